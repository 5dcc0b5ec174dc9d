"""The pure LP relaxation: integrality dropped, solved by HiGHS (`lp`) or GLOP (`glop-lp`).

Its optimum is the bound every plan is measured against (the "LP bound") and its solve time the
floor any MIP backend is compared to. Used as an epoch backend, its fractional x is rounded by
the placement step (a start is taken when x >= 0.5, then repaired and backfilled).
"""

from __future__ import annotations

import threading
import time

import numpy as np

from optalloc.model.matrix import LinearModel
from optalloc.solve._ortools import mb_available, mb_result
from optalloc.solve.base import Backend, SolveResult
from optalloc.solve.highs import Dive, HighsBackend, new_quiet_highs
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


def start_dive(lm: LinearModel, settings: SolverSettings, cols, early=None) -> Dive:
    """The LP relaxation solved by HiGHS, ready to dive on the columns `cols` (`Dive.run`);
    `early`: the same LP begun before lm's column bounds were final (EarlyLp)."""
    return Dive(lm, settings, cols, early=early)


class EarlyLp:
    """The LP relaxation of a model whose column bounds are not final yet, solved by HiGHS on
    a thread of its own while the caller works out those bounds; `finish(lm)` waits for it,
    moves the bounds that changed and re-solves warm. HiGHS releases the GIL while it solves,
    so the LP and the caller's Python run on two cores at once (the epoch: the LP beside the
    greedy pass, whose idle GPUs set the fill columns' bounds, optalloc.model.fill). Begun
    with bounds the final ones only lower (the most fill any plan could leave), the
    re-solve is the dual simplex from an optimal basis: the 16,384-GPU bench epoch, seeds 0
    and 1, 0 iterations, 0.05 s, where raising them from 0 took HiGHS's primal simplex 8,030
    iterations and 7.2 s. The Highs object is made on the caller's thread: making one
    points fd 1 at /dev/null for a moment (new_quiet_highs), which another thread must not
    race with its own output."""

    def __init__(self, lm: LinearModel, settings: SolverSettings):
        self.lm, self.settings = lm, settings
        self.h = new_quiet_highs()
        self.seconds = 0.0
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._solve, name="optalloc-early-lp",
                                        daemon=True)
        self._thread.start()

    def _solve(self) -> None:
        t = time.perf_counter()
        try:
            HighsBackend()._load(self.lm, self.settings, True, h=self.h)
            self.h.run()
        except BaseException as e:  # re-raised on the caller's thread by finish()
            self._error = e
        self.seconds = time.perf_counter() - t

    def finish(self, lm: LinearModel):
        """(the Highs, solved for lm; the seconds it spent solving). lm must be the model this
        LP was begun with but for its column bounds (else it is solved afresh)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        t = time.perf_counter()
        a = self.lm
        if not (lm.A is a.A and lm.n_vars == a.n_vars and np.array_equal(lm.c, a.c)
                and lm.obj_offset == a.obj_offset and np.array_equal(lm.row_lo, a.row_lo)
                and np.array_equal(lm.row_hi, a.row_hi)):
            self.h = HighsBackend()._load(lm, self.settings, True)
            self.h.run()
            return self.h, self.seconds + time.perf_counter() - t
        moved = np.flatnonzero((lm.lb != a.lb) | (lm.ub != a.ub))
        if len(moved):
            idx = moved.astype(np.int32)
            self.h.changeColsBounds(len(idx), idx, lm.lb[moved].astype(float),
                                    lm.ub[moved].astype(float))
            # one LP's time limit for both solves, as if it had been solved once
            limit = float(self.settings.time_limit_s)
            self.h.setOptionValue("time_limit", max(0.05, limit - self.seconds))
            self.h.run()
            self.h.setOptionValue("time_limit", limit)  # the dive's rounds: each its own
        return self.h, self.seconds + time.perf_counter() - t
