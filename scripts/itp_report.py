"""The tables of results/itp.md from scripts/gangs_compare.py's JSON files (one per scenario).

    python scripts/itp_report.py results/itp/*.json > /tmp/itp-tables.md

One row per scenario and policy (greedy, ilp without lookahead, ilp), then the per-project
owed-delivered table of each scenario. Every number comes from the JSON: nothing is typed in.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

NAMES = {"priority": "priority", "greedy": "greedy", "ilp-nolookahead": "ilp, no lookahead",
         "ilp": "ilp"}


def _get(m, *path):
    for p in path:
        m = m.get(p) if isinstance(m, dict) else None
    return m


def pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def wait(m, cls) -> str:
    w = _get(m, "waits", cls)
    if not w or not w.get("n"):
        return "-"
    s = w["p90_s"]
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.1f} min"


def row(name: str, pol: str, m: dict) -> str:
    worst = _get(m, "owed_delivered", "worst_hourly") or {}
    occ = m.get("occupancy") or {}
    pre = m.get("preemptions") or {}
    res = m.get("reservations") or {}
    solver = m.get("solver") or {}
    cells = [
        name, NAMES.get(pol, pol),
        pct(_get(m, "owed_delivered", "hourly")), pct(_get(m, "owed_delivered", "period")),
        f"{pct(worst.get('value'))} ({worst.get('project', '-')})",
        f"{pct(occ.get('total'))} / {pct(occ.get('limit'))} ({pct(occ.get('of_limit'))})",
        f"{m.get('demand_ratio', 0):.2f}",
        wait(m, "debug"), wait(m, "large"), wait(m, "other"),
        f"{pre.get('per_1000_gpu_h', 0):.2f}", f"{pre.get('lost_gpu_h', 0):,.0f}",
        f"{res.get('kept', 0)} / {res.get('dropped', 0)}" if res.get("made") else "-",
        f"{1000 * solver.get('mean_s', 0):.0f} ms",
        f"{m.get('wall_s', 0):.0f} s",
    ]
    return "| " + " | ".join(cells) + " |"


HEAD = ("| scenario | policy | owed (hourly) | owed (period) | worst project (hourly) | "
        "occupancy / limit (of limit) | demand ratio | debug p90 | large p90 | other p90 | "
        "preempt / 1000 GPU-h | GPU-h lost | reservations kept / dropped | solver mean | wall |")


def main(paths: list[str]) -> int:
    runs = [(Path(p).stem, json.loads(Path(p).read_text())) for p in paths]
    print(HEAD)
    print("|" + "---|" * (HEAD.count("|") - 1))
    for name, ms in runs:
        for pol in ("priority", "greedy", "ilp-nolookahead", "ilp"):
            if pol in ms:
                print(row(name, pol, ms[pol]))
    for name, ms in runs:
        pols = [p for p in ("greedy", "ilp-nolookahead", "ilp") if p in ms]
        projects = sorted({p for pol in pols for p in (ms[pol].get("projects") or {})})
        print(f"\n#### {name}: owed delivered per project (hourly / period)\n")
        print("| project | " + " | ".join(NAMES[p] for p in pols) + " |")
        print("|---" * (len(pols) + 1) + "|")
        for pr in projects:
            cells = []
            for pol in pols:
                d = (ms[pol].get("projects") or {}).get(pr) or {}
                cells.append(f"{pct(d.get('hourly'))} / {pct(d.get('period'))}")
            print(f"| {pr} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
