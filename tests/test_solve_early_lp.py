"""EarlyLp (optalloc.solve.lp): the epoch's LP begun on its own thread before the fill
columns' bounds are known, then finished for the final bounds. Whatever bounds it began with,
the finished LP is the final model's LP: the same optimum (the epoch's bound) as solving that
model from scratch, a point inside its bounds, and reduced costs for it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_epoch_properties import assert_true_bound_and_honest_status, instances

import optalloc.epoch as epoch
from optalloc.bench.instances import scale_instance
from optalloc.model.build import build_model
from optalloc.model.matrix import LinearModel
from optalloc.model.objective.impact import compute_impact
from optalloc.model.requirements import compute_requirements
from optalloc.plan.incumbent import greedy_placed
from optalloc.solve.highs import Dive, HighsBackend
from optalloc.solve.lp import EarlyLp
from optalloc.types import SolverSettings


def _model(c, A, hi, ub) -> LinearModel:
    n = len(c)
    return LinearModel(
        c=np.asarray(c, float), obj_offset=0.0, lb=np.zeros(n), ub=np.asarray(ub, float),
        integer=np.zeros(n, bool), A=sp.csr_matrix(np.asarray(A, float)),
        row_lo=np.full(len(hi), -np.inf), row_hi=np.asarray(hi, float),
        var_blocks={"x": (0, n)}, row_blocks=(("cap", 0, len(hi)),))


def _direct(lm: LinearModel) -> float:
    r = HighsBackend().solve(lm, SolverSettings(), relax=True)
    assert r.status == "optimal"
    return r.objective


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 12), m=st.integers(1, 4), seed=st.integers(0, 10**6),
       lower=st.booleans())
def test_the_finished_lp_is_the_final_models_lp_whatever_bounds_it_began_with(n, m, seed,
                                                                               lower):
    rng = np.random.default_rng(seed)
    c, A, hi = rng.integers(1, 40, n), rng.integers(0, 9, (m, n)), rng.integers(3, 30, m)
    final = _model(c, A, hi, rng.integers(0, 6, n))
    # begun with every bound above the final one (the epoch's case), or anywhere
    begun = replace(final, ub=final.ub + rng.integers(0, 5, n) if lower
                    else rng.integers(0, 6, n).astype(float))
    dive = Dive(final, SolverSettings(), np.arange(n), early=EarlyLp(begun, SolverSettings()))
    assert dive.first.status == "optimal"
    assert dive.first.objective == pytest.approx(_direct(final), rel=1e-9, abs=1e-9)
    assert final.violation(dive.first.x) <= 1e-9
    assert dive.reduced_costs is not None and len(dive.reduced_costs) == n


def test_a_model_that_differs_beyond_its_bounds_is_solved_afresh():
    # max 3a + 2b, a + b <= 1 begun; the final model's row allows 2: optimum 5, not 3
    begun = _model([3, 2], [[1, 1]], [1], [1, 1])
    final = replace(begun, A=sp.csr_matrix(np.array([[1.0, 1.0]])), row_hi=np.array([2.0]))
    dive = Dive(final, SolverSettings(), np.arange(2), early=EarlyLp(begun, SolverSettings()))
    assert dive.first.objective == pytest.approx(5.0)


def test_an_error_on_the_lps_thread_is_raised_where_it_is_finished(monkeypatch):
    def broken(self, lm, settings, relax, h=None):
        raise RuntimeError("highs could not take the model")

    monkeypatch.setattr(HighsBackend, "_load", broken)
    early = EarlyLp(_model([1], [[1]], [1], [1]), SolverSettings())
    with pytest.raises(RuntimeError, match="could not take the model"):
        early.finish(early.lm)


@pytest.mark.parametrize("size,seed", [("S", 0), ("M", 0), ("M", 7)])
def test_the_epochs_bound_is_the_lp_optimum_of_its_final_model(size, seed):
    """The epoch begins its LP with the fill columns at the most any plan could leave, and
    finishes it for the greedy plan's fill: its bound is the final model's LP optimum."""
    snap = scale_instance(size, seed)
    req, imp = compute_requirements(snap), compute_impact(snap)
    em = build_model(snap, req, imp)
    g = greedy_placed(em)
    final = em.with_fill(epoch.left_idle(em, g))
    assert len(final.f) and not np.array_equal(final.lm.ub, em.with_fill(
        float(em.tg.capacity.sum())).lm.ub), "the instance should move the fill bounds"
    lp = _direct(final.lm)
    plan = epoch.run_epoch(snap)
    assert plan.report.bound <= lp * (1 + 1e-9)  # the LP's optimum, or a MIP's tighter bound
    if plan.report.source in ("lp-rounded", "greedy", "lp-dive"):  # no MIP: the LP's own
        # with the `order_types` rows its point broke added (optalloc.model.type_rows): no
        # higher than without them, no lower than with them all
        assert plan.report.bound >= _direct(final.with_all_type_rows().lm) * (1 - 1e-9)
        if not len(final.ordx.a):
            assert plan.report.bound == pytest.approx(lp, rel=1e-9)


def test_the_cut_loop_ends_at_an_lp_point_that_keeps_every_type_link():
    """The epoch adds the `order_types` rows the LP's point breaks, warm, until it breaks
    none; the bound is then the LP optimum of the model with those rows."""
    from optalloc.solve import start_dive

    snap = scale_instance("M", 0)
    em = build_model(snap)
    assert len(em.ordx.a) and not em.ordx.on.any()  # the links, none of their rows yet
    dive = start_dive(em.lm, SolverSettings(), em.x)
    assert em.ordx.broken(dive.x).any()  # the instance should need the loop
    cut = epoch._cut_type_rows(em, dive)  # optalloc.epoch_status.cut_type_rows
    assert cut.ordx.on.any() and not cut.ordx.broken(dive.x).any()
    assert cut.lm.n_cons == em.lm.n_cons + int(cut.ordx.on.sum())
    assert dive.first.objective == pytest.approx(_direct(cut.lm), rel=1e-9)
    assert dive.first.objective <= _direct(em.lm) * (1 + 1e-9)


@pytest.mark.parametrize("size,begun", [("S", False), ("M", True)])
def test_the_lp_is_begun_beside_the_greedy_pass_only_in_models_of_2000_columns_or_more(
        monkeypatch, size, begun):
    made = []
    real = epoch.EarlyLp

    def spy(lm, settings):
        made.append(lm.n_vars)
        return real(lm, settings)

    monkeypatch.setattr(epoch, "EarlyLp", spy)
    plan = epoch.run_epoch(scale_instance(size, 0))
    assert bool(made) is begun
    assert plan.report.n_vars >= epoch.EARLY_LP_FROM if begun else plan.report.n_vars < 2000
    assert plan.report.status == "optimal"


def test_the_lp_and_its_warm_finish_share_one_time_limit(monkeypatch):
    """Begun and finished, the LP gets the time limit of one solve: the finish gets what the
    begun solve left, and the dive's rounds after it their own whole limit again."""
    lm = _model([3, 2, 1], [[1, 1, 1]], [2], [1, 1, 1])
    early = EarlyLp(lm, SolverSettings(time_limit_s=10.0))
    early.finish(lm)
    early.seconds = 9.5  # as if the begun solve had taken 9.5 s of the 10
    seen = []
    real = type(early.h).setOptionValue

    def spy(h, name, value):
        if name == "time_limit":
            seen.append(value)
        return real(h, name, value)

    monkeypatch.setattr(type(early.h), "setOptionValue", spy)
    early._thread = type("Done", (), {"join": lambda self: None})()
    early.finish(replace(lm, ub=np.array([1.0, 0.0, 1.0])))
    assert seen == [pytest.approx(0.5), 10.0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_every_small_epoch_through_the_early_lp_keeps_a_true_bound_and_an_honest_status(snap):
    """The epoch property of test_epoch_properties (its bound never below its model's true
    optimum, `optimal` within 1e-4 of it), with every LP begun beside the greedy pass (the
    size threshold at 0), so the early LP is checked on the random snapshots too."""

    def run(snap, settings):
        saved = epoch.EARLY_LP_FROM
        epoch.EARLY_LP_FROM = 0
        try:
            return epoch.run_epoch(snap, settings)
        finally:
            epoch.EARLY_LP_FROM = saved

    assert_true_bound_and_honest_status(snap, run)
