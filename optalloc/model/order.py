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

from optalloc.contract import short_jobs
from optalloc.shape import PIECES, SMALL, WHOLE
from optalloc.snapshot import Snapshot

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


def _project_order(snap: Snapshot) -> np.ndarray:
    J = len(snap.jobs)
    if J == 0:
        return np.zeros(0, dtype=np.int64)
    ids = np.array([j.id for j in snap.jobs], dtype=object)
    order = np.lexsort((ids, snap.job_submit, ~snap.job_running, -snap.job_priority,
                        snap.job_project))
    proj = snap.job_project[order]
    start = np.r_[0, np.flatnonzero(np.diff(proj)) + 1]
    first = np.repeat(start, np.diff(np.r_[start, J]))
    pos = np.empty(J, dtype=np.int64)
    pos[order] = np.arange(J) - first
    return pos


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
    pairs, inv = np.unique(np.stack([proj, -snap.job_priority], axis=1), axis=0,
                           return_inverse=True)
    inv = np.asarray(inv).reshape(-1)
    first = np.searchsorted(pairs[:, 0], proj, side="left")
    last = np.searchsorted(pairs[:, 0], proj, side="right")
    return inv - first, last - first


_EMPTY = np.zeros(0, np.int64)


def precedence_pairs(ctx_snap, req) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) job index pairs: a ahead of b in its project's order, a must start if b does.

    a "fits in b's place" on every candidate type of the pair (the same type set): a
    single-node a no larger than b's per-node chunk (b's GPUs on one node, a whole node, or
    its gpus_per_node), a whole-node gang a no larger than a whole-node gang b, a per-node
    gang a of q GPUs per node in no more pieces than b has nodes of at least q GPUs (a
    per-node gang b of >= q per node, or a whole-node gang b's whole nodes: 4 + 4 fits where
    8 + 8 would go; without that link a priority-1 4 + 4 gang waited behind its project's
    priority-0 8 + 8 one, which met more of the floor)."""
    snap = ctx_snap
    grouped = job_groups(snap, req)
    if grouped is None:
        return _EMPTY, _EMPTY
    jobs, cls, g, chunk, gpn, pos, group, npieces = grouped
    # each job linked to the latest job of its group (project, types) ahead of it that fits in
    # its place, per kind of job ahead: single-node of s GPUs, whole-node gang of s GPUs,
    # per-node gang of s GPUs in pieces of q; one searchsorted over all groups per kind
    order = np.lexsort((pos, group))  # by group, then the project's order
    gk = group[order] * (int(pos.max()) + 1) + pos[order]  # ascending
    co, go, ko, no = cls[order], g[order], chunk[order], gpn[order]
    short = short_jobs(snap)[jobs[order]]
    A, B = [], []

    def link(have: np.ndarray, fits: np.ndarray) -> None:
        _link(have, fits)
        if (have & short).any():
            # and to the latest such job ahead that is not a debug job: a debug job's own
            # link to a longer job of its priority ahead of it is dropped (linked_pairs), and
            # the chain through it with it (A's priority-0 4-GPU job ran while its priority-2
            # 1-GPU job waited, linked only to a priority-2 debug job between them)
            _link(have & ~short, fits)

    def _link(have: np.ndarray, fits: np.ndarray) -> None:
        h, f = np.flatnonzero(have), np.flatnonzero(fits)
        k = np.searchsorted(gk[h], gk[f], side="left") - 1
        ok_ = k >= 0
        k, f = k[ok_], f[ok_]
        same = group[order[h[k]]] == group[order[f]]
        A.append(jobs[order[h[k[same]]]])
        B.append(jobs[order[f[same]]])

    for s_ in np.unique(go[co == SMALL]):  # single-node a of s GPUs
        link((co == SMALL) & (go == s_), (co >= 0) & (go >= s_) & (ko >= s_))
    for s_ in np.unique(go[co == WHOLE]):  # whole-node gang a of s GPUs
        link((co == WHOLE) & (go == s_), (co == WHOLE) & (go >= s_))
    po = npieces[order]
    for s_, q in set(zip(go[co == PIECES].tolist(), no[co == PIECES].tolist())):
        # b's nodes of >= q GPUs: a per-node gang's pieces, or a whole-node gang's whole nodes
        room = ((co == PIECES) & (no >= q)) | ((co == WHOLE) & (ko >= q))
        link((co == PIECES) & (go == s_) & (no == q), room & (po >= s_ // q))
    return linked_pairs(snap, A, B)



def job_groups(snap: Snapshot, req):
    """What precedence_pairs links, for the allocated queued jobs with candidates: (jobs, the
    shape class of each, -1 where it differs by type; GPUs, smallest per-node chunk,
    gpus_per_node, position in its project's order, group = (project, candidate types),
    fewest full pieces over its types), or None when fewer than two such jobs wait. Made
    once per requirements (the `order` and the `order_types` links both read it)."""
    if "_job_groups" not in req.__dict__:
        req.__dict__["_job_groups"] = _job_groups(snap, req)
    return req.__dict__["_job_groups"]


def _job_groups(snap: Snapshot, req):
    cj, ct = req.cand_job, req.cand_type
    if not len(cj):
        return None
    # queued, or displaced from a down node (queued again); not a running job's move or restart
    ok = snap.job_tier1[cj, ct] & ~(req.cand_move | req.cand_restart)
    J, T = snap.job_allowed.shape
    mask = np.zeros((J, T), dtype=bool)
    mask[cj[ok], ct[ok]] = True
    jobs = np.flatnonzero(mask.any(axis=1))
    if len(jobs) < 2:
        return None
    m = mask[jobs]
    big = np.iinfo(np.int64).max
    shape = np.where(m, req.shape[jobs], -1)
    # the job's shape class if it is the same on all its types, else -1 (no pairs)
    lo = np.where(m, shape, big).min(axis=1)
    hi = np.where(m, shape, -1).max(axis=1)
    cls = np.where(lo == hi, lo, -1)
    chunk = np.where(m, req.size[jobs], big).min(axis=1)  # smallest per-node chunk
    key = np.concatenate([snap.job_project[jobs][:, None], m.astype(np.int64)], axis=1)
    _, group = np.unique(key, axis=0, return_inverse=True)
    npieces = np.where(m, req.pieces[jobs], big).min(axis=1)
    return (jobs, cls, snap.job_gpus[jobs], chunk, snap.job_gpn[jobs],
            project_order(snap)[jobs], np.asarray(group).reshape(-1), npieces)


def linked_pairs(snap: Snapshot, A: list, B: list) -> tuple[np.ndarray, np.ndarray]:
    """The (a, b) pairs of the links A[i] -> B[i] (lists of index arrays): self-links dropped,
    and a debug job never behind a longer one of its own priority; unique, sorted."""
    if not A:
        return _EMPTY, _EMPTY
    a, b = np.concatenate(A), np.concatenate(B)
    short = short_jobs(snap)
    # a debug job may start while a longer job of its priority ahead of it waits (the debug
    # allowance): the contract's cheap grant; inside the target it is still worth less than
    # the jobs ahead. Never one its team declared more important (README, "The contract")
    prio = snap.job_priority
    keep = (a != b) & ~(short[b] & ~short[a] & (prio[b] >= prio[a]))
    # one integer per pair (a * J + b): sorted as the pairs are, by a then b, and unique
    # (np.unique over rows sorted a structured view: the 32,768-GPU epoch ~0.1 s)
    J = np.int64(max(len(snap.jobs), 1))
    key = np.unique(a[keep].astype(np.int64) * J + b[keep])
    return key // J, key % J


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
