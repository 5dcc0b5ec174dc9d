"""The pure LP relaxation: integrality dropped, solved by HiGHS (`lp`) or GLOP (`glop-lp`).

Its optimum is the bound every plan is measured against (the "LP bound") and its solve time the
floor any MIP backend is compared to. Used as an epoch backend, its fractional x is rounded by
the placement step (a start is taken when x >= 0.5, then repaired and backfilled).
"""

from __future__ import annotations

from optalloc.model.matrix import LinearModel
from optalloc.solve._ortools import mb_available, mb_result
from optalloc.solve.base import SolveResult
from optalloc.solve.highs import HighsBackend
from optalloc.types import SolverSettings


class LpBackend:
    name = "lp"
    relaxation = True

    def available(self) -> bool:
        return HighsBackend().available()

    def solve(self, lm: LinearModel, settings: SolverSettings, *, relax: bool = True) -> SolveResult:
        r = HighsBackend().solve(lm, settings, relax=True)
        return type(r)(**{**r.__dict__, "backend": self.name})


class GlopLpBackend:
    name = "glop-lp"
    relaxation = True

    def available(self) -> bool:
        return mb_available("glop")

    def solve(self, lm: LinearModel, settings: SolverSettings, *, relax: bool = True) -> SolveResult:
        return mb_result(self.name, "glop", lm, settings, "", True)
