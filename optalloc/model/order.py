"""The scheme's two orders, computed once and used by the model, the reasons and the greedy
baseline (DESIGN.md section 8, rules 1 and 3).

* **Fair Tree order across teams**: at every level of the org tree siblings are ranked by usage
  ratio over the window (lower first, ties by name); a subtree's rank comes before the rank of
  anything inside it. `fair_tree_rank` gives every project its position in that order.
* **A team's own order**: declared priority (higher first), then, among equal priority, jobs
  already running (a started job keeps its place: an equal-priority job never displaces it),
  then submit time (earlier first), then id. `project_order` gives every job its position
  inside its project, `priority_class` the position of its priority among the project's
  distinct priorities.
"""

from __future__ import annotations

import numpy as np

from optalloc.snapshot import Snapshot
from optalloc.uniq import unique_rows

R_MAX = 8.0  # usage ratios are clipped to [0, R_MAX] (numerically safe, order preserved)


def clipped_ratios(snap: Snapshot) -> np.ndarray:
    """(O,) usage ratios clipped to [0, R_MAX], unknown (nan) and infinite as R_MAX: what the
    targets' water-filling and the floors' tie-break read."""
    r = np.nan_to_num(np.asarray(snap.usage_ratio, float), nan=R_MAX, posinf=R_MAX)
    return np.clip(r, 0.0, R_MAX)


def fair_tree_rank(snap: Snapshot) -> np.ndarray:
    """(O,) 0-based rank of every leaf among all leaves in Fair-Tree order (inner nodes -1).
    Computed once per snapshot (read-only)."""
    return snap.derived(_fair_tree_rank)


def _path_keys(org, nodes, key) -> dict:
    """{v: (key(u) for each u on v's path from the top level down to v)} for `nodes`: the
    Fair-Tree order compares these level by level."""
    out = {}
    for v in nodes:
        path, u = [], int(v)
        while org.parent[u] >= 0:
            path.append(key(u))
            u = int(org.parent[u])
        out[int(v)] = tuple(reversed(path))
    return out


def _fair_tree_rank(snap: Snapshot) -> np.ndarray:
    org = snap.org
    ratio = np.nan_to_num(np.asarray(snap.usage_ratio, dtype=float), nan=np.inf)
    key = _path_keys(org, np.flatnonzero(org.is_leaf), lambda u: (float(ratio[u]), org.names[u]))
    rank = np.full(org.n, -1, dtype=np.int64)
    for r, v in enumerate(sorted(key, key=key.__getitem__)):
        rank[v] = r
    return rank


def tree_position(snap: Snapshot) -> np.ndarray:
    """(O,) every org node's place in the Fair-Tree order as a score in [0, 1], 1 first: the
    nodes ranked by their path's usage ratios from the top (lower first), so a subtree's
    nodes come after its parent and all ahead of a worse-ranked sibling subtree's (the
    floors' tie-break: a subtree's rank comes before anything inside it); equal paths share
    a score. The root scores 0."""
    return snap.derived(_tree_position)


def _tree_position(snap: Snapshot) -> np.ndarray:
    org = snap.org
    ratio = clipped_ratios(snap)
    keys = _path_keys(org, range(1, org.n), lambda u: float(ratio[u]))
    # equal ratios all the way down score the same: a tie stays a tie (the work tier decides
    # it: equal shares and ratios, B's 16-GPU gang starts where A's eight 1-GPU jobs leave 8
    # GPUs idle), never broken by name
    ranks = {k: r for r, k in enumerate(sorted(set(keys.values())))}
    out = np.zeros(org.n)
    n = max(len(ranks) - 1, 1)
    for v, k in keys.items():
        out[v] = 1.0 - ranks[k] / n
    return out


def order_score(snap: Snapshot) -> np.ndarray:
    """(O,) a leaf's Fair-Tree position as a score in [0, 1]: 1 for the best-ranked project,
    0 for the worst (a single project scores 1)."""
    rank = fair_tree_rank(snap)
    n = int((rank >= 0).sum())
    return np.where(rank >= 0, 1.0 - rank / max(n - 1, 1), 0.0)


def project_order(snap: Snapshot) -> np.ndarray:
    """(J,) 0-based position of every job in its project's own order. Computed once per
    snapshot (read-only)."""
    return snap.derived(_project_order)


