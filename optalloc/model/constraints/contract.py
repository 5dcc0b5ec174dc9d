"""The time-slicing contract and the one-choice rule.

Variables
  x[c] in {0,1}   candidate c = (job j, gpu_type t): j starts on t this epoch (all its GPUs:
                  a gang is all-or-nothing by construction, the variable is the whole job);
                  for a running job past its protection, a move: it restarts on t (another
                  type), worth EPS_MOVE of its keep (optalloc.model.objective.impact);
                  lb = 1 for the gang of a due reservation (optalloc.model.reservations)
  k[i] in {0,1}   running job i keeps its exact placement.
                  lb = 1 when it is protected (allocated work inside min(min_runtime, cap));
                  ub = 0 when it sits on a drain node and is not protected: a drain node's
                  jobs leave as soon as their protection ends (unallocated work at once).
                  Running jobs on a down node have no k: they are gone (and may restart).

Objective terms
  + v[j,t] x[c]                            work value of a start
  + (v[j,t_run] + churn_j) k[i] - churn_j  work value of keeping; churn_j paid when not kept

Constraint family `one_choice[job]`:  sum_t x[j,t] + k[j] <= 1  (rows only for jobs with two
or more options).
"""

from __future__ import annotations

import numpy as np

from optalloc.model.context import BuildContext
from optalloc.model.objective.impact import candidate_values


def keep_bounds(ctx: BuildContext) -> tuple[np.ndarray, np.ndarray]:
    """(lb, ub) of k: protected jobs stay; unprotected jobs on drain nodes leave."""
    snap, req = ctx.snap, ctx.req
    rj = req.run_job
    lb = np.where(req.run_fixed, 1.0, 0.0)
    ub = np.where(snap.job_on_drain[rj] & ~req.run_fixed, 0.0, 1.0) if len(rj) else lb
    return lb, ub


def define_decisions(ctx: BuildContext) -> None:
    req, imp, b = ctx.req, ctx.imp, ctx.b
    # a due reservation's gang starts this epoch (optalloc.model.reservations): lb = 1
    forced = ctx.res.forced if ctx.res is not None and len(ctx.res.forced) else 0.0
    ctx.x = b.add_vars("x", len(req.cand_job), np.asarray(forced, float), 1,
                       candidate_values(imp, req))
    run_val = imp.value[req.run_job, req.run_type] if len(req.run_job) else np.zeros(0)
    churn = imp.churn[req.run_job] if len(req.run_job) else np.zeros(0)
    lb, ub = keep_bounds(ctx)
    ctx.k = b.add_vars("k", len(req.run_job), lb, ub, run_val + churn)
    b.add_offset(-float(churn.sum()))


def define_one_choice(ctx: BuildContext) -> None:
    req = ctx.req
    J = len(ctx.snap.jobs)
    jobs = np.concatenate([req.cand_job, req.run_job])
    cols = np.concatenate([ctx.x, ctx.k])
    count = np.bincount(jobs, minlength=J)
    multi = count >= 2
    row_of = np.cumsum(multi) - 1
    sel = multi[jobs]
    ctx.b.add_rows("one_choice", int(multi.sum()), row_of[jobs[sel]], cols[sel], 1.0, -np.inf, 1.0)
