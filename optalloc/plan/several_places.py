"""The team's order over the places of several jobs (DESIGN.md rule 3): a waiting allocated
job that fits where lower-priority jobs of its own project start this epoch, in their places
together (with the free GPUs beside them), starts there; they wait, or start elsewhere.

The model's `order` rows link a job only to the place of one job it fits in whole (a row per
pair, optalloc.model.job_groups), so its plan could start two priority-0 2 + 2 gangs on two
4-GPU nodes while the project's priority-1 4-GPU job waited: 8 GPUs busy against greedy's 4,
and the team's declared order broken (README, rule 3, the left-out of stop 44). The sort
starts the priority-1 job first; the optimizer may pack better only where the team's order
allows it. This step runs in the placement after the backfill (optalloc.plan.place.
backfill_rounds): for each such job, best-ranked first, the project's lower-priority starts
on a type it may use are given back lowest-ranked first until it fits; it starts; those
whose GPUs it did not take start again where they were. The jobs it displaced wait (the
next backfill round may start them elsewhere). With `repack` (on the epoch's chosen plan
only, optalloc.plan.repack_order), where their places lie on several nodes and no node has
room for it, other queued starts of the type move onto the GPUs they freed, as few as it
needs, node by node (`_repacked`), and only where its project then holds as many GPUs of
the type as before (`_given_back`): the model counts a type's GPUs and
its packing per size, not which start sits on which node, so a move within the type changes
nothing it counts. Before, on the bench's 1,024-GPU epoch (seed 6), P1-3's priority-0 1 + 1
gang and 1-GPU job took three single GPUs on three h100 nodes, at P1-3's target there, while
its priority-1 2-GPU job waited: no node held two of their GPUs, and moving one 1-GPU start
of another team onto a freed GPU gave it one.

Left to other steps: a running job's place (the priority swaps, optalloc.plan.victims, and
the `keep_order` rows), equal priorities (submit order: the `order` rows), and unallocated
starts (an allocated job evicts those in the backfill).
"""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.order import project_order, scheme_above
from optalloc.plan.fit import alloc, nodes_for
from optalloc.plan.nodepool import NodePool
from optalloc.plan.team_order import forced_jobs

#: passes started again, in one call, after a start gave jobs back
RESTARTS = 8
#: nodes a job may take by moving other starts off them, at most (_repacked)
NODES = 8


def start_ahead_of_several(em: EpochModel, pool: NodePool, kept: np.ndarray,
                           placements: dict, started: np.ndarray, cand_of: dict,
                           backfilled: np.ndarray, by_job: dict, preds: dict, keeps: dict,
                           typed: dict, repack: bool = False,
                           restarts: bool = False) -> list[tuple[int, int]]:
    """Start every waiting allocated queued job that fits in the places of its project's
    lower-priority starts of this epoch (and the free GPUs beside them); returns the (job
    started, job given back) pairs. `by_job`, `preds`, `keeps`, `typed`: per job its
    candidates, its `order` predecessors, per candidate its `keep_order` running jobs and
    its `order_types` predecessors (optalloc.plan.backfill.candidates_by_job). `repack`:
    also where it fits only with the plan's other queued starts beside their places moved
    (`_repacked`; on the chosen plan only: optalloc.plan.repack_order). `restarts`: instead
    of the waiting queued jobs, the running jobs the plan stops, in the places of their
    team's starts ranked below them, their own priority's too (`_stopped`; on the chosen
    plan only, likewise)."""
    snap = em.snap
    rank = project_order(snap)
    out: list[tuple[int, int]] = []
    # a job given back whose GPUs the new start did not all take leaves them free (the jobs
    # judged unable to fit before may fit now), and it waits itself, ahead of its team's
    # lower starts (it may take their places: a helper's review at stop 45): the pass starts
    # again, best-ranked first, at most RESTARTS times; the last pass goes to the end
    for it in range(RESTARTS + 1):
        low = _movable(em, placements)
        if not low:
            break
        mine = _by_project(snap, low, rank)  # per project: its movable starts, lowest first
        stopped = _stopped(em, kept, placements) if restarts else None
        again = False
        for a, types in _may_fit(em, pool, placements, low, rank, stopped, repack):
            if a in placements or any(p not in placements for p in preds.get(a, ())):
                continue  # its own predecessor waits: the order keeps it waiting
            # below it: a lower priority, or its own where a is a running job it stopped
            # (running before queued, rule 3; the restart: `_stopped`)
            q = snap.job_priority[a] + (0.5 if restarts else 0.0)
            bs = [b for b in mine[int(snap.job_project[a])]
                  if b in placements and snap.job_priority[b] < q]
            if bs:
                given = _start_in_their_place(em, pool, kept, placements, started, cand_of,
                                              backfilled, a, bs, types, by_job, keeps, typed,
                                              repack)
                out += given
                again = bool(given) and it < RESTARTS
                if again:
                    break
        if not again:
            break
    return out


