"""What the large-job p90 wait is made of, for one policy on one scenario (results/gangs.md,
"Stop 58"): large jobs (the metrics' class: >= 64 GPUs or >= 8 nodes, debug jobs aside), how
many are unallocated work, how many never started by the horizon (allocated / unallocated;
their waits count to the horizon), and the p90 wait of all of them and of the allocated ones.
Where more than a tenth never start, the p90 is one of those horizon-censored waits.

    python scripts/large_waits_split.py --scenario scenarios/gangs.yaml [--duration 7d]
        [--seed N] --policy greedy|ilp|ilp-lookahead

One JSON line on stdout. `ilp-lookahead` is the ilp with `policy.max_reservations` 2 (or the
scenario's own count), as scripts/gangs_compare.py runs it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np

from optalloc.cli.sim_cmd import load
from optalloc.sim.engine import simulate
from optalloc.sim.metrics import job_waits
from optalloc.sim.policies import make_policy
from optalloc.sim.whatif import with_config


def split(scenario: str, duration: str | None, seed: int | None, policy: str) -> dict:
    sc = load(scenario, duration=duration, seed=seed)
    name = policy
    if policy == "ilp-lookahead":
        cfg = sc.config
        n = cfg.policy.max_reservations or 2
        sc = with_config(sc, dataclasses.replace(
            cfg, policy=dataclasses.replace(cfg.policy, max_reservations=n)))
        name = "ilp"
    w = job_waits(simulate(sc, make_policy(name), progress=False))
    large, alloc, cens = w["cls"] == "large", w["allocated"], w["censored"]
    wait = w["wait_s"]

    def p90(sel) -> float | None:
        return round(float(np.percentile(wait[sel], 90)) / 3600, 2) if sel.any() else None

    return {"scenario": scenario, "duration": duration, "seed": seed, "policy": policy,
            "large": int(large.sum()), "unallocated": int((large & ~alloc).sum()),
            "never_started_allocated": int((large & alloc & cens).sum()),
            "never_started_unallocated": int((large & ~alloc & cens).sum()),
            "p90_h": p90(large), "p90_allocated_h": p90(large & alloc)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--duration")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--policy", default="ilp-lookahead",
                    choices=("greedy", "ilp", "ilp-lookahead"))
    a = ap.parse_args(argv)
    print(json.dumps(split(a.scenario, a.duration, a.seed, a.policy)))


if __name__ == "__main__":
    main()
