"""A solver's integer solution that a plan already placed is not placed again
(optalloc.plan.outcome.placed_already): the scheme's order and the objective read only a plan's
starts and keeps, so the plan already there is the outcome. On 3 days of ITP cluster04, 155 of
the 211 MIP solutions were the LP's rounding or the greedy plan."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import optalloc.epoch as epoch
from optalloc.bench.instances import scale_instance
from optalloc.model.build import build_model
from optalloc.plan.incumbent import greedy_placed
from optalloc.plan.outcome import placed_already, scored
from optalloc.plan.holdings import as_solution
from optalloc.types import EXACT_GAP


def _digest(plan) -> tuple:
    return (sorted((p.job_id, p.gpu_type, tuple((n.node, tuple(n.gpus)) for n in p.nodes))
                   for p in plan.placements),
            sorted(p.job_id for p in plan.preemptions),
            sorted((p.job_id, p.code, p.message) for p in plan.pending))


def _placements(monkeypatch) -> list:
    sources: list = []
    real = epoch.placed_outcome

    def spy(em, x, source, **kw):
        sources.append(source)
        return real(em, x, source, **kw)

    monkeypatch.setattr(epoch, "placed_outcome", spy)
    return sources


def _mip_returns_the_rounding(monkeypatch) -> None:
    """The MIP's answer replaced by the LP rounding's plan as a point of the model (its bound
    kept): on 88 GPUs the MIP returned the rounding itself until stop 35 (seed 10), since
    then it finds a plan better in the work tier on every seed tried (0-199)."""
    rounded: list = []
    real_placed, real_solve = epoch.placed_outcome, epoch.solve

    def placed_outcome(em, x, source, **kw):
        out = real_placed(em, x, source, **kw)
        if source == "lp-rounded":
            rounded.append((em, out))
        return out

    def solve(lm, settings, start=None, cutoff=None):
        res = real_solve(lm, settings, start, cutoff)
        if rounded and res.has_solution:
            em, out = rounded[-1]
            res = replace(res, x=as_solution(em, out.placed), objective=out.model_value)
        return res

    monkeypatch.setattr(epoch, "placed_outcome", placed_outcome)
    monkeypatch.setattr(epoch, "solve", solve)


def test_the_mip_solution_that_is_the_lps_rounding_is_not_placed_again(monkeypatch):
    snap = scale_instance("S", 98)  # 88 GPUs: solved exactly (seed 10 until stop 37)
    _mip_returns_the_rounding(monkeypatch)
    placed = _placements(monkeypatch)
    plan = epoch.run_epoch(snap)
    assert placed == ["lp-rounded"]  # the MIP ran, its solution was not placed
    assert plan.report.status == "optimal" and plan.report.gap <= EXACT_GAP
    assert plan.report.source == "lp-rounded"
    assert "the mip solution is the same plan" in plan.report.message

    monkeypatch.setattr(epoch, "placed_already", lambda em, x, plans: None)
    placed.clear()
    again = epoch.run_epoch(snap)
    assert placed == ["lp-rounded", "mip"]
    # the whole plan is the one placing the MIP's solution again gives
    assert _digest(again) == _digest(plan)
    assert again.report.objective == pytest.approx(plan.report.objective, rel=1e-12)


@pytest.fixture(scope="module")
def greedy_outcome():
    em = build_model(scale_instance("S", 3))
    g = greedy_placed(em)
    return em, scored(em, g, "greedy", backend="highs", status="feasible")


def test_a_placed_plan_is_found_by_its_own_solution(greedy_outcome):
    em, out = greedy_outcome
    assert out.model_point
    x = as_solution(em, out.placed)
    assert placed_already(em, x, [out]) is out


def test_a_fractional_solution_or_another_start_is_placed(greedy_outcome):
    em, out = greedy_outcome
    x = as_solution(em, out.placed)
    frac = x.copy()
    frac[em.x[0]] = 0.5
    assert placed_already(em, frac, [out]) is None
    other = x.copy()
    other[em.x[0]] = 1.0 - other[em.x[0]]
    assert placed_already(em, other, [out]) is None
    assert placed_already(em, x, []) is None


def test_a_plan_that_breaks_a_row_of_the_model_is_not_reused(greedy_outcome):
    em, out = greedy_outcome
    x = as_solution(em, out.placed)
    out.model_point = False
    try:
        assert placed_already(em, x, [out]) is None
    finally:
        out.model_point = True
    assert np.array_equal(as_solution(em, out.placed), x)