def _by_project(snap, low: list[int], rank: np.ndarray) -> dict[int, list[int]]:
    """Per project, its jobs among `low`, lowest-ranked first (ties: as listed)."""
    lb = np.asarray(low, np.int64)
    lb = lb[np.argsort(-rank[lb], kind="stable")]
    pr = snap.job_project[lb]
    by = np.argsort(pr, kind="stable")
    lb, pr = lb[by], pr[by]
    cut = np.flatnonzero(np.r_[True, pr[1:] != pr[:-1], True])
    js, ps = lb.tolist(), pr[cut[:-1]].tolist()
    return {p: js[a:b] for p, a, b in zip(ps, cut[:-1].tolist(), cut[1:].tolist())}


def _movable(em: EpochModel, placements: dict) -> list[int]:
    """The starts that may be given back: queued jobs (a running job's place is the priority
    swaps'), allocated where they start, not a reservation's gang."""
    fixed = _fixed(em)
    return [j for j, pl in placements.items() if pl.allocated and not fixed[j]]


def _stopped(em: EpochModel, kept: np.ndarray, placements: dict) -> np.ndarray:
    """(J,) bool: running jobs the plan stops (not kept, not restarted or moved) that may
    restart on their own type and rank before their team's queued jobs of their priority
    (not a drain leaver: it ranks as queued, optalloc.model.order.project_order). Such a
    job takes the places of its team's starts ranked below it, those of its own priority
    too, as the team's order starts it first (a helper's random snapshot: p1's running
    priority-2 2-GPU job gave its node to p0's floor, p1's queued priority-2 1-GPU jobs
    took the room where it could restart, and its `keep_order` row held p1's priority-0
    job beside a free GPU; tests/test_epoch_stopped_restarts_first.py)."""
    snap, req = em.snap, em.req
    out = np.zeros(len(snap.jobs), bool)
    restarts = req.cand_job[req.cand_restart]
    if not len(restarts):
        return out
    out[restarts] = True
    out[req.run_job[kept]] = False
    out[list(placements)] = False
    out &= ~(snap.job_on_drain & ~snap.job_protected)
    # a teammate a due reservation's gang that starts ranks above by the scheme's order
    # leaves at the gang's turn, and ranks as queued (it ran because the gang could not:
    # tests/test_epoch_due_gang_team_order.py)
    for g in np.flatnonzero(forced_jobs(em)).tolist():
        if g in placements and out.any():
            out &= ~((snap.job_project == snap.job_project[g])
                     & scheme_above(snap, g, np.arange(len(snap.jobs))))
    return out


