"""CP-SAT through OR-Tools model_builder.

CP-SAT needs integer coefficients. Every constraint of the epoch model already is integral (GPU
counts, whole-GPU floors), and every variable is integer. The objective is not (fair-share
weights), so it is scaled and rounded:

    c_int = round(c * K),   K = SCALE / max|c|   (SCALE = 1e9)

The incumbent's objective is then recomputed with the true c, and the proven bound is mapped
back conservatively: bound = bound_int / K + sum_i |c_i - c_int_i / K| * max(|lb_i|, |ub_i|),
so the reported gap stays honest despite the rounding.
"""

from __future__ import annotations

import numpy as np

from optalloc.model.matrix import LinearModel
from optalloc.solve._ortools import mb_available, mb_solve
from optalloc.solve.base import Backend, SolveResult, finish
from optalloc.types import SolverSettings

SCALE = 1e9


class CpSatBackend(Backend):
    name = "cpsat"

    def available(self) -> bool:
        return mb_available("sat")

    def solve(self, lm: LinearModel, settings: SolverSettings, *, relax: bool = False,
              start=None) -> SolveResult:
        if relax:
            raise ValueError("cpsat solves integer models only; use the lp backend for relaxations")
        cmax = float(np.abs(lm.c).max()) if lm.n_vars else 1.0
        K = SCALE / cmax if cmax > 0 else 1.0
        c_int = np.round(lm.c * K)
        err = float((np.abs(lm.c - c_int / K) * np.maximum(np.abs(lm.lb), np.abs(lm.ub))).sum())
        params = (
            f"num_workers: {max(1, settings.threads)}, relative_gap_limit: {settings.mip_gap}, "
            "random_seed: 0"
        )
        status, x, bound, msg, t0 = mb_solve(
            self.name, "sat", lm, c_int, 0.0, settings.time_limit_s, params, False,
            settings.mip_gap,
        )
        if bound is not None:
            bound = bound / K + err + lm.obj_offset
        return finish(self.name, lm, status, x, bound, t0, msg)
