"""A solver's answer is checked against its own solution: HiGHS 1.16, given a start on this
44-column epoch of ITP cluster02 (tests/data/highs_start_cluster02.npz: the epoch's model and
the placed LP-rounded plan as the start), answers "optimal, 40,319.6" and returns the start
itself (31,603.9); the true optimum is 32,369.2. The epoch no longer hands HiGHS a start, and
an answer whose solution is not worth what it reports keeps its point but loses its bound."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from optalloc.model.matrix import LinearModel
from optalloc.solve import solve
from optalloc.types import SolverSettings

OPTIMUM = 32369.207263617216


@pytest.fixture(scope="module")
def model():
    d = np.load(Path(__file__).parent / "data" / "highs_start_cluster02.npz")
    A = sp.csr_matrix((d["data"], d["indices"], d["indptr"]), shape=tuple(d["shape"]))
    lm = LinearModel(d["c"], float(d["off"]), d["lb"], d["ub"], d["integer"].astype(bool), A,
                     d["row_lo"], d["row_hi"], {}, ())
    return lm, d["x0"]


def test_the_mip_from_scratch_finds_the_optimum(model):
    lm, _ = model
    r = solve(lm, SolverSettings(mip_gap=1e-4))
    assert r.status == "optimal"
    assert r.objective == pytest.approx(OPTIMUM, rel=1e-4)
    assert r.bound == pytest.approx(OPTIMUM, rel=1e-4)


def test_an_answer_from_a_start_never_carries_a_bound_below_what_is_possible(model):
    lm, x0 = model
    assert lm.violation(x0) <= 1e-6 and lm.objective(x0) < OPTIMUM - 700
    r = solve(lm, SolverSettings(mip_gap=1e-4), start=x0)
    assert r.has_solution and lm.violation(r.x) <= 1e-6
    # either a true answer, or (HiGHS 1.16) the start with its bound dropped, said why
    if r.bound is not None:
        assert r.bound >= OPTIMUM - 1e-4 * OPTIMUM
        assert r.objective >= r.bound - 1e-4 * abs(r.bound)
    else:
        assert r.status == "feasible"
        assert "not the" in r.message and "its bound is not used" in r.message
