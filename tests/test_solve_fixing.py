"""Reduced-cost fixing (optalloc.solve.fixing): every point worth at least the incumbent keeps
every fixed column, so the model's optimum is max(incumbent, the fixed model's optimum); and
the epoch's MIP with columns fixed returns a plan certified against a true bound."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import optalloc.epoch as epoch
from optalloc.bench.instances import scale_instance
from optalloc.model.matrix import LinearModel
from optalloc.solve.fixing import fix_by_reduced_cost
from optalloc.solve.highs import Dive
from optalloc.types import SolverSettings


def _model(c, A, hi) -> LinearModel:
    n = len(c)
    return LinearModel(
        c=np.asarray(c, float), obj_offset=0.0, lb=np.zeros(n), ub=np.ones(n),
        integer=np.ones(n, bool), A=sp.csr_matrix(np.asarray(A, float)),
        row_lo=np.full(len(hi), -np.inf), row_hi=np.asarray(hi, float),
        var_blocks={"x": (0, n)}, row_blocks=(("cap", 0, len(hi)),))


def _points(lm: LinearModel):
    """Every 0/1 point of lm (by enumeration) with its value."""
    for bits in itertools.product((0.0, 1.0), repeat=lm.n_vars):
        x = np.array(bits)
        x = np.clip(x, lm.lb, lm.ub)
        if lm.violation(x) <= 1e-9:
            yield x, lm.objective(x)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 8), m=st.integers(1, 3), seed=st.integers(0, 10**6),
    pick=st.floats(0.0, 1.0),
)
def test_every_point_worth_the_incumbent_keeps_the_fixed_columns(n, m, seed, pick):
    rng = np.random.default_rng(seed)
    lm = _model(rng.integers(1, 30, n), rng.integers(1, 10, (m, n)), rng.integers(5, 25, m))
    dive = Dive(lm, SolverSettings(), np.arange(n))
    assert dive.first.status == "optimal"
    pts = sorted(_points(lm), key=lambda p: p[1])
    incumbent = pts[int(pick * (len(pts) - 1))][1]  # the value of some feasible point
    fixed, k = fix_by_reduced_cost(lm, dive.first.x, dive.reduced_costs, incumbent)
    assert k == int((fixed.lb != lm.lb).sum() + (fixed.ub != lm.ub).sum())
    best = max(v for _, v in pts)
    for x, v in pts:
        if v >= incumbent - 1e-9:
            assert fixed.violation(x) <= 1e-9, (x, v, incumbent)
    fixed_best = max((v for _, v in _points(fixed)), default=-np.inf)
    assert max(incumbent, fixed_best) == pytest.approx(best)


def test_a_column_that_would_cost_more_than_the_lps_slack_is_fixed():
    # max 10a + 9b + c, a + b + c <= 1.5: the LP takes a and half of b (14.5; the row's dual
    # is 9, b's value per GPU); taking c costs 8 (its reduced cost), so with a plan worth 10
    # in hand (slack 4.5) c stays out; a (reduced cost 1) and b (fractional) stay free
    lm = _model([10, 9, 1], [[1, 1, 1]], [1.5])
    dive = Dive(lm, SolverSettings(), np.arange(3))
    assert dive.first.x.tolist() == [1.0, 0.5, 0.0]
    fixed, k = fix_by_reduced_cost(lm, dive.first.x, dive.reduced_costs, 10.0)
    assert k == 1 and fixed.ub.tolist() == [1.0, 1.0, 0.0] and fixed.lb.tolist() == [0, 0, 0]
    # with a worse plan in hand (slack 9.5), nothing is fixed
    assert fix_by_reduced_cost(lm, dive.first.x, dive.reduced_costs, 5.0) == (lm, 0)


def test_the_epochs_mip_with_fixed_columns_returns_the_optimum_it_certifies(monkeypatch):
    # 88 GPUs, solved exactly, some integer columns fixed (seed 1 until stop 34's keep_order
    # rows and floors down the tree)
    snap = scale_instance("S", 7)
    plan = epoch.run_epoch(snap)
    rep = plan.report
    assert "integer columns fixed by the LP's reduced costs" in rep.message
    assert rep.status == "optimal" and rep.gap <= 1e-4
    monkeypatch.setattr(epoch, "fix_by_reduced_cost", lambda lm, x, d, inc: (lm, 0))
    whole = epoch.run_epoch(snap).report
    assert "fixed by" not in whole.message
    # the bound with columns fixed is a true bound: the whole MIP's plan is not above it
    assert whole.objective <= rep.bound * (1 + 1e-9)
    assert rep.objective >= whole.bound * (1 - 1e-4)
