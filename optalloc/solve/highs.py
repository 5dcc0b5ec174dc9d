"""HiGHS through highspy, fed the CSC matrix directly (no per-element Python)."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace

import numpy as np

from optalloc.model.matrix import LinearModel
from optalloc.solve.base import Backend, SolveResult, finish
from optalloc.types import SolverSettings


class HighsBackend(Backend):
    name = "highs"

    def available(self) -> bool:
        try:
            import highspy  # noqa: F401
        except ImportError:
            return False
        return True

    warm_start = True  # solve() accepts `start`, a feasible point to begin from
    cutoff = True  # and `cutoff`, HiGHS's objective_bound

    def solve(
        self, lm: LinearModel, settings: SolverSettings, *, relax: bool = False,
        start: np.ndarray | None = None, cutoff: float | None = None,
    ) -> SolveResult:
        """`start`: a feasible integer point handed to HiGHS as its first incumbent (the MIP
        then mostly proves the bound); ignored when relaxing. `cutoff`: see `_cut`."""
        import highspy

        t0 = time.perf_counter()
        if lm.n_cons == 0:  # no rows: HiGHS answers "model empty"; each column to its best bound
            x = np.where(lm.c > 0, lm.ub, lm.lb).astype(float)
            obj = lm.objective(x)
            return finish(self.name, lm, "optimal", x, obj, t0, "no constraints", relax)
        if cutoff is not None and not relax and lm.integer.any():
            r = self._cut(lm, settings, start, float(cutoff), t0)
            if r is not None:
                return r
            left = float(settings.time_limit_s) - (time.perf_counter() - t0)
            settings = replace(settings, time_limit_s=max(0.05, left))
        h = self._load(lm, settings, relax)
        if start is not None and not relax:
            _set_start(h, start)
        h.run()
        if (not relax and lm.integer.any()
                and h.getModelStatus() == highspy.HighsModelStatus.kInfeasible):
            # HiGHS 1.16's presolve called a 283-column epoch MIP infeasible that has integer
            # points (the gang scenario, seed 4, with the lookahead: the epoch's own placed plan
            # was one; without presolve: optimal, 352,912.8). An epoch's model always has a
            # point (keep what runs, start nothing), so "infeasible" is checked once without it
            left = max(0.05, float(settings.time_limit_s) - (time.perf_counter() - t0))
            h = self._load(lm, replace(settings, time_limit_s=left), relax)
            h.setOptionValue("presolve", "off")
            h.run()
            r = self._result(h, lm, relax, t0)
            return replace(r, message=f"{r.message} (presolve said infeasible; solved without "
                                      "it)")
        return self._result(h, lm, relax, t0)

    def _cut(self, lm: LinearModel, settings: SolverSettings, start, cutoff: float,
             t0: float) -> SolveResult | None:
        """The MIP with HiGHS's objective_bound at `cutoff`, the value of a point the caller
        holds (a plan it placed): nodes and columns that cannot reach it are pruned from the
        start, where HiGHS otherwise learns such a bound only from its own incumbents. Measured
        on the 2,587 MIPs of 10 days of ITP cluster04, each solved both ways, paired: 45.4 ->
        33.1 s, every one optimal, none worse than the 1e-4 gap allows, every bound at least
        the value of the plain solve's point. The answer is a point worth at least `cutoff` (its
        bound then at least `cutoff`: any better point is in the tree searched), or, on a time
        limit, none; anything else (HiGHS calls a model with no point above its bound
        infeasible, and on some epoch MIPs given a bound above their optimum answered
        "optimal" with a point far below it and that point's value as its bound) is None, and
        the caller solves without the cutoff, as before it."""
        h = self._load(lm, settings, False)
        # HiGHS's sense: it minimizes -objective, offset included (checked on a toy model)
        h.setOptionValue("objective_bound", -cutoff)
        if start is not None:
            _set_start(h, start)
        h.run()
        r = self._result(h, lm, False, t0)
        good = r.x is not None and r.objective is not None and r.objective >= cutoff
        if r.status == "timeout" and not good:
            return finish(self.name, lm, "timeout", None, None, t0,
                          "time limit, no point worth the cutoff found")
        if not good or r.status not in ("optimal", "timeout", "feasible"):
            return None
        bound = None if r.bound is None else max(r.bound, cutoff)
        return replace(r, bound=bound, message=f"{r.message} (cutoff {cutoff:.6g})")

    def dive(
        self, lm: LinearModel, settings: SolverSettings, cols: np.ndarray, rounds: int = 4,
        points: list | None = None,
    ) -> tuple[SolveResult, np.ndarray | None]:
        """LP diving in one call (`Dive`): the LP relaxation (its optimum is the returned
        result's bound), then `rounds` rounds. Returns (the first LP's result with the whole
        dive's seconds, the last LP's x); `points`, when given, receives every LP point of the
        dive in order (the first LP's, then each round's), the last included."""
        d = Dive(lm, settings, cols)
        x = d.run(rounds)
        if points is not None:
            points.extend(d.points)
        return d.result(), x

    def _load(self, lm: LinearModel, settings: SolverSettings, relax: bool, h=None):
        """A Highs with lm passed and the options set (`h`: a Highs to use, from
        new_quiet_highs, which must be made on the main thread: see optalloc.solve.lp.EarlyLp)."""
        import highspy

        inf = highspy.kHighsInf
        h = new_quiet_highs() if h is None else h
        h.setOptionValue("time_limit", float(settings.time_limit_s))
        h.setOptionValue("mip_rel_gap", float(settings.mip_gap))
        h.setOptionValue("random_seed", 0)
        if relax:
            # the relaxation is solved faster without HiGHS's presolve (measured, dual simplex,
            # same optimum: the 1,024-GPU bench LP 0.120 -> 0.063 s, the 8,192-GPU one 3.05 ->
            # 1.30 s); the MIP keeps it, its branching lives on presolve's reductions
            h.setOptionValue("presolve", "off")
            # nor its simplex scaling: the epoch's matrix is GPU counts (1 to a few hundred),
            # and HiGHS's equilibration only added iterations (measured, dual simplex, same
            # optimum, one process each: the bench LPs M 0.05 -> 0.03 s, L 0.82 -> 0.57 s, XL
            # 2.14 -> 1.78 s, XXL 9.28 -> 7.61 s); the MIPs keep it (3 days of cluster04's
            # 225 MIPs: 4.71 vs 4.51 s, noise)
            h.setOptionValue("simplex_scale_strategy", 0)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = lm.n_vars, lm.n_cons
        lp.col_cost_ = lm.c
        lp.offset_ = lm.obj_offset
        lp.col_lower_ = lm.lb
        lp.col_upper_ = lm.ub
        lp.row_lower_ = np.where(np.isfinite(lm.row_lo), lm.row_lo, -inf)
        lp.row_upper_ = np.where(np.isfinite(lm.row_hi), lm.row_hi, inf)
        lp.sense_ = highspy.ObjSense.kMaximize
        A = lm.A.tocsc()
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = A.indptr.astype(np.int32)
        lp.a_matrix_.index_ = A.indices.astype(np.int32)
        lp.a_matrix_.value_ = A.data.astype(float)
        if not relax and lm.integer.any():
            # HiGHS's feasibility-jump heuristic runs at every MIP's root, and on the epochs'
            # small MIPs it was most of the solve (a 25-row, 56-column MIP after presolve,
            # solved at its root in 40 LP iterations: 35 -> 10 ms without it). The epoch comes
            # to the MIP with its own plans (greedy, the LP's roundings), so a first incumbent
            # is not what it needs. Measured over the MIPs the simulator's epochs solve, each
            # set once per process, paired: ITP cluster04 (3 days, 225 MIPs) 5.6 -> 4.0 s,
            # cluster02 with the lookahead (10 days, 566) 2.9 -> 1.2 s, the gang scenario with
            # it (2 days, 251) 0.79 -> 0.50-0.61 s; the bench's 1,024-GPU epochs that need the
            # whole MIP (seeds 4, 5, 10, two reservations) 5.0-5.1 -> 4.7-5.0 s. All optimal
            # within the 1e-4 gap either way
            h.setOptionValue("mip_heuristic_run_feasibility_jump", False)
            lp.integrality_ = [
                highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                for i in lm.integer
            ]
        h.passModel(lp)
        return h

    def _result(self, h, lm: LinearModel, relax: bool, t0: float) -> SolveResult:
        import highspy

        st = h.getModelStatus()
        S = highspy.HighsModelStatus
        info = h.getInfo()
        has_x = info.primal_solution_status == 2
        x = np.asarray(h.getSolution().col_value) if has_x else None
        mip = not relax and lm.integer.any()
        bound = None
        if st == S.kOptimal:
            status = "optimal"
            bound = info.mip_dual_bound if mip else info.objective_function_value
        elif st in (S.kTimeLimit, S.kIterationLimit, S.kInterrupt, S.kSolutionLimit):
            status = "timeout"
            bound = info.mip_dual_bound if mip else None
        elif st in (S.kInfeasible, S.kUnboundedOrInfeasible):
            status, x = "infeasible", None
        else:
            status, x = "error", None
        if bound is not None and not np.isfinite(bound):
            bound = None
        if status == "timeout" and x is None:
            return finish(self.name, lm, status, None, None, t0, "time limit, no incumbent")
        msg = h.modelStatusToString(st)
        if mip and x is not None and bound is not None:
            # HiGHS 1.16 given a start answered "optimal, 40,319.6" with the start itself
            # (31,603.9) on a 44-column epoch whose optimum is 32,369.2: an answer whose own
            # solution is not worth what it reports has no bound to trust
            said = info.objective_function_value
            own = lm.objective(np.where(lm.integer, np.round(x), x))  # as finish() rounds it
            if not (np.isfinite(said) and abs(own - said) <= 1e-6 * max(1.0, abs(own))):
                status, bound = "feasible", None
                msg = (f"{msg}, but its solution is worth {own:.6g}, not the {said:.6g} it "
                       "reports: its bound is not used")
        return finish(self.name, lm, status, x, bound, t0, msg, relax)


def _set_start(h, start: np.ndarray) -> None:
    """Hand HiGHS `start`, a feasible integer point, as its first incumbent."""
    import highspy

    sol = highspy.HighsSolution()
    sol.col_value = np.asarray(start, dtype=float)
    sol.value_valid = True
    h.setSolution(sol)


def new_quiet_highs():
    """A `highspy.Highs` that prints nothing. HiGHS writes its copyright banner to the process's
    stdout (fd 1, from C) while constructing, before any option can be set, which would corrupt
    `optalloc epoch --json` output and cron mails; fd 1 points at /dev/null for that moment."""
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
    h.setOptionValue("output_flag", False)
    return h


class Dive:
    """LP diving, a step at a time. Construction solves the LP relaxation (`first`: its optimum
    is the bound); `run(rounds)` then, each round, fixes the columns of `cols` the LP sets to 1
    and forbids the lower half of the fractional ones, and re-solves warm, so the LP reroutes
    what fractional gangs did to whole jobs while keeping what it already decided. It stops at
    the last feasible LP. `points` holds every LP point so far (the first LP's, then each
    round's); `solve_s` the seconds spent in HiGHS so far.

    The caller places the first LP's point before diving at all: measured with the backfill of
    stop 21 on the bench instances, the first point usually rounds best (its plan's gap to the
    bound, first point / after 8 rounds: M seeds 0-3 0.26/0.30, 0.36/0.67, 0.30/0.68,
    0.05/0.25%; L seeds 0-1 0.06/0.26, 0.06/0.17%); at stop 15, with a weaker placement, the
    dive's last point was what certified the 1,024-GPU epoch (0.38%)."""

    def __init__(self, lm: LinearModel, settings: SolverSettings, cols: np.ndarray,
                 early=None):
        """`early`: the same LP already on its way (optalloc.solve.lp.EarlyLp), finished here
        for lm's column bounds instead of solving it from scratch."""
        t0 = time.perf_counter()
        backend = HighsBackend()
        self.cols = np.asarray(cols)
        spent = 0.0
        if early is not None:
            self.h, spent = early.finish(lm)
        else:
            self.h = backend._load(lm, settings, True)
            self.h.run()
        self.first = backend._result(self.h, lm, True, t0)
        if spent:
            self.first = replace(self.first, solve_s=self.first.solve_s + spent)
        self.x = self.first.x
        # the first LP's reduced costs (optalloc.solve.fixing), kept before any round moves it
        self.reduced_costs = (np.asarray(self.h.getSolution().col_dual)
                              if self.first.status == "optimal" and self.x is not None else None)
        self.points = [self.x] if self.x is not None else []
        self.bounds = (lm.lb, lm.ub)
        self._rounds: list = []  # the bound changes of each round so far: (columns, value)
        self.first_basis = self.h.getBasis() if self.reduced_costs is not None else None
        self.solve_s = spent + time.perf_counter() - t0

    def run(self, rounds: int) -> np.ndarray | None:
        """`rounds` more rounds (fewer when nothing is left fractional or an LP fails); the
        last feasible LP's x."""
        import highspy

        t0 = time.perf_counter()
        h, cols, x = self.h, self.cols, self.x
        for _ in range(rounds):
            if x is None:
                break
            v = x[cols]
            frac = (v > 1e-6) & (v < 1 - 1e-6)
            if not frac.any():
                break
            one = cols[v > 1 - 1e-6]
            cut = np.median(v[frac])
            down = cols[frac & (v <= cut)]
            if len(one):
                h.changeColsBounds(len(one), one.astype(np.int32), np.ones(len(one)),
                                   np.ones(len(one)))
            h.changeColsBounds(len(down), down.astype(np.int32), np.zeros(len(down)),
                               np.zeros(len(down)))
            self._rounds += [(one, 1.0), (down, 0.0)]
            h.run()
            if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
                break
            x = np.asarray(h.getSolution().col_value)
            self.points.append(x)
        self.x = x
        self.solve_s += time.perf_counter() - t0
        return x

    def add_rows(self, lm: LinearModel) -> None:
        """The rows lm has beyond the LP's (appended: lm is the dive's model with rows added,
        the same columns) added to the LP and re-solved warm, before any round: the first LP
        is now lm's (its optimum the bound, its point, reduced costs and basis)."""
        import highspy

        t0 = time.perf_counter()
        h = self.h
        n = h.getNumRow()
        new = lm.A[n:].tocsr()
        if new.shape[0]:
            inf = highspy.kHighsInf
            lo = np.where(np.isfinite(lm.row_lo[n:]), lm.row_lo[n:], -inf)
            hi = np.where(np.isfinite(lm.row_hi[n:]), lm.row_hi[n:], inf)
            h.addRows(new.shape[0], lo.astype(float), hi.astype(float), new.nnz,
                      new.indptr[:-1].astype(np.int32), new.indices.astype(np.int32),
                      new.data.astype(float))
            h.run()
        first = HighsBackend()._result(h, lm, True, t0)
        self.first = replace(first, solve_s=self.first.solve_s + first.solve_s)
        self.x = self.first.x
        ok = self.first.status == "optimal" and self.x is not None
        self.reduced_costs = np.asarray(h.getSolution().col_dual) if ok else None
        self.points = [self.x] if self.x is not None else []
        self.first_basis = h.getBasis() if ok else None
        self.solve_s += time.perf_counter() - t0

    def forbid_fractional(self) -> np.ndarray | None:
        """The other direction, from the first LP's optimum: every column of `cols` it left
        fractional forbidden at once (nothing fixed to 1), re-solved warm from the first LP's
        basis. Where halving the fractional columns round by round keeps a start whose
        partners the rounding cannot fit, this drops them all and lets the LP reroute the GPUs
        to whole jobs. The dive's own state (its rounds' bounds, basis and point) is restored
        after, so `run` goes on where it was. The new point (also added to `points`), or None
        when nothing was fractional or the LP failed."""
        if self.first_basis is None:
            return None
        v = self.first.x[self.cols]
        frac = (v > 1e-6) & (v < 1 - 1e-6)
        if not frac.any():
            return None
        x = self._from_first([(self.cols[frac], 0.0)])
        if x is not None:
            self.points.append(x)
        return x

    def fixed_point(self, ones: np.ndarray) -> np.ndarray | None:
        """The first LP with the columns `ones` fixed to 1 (a plan's keeps: the caller's
        repair kept running jobs the LP stopped, optalloc.epoch_kept), re-solved warm from the
        first LP's basis; the dive's own state (its rounds' bounds, basis) restored after. The
        new point, or None when the LP failed (or there is no first basis)."""
        if self.first_basis is None or not len(ones):
            return None
        return self._from_first([(np.asarray(ones), 1.0)])

    def without_rows(self, rows: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray | None:
        """The first LP with the rows `rows` (their bounds `lo`, `hi`) left out, re-solved warm
        from its basis (the rows' bounds freed: the basis stays primal feasible); then the rows,
        the dive's bounds and basis as they were. The point, or None when the LP failed."""
        import highspy

        if self.first_basis is None or not len(rows):
            return None
        r, inf = np.asarray(rows, dtype=np.int32), highspy.kHighsInf
        self.h.changeRowsBounds(len(r), r, np.full(len(r), -inf), np.full(len(r), inf))
        try:
            return self._from_first([])
        finally:
            self.h.changeRowsBounds(len(r), r, np.where(np.isfinite(lo), lo, -inf).astype(float),
                                    np.where(np.isfinite(hi), hi, inf).astype(float))

    def _from_first(self, changes: list) -> np.ndarray | None:
        """The first LP with `changes` ((columns, value) pairs) on the model's bounds,
        re-solved warm from the first LP's basis; then every column back as the dive had it
        (its rounds' bounds) and its basis. The point, or None when the LP failed."""
        import highspy

        t0 = time.perf_counter()
        h = self.h
        here = h.getBasis()
        self._set_bounds(changes)
        h.setBasis(self.first_basis)
        h.run()
        x = None
        if h.getModelStatus() == highspy.HighsModelStatus.kOptimal:
            x = np.asarray(h.getSolution().col_value)
        lb, ub = self.bounds
        for cols, _ in changes:  # columns outside `cols` (_set_bounds resets only those)
            c = np.setdiff1d(np.asarray(cols), self.cols).astype(np.int32)
            if len(c):
                h.changeColsBounds(len(c), c, lb[c].astype(float), ub[c].astype(float))
        self._set_bounds(self._rounds)
        h.setBasis(here)
        self.solve_s += time.perf_counter() - t0
        return x

    def _set_bounds(self, changes: list) -> None:
        """The columns of `cols` back to the model's bounds, then `changes` applied in order."""
        idx = self.cols.astype(np.int32)
        lb, ub = self.bounds
        self.h.changeColsBounds(len(idx), idx, lb[self.cols], ub[self.cols])
        for cols, value in changes:
            if len(cols):
                c = np.asarray(cols).astype(np.int32)
                val = np.full(len(c), value)
                self.h.changeColsBounds(len(c), c, val, val)

    def result(self) -> SolveResult:
        """The first LP's result (its bound), with the seconds of the whole dive so far."""
        return type(self.first)(**{**self.first.__dict__, "solve_s": self.solve_s})