def _stays(snap: Snapshot) -> np.ndarray:
    """(J,) bool: running jobs that keep a running job's place in their team's order (not one
    that must leave a drain node past its protection: it ranks as the queued job it becomes)."""
    return snap.job_running & ~(snap.job_on_drain & ~snap.job_protected)


def _project_order(snap: Snapshot) -> np.ndarray:
    J = len(snap.jobs)
    if J == 0:
        return np.zeros(0, dtype=np.int64)
    ids = np.array([j.id for j in snap.jobs], dtype=object)
    # a running job ranks before the queued jobs of its priority (it is not stopped for an
    # equal one), except one that must leave a drain node (past its protection): it is
    # requeued (DESIGN.md rule 5), so it ranks as a queued job would, by submit time (a
    # helper's case at stop 43: restarted at once on the up node, it kept its project's
    # earlier 7-GPU job waiting below the project's floor, and greedy ran that job)
    order = np.lexsort((ids, snap.job_submit, ~_stays(snap), -snap.job_priority,
                        snap.job_project))
    proj = snap.job_project[order]
    start = np.r_[0, np.flatnonzero(np.diff(proj)) + 1]
    first = np.repeat(start, np.diff(np.r_[start, J]))
    pos = np.empty(J, dtype=np.int64)
    pos[order] = np.arange(J) - first
    return pos


def team_place(snap: Snapshot) -> np.ndarray:
    """(J,) every job's place in its team's order as a score in [0, 1], 1 first: declared
    priority, then running before queued (as `project_order`), then submit time; equal submit
    times share a place (no id breaks the tie: there the work lost decides, the optimizer's
    freedom). Computed once per snapshot (read-only)."""
    return snap.derived(_team_place)


def _team_place(snap: Snapshot) -> np.ndarray:
    J = len(snap.jobs)
    if J == 0:
        return np.zeros(0)
    keys = np.stack([snap.job_project, -snap.job_priority, (~_stays(snap)).astype(np.int64),
                     np.asarray(snap.job_submit, float)], axis=1)
    order = np.lexsort(keys.T[::-1])
    k = keys[order]
    new = np.r_[True, (k[1:] != k[:-1]).any(axis=1)]
    dense = np.cumsum(new) - 1  # a dense rank over all jobs, ties shared
    newp = np.r_[True, k[1:, 0] != k[:-1, 0]]
    first = np.maximum.accumulate(np.where(newp, dense, 0))
    rank = np.empty(J, np.int64)
    rank[order] = dense - first
    top = np.zeros(snap.org.n, np.int64)
    np.maximum.at(top, snap.job_project, rank)
    return 1.0 - rank / np.maximum(top[snap.job_project], 1)


def scheme_above(snap: Snapshot, a, b) -> np.ndarray:
    """(broadcast of a and b) bool: job a ranks above job b in their team's order as the
    scheme states it (DESIGN.md rule 3: declared priority, then submit time; ties by
    `project_order`), running or not. A due reservation's gang may take the GPUs of the
    teammates it ranks above by this order (they ran because it could not start), never of
    those above it (optalloc.model.free_times.team_holds and the rows that follow it)."""
    prio, sub, pos = snap.job_priority, snap.job_submit, project_order(snap)
    earlier = (sub[a] < sub[b]) | ((sub[a] == sub[b]) & (pos[a] < pos[b]))
    return (prio[a] > prio[b]) | ((prio[a] == prio[b]) & earlier)


def priority_class(snap: Snapshot) -> tuple[np.ndarray, np.ndarray]:
    """((J,) 0-based rank of the job's priority among its project's distinct priorities,
    highest first; (J,) number of distinct priorities in the job's project). Computed once per
    snapshot (read-only)."""
    return snap.derived(_priority_class)


def _priority_class(snap: Snapshot) -> tuple[np.ndarray, np.ndarray]:
    J = len(snap.jobs)
    if J == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    proj = snap.job_project
    # np.unique(axis=0) less its per-call cost (optalloc.uniq)
    pairs, inv = unique_rows(np.stack([proj, -snap.job_priority], axis=1))
    first = np.searchsorted(pairs[:, 0], proj, side="left")
    last = np.searchsorted(pairs[:, 0], proj, side="right")
    return inv - first, last - first


_EMPTY = np.zeros(0, np.int64)


