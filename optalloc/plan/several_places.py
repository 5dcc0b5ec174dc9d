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


def start_ahead_of_several(em: EpochModel, pool: NodePool, kept: np.ndarray,
                           placements: dict, started: np.ndarray, cand_of: dict,
                           backfilled: np.ndarray, by_job: dict, preds: dict, keeps: dict,
                           typed: dict) -> list[tuple[int, int]]:
    """Start every waiting allocated queued job that fits in the places of its project's
    lower-priority starts of this epoch (and the free GPUs beside them); returns the (job
    started, job given back) pairs. `by_job`, `preds`, `keeps`, `typed`: per job its
    candidates, its `order` predecessors, per candidate its `keep_order` running jobs and
    its `order_types` predecessors (optalloc.plan.backfill.candidates_by_job)."""
    snap, req = em.snap, em.req
    if not placements:
        return []
    J = len(snap.jobs)
    on = np.zeros(J, bool)
    on[list(placements)] = True
    gangs = {h.job for h in em.res.held} if em.res is not None else set()
    # lower-priority starts that may be given back: queued jobs (a running job's place is
    # the priority swaps'), allocated where they start, not a reservation's gang
    movable = on & ~snap.job_running
    movable[list(gangs)] = False
    low = [j for j in np.flatnonzero(movable).tolist()
           if placements[j].allocated and snap.jobs[j].placement is None]
    if not low:
        return []
    prio, proj = snap.job_priority, snap.job_project
    low_max = {}  # per project: the lowest priority among its movable starts
    for j in low:
        p = int(proj[j])
        low_max[p] = min(low_max.get(p, prio[j]), prio[j])
    rank = project_order(snap)
    low_set = set(low)
    waiting = [a for a in np.flatnonzero(~on & ~snap.job_running).tolist()
               if int(proj[a]) in low_max and prio[a] > low_max[int(proj[a])] and a in by_job]
    out: list[tuple[int, int]] = []
    for a in sorted(waiting, key=lambda a: (int(proj[a]), int(rank[a]))):
        if a in placements or any(p not in placements for p in preds.get(a, ())):
            continue  # its own predecessor waits: the order keeps it waiting
        mine = sorted((b for b in placements if int(proj[b]) == int(proj[a])
                       and prio[b] < prio[a] and b in low_set),
                      key=lambda b: -int(rank[b]))  # lowest-ranked first
        if mine:
            out += _start_in_their_place(em, pool, kept, placements, started, cand_of,
                                         backfilled, a, mine, by_job, keeps, typed)
    return out


def _start_in_their_place(em, pool, kept, placements, started, cand_of, backfilled, a, mine,
                          by_job, keeps, typed) -> list[tuple[int, int]]:
    snap, req = em.snap, em.req
    for c in by_job[a]:
        t = int(req.cand_type[c])
        if not snap.job_tier1[a, t]:
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
