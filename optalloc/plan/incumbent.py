"""The greedy baseline's plan in the model's coordinates, so the optimizer can score it, start
from it and never return anything worse on its own objective (epoch phase 3b)."""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.plan.holdings import Placed
from optalloc.plan.greedy_order import greedy_pass


def greedy_placed(em: EpochModel) -> Placed | None:
    """The ranked pass of the published greedy system as a Placed, or None when one of its
    placements has no counterpart in the model (then it is not a candidate). A plan that
    breaks a row (an `order` or `keep_order` row: it started a job below one of its project
    that it preempted) is scored but not eligible (optalloc.plan.outcome.best_plan)."""
    snap, req = em.snap, em.req
    res = greedy_pass(snap)
    C, K, J = len(req.cand_job), len(req.run_job), len(snap.jobs)
    cand = np.full((J, len(snap.gpu_types)), -1, np.int64)  # (job, type) -> candidate, -1
    cand[req.cand_job, req.cand_type] = np.arange(C)
    run_of = {j: i for i, j in enumerate(req.run_job.tolist())}
    tidx = {n: i for i, n in enumerate(snap.type_names)}
    started = np.zeros(C, bool)
    kept = np.zeros(K, bool)
    placements = {}
    for pl in res.placements:
        j = snap.job_index[pl.job_id]
        job = snap.jobs[j]
        # the pass keeps a running job's own Placement object: `is` first (a kept job's
        # dataclass == compared every node's GPU tuple: 1% of the XL epoch)
        if job.running and (job.placement is pl or job.placement == pl) and j in run_of:
            kept[run_of[j]] = True
            continue
        c = int(cand[j, tidx[pl.gpu_type]])
        if c < 0:
            return None
        started[c] = True
        placements[j] = pl
    fm = res.free
    free = np.where(fm.accepts, fm.free, 0)
    return Placed(started, kept, placements, np.zeros(J, bool),
                  np.zeros(K, bool), free)
