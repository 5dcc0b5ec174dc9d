"""Per project of a scenario: entitled GPUs on the whole cluster, the GPU-hours its allocated
jobs submit within the horizon against its entitled GPU-hours, and its large (>= 64-GPU) jobs
(results/gangs.md: a project that submits more than its budget queues, whatever the policy).

    python scripts/project_load.py scenarios/gangs.yaml [--seed N]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from optalloc.cli.sim_cmd import load
from optalloc.org import OrgTree


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--seed", type=int)
    a = ap.parse_args(argv)
    sc = load(a.scenario, seed=a.seed)
    cfg = sc.config
    types = [g.name for g in cfg.gpu_types]
    tree = OrgTree.build(cfg.org, types)
    cap = [sum(n.gpus for n in cfg.nodes if n.gpu_type == t) for t in types]
    hours = sc.duration_s / 3600.0
    end = sc.start_time + sc.duration_s
    work, large, n_large, beyond = Counter(), Counter(), Counter(), Counter()
    ent = {nm: float(tree.entitlement[i] @ cap) for i, nm in enumerate(tree.names)}
    for j in sc.jobs:
        if j.min_runtime_s <= 0 or j.submit_time > end:
            continue
        gh = j.gpus * float(j.duration_s or 0.0) / 3600.0
        work[j.project] += gh
        if j.gpus >= 64:
            large[j.project] += gh
            n_large[j.project] += 1
            beyond[j.project] += j.gpus > ent[j.project] + 1e-9
    print("| project | entitled GPUs | submitted / entitled GPU-hours | large jobs | "
          "of them beyond the share | large share of its GPU-hours |")
    print("|---|---|---|---|---|---|")
    for i, nm in enumerate(tree.names):
        if not tree.is_leaf[i]:
            continue
        e = ent[nm]
        load_ = work[nm] / (e * hours) if e > 0 else float("inf")
        share = large[nm] / work[nm] if work[nm] else 0.0
        print(f"| {nm} | {e:.1f} | {load_:.2f} | {n_large[nm]} | {beyond[nm]} | "
              f"{100 * share:.0f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
