"""Simulator speed benchmark: the ITP cluster04 scenario (15,802 jobs, 60 days, 480 GPUs,
5-minute epochs) through `greedy` and `ilp`, the issue's targets being greedy under 60 s and
ilp under 10 min on a 2-core machine. `quick` replays the first 3 days only.

    python -m optalloc.bench.sim_bench [--quick] [--policies greedy,ilp]

Needs the public traces ($OPTALLOC_TRACES, default ../shared/data/traces); without them the
suite returns one row saying so instead of failing the whole `optalloc bench` run.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from optalloc.errors import OptallocError

SCENARIO = os.path.join(os.path.dirname(__file__), "..", "..", "scenarios", "itp-cluster04.yaml")
QUICK_HORIZON_S = 3 * 86400.0


def run(quick: bool = False, policies=("greedy", "ilp"), scenario: str = SCENARIO) -> list[dict]:
    from optalloc.sim.engine import simulate
    from optalloc.sim.metrics import compute_metrics
    from optalloc.sim.policies import make_policy
    from optalloc.sim.scenario import load_scenario, with_horizon

    try:
        sc = load_scenario(os.path.normpath(scenario))
    except OptallocError as err:  # traces absent: say so in the table
        return [{"scenario": os.path.basename(scenario), "skipped": str(err).splitlines()[0]}]
    if quick:
        sc = with_horizon(sc, QUICK_HORIZON_S)
    rows = []
    for name in policies:
        t0 = time.perf_counter()
        res = simulate(sc, make_policy(name))
        wall = time.perf_counter() - t0
        m = compute_metrics(res)
        solver = m["solver"]
        rows.append(
            {
                "scenario": sc.name,
                "days": round(sc.duration_s / 86400, 2),
                "jobs": len(sc.jobs),
                "gpus": sum(n.gpus for n in sc.config.nodes),
                "policy": name,
                "wall_s": wall,
                "decisions": solver["epochs"],
                "decide_mean_ms": None if solver["mean_s"] is None else 1000 * solver["mean_s"],
                "decide_p99_ms": None if solver["p99_s"] is None else 1000 * solver["p99_s"],
                "decide_total_s": solver["total_s"],
                "max_gap": solver["max_gap"],
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    return rows


def main() -> None:
    from optalloc.bench.table import markdown_table

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--policies", default="greedy,ilp")
    a = ap.parse_args()
    print(markdown_table(run(a.quick, tuple(p for p in a.policies.split(",") if p))))


if __name__ == "__main__":
    main()
