"""SCIP through OR-Tools model_builder."""

from __future__ import annotations

from optalloc.model.matrix import LinearModel
from optalloc.solve._ortools import mb_available, mb_result
from optalloc.solve.base import Backend, SolveResult
from optalloc.types import SolverSettings


class ScipBackend(Backend):
    name = "scip"

    def available(self) -> bool:
        return mb_available("scip")

    def solve(self, lm: LinearModel, settings: SolverSettings, *, relax: bool = False,
              start=None) -> SolveResult:
        params = f"limits/gap = {settings.mip_gap}\nparallel/maxnthreads = {settings.threads}\n"
        params += "randomization/randomseedshift = 0\n"
        return mb_result(self.name, "scip", lm, settings, params, relax)
