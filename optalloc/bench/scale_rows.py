"""The rows of the scaling benchmark, each run in its own process (optalloc.bench.isolate) on
one pickled snapshot. Every function returns a dict with the row's times (medians over
`repeat`), model size, objective of the *placed* plan, the row's own bound and the invariant
check of its plan ("ok" or the first broken rule).

    lp     optalloc's model, LP relaxation (HiGHS): build + solve; its optimum is the bound
    epoch  optalloc's run_epoch end to end (the default path: LP diving, rounding, placement,
           the MIP only when the rounded plan is not certified)
    mip    optalloc's model solved by one MIP backend alone, then placed
    naive  the element-by-element PuLP + CBC model of the same problem (optalloc.bench.naive)
"""

from __future__ import annotations

import copyreg
import pickle
import statistics
import time
import types
from dataclasses import replace

from optalloc.types import SolverSettings, frozen_map

copyreg.pickle(types.MappingProxyType, lambda m: (frozen_map, (dict(m),)))


def save_snapshot(snap, path: str) -> None:
    with open(path, "wb") as fh:
        pickle.dump(snap, fh, protocol=pickle.HIGHEST_PROTOCOL)


def _load(path: str, progress=None):
    """The snapshot, and (through `progress`) the process's RSS once it is loaded: the row's
    own memory is peak_rss_mb minus this base (interpreter, libraries, snapshot)."""
    with open(path, "rb") as fh:
        snap = pickle.load(fh)
    if progress:
        progress({"base_rss_mb": current_rss_mb()})
    return snap


def current_rss_mb() -> float:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def mip_ran(message: str) -> bool:
    """Whether an epoch's report says its whole MIP ran (step 3d): only that step ends the
    report with the solver's own word ("; solver: optimal (Optimal)", epoch_status.final). Its
    first words name the plan chosen, not the path: a dive round or the greedy plan may end
    an epoch without the MIP, and the LP's rounding may win after it."""
    return "; solver: " in message


def _med(values) -> float:
    return float(statistics.median(values))


def lp_row(snap_path: str, settings: SolverSettings, repeat: int = 1, progress=None) -> dict:
    from optalloc.model.build import build_model
    from optalloc.solve import BACKENDS

    snap = _load(snap_path, progress)
    builds, solves = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        em = build_model(snap)
        t1 = time.perf_counter()
        lp = BACKENDS["lp"].solve(em.lm, replace(settings, backend="lp"))
        builds.append(t1 - t0)
        solves.append(time.perf_counter() - t1)
    solved = lp.status == "optimal" and lp.bound is not None  # else no bound: no gap either
    return {"status": lp.status, "build_s": _med(builds), "solve_s": _med(solves), "place_s": 0.0,
            "total_s": _med(b + s for b, s in zip(builds, solves)), "vars": em.lm.n_vars,
            "cons": em.lm.n_cons, "objective": lp.bound if solved else None,
            "bound": lp.bound if solved else None, "gap": 0.0 if solved else None,
            "invariants": "", "note": ("LP relaxation: the bound no plan beats" if solved else
                                       f"LP relaxation {lp.status}, no bound: {lp.message}"[:80])}


def epoch_row(snap_path: str, settings: SolverSettings, repeat: int = 1, progress=None,
              reservations: int = 0) -> dict:
    """run_epoch on the instance; `reservations` > 0: with the lookahead on
    (`policy.max_reservations`)."""
    from dataclasses import replace

    from optalloc.bench.checks import invariants
    from optalloc.epoch import run_epoch

    snap = _load(snap_path, progress)
    if reservations:
        snap = replace(snap, policy=replace(snap.policy, max_reservations=reservations))
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        plan = run_epoch(snap, settings)
        runs.append((time.perf_counter() - t0, plan.report))
    rep = runs[-1][1]
    mip = mip_ran(rep.message)
    return {"status": rep.status, "build_s": _med(r.build_s for _, r in runs),
            "solve_s": _med(r.solve_s for _, r in runs),
            "place_s": _med(r.place_s for _, r in runs), "total_s": _med(t for t, _ in runs),
            "vars": rep.n_vars, "cons": rep.n_cons, "objective": rep.objective,
            "bound": rep.bound, "gap": rep.gap, "invariants": invariants(snap, plan),
            "note": ("MIP ran: " if mip else "") + rep.message[:80]}


def mip_row(snap_path: str, settings: SolverSettings, repeat: int = 1, progress=None) -> dict:
    from optalloc.bench.checks import invariants, plan_of
    from optalloc.model.build import build_model
    from optalloc.plan.place import place
    from optalloc.plan.reasons import got_by_org
    from optalloc.solve import solve

    snap = _load(snap_path, progress)
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        em = build_model(snap)
        t1 = time.perf_counter()
        res = solve(em.lm, settings)
        t2 = time.perf_counter()
        placed = place(em, res.x, backfill=res.has_solution)
        t3 = time.perf_counter()
        runs.append((t1 - t0, t2 - t1, t3 - t2, t3 - t0))
    obj = em.plan_objective(placed.started, placed.kept, got_by_org(em, placed))
    plan = plan_of(snap, em.req.run_job[placed.kept], placed.placements)
    bound = res.bound
    gap = None if bound is None else max(0.0, bound - obj) / max(1.0, abs(obj))
    return {"status": res.status, "build_s": _med(r[0] for r in runs),
            "solve_s": _med(r[1] for r in runs), "place_s": _med(r[2] for r in runs),
            "total_s": _med(r[3] for r in runs), "vars": em.lm.n_vars, "cons": em.lm.n_cons,
            "objective": obj, "bound": bound, "gap": gap,
            "invariants": invariants(snap, plan), "note": res.message[:80]}


def naive_row(snap_path: str, settings: SolverSettings, time_limit_s: float = 600.0,
              progress=None) -> dict:
    from optalloc.bench.checks import invariants, plan_of
    from optalloc.bench.naive import count_binaries, solve_naive
    from optalloc.model.build import build_model

    snap = _load(snap_path, progress)
    em = build_model(snap)
    if progress:
        progress({"vars": count_binaries(em) + len(em.req.cand_job) + len(em.req.run_job)
                  + len(em.m) + len(em.d) + len(em.f), "naive_binaries": count_binaries(em)})
    res = solve_naive(em, time_limit_s=time_limit_s, mip_gap=settings.mip_gap,
                      threads=settings.threads, progress=progress)
    plan = plan_of(snap, em.req.run_job[res.kept], res.placements)
    return {"status": res.status, "build_s": res.build_s, "solve_s": res.solve_s,
            "place_s": res.place_s, "total_s": res.build_s + res.solve_s + res.place_s,
            "vars": res.n_vars, "cons": res.n_cons, "objective": res.objective,
            "bound": None, "gap": None,
            "invariants": invariants(snap, plan) if res.objective is not None else "",
            "note": res.message}
