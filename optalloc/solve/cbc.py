"""CBC through PuLP.

PuLP has no matrix interface, so rows are turned into LpAffineExpressions from the CSR arrays
(one Python object per non-zero: CBC is a reference backend, not the fast path). PuLP does not
expose CBC's dual bound: when CBC stops at its gap limit the bound reported is the one that
limit certifies (objective + mip_gap * max(1, |objective|)); after a time limit it is unknown.
"""

from __future__ import annotations

import time

import numpy as np

from optalloc.model.matrix import LinearModel
from optalloc.solve.base import Backend, SolveResult, finish
from optalloc.types import SolverSettings


class CbcBackend(Backend):
    name = "cbc"

    def available(self) -> bool:
        try:
            import pulp

            return bool(pulp.PULP_CBC_CMD(msg=False).available())
        except Exception:
            return False

    def solve(self, lm: LinearModel, settings: SolverSettings, *, relax: bool = False,
              start=None) -> SolveResult:
        import pulp

        t0 = time.perf_counter()
        prob = pulp.LpProblem("optalloc", pulp.LpMaximize)
        cat = np.where(lm.integer & (not relax), pulp.LpInteger, pulp.LpContinuous)
        xs = [
            pulp.LpVariable(f"v{i}", lowBound=float(lm.lb[i]), upBound=float(lm.ub[i]), cat=cat[i])
            for i in range(lm.n_vars)
        ]
        nz = np.flatnonzero(lm.c)
        prob += pulp.LpAffineExpression([(xs[i], float(lm.c[i])) for i in nz]) + lm.obj_offset
        A = lm.A
        for r in range(lm.n_cons):
            a, b = A.indptr[r], A.indptr[r + 1]
            expr = pulp.LpAffineExpression(
                [(xs[i], float(v)) for i, v in zip(A.indices[a:b], A.data[a:b])]
            )
            lo, hi = lm.row_lo[r], lm.row_hi[r]
            if lo == hi:
                prob += expr == float(lo), f"r{r}"
                continue
            if np.isfinite(lo):
                prob += expr >= float(lo), f"r{r}lo"
            if np.isfinite(hi):
                prob += expr <= float(hi), f"r{r}hi"
        solver = pulp.PULP_CBC_CMD(
            msg=False, timeLimit=float(settings.time_limit_s), gapRel=float(settings.mip_gap),
            threads=max(1, settings.threads),
        )
        try:
            prob.solve(solver)
        except pulp.PulpSolverError as err:
            return finish(self.name, lm, "error", None, None, t0, str(err))
        sol = prob.sol_status
        x = None
        if sol in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
            x = np.array([v.varValue if v.varValue is not None else 0.0 for v in xs])
        if sol == pulp.LpSolutionOptimal:
            obj = lm.objective(np.where(lm.integer & (not relax), np.round(x), x))
            gap = 0.0 if relax else settings.mip_gap
            return finish(self.name, lm, "optimal", x, obj + gap * max(1.0, abs(obj)), t0,
                          "optimal within gapRel", relax)
        if sol == pulp.LpSolutionIntegerFeasible:
            return finish(self.name, lm, "timeout", x, None, t0, "time limit", relax)
        if prob.status == pulp.LpStatusInfeasible:
            return finish(self.name, lm, "infeasible", None, None, t0, "infeasible")
        if time.perf_counter() - t0 >= 0.95 * settings.time_limit_s:
            return finish(self.name, lm, "timeout", None, None, t0, "time limit, no incumbent")
        return finish(self.name, lm, "error", None, None, t0, pulp.LpStatus[prob.status])