def _may_fit(em: EpochModel, pool: NodePool, placements: dict, low: list[int],
             rank: np.ndarray, stopped: np.ndarray | None = None, repack: bool = False):
    """[(job, types)], the project's order then the team's (best-ranked first): the waiting
    queued jobs, allocated on those types, that could fit on them in the free GPUs plus the
    GPUs of their project's lower-priority movable starts there (a necessary condition,
    node by node: its chunks against the nodes' rooms, largest first). Jobs alike (project,
    priority, type, shape) are judged once: the 16,384-GPU bench epoch has 27,000 waiting.
    `rank`: every job's place in its team's order (optalloc.model.order.project_order)."""
    snap, req = em.snap, em.req
    J, T = len(snap.jobs), len(snap.gpu_types)
    tidx = {n: i for i, n in enumerate(snap.type_names)}
    on = np.zeros(J, bool)
    on[list(placements)] = True
    lb = np.asarray(low, np.int64)
    # the movable starts' GPUs per node, one entry per (start, node): read by every room
    # below (a loop over a project's placements per (project, type, priority) took half of
    # this step on the bench's 1,024-GPU epoch); one walk over the starts' nodes (four took
    # 0.17 s over XL's 49 calls)
    index = snap.node_index
    lt_l, e_job, e_node, e_cnt, e_t = [], [], [], [], []
    for b in low:
        pl = placements[b]
        t = tidx[pl.gpu_type]
        lt_l.append(t)
        for x in pl.nodes:
            e_job.append(b)
            e_node.append(index[x.node])
            e_cnt.append(len(x.gpus))
            e_t.append(t)
    lt = np.array(lt_l, np.int64)
    O = snap.org.n
    lowest = np.full((O, T), np.iinfo(np.int64).max)  # per project and type: lowest priority
    np.minimum.at(lowest, (snap.job_project[lb], lt), snap.job_priority[lb])
    free = np.where(pool.accept, pool.free, 0)
    # with every queued start moved off (where `repack`)
    moves = free + _movable_on_nodes(em, pool) if repack else None
    rooms: dict = {}
    e_node, e_cnt = np.array(e_node, np.int64), np.array(e_cnt, np.int64)
    e_job = np.asarray(e_job, np.int64)
    e_pt = (snap.job_project[e_job].astype(np.int64) * T + np.array(e_t, np.int64)
            if len(e_job) else e_job)
    e_prio = snap.job_priority[e_job]
    N = len(free)
    lb_pt = snap.job_project[lb].astype(np.int64) * T + lt
    on_ts = [snap.node_type == t for t in range(T)]
    free_t = [int(free[on].sum()) for on in on_ts]

    def room(p: int, t: int, q: int) -> np.ndarray:
        """The type-t nodes' free GPUs plus those of p's movable starts below q (where
        `repack`: plus those of every queued start, which may move: _repacked), largest
        first; and how many GPUs of t they and the free GPUs hold (a move needs GPUs
        elsewhere)."""
        key = (p, t, q)
        if key not in rooms:
            on_t = on_ts[t]
            sel = (lb_pt == p * T + t) & (snap.job_priority[lb] < q)
            if repack:
                r = moves
            else:
                es = (e_pt == p * T + t) & (e_prio < q)
                r = free + np.bincount(e_node[es], weights=e_cnt[es], minlength=N).astype(
                    free.dtype)
            total = int(free_t[t] + snap.job_gpus[lb[sel]].sum())
            rooms[key] = (-np.sort(-r[on_t])).tolist(), total
        return rooms[key]

    fits: dict[int, list[int]] = {}
    # `stopped` given: those jobs alone, each on its own type (req.cand_restart), ahead of its
    # team's starts of its priority too (`_stopped`): its priority counts half a step more
    waiting = ~on & ~snap.job_running if stopped is None else np.zeros(J, bool)
    stopped = np.zeros(J, bool) if stopped is None else stopped
    own_t = np.full(J, -1, np.int64)
    own_t[req.run_job] = req.run_type
    for t in range(T):
        ahead = stopped & (own_t == t)
        w = np.flatnonzero((waiting | ahead) & snap.job_tier1[:, t]
                           & (snap.job_priority + 0.5 * ahead > lowest[snap.job_project, t]))
        if not len(w):
            continue
        cols = [snap.job_project[w], 2 * snap.job_priority[w] + ahead[w], req.size[w, t],
                req.pieces[w, t], req.rem[w, t]]
        code = np.zeros(len(w), np.int64)
        for col in cols:  # one integer per kind (a row-wise np.unique sorts far slower)
            col = np.asarray(col, np.int64)
            code = code * (int(col.max()) - int(min(col.min(), 0)) + 1) + col - min(col.min(), 0)
        _, one, inv = np.unique(code, return_index=True, return_inverse=True)
        kinds = zip(*(np.asarray(col)[one].tolist() for col in cols))
        ok = np.zeros(len(one), bool)
        for i, (p, q, size, pieces, rem) in enumerate(kinds):
            r, total = room(p, t, q / 2)  # r: largest first, a list
            if pieces + (rem > 0) > len(r) or size * pieces + rem > total:
                continue
            if rem <= size:  # its chunks largest first: `pieces` of size, then rem: against
                ok[i] = ((not pieces or r[pieces - 1] >= size)  # the largest rooms, in order
                         and (not rem or r[pieces] >= rem))
            else:
                need = sorted([size] * pieces + [rem], reverse=True)
                ok[i] = all(x >= y for x, y in zip(r, need))
        for a in w[ok[np.asarray(inv).reshape(-1)]].tolist():
            fits.setdefault(a, []).append(t)
    return sorted(fits.items(), key=lambda e: (int(snap.job_project[e[0]]), int(rank[e[0]])))


