"""A running job that gave way on its type: which `keep_order` rows a plan may break and still
keep the team's order (DESIGN.md section 8, rule 3).

A `keep_order` row lets a job b of a strictly lower priority start on a running job a's type
only while a runs (kept, or moved). Where a had to give way to work ranked above it, that is
stricter than the scheme: b may fill what is left, as under greedy (helpers' cases of stop
37, two 8-GPU nodes: A runs R, priority 1, 8 GPUs past its protection, on n00; n01 holds B's
protected 4-GPU job and 4 free GPUs; A queues Q, priority 0, 4 GPUs):
- A queues H, priority 2, a whole node: greedy starts H in R's place and Q beside B's job.
  The epoch kept R and Q, and H, A's first job, waited;
- B, ranked first and below its floor (4 of 8), queues a whole node: greedy starts it in
  R's place and Q beside it. The epoch kept R and Q, and B stayed below its floor while A
  held 12 GPUs of a target of 8.

So a plan that breaks a row on a's own type t only where a gave way there is eligible: a does
not fit on t beside the allocated work the plan runs there but its team's jobs below it
(u_t - u_g >= cap_t - g_a + 1: u_t the GPUs of allocated starts and keeps on t, keeps off
drain nodes; u_g those of a's project there with a priority below a's, or a's own but not
running, not a due reservation's gang's start nor a protected keep; cap_t the GPUs of t's up
nodes). Where the plan's placements are known (the backfill, a placed plan's eligibility,
the reasons), a also gave way where the count lets it fit but its shape fits on no up node of
t beside that work (`_no_room_on_nodes`: until stop 45 the count alone decided, and where
whole jobs left GPUs on t that a could not use the row held as written: its team's jobs
below waited beside idle GPUs, greedy started them). The placement's backfill reads the same
rule
(optalloc.plan.backfill.gave_way_rows): the team's job below fills what is left.

The solver's model keeps the rows pairwise. Written into the model (stop 40: a column per
running job, 1 only where its room condition holds, a big-M row per job, and segment sums
of the GPUs per project, type and priority), the relaxation let the LP drop the rows almost
everywhere on a full cluster (the coefficient is nearly the type's capacity): on the
1,024-GPU bench instance, seeds 9-99, the whole MIP hit its time limit in 8 epochs where it
did in 1, its plans moved -1.06% to +1.15% (mean -0.06%), and the 16,384-GPU LP took 1.40 s
where it took 1.29 s. So the rows stay, and the candidate plans (the greedy baseline's,
which follows the scheme's order and nothing else) are judged by the scheme's rule:
optalloc.plan.outcome.scored, `eligible`. The bound is the model's, which counts no such
plan, so a plan chosen for it is `feasible`, never `optimal`.
"""

from __future__ import annotations

import numpy as np

from optalloc.shape import fits_nodes
from optalloc.snapshot import job_resumable


def own_type_rows(req, keep_i: np.ndarray, keep_c: np.ndarray) -> np.ndarray:
    """(R,) bool: the keep_order rows on the running job's own type (not a type it may move
    to)."""
    return req.cand_type[keep_c] == req.run_type[keep_i]


def _items(snap, req, forced):
    """Every start and every keep as one list of items (C + K: the candidates, then
    req.run_job's keeps): per item its type, project, GPUs, level (2 r for a start of
    priority rank r, 2 r + 1 for a keep: below a running job of rank p are the items of
    level <= 2 p), whether it counts toward u_t (allocated work there; a keep off drain
    nodes) and toward u_g (the same, not a forced start); and per job its priority's rank
    among the distinct priorities (lowest 0)."""
    cj, ct = req.cand_job, req.cand_type
    rj, rt = req.run_job, req.run_type
    _, rank = np.unique(snap.job_priority, return_inverse=True)
    rank = rank.reshape(-1).astype(np.int64)
    f = (np.asarray(forced) > 0 if forced is not None and len(forced)
         else np.zeros(len(cj), bool))
    typ = np.r_[ct, rt].astype(np.int64)
    proj = np.r_[snap.job_project[cj], snap.job_project[rj]].astype(np.int64)
    gpus = np.r_[snap.job_gpus[cj], snap.job_gpus[rj]].astype(float)
    level = np.r_[2 * rank[cj], 2 * rank[rj] + 1]
    # allocated work only: an allocated job evicts unallocated work wherever it goes
    alloc = np.r_[snap.job_tier1[cj, ct], snap.job_tier1[rj, rt]]
    in_t = alloc & np.r_[np.ones(len(cj), bool), ~snap.job_on_drain[rj]]
    # a protected teammate below cannot make way for the running job: it counts as others' work
    # (fresh draws at stop 43: A's 8-GPU job gave way on 2 x 8 GPUs where a protected 1-GPU
    # teammate held the other node, and its allocated 1-GPU teammates waited beside a free GPU)
    in_g = in_t & np.r_[~f, ~snap.job_protected[rj]]
    return typ, proj, gpus, level, in_t, in_g, rank


