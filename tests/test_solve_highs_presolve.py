"""HiGHS 1.16's presolve calls this epoch MIP infeasible (283 columns, 94 rows; the gang
scenario, seed 4, with the lookahead, hour 164.5: tests/data/highs_presolve_infeasible_gangs4.npz),
though it has integer points (the epoch's own placed plan was one) and, without presolve, an
optimum of 352,912.8. An epoch's model always has a point, so the backend checks an
"infeasible" MIP once more without presolve instead of degrading the epoch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from optalloc.model.matrix import LinearModel
from optalloc.solve import solve
from optalloc.types import SolverSettings

OPTIMUM = 352912.7611537261


def test_a_mip_presolve_calls_infeasible_is_solved_again_without_it():
    d = np.load(Path(__file__).parent / "data" / "highs_presolve_infeasible_gangs4.npz")
    A = sp.csr_matrix(sp.csc_matrix((d["data"], d["indices"], d["indptr"]),
                                    shape=tuple(d["shape"])))
    lm = LinearModel(d["c"], float(d["off"]), d["lb"], d["ub"], d["integer"].astype(bool), A,
                     d["lo"], d["hi"], {}, ())
    r = solve(lm, SolverSettings(mip_gap=1e-4))
    assert r.status == "optimal" and r.has_solution
    assert lm.violation(r.x) <= 1e-6
    assert r.objective == pytest.approx(OPTIMUM, rel=1e-4)
    assert r.bound is not None and r.bound >= r.objective - 1e-4 * abs(r.objective)
    assert "presolve said infeasible" in r.message
