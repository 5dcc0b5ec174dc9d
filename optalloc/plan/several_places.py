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
next backfill round may start them elsewhere).

Left to other steps: a running job's place (the priority swaps, optalloc.plan.victims, and
the `keep_order` rows), equal priorities (submit order: the `order` rows), and unallocated
starts (an allocated job evicts those in the backfill).
"""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.order import project_order
from optalloc.plan.fit import alloc, nodes_for
from optalloc.plan.nodepool import NodePool

#: passes started again, in one call, after a start gave jobs back
RESTARTS = 8


def start_ahead_of_several(em: EpochModel, pool: NodePool, kept: np.ndarray,
                           placements: dict, started: np.ndarray, cand_of: dict,
                           backfilled: np.ndarray, by_job: dict, preds: dict, keeps: dict,
                           typed: dict) -> list[tuple[int, int]]:
    """Start every waiting allocated queued job that fits in the places of its project's
    lower-priority starts of this epoch (and the free GPUs beside them); returns the (job
    started, job given back) pairs. `by_job`, `preds`, `keeps`, `typed`: per job its
    candidates, its `order` predecessors, per candidate its `keep_order` running jobs and
    its `order_types` predecessors (optalloc.plan.backfill.candidates_by_job)."""
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
        mine: dict[int, list[int]] = {}  # per project: its movable starts, lowest-ranked first
        for b in sorted(low, key=lambda b: -int(rank[b])):
            mine.setdefault(int(snap.job_project[b]), []).append(b)
        again = False
        for a, types in _may_fit(em, pool, placements, low, rank):
            if a in placements or any(p not in placements for p in preds.get(a, ())):
                continue  # its own predecessor waits: the order keeps it waiting
            bs = [b for b in mine[int(snap.job_project[a])]
                  if b in placements and snap.job_priority[b] < snap.job_priority[a]]
            if bs:
                given = _start_in_their_place(em, pool, kept, placements, started, cand_of,
                                              backfilled, a, bs, types, by_job, keeps, typed)
                out += given
                again = bool(given) and it < RESTARTS
                if again:
                    break
        if not again:
            break
    return out


def _movable(em: EpochModel, placements: dict) -> list[int]:
    """The starts that may be given back: queued jobs (a running job's place is the priority
    swaps'), allocated where they start, not a reservation's gang."""
    snap = em.snap
    gangs = {h.job for h in em.res.held} if em.res is not None else set()
    return [j for j, pl in placements.items()
            if pl.allocated and not snap.job_running[j] and j not in gangs]


def _may_fit(em: EpochModel, pool: NodePool, placements: dict, low: list[int],
             rank: np.ndarray):
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
    lt = np.array([tidx[placements[b].gpu_type] for b in low], np.int64)
    O = snap.org.n
    lowest = np.full((O, T), np.iinfo(np.int64).max)  # per project and type: lowest priority
    np.minimum.at(lowest, (snap.job_project[lb], lt), snap.job_priority[lb])
    free = np.where(pool.accept, pool.free, 0)
    rooms: dict = {}

    def room(p: int, t: int, q: int) -> np.ndarray:
        """The type-t nodes' free GPUs plus those of p's movable starts below q, largest
        first."""
        key = (p, t, q)
        if key not in rooms:
            r = free.copy()
            sel = (snap.job_project[lb] == p) & (lt == t) & (snap.job_priority[lb] < q)
            for b in lb[sel].tolist():
                for x in placements[b].nodes:
                    r[snap.node_index[x.node]] += len(x.gpus)
            rooms[key] = -np.sort(-r[snap.node_type == t])
        return rooms[key]

    fits: dict[int, list[int]] = {}
    waiting = ~on & ~snap.job_running
    for t in range(T):
        w = np.flatnonzero(waiting & snap.job_tier1[:, t]
                           & (snap.job_priority > lowest[snap.job_project, t]))
        if not len(w):
            continue
        key = np.stack([snap.job_project[w], snap.job_priority[w], req.size[w, t],
                        req.pieces[w, t], req.rem[w, t]], axis=1)
        kinds, inv = np.unique(key, axis=0, return_inverse=True)
        ok = np.zeros(len(kinds), bool)
        for i, (p, q, size, pieces, rem) in enumerate(kinds.tolist()):
            need = [size] * pieces + ([rem] if rem else [])
            r = room(p, t, q)
            ok[i] = len(need) <= len(r) and bool((r[:len(need)] >= sorted(need)[::-1]).all())
        for a in w[ok[np.asarray(inv).reshape(-1)]].tolist():
            fits.setdefault(a, []).append(t)
    return sorted(fits.items(), key=lambda e: (int(snap.job_project[e[0]]), int(rank[e[0]])))


def _start_in_their_place(em, pool, kept, placements, started, cand_of, backfilled, a, mine,
                          types, by_job, keeps, typed) -> list[tuple[int, int]]:
    """Job a started in the places of `mine` (lowest-ranked first) on the first of its
    candidates' types in `types` where it fits: the jobs given back, as (a, b) pairs."""
    snap, req = em.snap, em.req
    for c in by_job.get(a, ()):
        t = int(req.cand_type[c])
        if t not in types:
            continue
        if any(p not in placements for p in typed.get(c, ())):
            continue  # a job ahead of it that may use this type waits (order_types)
        if any(not (kept[i] or int(req.run_job[i]) in placements) for i in keeps.get(c, ())):
            continue  # a running job ranked above it does not run (keep_order)
        bs = [b for b in mine if placements[b].gpu_type == snap.type_names[t]]
        if not bs or (pool.free[pool.accept & (snap.node_type == t)].sum()
                      + sum(int(snap.job_gpus[b]) for b in bs) < snap.job_gpus[a]):
            continue
        given: list[int] = []
        nodes = None
        for b in bs:
            pool.release_placement(placements[b], b)
            given.append(b)
            nodes = nodes_for(pool, em, c, [], {}, evict=False)
            if nodes is not None:
                break
        if nodes is None:  # it fits not even in all their places: as they were
            for b in given:
                pool.hold_placement(placements[b], b)
            continue
        placements[a] = alloc(pool, em, a, t, nodes)
        started[c] = True
        cand_of[a] = c
        backfilled[a] = True
        out = []
        for b in given:
            pl = placements[b]
            if all(pool.is_free(snap.node_index[x.node], x.gpus) for x in pl.nodes):
                pool.hold_placement(pl, b)  # it did not need these: b starts there again
            else:
                del placements[b]
                started[cand_of.pop(b)] = False
                backfilled[b] = False
                out.append((a, b))
        return out
    return []
