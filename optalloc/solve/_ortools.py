"""Shared glue for the OR-Tools model_builder solvers (SCIP, CP-SAT, GLOP): the whole matrix is
handed over with `fill_model_from_sparse_data` (one call, no per-row Python)."""

from __future__ import annotations

import time

import numpy as np

from optalloc.model.matrix import LinearModel
from optalloc.solve.base import SolveResult, finish


def mb_available(solver: str) -> bool:
    try:
        from ortools.linear_solver.python import model_builder_helper as mbh
    except ImportError:
        return False
    return bool(mbh.ModelSolverHelper(solver).solver_is_supported())


def mb_solve(
    name: str,
    solver: str,
    lm: LinearModel,
    c: np.ndarray,
    offset: float,
    time_limit_s: float,
    params: str,
    relax: bool,
    mip_gap: float,
) -> tuple[str, np.ndarray | None, float | None, str, float]:
    """Returns (status, x, raw bound in the units of `c` + offset, message, t0)."""
    from ortools.linear_solver.python import model_builder_helper as mbh

    t0 = time.perf_counter()
    m = mbh.ModelBuilderHelper()
    # open row sides become the row's activity range (CP-SAT rejects "infinite" sides)
    A = lm.A.astype(float).tocsr()
    Ap, An = A.maximum(0), A.minimum(0)
    act_lo = Ap @ lm.lb + An @ lm.ub
    act_hi = Ap @ lm.ub + An @ lm.lb
    m.fill_model_from_sparse_data(
        lm.lb, lm.ub, np.asarray(c, float),
        np.where(np.isfinite(lm.row_lo), lm.row_lo, np.minimum(act_lo, lm.row_hi)),
        np.where(np.isfinite(lm.row_hi), lm.row_hi, np.maximum(act_hi, lm.row_lo)),
        A,
    )
    if not relax:
        for i in np.flatnonzero(lm.integer):
            m.set_var_integrality(int(i), True)
    m.set_maximize(True)
    m.set_objective_offset(float(offset))
    s = mbh.ModelSolverHelper(solver)
    s.set_time_limit_in_seconds(float(time_limit_s))
    if params:
        s.set_solver_specific_parameters(params)
    s.solve(m)
    st = s.status()
    S = mbh.SolveStatus
    x = np.asarray(s.variable_values()) if s.has_solution() else None
    bound = None
    if st == S.OPTIMAL:
        status = "optimal"
        bound = s.best_objective_bound() if not relax else s.objective_value()
    elif st == S.FEASIBLE:
        bound = s.best_objective_bound()
        obj = s.objective_value()
        gap = abs(bound - obj) / max(1.0, abs(obj)) if np.isfinite(bound) else np.inf
        status = "optimal" if gap <= mip_gap else "timeout"
    elif st == S.INFEASIBLE:
        status, x = "infeasible", None
    elif st == S.NOT_SOLVED and time.perf_counter() - t0 >= 0.95 * time_limit_s:
        status, x = "timeout", None
    else:
        status, x = "error", None
    if bound is not None and not np.isfinite(bound):
        bound = None
    return status, x, bound, str(st.name), t0


def mb_result(name, solver, lm, settings, params, relax) -> SolveResult:
    status, x, bound, msg, t0 = mb_solve(
        name, solver, lm, lm.c, lm.obj_offset, settings.time_limit_s, params, relax,
        settings.mip_gap,
    )
    return finish(name, lm, status, x, bound, t0, msg, relax)
