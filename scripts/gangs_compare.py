"""Greedy vs ilp without lookahead vs ilp with lookahead on one scenario (results/gangs.md).

    python scripts/gangs_compare.py --scenario scenarios/itp-cluster04.yaml [--duration 7d]
        [--policies greedy,ilp,ilp-lookahead] [--seed N] --out results/itp/itp-cluster04.json

`ilp` is the scenario's own policy (the lookahead is off unless its policy sets
`max_reservations`); `ilp-lookahead` is the ilp policy with `policy.max_reservations: 2` (or the
scenario's own count when it sets one); `ilp-nolookahead` forces 0 (each epoch solved alone). Each
run is checked for conservation; the JSON holds compute_metrics' dict per policy plus the wall
time, and a table of the headline numbers goes to stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from optalloc.cli.sim_cmd import load
from optalloc.sim.engine import check_conservation, simulate
from optalloc.sim.metrics import compute_metrics
from optalloc.sim.policies import make_policy
from optalloc.sim.whatif import with_config

ROWS = (
    ("owed (hourly)", ("owed_delivered", "hourly"), "pct"),
    ("worst project (hourly)", ("owed_delivered", "worst_hourly", "value"), "pct"),
    ("worst project (period)", ("owed_delivered", "worst_period", "value"), "pct"),
    ("occupancy / limit", ("occupancy", "of_limit"), "pct"),
    ("occupancy (total)", ("occupancy", "total"), "pct"),
    ("debug p90", ("waits", "debug", "p90_s"), "h"),
    ("large p90", ("waits", "large", "p90_s"), "h"),
    ("large p50", ("waits", "large", "p50_s"), "h"),
    ("large never started", ("waits", "large", "n_censored"), "n"),
    ("large allocated p90", ("waits", "large_allocated", "p90_s"), "h"),
    ("large allocated (jobs)", ("waits", "large_allocated", "n"), "n"),
    ("large within share p90", ("waits", "large_within_share", "p90_s"), "h"),
    ("large within share (jobs)", ("waits", "large_within_share", "n"), "n"),
    ("large beyond share p90", ("waits", "large_beyond_share", "p90_s"), "h"),
    ("large beyond share (jobs)", ("waits", "large_beyond_share", "n"), "n"),
    ("other p90", ("waits", "other", "p90_s"), "h"),
    ("preempt / 1000 GPU-h", ("preemptions", "per_1000_gpu_h"), "f"),
    ("reservations kept / dropped", ("reservations",), "res"),
    ("GPU-h held idle by reservations", ("reservations", "idle_gpu_h"), "f"),
    ("solver s/decision (mean)", ("solver", "mean_s"), "f3"),
)


def _get(d, path):
    for p in path:
        d = d.get(p) if isinstance(d, dict) else None
    return d


def fmt(v, kind) -> str:
    if kind == "res":
        return "-" if not v else f"{v['kept']} / {v['dropped']}"
    if v is None:
        return "-"
    return {"pct": f"{100 * v:.1f}%", "h": f"{v / 3600:.1f} h", "n": f"{v}",
            "f": f"{v:,.1f}", "f3": f"{v:.3f}"}[kind]


def run(scenario: str, duration: str | None, policies: list[str], seed: int | None = None) -> dict:
    sc = load(scenario, duration=duration, seed=seed)
    out = {}
    for name in policies:
        s = sc
        pol = name
        if name in ("ilp-nolookahead", "ilp-lookahead"):
            cfg = sc.config
            n = 0 if name == "ilp-nolookahead" else (cfg.policy.max_reservations or 2)
            s = with_config(sc, dataclasses.replace(
                cfg, policy=dataclasses.replace(cfg.policy, max_reservations=n)))
            pol = "ilp"
        t0 = time.perf_counter()
        res = simulate(s, make_policy(pol), progress=False)
        wall = time.perf_counter() - t0
        check_conservation(res)
        m = compute_metrics(res)
        m["policy"] = name
        m["wall_s"] = wall
        out[name] = m
        print(f"  {name}: {wall:.0f}s wall, {len(res.epochs)} decisions", file=sys.stderr,
              flush=True)
    return out


def table(metrics: dict) -> str:
    names = list(metrics)
    lines = ["| metric | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for label, path, kind in ROWS:
        lines.append(f"| {label} | " + " | ".join(fmt(_get(metrics[n], path), kind)
                                                  for n in names) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--duration")
    ap.add_argument("--policies", default="greedy,ilp,ilp-lookahead")
    ap.add_argument("--seed", type=int, help="re-seed the scenario (another draw of a synthetic "
                    "workload; the trace mapping's hash for a trace)")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    metrics = run(a.scenario, a.duration, [p.strip() for p in a.policies.split(",") if p], a.seed)
    print(table(metrics))
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(metrics, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
