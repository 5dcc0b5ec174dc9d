"""Epoch benchmark: build + solve + place per backend, side by side, on generated clusters.

Rows:
  * `epoch/<backend>`: run_epoch end to end (LP diving, the MIP only if the rounded plan is
    not certified within mip_gap of the LP bound);
  * `mip/<backend>`: the backend's MIP on the same matrix, then placement of its incumbent;
  * `lp`: the pure LP relaxation (HiGHS), the floor any solve is compared to;
  * `sim/<size>`: the simulator's case (480 GPUs = 60 x 8, one gpu_type, 100 / 300 jobs): run_epoch
    over `SIM_SEEDS` generated states, median and p90 milliseconds per epoch, how often the MIP
    ran, and the largest certified gap (`python -m optalloc.bench.epoch_bench --sim`).
`gap_lp` = (LP bound - objective of the placed plan) / |objective| (certified: the LP bound is a
true upper bound). Times are medians over `repeats`; `py_peak_mb` is the Python-side peak
allocation (tracemalloc, separate untimed pass; solver-internal memory is not included).

    python -m optalloc.bench.epoch_bench [--quick] [--sim] [--repeats N] [--backends highs,scip]
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from dataclasses import replace

from optalloc.bench.instances import make_instance
from optalloc.bench.scale_rows import mip_ran
from optalloc.epoch import run_epoch
from optalloc.model.build import build_model
from optalloc.plan.place import place
from optalloc.plan.reasons import got_by_org
from optalloc.solve import BACKENDS, MIP_BACKENDS, available_backends
from optalloc.types import SolverSettings

SIZES = {
    "1024gpu-2000jobs": dict(n_nodes=128, n_jobs=2000),
    "480gpu-300jobs": dict(n_nodes=60, n_jobs=300, n_programs=3, projects_per_program=4),
}
QUICK_SIZES = {"128gpu-200jobs": dict(n_nodes=16, n_jobs=200, n_programs=2)}
SIM_SIZES = {
    "480gpu-100jobs-1type": dict(n_nodes=60, n_jobs=100, n_types=1, n_programs=3,
                                 projects_per_program=4),
    "480gpu-300jobs-1type": dict(n_nodes=60, n_jobs=300, n_types=1, n_programs=3,
                                 projects_per_program=4),
}
SIM_SEEDS = 20


def _peak_mb(fn) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def _epoch_row(size, snap, backend, settings, repeats, lp_bound) -> dict:
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        plan = run_epoch(snap, replace(settings, backend=backend))
        runs.append((time.perf_counter() - t0, plan))
    total = statistics.median(r[0] for r in runs)
    rep = runs[-1][1].report
    return {
        "size": size, "row": f"epoch/{backend}", "status": rep.status,
        "total_s": total,
        "build_s": statistics.median(r[1].report.build_s for r in runs),
        "solve_s": statistics.median(r[1].report.solve_s for r in runs),
        "place_s": statistics.median(r[1].report.place_s for r in runs),
        "objective": rep.objective, "gap_lp": (lp_bound - rep.objective) / abs(rep.objective),
        "vars": rep.n_vars, "cons": rep.n_cons,
        "py_peak_mb": _peak_mb(lambda: run_epoch(snap, replace(settings, backend=backend))),
    }


def _mip_row(size, snap, backend, settings, repeats, lp_bound) -> dict:
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        em = build_model(snap)
        t1 = time.perf_counter()
        res = BACKENDS[backend].solve(em.lm, settings)
        t2 = time.perf_counter()
        placed = place(em, res.x, backfill=res.has_solution)
        t3 = time.perf_counter()
        obj = em.plan_objective(placed.started, placed.kept, got_by_org(em, placed))
        runs.append((t3 - t0, t1 - t0, t2 - t1, t3 - t2, res, obj, em))
    med = lambda i: statistics.median(r[i] for r in runs)  # noqa: E731
    res, obj, em = runs[-1][4], runs[-1][5], runs[-1][6]
    return {
        "size": size, "row": f"mip/{backend}", "status": res.status,
        "total_s": med(0), "build_s": med(1), "solve_s": med(2), "place_s": med(3),
        "objective": obj, "gap_lp": (lp_bound - obj) / abs(obj),
        "mip_gap": res.gap, "vars": em.lm.n_vars, "cons": em.lm.n_cons,
        "py_peak_mb": _peak_mb(lambda: BACKENDS[backend].solve(build_model(snap).lm, settings)),
    }


def run(quick: bool = False, repeats: int | None = None, backends=None, seed: int = 0,
        mip_time_limit_s: float = 10.0) -> list[dict]:
    repeats = repeats or (1 if quick else 3)
    have = available_backends()
    backends = [b for b in (backends or MIP_BACKENDS) if b in have]
    settings = SolverSettings(time_limit_s=mip_time_limit_s, mip_gap=0.005, threads=1)
    rows = []
    for size, kw in (QUICK_SIZES if quick else SIZES).items():
        snap = make_instance(seed=seed, **kw)
        em = build_model(snap)
        lp_times, lp = [], None
        for _ in range(repeats):
            lp = BACKENDS["lp"].solve(em.lm, settings)
            lp_times.append(lp.solve_s)
        rows.append({"size": size, "row": "lp", "status": lp.status,
                     "total_s": statistics.median(lp_times), "solve_s": statistics.median(lp_times),
                     "objective": lp.bound, "gap_lp": 0.0, "vars": em.lm.n_vars,
                     "cons": em.lm.n_cons})
        rows.append(_epoch_row(size, snap, "highs", settings, repeats, lp.bound))
        for b in backends:
            rows.append(_mip_row(size, snap, b, settings, repeats, lp.bound))
    return rows


def sim_rows(seeds: int = SIM_SEEDS, settings: SolverSettings | None = None) -> list[dict]:
    """Per-epoch latency on simulator-sized states: one run_epoch per seeded instance."""
    settings = settings or SolverSettings(mip_gap=0.005, threads=1)
    rows = []
    for size, kw in SIM_SIZES.items():
        ms, mip, gaps = [], 0, []
        for seed in range(seeds):
            snap = make_instance(seed=seed, **kw)
            t0 = time.perf_counter()
            plan = run_epoch(snap, settings)
            ms.append(1000 * (time.perf_counter() - t0))
            mip += mip_ran(plan.report.message)
            gaps.append(plan.report.gap or 0.0)
        ms.sort()
        rows.append({"size": size, "row": "sim/epoch/highs", "epochs": seeds,
                     "median_ms": statistics.median(ms),
                     "p90_ms": ms[min(len(ms) - 1, int(round(0.9 * (len(ms) - 1))))],
                     "mip_ran": mip, "max_gap": max(gaps)})
    return rows


def main(argv=None) -> int:
    from optalloc.bench.table import markdown_table

    ap = argparse.ArgumentParser(prog="python -m optalloc.bench.epoch_bench")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--backends", default=",".join(MIP_BACKENDS))
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--sim", action="store_true", help="only the simulator-sized rows")
    a = ap.parse_args(argv)
    if a.sim:
        print(markdown_table(sim_rows(a.repeats or SIM_SEEDS)))
        return 0
    rows = run(a.quick, a.repeats, [b for b in a.backends.split(",") if b], 0, a.time_limit)
    print(markdown_table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
