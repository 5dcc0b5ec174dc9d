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
from dataclasses import replace

import numpy as np

from optalloc.model.build import EpochModel, build_model
from optalloc.model.objective.impact import compute_impact
from optalloc.model.requirements import compute_requirements
from optalloc.plan.place import as_solution, place
from optalloc.plan.reasons import floor_violations, got_by_org, pending_reasons, preemptions
from optalloc.snapshot import Snapshot
from optalloc.solve import BACKENDS, SolveResult, relative_gap, solve
from optalloc.solve.highs import HighsBackend
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
    # 3. solve + 4. place (3a: LP relaxation, rounded and placed; 3b: the MIP if 3a is not
    #    certified within the gap)
    res, placed, place_s = _solve_and_place(em, settings)
    degraded = None
    if res.status not in ("optimal", "feasible"):
        what = "best incumbent kept" if res.has_solution else "running jobs kept, nothing new"
        degraded = f"{res.backend}: {res.status} ({res.message}); {what}"
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
        preemptions=preemptions(em, placed, snapshot.policy.grace_s, got),
        pending=pending_reasons(em, placed, degraded, got),
        floor_violations=floor_violations(em, got),
        report=report,
        degraded=degraded,
    )


def _with_alloc(p: Placement, snap: Snapshot) -> Placement:
    alloc = bool(snap.job_allocated[snap.job_index[p.job_id]])
    return p if p.allocated == alloc else Placement(p.job_id, p.gpu_type, p.nodes, alloc)


def _solve_and_place(em: EpochModel, settings: SolverSettings):
    """Phases 3 and 4.

    3a. Solve the LP relaxation (HiGHS), round it (x >= 0.5) and place + backfill. The placed
        plan is an integer point of the model, the LP optimum an upper bound: when the plan is
        within settings.mip_gap of it, the plan is certified and the MIP is skipped.
    3b. Otherwise solve the MIP with settings.backend, place its incumbent, and report the
        tighter of the MIP and LP bounds. An LP backend (`lp`, `glop-lp`) stops after 3a.
    Returns (SolveResult with the bound used, Placed, place seconds)."""
    lm = em.lm
    if lm.n_vars == 0:  # nothing to decide: an empty model is trivially optimal
        x = np.zeros(0)
        res = SolveResult(settings.backend, "optimal", x, lm.objective(x), lm.objective(x),
                          0, lm.n_cons, 0.0, "empty model")
        t = time.perf_counter()
        return res, place(em, x), time.perf_counter() - t
    backend = BACKENDS.get(settings.backend)
    if backend is None or not backend.available():
        res = solve(lm, settings)  # the error result naming the problem
        t = time.perf_counter()
        return res, place(em, None, backfill=False), time.perf_counter() - t
    lp_name = settings.backend if getattr(backend, "relaxation", False) else "lp"
    if lp_name == "lp":  # HiGHS: LP diving (the bound is the first LP's optimum)
        lp, x_lp = HighsBackend().dive(lm, settings, em.x, rounds=8)
    else:
        lp = solve(lm, replace(settings, backend=lp_name))
        x_lp = lp.x
    lp_plan, start = None, None
    if lp.has_solution:
        t = time.perf_counter()
        placed = place(em, x_lp)
        place_s = time.perf_counter() - t
        obj = em.plan_objective(placed.started, placed.kept, got_by_org(em, placed))
        gap = relative_gap(obj, lp.bound)
        if lp_name == settings.backend or (gap is not None and gap <= settings.mip_gap):
            msg = f"LP relaxation rounded and placed; certified within {gap:.2e} of the LP bound"
            res = SolveResult(settings.backend, "optimal", lp.x, obj, lp.bound, lm.n_vars,
                              lm.n_cons, lp.solve_s, msg)
            return res, placed, place_s
        lp_plan = (placed, place_s, obj)
        start = as_solution(em, placed)  # the MIP starts from it and mostly proves the bound
        if lm.violation(start) > 1e-6:
            start = None
    left = max(0.05, settings.time_limit_s - lp.solve_s)
    mip = solve(lm, replace(settings, time_limit_s=left), start=start)
    bounds = [b for b in (mip.bound, lp.bound if lp.has_solution else None) if b is not None]
    t = time.perf_counter()
    placed = place(em, mip.x, backfill=mip.has_solution)
    place_s = time.perf_counter() - t
    x, msg = mip.x, mip.message
    if lp_plan is not None:  # the rounded LP plan is an incumbent too: keep the better one
        obj = em.plan_objective(placed.started, placed.kept, got_by_org(em, placed))
        if not mip.has_solution or lp_plan[2] > obj:
            placed, place_s = lp_plan[0], lp_plan[1] + place_s
            x, msg = lp.x, f"{msg}; the rounded LP plan was better"
    res = SolveResult(mip.backend, mip.status, x, mip.objective,
                      min(bounds) if bounds else None, lm.n_vars, lm.n_cons,
                      lp.solve_s + mip.solve_s, msg)
    return res, placed, place_s


__all__ = ["run_epoch"]
