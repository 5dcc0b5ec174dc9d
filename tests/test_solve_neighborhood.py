"""The MIP around a plan (RINS, optalloc/solve/neighborhood.py): columns where the plan and the
LP agree are fixed, the plan stays feasible in the neighbourhood, and the neighbourhood's optimum
is never worse than the plan and never better than the LP bound."""

from __future__ import annotations

import numpy as np

from optalloc.bench.instances import scale_instance
from optalloc.epoch import _placed_outcome
from optalloc.model.build import build_model
from optalloc.plan.place import as_solution
from optalloc.solve import neighborhood, relax_and_dive, solve
from optalloc.types import SolverSettings


def test_the_neighborhood_fixes_what_the_plan_and_the_lp_agree_on_and_keeps_the_plan():
    em = build_model(scale_instance("S"))
    lm = em.lm
    lp, x = relax_and_dive(lm, SolverSettings(), em.x, rounds=8)
    plan = _placed_outcome(em, x, "lp-rounded", backend="highs", status="feasible", message="")
    assert plan.model_point
    inc = as_solution(em, plan.placed)
    sub, free = neighborhood(lm, inc, lp.x)
    ints = np.flatnonzero(lm.integer)
    agree = np.abs(inc[ints] - lp.x[ints]) <= 1e-6
    assert free == int((~agree).sum())
    assert np.array_equal(sub.lb[ints[agree]], inc[ints[agree]])
    assert np.array_equal(sub.ub[ints[agree]], inc[ints[agree]])
    assert np.array_equal(sub.lb[ints[~agree]], lm.lb[ints[~agree]])
    assert sub.violation(inc) <= 1e-9  # the plan is a point of its neighbourhood
    settings = SolverSettings()
    r = solve(sub, settings)
    assert r.status == "optimal"
    obj_inc = float(lm.c @ inc) + lm.obj_offset
    # the neighbourhood holds the plan (its bound is at least the plan's), its answer is within
    # mip_gap of that bound, and no point of it beats the LP bound of the whole model
    assert r.bound + 1e-6 >= obj_inc
    assert r.objective >= r.bound - settings.mip_gap * abs(r.bound) - 1e-6
    assert r.objective <= lp.bound + 1e-6


def test_the_1024_gpu_epoch_with_reservations_is_certified_and_rins_improves_the_rounded_plan(
        monkeypatch):
    """Measured at stop 18 (seed 0): the rounded plan alone was 2.1% from the bound there; the
    MIP around it (RINS) brought it to 0.60%, still over mip_gap 0.5%, so the whole MIP ran and
    certified. Since the backfill ranks a job again by the type it would actually get (stop 21),
    seed 0's rounded plan is certified by itself (0.50%), so this uses seed 1: the rounded plan
    1.38% from the bound, the dive's earlier points 1.07% and 1.14%, RINS 0.73%, the whole MIP
    0.03%."""
    import dataclasses

    import optalloc.epoch as epoch

    seen = []
    best = epoch._best
    monkeypatch.setattr(epoch, "_best", lambda plans: (seen.append(list(plans)), best(plans))[1])
    snap = scale_instance("M", 1)
    snap = dataclasses.replace(snap, policy=dataclasses.replace(snap.policy, max_reservations=2))
    plan = epoch.run_epoch(snap)
    assert plan.report.status == "optimal" and plan.report.gap <= 0.005
    by = {p.source: p.objective for p in seen[-1] if p.model_point}
    assert by["mip-neighborhood"] > by["lp-rounded"]
