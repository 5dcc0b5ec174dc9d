"""The team's order over the places of several jobs, with other starts moved (DESIGN.md rule
3; step 4c of the epoch, on the chosen plan only).

The placement gives a waiting job the places of its project's lower-priority starts where
it fits in them, alone or together, with the free GPUs beside them
(optalloc.plan.several_places). Where those places lie on several nodes, none of which has
room for it, it waited: on the bench's 1,024-GPU epoch (seed 6) P1-3's priority-0 1 + 1 gang
and 1-GPU job took three single GPUs on three h100 nodes, at P1-3's h100 target, while its
priority-1 2-GPU job waited, told only that its program held its b200 target. The sort
starts the priority-1 job first, and the plan could: moving one 1-GPU start of another team
from one of those nodes onto a GPU the gang freed gives it two GPUs on one node. Such a move
keeps the start on its type, so nothing the model counts changes (GPUs per type, packing per
size), only which start sits on which node.

Here, on the epoch's chosen plan, each such job, best-ranked first, takes their places with
the plan's other queued starts on those nodes moved, as few as it needs (several_places with
`repack`); what that leaves free goes to the backfill. It runs once, after the search: run
in every candidate's placement it changed which plans the search certified (the bench's M
seeds 0-15: 14 of 32 epochs met fewer floor GPUs, two ran to the time limit, and the epoch
took twice as long). The epoch keeps the result only where it scores better by the scheme's
order (optalloc.plan.score; a job given back whose GPUs no one else can use costs its
project floor or target GPUs, which that order puts first).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.plan.backfill import candidates_by_job
from optalloc.plan.holdings import Placed
from optalloc.plan.rebuild import pool_after, refill
from optalloc.plan.several_places import start_ahead_of_several


def repacked(em: EpochModel, placed: Placed,
             restarts: bool = False) -> tuple[list[int], Placed] | None:
    """(the jobs that took lower-priority teammates' places, `placed` with them started, the
    other starts moved and the rest backfilled), or None where no job does. `restarts`: the
    running jobs the plan stops instead, in the places of starts their team ranks below them
    (several_places._stopped)."""
    snap, req = em.snap, em.req
    if placed is None or not placed.placements:
        return None
    pool, gpus = pool_after(em, placed.kept, placed.placements, freed=True)
    kept, started = placed.kept.copy(), placed.started.copy()
    placements = dict(placed.placements)
    cand_of = {int(req.cand_job[c]): int(c) for c in np.flatnonzero(placed.started)}
    J = len(snap.jobs)
    backfilled = np.zeros(J, bool) if placed.backfilled is None else placed.backfilled.copy()
    by_job, _, _, preds, keeps, typed = candidates_by_job(em)
    given = start_ahead_of_several(em, pool, kept, placements, started, cand_of, backfilled,
                                   by_job, preds, keeps, typed, repack=True,
                                   restarts=restarts)
    if not given:
        return None
    held = [] if placed.held is None else [placed.held]
    restored = refill(em, pool, gpus, kept, started, placements, cand_of, backfilled, held)
    if placed.restored is not None:
        restored = (placed.restored & kept) | restored
    pairs = ([] if placed.ahead is None else placed.ahead.tolist()) + [list(p) for p in given]
    ahead = np.array([(a, b) for a, b in pairs if a in placements and b not in placements],
                     np.int64).reshape(-1, 2)
    now = np.zeros(J, bool)
    now[list(placements)] = True
    out = replace(placed, started=started, kept=kept | restored, placements=placements,
                  backfilled=backfilled & now, restored=restored,
                  free=np.where(pool.accept, pool.free, 0),
                  held=(np.unique(np.concatenate(held), axis=0) if held
                        else np.zeros((0, 3), np.int64)),
                  ahead=ahead)
    return sorted({a for a, _ in given if a in placements}), out