def _start_in_their_place(em, pool, kept, placements, started, cand_of, backfilled, a, mine,
                          types, by_job, keeps, typed, repack) -> list[tuple[int, int]]:
    """Job a started in the places of `mine` (lowest-ranked first) on the first of its
    candidates' types in `types` where it fits: the jobs given back, as (a, b) pairs."""
    snap, req = em.snap, em.req
    for c in by_job.get(a, ()):
        t = int(req.cand_type[c])
        if t not in types or (snap.job_running[a] and not req.cand_restart[c]):
            continue
        if any(p not in placements for p in typed.get(c, ())):
            continue  # a job ahead of it that may use this type waits (order_types)
        if any(not (kept[i] or int(req.run_job[i]) in placements) for i in keeps.get(c, ())):
            continue  # a running job ranked above it does not run (keep_order)
        bs = [b for b in mine if placements[b].gpu_type == snap.type_names[t]]
        if not bs or (pool.free[pool.accept & (snap.node_type == t)].sum()
                      + sum(int(snap.job_gpus[b]) for b in bs) < snap.job_gpus[a]):
            continue
        saved = _state(pool, placements) if repack else None
        given: list[int] = []
        nodes = taken = None
        room = int(pool.free[pool.accept & (snap.node_type == t)].sum())
        for b in bs:
            pool.release_placement(placements[b], b)
            given.append(b)
            room += int(snap.job_gpus[b])
            nodes = nodes_for(pool, em, c, [], {}, evict=False)
            if nodes is not None:
                break
            if repack and room >= snap.job_gpus[a]:  # enough GPUs, on other nodes: with
                taken = _repacked(em, pool, placements, cand_of, a, c, given)  # the starts
                if taken is not None:  # beside them moved
                    break
        if nodes is None and taken is None:  # it fits not even so: as they were
            for b in given:
                pool.hold_placement(placements[b], b)
            continue
        placements[a] = alloc(pool, em, a, t, nodes) if taken is None else taken
        if repack:
            out = _given_back(em, pool, placements, cand_of, a, given)
            if out is None:  # its project would hold more or fewer GPUs of t: as it was
                _restore(pool, placements, saved)
                continue
        else:
            out = []
            for b in given:
                pl = placements[b]
                if all(pool.is_free(snap.node_index[x.node], x.gpus) for x in pl.nodes):
                    pool.hold_placement(pl, b)  # it did not need these: b starts there again
                else:
                    out.append(b)
        for b in out:
            del placements[b]
            started[cand_of.pop(b)] = False
            backfilled[b] = False
        started[c] = True
        cand_of[a] = c
        backfilled[a] = True
        return [(a, b) for b in out]
    return []


def _movable_on_nodes(em: EpochModel, pool: NodePool) -> np.ndarray:
    """(N,) per node, the pool's GPUs held by the plan's queued starts that may move to other
    GPUs of their type. Read from the pool's owner grid (every start holds its GPUs there): a
    loop over the placements per call took 0.27 s of XL's 0.7 s in this step."""
    own = pool.owner
    out = own >= 0
    out[out] = ~_fixed(em)[own[out]]
    return out.sum(axis=1)


def _fixed(em: EpochModel) -> np.ndarray:
    """(J,) bool: jobs whose GPUs do not move (a running job's, a reservation's gang's)."""
    fixed = em.__dict__.get("_fixed_starts")
    if fixed is None:  # once per model
        fixed = em.snap.job_running.copy()
        if em.res is not None:
            fixed[[h.job for h in em.res.held]] = True
        em.__dict__["_fixed_starts"] = fixed
    return fixed


