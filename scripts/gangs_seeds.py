"""One workload drawn with several seeds: the headline numbers of greedy, the ilp without the
lookahead and the ilp with it, a row per seed, and the mean of the seeds (results/gangs.md).

    python scripts/gangs_compare.py --scenario scenarios/gangs.yaml --seed N \\
        --policies greedy,ilp,ilp-lookahead --out results/gangs/gangs-seedN.json   # per seed
    python scripts/gangs_seeds.py results/gangs/gangs.json results/gangs/gangs-seed*.json

A single run of a 14-day simulation moves by several points when anything perturbs a decision
(a different LP vertex, one job more): the seeds show which differences hold across draws.
Every number comes from the JSON files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from gangs_compare import _get  # noqa: E402

POLICIES = (("greedy", "greedy"), ("ilp", "ilp"), ("ilp-lookahead", "ilp + lookahead"))
COLS = (
    ("owed (hourly)", ("owed_delivered", "hourly"), "pct"),
    ("worst project (hourly)", ("owed_delivered", "worst_hourly", "value"), "pct"),
    ("worst project (period)", ("owed_delivered", "worst_period", "value"), "pct"),
    ("occupancy / limit", ("occupancy", "of_limit"), "pct"),
    ("large p90", ("waits", "large", "p90_s"), "h"),
    ("large allocated p90", ("waits", "large_allocated", "p90_s"), "h"),
    ("debug p90", ("waits", "debug", "p90_s"), "h"),
    ("other p90", ("waits", "other", "p90_s"), "h"),
)


def _fmt(v, kind) -> str:
    if v is None:
        return "-"
    return f"{100 * v:.1f}%" if kind == "pct" else f"{v / 3600:.1f} h"


def _seed(path: Path, ms: dict) -> str:
    return str((ms.get("greedy") or {}).get("seed", path.stem))


def main(paths: list[str]) -> int:
    runs = [(Path(p), json.loads(Path(p).read_text())) for p in paths]
    print("| seed | policy | " + " | ".join(c[0] for c in COLS) + " |")
    print("|---" * (len(COLS) + 2) + "|")
    sums: dict = {}
    for path, ms in runs:
        for key, name in POLICIES:
            if key not in ms:
                continue
            vals = [_get(ms[key], c[1]) for c in COLS]
            for i, v in enumerate(vals):
                if v is not None:
                    s = sums.setdefault((key, i), [0.0, 0])
                    s[0] += v
                    s[1] += 1
            print(f"| {_seed(path, ms)} | {name} | "
                  + " | ".join(_fmt(v, c[2]) for v, c in zip(vals, COLS)) + " |")
    for key, name in POLICIES:
        cells = []
        for i, c in enumerate(COLS):
            s = sums.get((key, i))
            cells.append(_fmt(s[0] / s[1], c[2]) if s and s[1] else "-")
        print(f"| mean of {len(runs)} | {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
