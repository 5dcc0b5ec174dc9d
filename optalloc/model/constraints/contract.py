"""The time-slicing contract and the one-choice rule.

Variables
  x[c] in {0,1}   candidate c = (job j, gpu_type t): j starts on t this epoch (all its GPUs:
                  a gang is all-or-nothing by construction, the variable is the whole job)
  k[i] in {0,1}   running job i keeps its exact placement; lb = 1 when it is protected
                  (inside min_runtime) or held by the preemption margin (margin_hold). Running jobs on a down node have no k: they are gone.

Objective terms
  + v[j,t] x[c]                          impact of a start
  + (v[j,t_run] + churn_j) k[i] - churn_j  impact of keeping; churn_j paid when preempted

Constraint family `one_choice[job]`:  sum_t x[j,t] + k[j] <= 1  (rows only for jobs with two
or more options).
"""

from __future__ import annotations

import numpy as np

from optalloc.model.context import BuildContext


def margin_hold(ctx: BuildContext) -> np.ndarray:
    """(K,) bool: running jobs past their min_runtime that are held (k = 1) this epoch because no
    preemption of them could pay its margin (hysteresis + lost work, Impact.margin):

    * impact: no queued tier-1 job allowed on the job's type is worth more per GPU than
      (1 + margin) times the running job (running jobs already carry their project's best
      factor, so jobs of the same project never qualify), and
    * floors: no floor can gain from its GPUs: its project and ancestors hold no more tier-1
      GPUs of that type than their floors, or every floor on that type is already met by
      running jobs (floor-driven preemptions are never damped).
    Unallocated and zero-share running jobs are never held (they yield to allocated demand)."""
    from optalloc.model.constraints.floors import floor_targets

    snap, req, imp = ctx.snap, ctx.req, ctx.imp
    K = len(req.run_job)
    if K == 0 or imp.margin is None:
        return np.zeros(K, dtype=bool)
    rj, rt = req.run_job, req.run_type
    T = len(snap.gpu_types)
    g = np.maximum(snap.job_gpus, 1).astype(float)
    tier1 = imp.tier[rj, rt] >= 1.0
    # impact: best queued value per GPU on each type
    cj, ct = req.cand_job, req.cand_type
    ok = imp.tier[cj, ct] >= 1.0 if len(cj) else np.zeros(0, bool)
    best = np.zeros(T)
    np.maximum.at(best, ct[ok], imp.value[cj[ok], ct[ok]] / g[cj[ok]])
    own = imp.value[rj, rt] / g[rj]
    no_gain = best[rt] <= own * (1.0 + imp.margin[rj])
    # floors: tier-1 running GPUs per org node and type vs its floor
    F, _ = floor_targets(ctx)
    leaf = np.zeros_like(F)
    np.add.at(leaf, (snap.job_project[rj[tier1]], rt[tier1]), snap.job_gpus[rj[tier1]])
    M = snap.org.membership()
    held = M.astype(float) @ leaf
    over = held > F + 1e-9  # (O, T)
    over[0] = False  # the root has no floor
    anc_over = (M[:, snap.job_project[rj]] & over[:, rt]).any(axis=0)
    under = (held < F - 1e-9)[1:].any(axis=0)  # (T,) some floor on t is not met by running jobs
    return tier1 & no_gain & ~(anc_over & under[rt]) & ~req.run_fixed


def define_decisions(ctx: BuildContext) -> None:
    req, imp, b = ctx.req, ctx.imp, ctx.b
    ctx.x = b.add_vars("x", len(req.cand_job), 0, 1, imp.value[req.cand_job, req.cand_type])
    run_val = imp.value[req.run_job, req.run_type] if len(req.run_job) else np.zeros(0)
    churn = imp.churn[req.run_job] if len(req.run_job) else np.zeros(0)
    lb = np.where(req.run_fixed | margin_hold(ctx), 1.0, 0.0)
    ctx.k = b.add_vars("k", len(req.run_job), lb, 1, run_val + churn)
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
