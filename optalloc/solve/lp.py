"""The pure LP relaxation: integrality dropped, solved by HiGHS (`lp`) or GLOP (`glop-lp`).

Its optimum is the bound every plan is measured against (the "LP bound") and its solve time the
floor any MIP backend is compared to. Used as an epoch backend, its fractional x is rounded by
the placement step (a start is taken when x >= 0.5, then repaired and backfilled).
"""

from __future__ import annotations

from optalloc.model.matrix import LinearModel
from optalloc.solve._ortools import mb_available, mb_result
from optalloc.solve.base import Backend, SolveResult
from optalloc.solve.highs import Dive, HighsBackend
from optalloc.types import SolverSettings


class LpBackend(Backend):
    name = "lp"
    relaxation = True

    def available(self) -> bool:
        return HighsBackend().available()

    def solve(self, lm: LinearModel, settings: SolverSettings, *, relax: bool = True,
              start=None) -> SolveResult:
        r = HighsBackend().solve(lm, settings, relax=True)
        return type(r)(**{**r.__dict__, "backend": self.name})


class GlopLpBackend(Backend):
    name = "glop-lp"
    relaxation = True

    def available(self) -> bool:
        return mb_available("glop")

    def solve(self, lm: LinearModel, settings: SolverSettings, *, relax: bool = True,
              start=None) -> SolveResult:
        return mb_result(self.name, "glop", lm, settings, "", True)


def relax_and_dive(lm: LinearModel, settings: SolverSettings, cols, rounds: int = 8,
                   points: list | None = None):
    """The LP bound and a rounded-friendly LP point: HiGHS solves the relaxation (its optimum
    is the returned result's bound), then forbids the columns of `cols` left fractional and
    re-solves warm, `rounds` times. Returns (the first LP's result, the last LP's x); `points`
    receives every LP point of the dive (HighsBackend.dive)."""
    return HighsBackend().dive(lm, settings, cols, rounds=rounds, points=points)


def start_dive(lm: LinearModel, settings: SolverSettings, cols) -> Dive:
    """The LP relaxation solved by HiGHS, ready to dive on the columns `cols` (`Dive.run`)."""
    return Dive(lm, settings, cols)
