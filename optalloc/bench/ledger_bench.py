"""Ledger benchmark: build and query an in-memory ledger of N intervals over P projects.

The issue's target: `ledger report` over 1,000,000 intervals and 200 projects in under 1 s.
Each row times, in one process and one run (wall seconds, best of `repeat`):

    build_s             Ledger from columns (what StateStore.ledger does after reading)
    report_s            build_report(ledger, now): usage, entitled, ratios, owed/delivered over lookback
    usage_ratios_s      Ledger.usage_ratios(now) (the per-epoch call of cron and simulator)
    owed_shortfall_s    Ledger.shortfalls(now) (the other per-epoch call: the floors' debt and lift)
    owed_delivered_s    Ledger.owed_delivered over the whole span, hourly (simulator metrics)
    store_load_s        StateStore.ledger() from a SQLite file (only with store=True)
    peak_mem_mb         tracemalloc peak while building and reporting (separate pass)

Data: synthetic and seeded. Projects sit 20 to a program; intervals of 1-64 GPUs, 5 min to
2 days long, spread over `days`; 80% allocated; capacity and demand sampled every 5 minutes.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import tracemalloc
from typing import Callable, Sequence

import numpy as np

from optalloc.ledger import Ledger, build_report
from optalloc.state import StateStore
from optalloc.org import OrgTree
from optalloc.types import GpuType, OrgNode, Policy

GPU_TYPES = (GpuType("h100", 1.0), GpuType("b200", 1.6))
DAY = 86400.0
DEFAULT_SIZES = ((10_000, 20, 7), (100_000, 200, 30), (1_000_000, 200, 60))
QUICK_SIZES = ((10_000, 20, 7),)


def synthetic_tree(n_projects: int) -> OrgTree:
    programs = []
    for g in range(0, n_projects, 20):
        kids = tuple(OrgNode(f"p{i:04d}", share=1 + i % 7) for i in range(g, min(g + 20, n_projects)))
        programs.append(OrgNode(f"prog{g // 20:03d}", share=1 + (g // 20) % 3, children=kids))
    return OrgTree.build(OrgNode("root", children=tuple(programs)), [g.name for g in GPU_TYPES])


def synthetic_data(n: int, n_projects: int, days: float, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    span = days * DAY
    start = rng.uniform(0, span, n)
    dur = np.exp(rng.uniform(np.log(300), np.log(2 * DAY), n))
    t = np.arange(0, span, 300.0)
    return {
        "start": start,
        "end": np.minimum(start + dur, span),
        "gpus": rng.choice([1, 2, 4, 8, 16, 64], n, p=[0.3, 0.2, 0.2, 0.2, 0.07, 0.03]),
        "project_code": rng.integers(0, n_projects, n),
        "type_code": rng.integers(0, 2, n),
        "allocated": rng.random(n) < 0.8,
        "sample_t": t,
        "capacity": np.column_stack([np.full(len(t), 1024), np.full(len(t), 88)]),
        "demand": rng.integers(0, 40, (len(t), n_projects)),
        "span": span,
    }


def build(tree: OrgTree, data: dict, policy: Policy) -> Ledger:
    led = Ledger(GPU_TYPES, tree, policy)
    led.record_columns(
        start=data["start"], end=data["end"], gpus=data["gpus"],
        project_code=data["project_code"], project_names=led.projects,
        type_code=data["type_code"], type_names=[g.name for g in GPU_TYPES],
        allocated=data["allocated"],
    )
    names = led.projects
    for k, t in enumerate(data["sample_t"]):
        led.record_capacity(t, {"h100": int(data["capacity"][k, 0]), "b200": int(data["capacity"][k, 1])})
        led.record_demand(t, dict(zip(names, data["demand"][k].tolist())))
    return led


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _store_load(tree: OrgTree, led: Ledger, data: dict, policy: Policy) -> float:
    from optalloc.types import Interval

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "state.db")
        names = led.projects
        ivs = [
            Interval(f"j{i}", names[p], GPU_TYPES[ty].name, int(g), float(s), float(e), bool(a))
            for i, (p, ty, g, s, e, a) in enumerate(zip(
                data["project_code"], data["type_code"], data["gpus"], data["start"], data["end"],
                data["allocated"]))
        ]
        with StateStore(path) as store:
            store.record_intervals(ivs)
            t0 = time.perf_counter()
            store.ledger(GPU_TYPES, tree, policy)
            return time.perf_counter() - t0


def run(
    sizes: Sequence[tuple[int, int, float]] | None = None,
    quick: bool = False,
    repeat: int = 3,
    store: bool = False,
) -> list[dict]:
    """One row per (intervals, projects, days). `quick` uses one small size."""
    sizes = sizes or (QUICK_SIZES if quick else DEFAULT_SIZES)
    policy = Policy(lookback_s=7 * DAY)
    rows = []
    for n, n_projects, days in sizes:
        tree = synthetic_tree(n_projects)
        data = synthetic_data(n, n_projects, days)
        now = data["span"]
        t0 = time.perf_counter()
        led = build(tree, data, policy)
        samples_s = time.perf_counter() - t0
        build_s = _best(lambda: Ledger(GPU_TYPES, tree, policy).record_columns(
            start=data["start"], end=data["end"], gpus=data["gpus"],
            project_code=data["project_code"], project_names=led.projects,
            type_code=data["type_code"], type_names=[g.name for g in GPU_TYPES],
            allocated=data["allocated"]), repeat)
        row = {
            "name": f"{n:,} intervals x {n_projects} projects, {days:g} d",
            "intervals": n,
            "projects": n_projects,
            "days": days,
            "build_s": build_s,
            "report_s": _best(lambda: build_report(led, now), repeat),
            "usage_ratios_s": _best(lambda: led.usage_ratios(now), repeat),
            "owed_shortfall_s": _best(lambda: led.shortfalls(now), repeat),
            "owed_delivered_s": _best(lambda: led.owed_delivered(0.0, now), repeat),
            "build_with_samples_s": samples_s,
        }
        tracemalloc.start()
        build_report(build(tree, data, policy), now)
        row["peak_mem_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        if store:
            row["store_load_s"] = _store_load(tree, led, data, policy)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    from optalloc.bench.table import markdown_table

    ap = argparse.ArgumentParser(prog="python -m optalloc.bench.ledger_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one small size")
    ap.add_argument("--store", action="store_true", help="also time loading from a SQLite file")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(markdown_table(run(quick=args.quick, repeat=args.repeat, store=args.store)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