def _repacked(em: EpochModel, pool: NodePool, placements: dict, cand_of: dict, a: int,
              c: int, given: list[int]):
    """Job a's placement for candidate c, taken in the pool, once some of the plan's other
    queued starts on its type move to other GPUs of it (those the jobs `given` back freed,
    or free ones): node by node (the most free GPUs first, at most NODES of them where
    moving its queued starts would make room for a's largest piece), smallest first, as few
    as a needs; each moved start is placed again (largest first, best fit; `placements`
    updated). None, with the pool and the placements as they were, where a or one of them
    then does not fit."""
    snap, req = em.snap, em.req
    t = int(req.cand_type[c])
    # the jobs `given` back and a hold no GPUs of the pool: every mover is another start
    room = pool.free + _movable_on_nodes(em, pool)
    ok = np.flatnonzero(pool.accept & (snap.node_type == t) & (room >= req.size[a, t]))
    nodes = ok[np.lexsort((ok, -pool.free[ok]))][:NODES].tolist()
    moved: dict[int, object] = {}
    found = None
    for n in nodes:
        own = pool.owner[n]  # now: a start moved off an earlier node holds none here
        on_n = own[own >= 0]
        ids, cnt = np.unique(on_n[~_fixed(em)[on_n]], return_counts=True)
        here = ids[np.lexsort((ids, cnt))].tolist()
        for m in here:
            moved[m] = placements[m]
            pool.release_placement(placements[m], m)
            found = nodes_for(pool, em, c, [], {}, evict=False)
            if found is not None:
                break
        if found is not None:
            break
    if found is None:
        for m, pl in moved.items():
            pool.hold_placement(pl, m)
        return None
    mine = alloc(pool, em, a, t, found)
    again: dict[int, object] = {}
    for m in sorted(moved, key=lambda m: (-int(snap.job_gpus[m]), m)):
        cm = cand_of[m]
        at = nodes_for(pool, em, cm, [], {}, evict=False)
        if at is None:  # one does not fit elsewhere: everything as it was
            pool.release_placement(mine, a)
            for k, pl in again.items():
                pool.release_placement(pl, k)
            for k, pl in moved.items():
                pool.hold_placement(pl, k)
            return None
        again[m] = alloc(pool, em, m, int(em.req.cand_type[cm]), at)
    placements.update(again)
    return mine


def _given_back(em: EpochModel, pool: NodePool, placements: dict, cand_of: dict, a: int,
                given: list[int]) -> list[int] | None:
    """After job a took the places of the jobs `given` back (lowest-ranked first) with other
    starts moved: those that start again, best-ranked first, where they were or elsewhere on
    their type, as long as their project holds no more GPUs of it than before; the rest,
    which wait. None where those that wait hold other than a's GPUs: the project would hold
    more of the type than the solution gave it (past its target, which the model caps) or
    fewer (floor or target GPUs, which the scheme's order puts before the team's own). A
    stopped running job's restart (`_stopped`) counts in no share row (requirements.
    cand_counted): where it takes free GPUs beside their places, they all wait, and the
    scheme's order judges the plan (repack_order: kept only where it scores better)."""
    snap = em.snap
    left = sum(int(snap.job_gpus[b]) for b in given) - int(snap.job_gpus[a])
    out = []
    for b in given[::-1]:
        pl, g = placements[b], int(snap.job_gpus[b])
        if g <= left and all(pool.is_free(snap.node_index[x.node], x.gpus) for x in pl.nodes):
            pool.hold_placement(pl, b)
            left -= g
            continue
        at = nodes_for(pool, em, cand_of[b], [], {}, evict=False) if g <= left else None
        if at is None:
            out.append(b)
            continue
        placements[b] = alloc(pool, em, b, int(em.req.cand_type[cand_of[b]]), at)
        left -= g
    return out[::-1] if left == 0 or (left < 0 and snap.job_running[a]) else None


def _state(pool: NodePool, placements: dict) -> tuple:
    """What _restore puts back: the pool's grid and the placements."""
    return (pool.occ.copy(), pool.owner.copy(), pool.free.copy(), pool.ev.copy(),
            dict(placements))


def _restore(pool: NodePool, placements: dict, saved: tuple) -> None:
    occ, owner, free, ev, pl = saved
    pool.occ[...], pool.owner[...], pool.free[...], pool.ev[...] = occ, owner, free, ev
    placements.clear()
    placements.update(pl)
