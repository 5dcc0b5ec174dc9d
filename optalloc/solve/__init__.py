"""Phase 3: solve the epoch model with a backend.

`BACKENDS` maps a name to a backend; every backend takes the same matrix form
(optalloc.model.matrix.LinearModel) and returns a normalized `SolveResult`
(status optimal|feasible|infeasible|timeout|error, objective, bound, gap, sizes, time).

    highs    HiGHS MIP via highspy (default)
    scip     SCIP via OR-Tools
    cpsat    CP-SAT via OR-Tools (objective scaled to integers, see cpsat.py)
    cbc      CBC via PuLP
    lp       LP relaxation via HiGHS (the bound / floor)
    glop-lp  LP relaxation via GLOP
"""

from __future__ import annotations

from optalloc.model.matrix import LinearModel
from optalloc.solve.base import Backend, SolveResult, relative_gap
from optalloc.solve.cbc import CbcBackend
from optalloc.solve.cpsat import CpSatBackend
from optalloc.solve.highs import HighsBackend
from optalloc.solve.lp import EarlyLp, GlopLpBackend, LpBackend, relax_and_dive, start_dive
from optalloc.solve.neighborhood import neighborhood
from optalloc.solve.scip import ScipBackend
from optalloc.types import SolverSettings

BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        HighsBackend(), ScipBackend(), CpSatBackend(), CbcBackend(), LpBackend(), GlopLpBackend()
    )
}

MIP_BACKENDS = ("highs", "scip", "cpsat", "cbc")
LP_BACKENDS = ("lp", "glop-lp")


def available_backends() -> list[str]:
    """Names of the backends whose solver is installed, in BACKENDS order."""
    return [name for name, b in BACKENDS.items() if b.available()]


def solve(lm: LinearModel, settings: SolverSettings, start=None, cutoff=None) -> SolveResult:
    """Solve with `settings.backend`; an unknown or unavailable backend is an error result,
    never an exception (the epoch degrades instead). `start`: a feasible point of lm given to
    backends that take a first incumbent (`warm_start = True`), ignored by the others;
    `cutoff`: the value of a point of lm the caller holds, given to backends that prune by it
    (`cutoff = True`, optalloc.solve.base.Backend), ignored by the others."""
    backend = BACKENDS.get(settings.backend)
    if backend is None:
        return SolveResult(settings.backend, "error", n_vars=lm.n_vars, n_cons=lm.n_cons,
                           message=f"unknown backend {settings.backend!r}; use one of "
                           f"{', '.join(BACKENDS)}")
    if not backend.available():
        return SolveResult(settings.backend, "error", n_vars=lm.n_vars, n_cons=lm.n_cons,
                           message=f"backend {settings.backend!r} is not installed")
    try:
        kw = {"cutoff": cutoff} if backend.cutoff and cutoff is not None else {}
        return backend.solve(lm, settings, start=start if backend.warm_start else None, **kw)
    except Exception as err:  # a solver crash must degrade the epoch, not kill cron
        return SolveResult(settings.backend, "error", n_vars=lm.n_vars, n_cons=lm.n_cons,
                           message=f"{type(err).__name__}: {err}")


__all__ = ["BACKENDS", "EarlyLp", "LP_BACKENDS", "MIP_BACKENDS", "Backend", "SolveResult",
           "available_backends", "neighborhood", "relative_gap", "relax_and_dive", "solve",
           "start_dive"]
