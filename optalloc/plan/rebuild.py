"""A placed plan rebuilt into a NodePool after the placement step, and backfilled again
(optalloc.plan.place.backfill_rounds): what the team's order by proxy
(optalloc.plan.proxy_order) and greedy's plan with its reservation-breaking starts undone
(optalloc.plan.reservations) do to a plan that has left place()."""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.objective.impact import candidate_values
from optalloc.plan.backfill import candidates_by_job
from optalloc.plan.nodepool import NodePool
from optalloc.plan.place import (
    _running_gpus,
    _running_holds,
    backfill_rounds,
    evictable_jobs,
    keep_bounds_of,
)


def pool_after(em: EpochModel, kept: np.ndarray, placements: dict,
               freed: bool) -> tuple[NodePool, tuple]:
    """(a NodePool holding the running jobs `kept` keeps and the starts `placements`, the
    (node, GPU, running position) of every running job's GPU: optalloc.plan.place.
    _running_gpus); with `freed`, the GPUs of the running jobs it stops are used last, as
    place() has them."""
    snap, req = em.snap, em.req
    pool = NodePool(snap, evictable_jobs(snap), em.res.deadline)
    rn, rg, ri = _running_gpus(em, _running_holds(em))
    on = kept[ri]
    pool.hold_many(rn[on], rg[on], req.run_job[ri[on]])
    if freed:
        pool.freed[rn[~on]] = True
    for e, pl in placements.items():
        pool.hold_placement(pl, e)
    return pool, (rn, rg, ri)


def refill(em: EpochModel, pool: NodePool, gpus: tuple, kept: np.ndarray, started: np.ndarray,
           placements: dict, cand_of: dict, backfilled: np.ndarray, held: list) -> np.ndarray:
    """backfill_rounds on a rebuilt plan, with what the model gives it (the running jobs'
    holds, the candidates' values and order, every running job that may stay restorable);
    returns the running jobs it restored."""
    req = em.req
    _, ub = keep_bounds_of(em)
    return backfill_rounds(em, pool, _running_holds(em),
                           {int(j): i for i, j in enumerate(req.run_job)}, kept, started,
                           placements, cand_of, backfilled, candidate_values(em.imp, req),
                           ub > 0, gpus, candidates_by_job(em)[0], held)