def gave_way(em, keep_i: np.ndarray, keep_c: np.ndarray, started: np.ndarray,
             kept: np.ndarray, placements: dict | None = None,
             owner: np.ndarray | None = None) -> np.ndarray:
    """(R,) bool per keep_order row (running positions keep_i, candidates keep_c) of model
    em: on its running job's own type, the running job does not fit beside the allocated
    work the plan (`started` (C,), `kept` (K,) bool) runs there but its team's jobs below
    it. With the plan's `placements` (job index -> Placement of every start), also where
    the GPUs would do by count but not by nodes (`_no_room_on_nodes`); `owner` (N, G), the
    job holding each GPU of the placement's pool (-1: none), says the same as `placements`
    and the kept jobs' GPUs, read from one grid. A running job that is not resumable and
    that the plan stops gave way where it does not fit in its own place beside that work
    (`_no_room_in_place`): it ends, it restarts nowhere else."""
    snap, req = em.snap, em.req
    R = len(keep_i)
    if not R:
        return np.zeros(0, bool)
    own = own_type_rows(req, keep_i, keep_c)
    if not own.any():
        return np.zeros(R, bool)
    T = len(snap.gpu_types)
    items = em.__dict__.get("_gave_way_items")
    if items is None:  # once per model: every candidate plan's check reads them
        forced = em.res.forced if em.res is not None else None
        items = em.__dict__["_gave_way_items"] = _items(snap, req, forced)
    typ, proj, gpus, level, in_t, in_g, rank = items
    on = np.r_[np.asarray(started, bool), np.asarray(kept, bool)]
    used_t = np.bincount(typ[on & in_t], weights=gpus[on & in_t], minlength=T)
    n = 2 * (int(rank.max(initial=0)) + 1)
    sel = np.flatnonzero(on & in_g)
    key = (proj[sel] * T + typ[sel]) * n + level[sel]
    order = np.argsort(key, kind="stable")
    sk, cum = key[order], np.r_[0.0, np.cumsum(gpus[sel][order])]
    run = req.run_job[keep_i]
    t = req.run_type[keep_i]
    base = (snap.job_project[run] * T + t) * n
    below = (cum[np.searchsorted(sk, base + 2 * rank[run], "right")]
             - cum[np.searchsorted(sk, base, "left")])
    need = snap.capacity_by_type()[t] - snap.job_gpus[run] + 1
    out = own & (used_t[t] - below >= need)
    rest = np.flatnonzero(own & ~out)
    if placements is not None and len(rest):
        # a job that is not resumable restarts nowhere: stopped, it ends, so it gave way where
        # work ranked above it takes its own place (not where it would fit elsewhere)
        ends = ~job_resumable(snap)[run[rest]] & ~np.asarray(kept, bool)[keep_i[rest]]
        if ends.any():
            out[rest[ends]] = _no_room_in_place(em, keep_i[rest[ends]], on, items,
                                                placements, owner)
        rest = rest[~ends]
        if len(rest):
            out[rest] = _no_room_on_nodes(em, keep_i[rest], on, items, placements, owner)
    return out


