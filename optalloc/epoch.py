"""One scheduling epoch, as a pure function of a Snapshot: `run_epoch(snapshot) -> Plan`.

Numbered phases (Kueue style):
  1. requirements  shapes of every job on every gpu_type, candidates, running holds, weights
  2. build         the epoch ILP as arrays (optalloc.model; math in models/formulation.md)
  3. solve         one backend from optalloc.solve (settings.backend)
  4. place         solution -> nodes and GPU indices, repair, restore + backfill
  5. reasons       preemptions, pending reasons, floor violations, the solve report

Never raises on solver trouble: infeasible / timeout / error keep the best incumbent if there
is one, else every running job that may stay keeps its GPUs and nothing new starts; either way
`plan.degraded` says why and pending jobs carry SolverDegraded.
"""

from __future__ import annotations

import time

import numpy as np

from optalloc.model.build import EpochModel, build_model
from optalloc.model.objective.impact import compute_impact
from optalloc.model.requirements import compute_requirements
from optalloc.plan.place import place
from optalloc.plan.reasons import floor_violations, got_by_org, pending_reasons, preemptions
from optalloc.snapshot import Snapshot
from optalloc.solve import SolveResult, relative_gap, solve
from optalloc.types import Placement, Plan, SolveReport, SolverSettings


def run_epoch(snapshot: Snapshot, settings: SolverSettings | None = None) -> Plan:
    settings = snapshot.policy.solver if settings is None else settings
    # 1. requirements
    t0 = time.perf_counter()
    req = compute_requirements(snapshot)
    imp = compute_impact(snapshot)
    # 2. build
    em = build_model(snapshot, req, imp)
    build_s = time.perf_counter() - t0
    # 3. solve
    res = _solve(em, settings)
    degraded = None
    if res.status not in ("optimal", "feasible"):
        what = "best incumbent kept" if res.has_solution else "running jobs kept, nothing new"
        degraded = f"{res.backend}: {res.status} ({res.message}); {what}"
    # 4. place
    t1 = time.perf_counter()
    placed = place(em, res.x, backfill=res.has_solution)
    place_s = time.perf_counter() - t1
    # 5. reasons and report
    got = got_by_org(em, placed)
    objective = em.plan_objective(placed.started, placed.kept, got)
    bound = res.bound
    report = SolveReport(
        backend=res.backend,
        status=res.status,
        objective=objective,
        bound=bound,
        gap=None if bound is None else (relative_gap(objective, bound) if bound > objective else 0.0),
        n_vars=em.lm.n_vars,
        n_cons=em.lm.n_cons,
        build_s=build_s,
        solve_s=res.solve_s,
        place_s=place_s,
        message=res.message,
    )
    kept = [snapshot.jobs[j].placement for j in req.run_job[placed.kept]]
    new = [placed.placements[j] for j in sorted(placed.placements)]
    return Plan(
        now=snapshot.now,
        placements=tuple(_with_alloc(p, snapshot) for p in kept) + tuple(new),
        preemptions=preemptions(em, placed, snapshot.policy.grace_s),
        pending=pending_reasons(em, placed, degraded, got),
        floor_violations=floor_violations(em, got),
        report=report,
        degraded=degraded,
    )


def _with_alloc(p: Placement, snap: Snapshot) -> Placement:
    alloc = bool(snap.job_allocated[snap.job_index[p.job_id]])
    return p if p.allocated == alloc else Placement(p.job_id, p.gpu_type, p.nodes, alloc)


def _solve(em: EpochModel, settings: SolverSettings) -> SolveResult:
    lm = em.lm
    if lm.n_vars == 0:  # nothing to decide: an empty model is trivially optimal
        x = np.zeros(0)
        return SolveResult(settings.backend, "optimal", x, lm.objective(x), lm.objective(x),
                           0, lm.n_cons, 0.0, "empty model")
    return solve(lm, settings)  # an LP backend's fractional x is rounded by the placement step


__all__ = ["run_epoch", "compute_requirements", "compute_impact"]