def keep_links(snap: Snapshot, req, free: np.ndarray,
               equal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(i, c) pairs: running job req.run_job[i] (allocated on its type, past its protection,
    free to stay: `free`) and start candidate c on that type of a job b of its project with a
    strictly lower declared priority (a queued job's start, or a running job's move onto t):
    b may start there only while i runs (kept, or moved). `equal`: instead the queued jobs of
    its project with its own priority (the team's order puts a running job first); the model
    has rows only for those a placement needed (optalloc.model.team_rows), all of them took
    the 16,384-GPU bench epoch from 2.9 s to its 13 s limit at a 2.4% gap.
    The team's order is the team's own (DESIGN.md rule 3): a job of its project ranked below
    it never takes a running job's GPUs for more of the project's floor or target (A alone
    on 2 x 8 GPUs: its queued 16-GPU priority-0 job preempted its running 8-GPU priority-2
    job; A alone on 8 GPUs: its two queued 4-GPU priority-0 jobs preempted its running 6-GPU
    priority-2 job; greedy keeps both). Whatever the sizes: several smaller jobs take a
    larger one's place together. Where i is preempted for another project, b starts on that
    type next epoch, after i in its team's order (i restarts now where it fits). Likewise on
    every other type i may move to: b never starts there while i, displaced, waits (B's
    priority-1 1-GPU job gave way on h100 to A's floor and was requeued while B's priority-0
    8-GPU job took the a100 node it could move to; greedy keeps it)."""
    rj, rt = req.run_job, req.run_type
    if not len(rj) or not len(req.cand_job):
        return _EMPTY, _EMPTY
    ok_i = free & snap.job_tier1[rj, rt]
    cj, ct = req.cand_job, req.cand_type
    ok_c = snap.job_tier1[cj, ct]  # a queued job's start, or a running job's move onto t
    # but not the restart of a job displaced inside its protection (a down node's): it runs
    # by the contract (rule 4), not by its place in the team's order, so it stops no
    # teammate's keep (a review's case: p1's protected priority-1 job leaving a down node held
    # p1's priority-2 job past its protection and target on its GPUs, and p3's floor of 1
    # went unmet beside it)
    ok_c = ok_c & ~(req.displaced[cj] & snap.job_protected[cj])
    if equal:  # a queued job's start only (running jobs of one priority go by submit time)
        ok_c = ok_c & ~(req.cand_move | req.cand_restart) & ~snap.job_running[cj]
    I, Cc = np.flatnonzero(ok_i), np.flatnonzero(ok_c)
    if not len(I) or not len(Cc):
        return _EMPTY, _EMPTY
    proj, prio = snap.job_project, snap.job_priority
    # each running job on its own type, and on each type it may move to
    ti = rt[I]
    mv = np.flatnonzero(req.cand_move)
    if len(mv):
        pos = np.full(len(snap.jobs), -1)
        pos[rj] = np.arange(len(rj))
        m_i = pos[cj[mv]]
        keep = (m_i >= 0) & ok_i[np.maximum(m_i, 0)]
        I, ti = np.r_[I, m_i[keep]], np.r_[ti, ct[mv[keep]]]
    # pair within (project, type): sort both sides by that key, broadcast per key
    T = len(snap.gpu_types)
    key_i = proj[rj[I]] * T + ti
    key_c = proj[cj[Cc]] * T + ct[Cc]
    common = np.intersect1d(key_i, key_c)
    if not len(common):
        return _EMPTY, _EMPTY
    in_i, in_c = np.isin(key_i, common), np.isin(key_c, common)
    I, key_i, Cc, key_c = I[in_i], key_i[in_i], Cc[in_c], key_c[in_c]
    oi, oc = np.argsort(key_i, kind="stable"), np.argsort(key_c, kind="stable")
    I, key_i, Cc, key_c = I[oi], key_i[oi], Cc[oc], key_c[oc]
    si, sc = np.searchsorted(key_i, common), np.searchsorted(key_c, common)
    ei, ec = np.searchsorted(key_i, common, "right"), np.searchsorted(key_c, common, "right")
    out_i, out_c = [], []
    for a0, a1, b0, b1 in zip(si.tolist(), ei.tolist(), sc.tolist(), ec.tolist()):
        ii, cc = I[a0:a1], Cc[b0:b1]
        pi, pc = prio[rj[ii]][:, None], prio[cj[cc]][None, :]
        r, c = np.nonzero((pi == pc) if equal else (pi > pc))
        out_i.append(ii[r])
        out_c.append(cc[c])
    return np.concatenate(out_i), np.concatenate(out_c)