def _no_room_on_nodes(em, keep_i: np.ndarray, on: np.ndarray, items, placements: dict,
                      owner: np.ndarray | None = None) -> np.ndarray:
    """(len(keep_i),) bool: the running job (req.run_job[keep_i]) does not fit, in its shape,
    on its own type's up nodes beside the allocated work the plan (`on`: the items of
    `_items` it runs, its starts placed as `placements` says) runs on each node but its
    team's jobs below it (the same items `gave_way` leaves out of its count). The count is
    per type, so it let an 8-GPU single-node job 'fit' in 13 free GPUs spread over nodes
    of 5, 2 and 4 (a helper's random snapshot at stop 45: p0's priority-2 8-GPU b200 job
    gave way to p1's floor on the one 8-GPU node without protected work, and p0's three
    priority-1 and priority-0 b200 jobs waited beside 11 idle GPUs; greedy fills them).
    Where a start has no placement the nodes are unknown: False (the row holds). With the
    pool's `owner` grid the items' nodes are read from it (`_held_items`) in one pass."""
    snap, req = em.snap, em.req
    rank = items[6]
    room = _team_room(em, on, items, placements, owner)
    if room is None:
        return np.zeros(len(keep_i), bool)
    up_t: dict = {}  # per type: its up nodes
    left_of: dict = {}  # per (project, type, rank): GPUs per up node of t beside the rest
    # one answer per distinct (project, type, rank, shape) of the running jobs asked about
    a, t = req.run_job[keep_i], req.run_type[keep_i]
    cols = [snap.job_project[a], t, rank[a], req.size[a, t], req.pieces[a, t], req.rem[a, t]]
    code = np.zeros(len(keep_i), np.int64)
    for col in cols:  # one integer per key (a row-wise np.unique sorted 5x slower)
        col = np.asarray(col, np.int64)
        code = code * (int(col.max()) + 1) + col
    _, one, back = np.unique(code, return_index=True, return_inverse=True)
    no_room = np.zeros(len(one), bool)
    for u, (p, t, ra, size, pieces, rem) in enumerate(
            zip(*(np.asarray(col)[one].tolist() for col in cols))):
        left = left_of.get((p, t, ra))
        if left is None:
            if t not in up_t:
                up_t[t] = snap.node_up & (snap.node_type == t)
            left = left_of[(p, t, ra)] = np.maximum(room(p, t, ra)[up_t[t]], 0)
        no_room[u] = not bool(fits_nodes(size, pieces, rem, left))
    return no_room[back.reshape(-1)]


def _no_room_in_place(em, keep_i: np.ndarray, on: np.ndarray, items, placements: dict,
                      owner: np.ndarray | None = None) -> np.ndarray:
    """(len(keep_i),) bool: the running job (req.run_job[keep_i], not resumable) does not fit
    in its own place beside the allocated work the plan runs there but its team's jobs below
    it: on one of its nodes (or one that is down) that work and its own GPUs there are more
    than the node's. Stopped, such a job ends (requirements: no restart), so it holds its
    team's jobs below it only where it could have stayed where it runs: before, the count
    over its type let it 'fit' in idle GPUs of another node, and B's bnr (3 GPUs, stopped
    for A's 8-GPU floor job on its node) held its teammate blo back beside 4 idle GPUs (an
    outside judge, stop 59). Counted as given way wherever a plan stops it, it also gave way
    where the rounded plan stopped it only for its own team's starts: on the bench's
    1,024-GPU seed 6 those took its place, the epoch kept it again, and the backfill left
    the teams' order at 831.5, not 832.5 (stop 60)."""
    snap, req = em.snap, em.req
    rank = items[6]
    room = _team_room(em, on, items, placements, owner)
    if room is None:
        return np.zeros(len(keep_i), bool)
    T = len(snap.gpu_types)
    # one answer per running position asked about, one room per (project, type, rank) of
    # theirs (before, every row scanned every item: XL's rows took 0.2 s a call)
    ks, back = np.unique(np.asarray(keep_i, np.int64), return_inverse=True)
    a, t = req.run_job[ks], req.run_type[ks]
    code = (snap.job_project[a].astype(np.int64) * T + t) * (int(rank.max(initial=0)) + 1)
    _, first, grp = np.unique(code + rank[a], return_index=True, return_inverse=True)
    grp = grp.reshape(-1)
    # the running pairs of the positions asked about, by group
    pk = np.asarray(req.run_pair_k, np.int64)
    pos = np.searchsorted(ks, pk).clip(0, len(ks) - 1)
    sel = np.flatnonzero(ks[pos] == pk)
    pos = pos[sel]
    pg = grp[pos]
    by_g = np.argsort(pg, kind="stable")
    sel, pos, pg = sel[by_g], pos[by_g], pg[by_g]
    bounds = np.searchsorted(pg, np.arange(len(first) + 1))
    bad = np.zeros(len(sel), bool)
    for u, f in enumerate(first.tolist()):
        p, tt, ra = int(snap.job_project[a[f]]), int(t[f]), int(rank[a[f]])
        left = room(p, tt, ra)
        s0, s1 = bounds[u], bounds[u + 1]
        n, g = req.run_pair_node[sel[s0:s1]], req.run_pair_gpus[sel[s0:s1]]
        bad[s0:s1] = ~snap.node_up[n] | (g > left[n] + 1e-9)
    out_k = np.zeros(len(ks), bool)
    out_k[pos[bad]] = True
    return out_k[back.reshape(-1)]


