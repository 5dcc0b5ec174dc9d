"""Dive.forbid_fractional: from the first LP's optimum, every column it left fractional is
forbidden at once and the rounds so far are undone; the point is the optimum of that LP."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from optalloc.bench.instances import scale_instance
from optalloc.model.build import build_model
from optalloc.solve.highs import Dive, HighsBackend
from optalloc.types import SolverSettings


@pytest.fixture(scope="module")
def model():
    em = build_model(scale_instance("M", 10))
    return em.lm, em.x


def test_the_other_direction_is_the_lp_with_the_first_fractional_starts_forbidden(model):
    lm, cols = model
    dive = Dive(lm, SolverSettings(), cols)
    first = dive.first.x
    v = first[cols]
    frac = cols[(v > 1e-6) & (v < 1 - 1e-6)]
    assert len(frac)
    dive.run(3)  # rounds that fix and forbid other columns: undone below
    n = len(dive.points)
    x = dive.forbid_fractional()
    assert x is not None and len(dive.points) == n + 1 and dive.points[-1] is x
    assert np.all(x[frac] == 0.0)
    ub = lm.ub.copy()
    ub[frac] = 0.0
    alone = HighsBackend().solve(replace(lm, ub=ub), SolverSettings(), relax=True)
    assert alone.status == "optimal"
    assert lm.objective(x) == pytest.approx(alone.objective, rel=1e-7)
    assert lm.violation(x) <= 1e-6
    assert lm.objective(x) <= dive.first.bound + 1e-6


def test_nothing_fractional_gives_no_other_point():
    lm = build_model(scale_instance("S", 0)).lm
    # a model whose LP optimum is integral on the columns asked about: none of them
    dive = Dive(lm, SolverSettings(), np.zeros(0, np.int64))
    assert dive.forbid_fractional() is None