def _team_room(em, on: np.ndarray, items, placements: dict, owner: np.ndarray | None):
    """A function (project, type, rank) -> (N,) GPUs left on each node beside the allocated
    work the plan `on` runs there (`_held_items` from the pool's `owner` grid, else
    `_placed_items`) but that project's jobs on that type at or below the rank (the team's
    jobs a running job may hold back), one answer per key; None where a start has no
    placement (the nodes are unknown). A running job's teammates below it are found among
    its own (project, type) group's items (before, every key scanned every item: XL's 2,900
    keys a call over 16,000 items took 0.12 s)."""
    snap, req = em.snap, em.req
    typ, proj, _, level, in_t, in_g, _ = items
    held = (_held_items(req, on, in_t, owner, len(snap.jobs)) if owner is not None
            else _placed_items(snap, req, on, in_t, placements))
    if held is None:
        return None
    item, node, cnt = held
    N, T = len(snap.nodes), len(snap.gpu_types)
    used = np.bincount(node, weights=cnt, minlength=N)
    mine = np.flatnonzero(in_g[item])
    pt = proj[item[mine]] * T + typ[item[mine]]
    by_pt = np.argsort(pt, kind="stable")
    mine, pt = mine[by_pt], pt[by_pt]
    memo: dict = {}

    def room(p: int, t: int, ra: int) -> np.ndarray:
        if (p, t, ra) not in memo:
            lo, hi = np.searchsorted(pt, [p * T + t, p * T + t + 1])
            below = mine[lo:hi]
            below = below[level[item[below]] <= 2 * ra]
            memo[(p, t, ra)] = snap.node_gpus - (
                used - np.bincount(node[below], weights=cnt[below], minlength=N))
        return memo[(p, t, ra)]
    return room


def _placed_items(snap, req, on, in_t, placements: dict):
    """(item, node, GPUs) per node of every allocated start (from its placement) and keep
    (from its running pairs) of the plan `on`; None where a start has no placement."""
    C = len(req.cand_job)
    cs = np.flatnonzero(on[:C] & in_t[:C])
    item, node, cnt = [], [], []
    for c in cs.tolist():
        pl = placements.get(int(req.cand_job[c]))
        if pl is None:
            return None
        for a in pl.nodes:
            item.append(c)
            node.append(snap.node_index[a.node])
            cnt.append(len(a.gpus))
    kp = np.flatnonzero(on[C:][req.run_pair_k] & in_t[C + req.run_pair_k])
    return (np.r_[np.asarray(item, np.int64), C + req.run_pair_k[kp]],
            np.r_[np.asarray(node, np.int64), req.run_pair_node[kp]],
            np.r_[np.asarray(cnt, float), req.run_pair_gpus[kp].astype(float)])


def _held_items(req, on, in_t, owner: np.ndarray, J: int):
    """`_placed_items` read from a placement pool's `owner` grid (the job holding each GPU,
    -1 none): a GPU counts for the allocated start or keep of the plan `on` whose job holds
    it, one GPU per entry (the backfill's pool holds every start where its placement says
    and every keep where it ran; on XL the per-placement loop took 40 ms a call)."""
    C = len(req.cand_job)
    item_of = np.full(J + 1, -1, np.int64)  # J: the free GPUs' -1
    k = np.flatnonzero(on[C:])
    item_of[req.run_job[k]] = C + k
    c = np.flatnonzero(on[:C])
    item_of[req.cand_job[c]] = c
    nodes, _ = np.nonzero(owner >= 0)
    it = item_of[owner[owner >= 0]]
    m = it >= 0
    m[m] = in_t[it[m]]
    return it[m], nodes[m], np.ones(int(m.sum()))


def breaks_only_given_way(em, sol: np.ndarray, started: np.ndarray, kept: np.ndarray,
                          tol: float = 1e-6, placements: dict | None = None) -> bool:
    """The point `sol` of em.lm (a placed plan: `started` (C,), `kept` (K,) bool) breaks
    rows, and only `keep_order` rows of running jobs that gave way on their type
    (`gave_way`): the plan keeps the scheme's order where the model is stricter."""
    lm = em.lm
    if (lm.lb - sol > tol).any() or (sol - lm.ub > tol).any():
        return False
    ax = lm.A @ sol
    bad = np.flatnonzero((lm.row_lo - ax > tol) | (ax - lm.row_hi > tol))
    block = [(a, b) for label, a, b in lm.row_blocks if label == "keep_order"]
    if not len(bad) or not block:
        return False
    a, b = block[0]
    if ((bad < a) | (bad >= b)).any():
        return False
    r = bad - a
    return bool(gave_way(em, em.keep_i[r], em.keep_c[r], started, kept, placements).all())
