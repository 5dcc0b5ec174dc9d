"""The tables of results/gangs.md from scripts/gangs_compare.py's JSON files.

    python scripts/gangs_report.py results/gangs/*.json > /tmp/tables.md

One table per scenario (greedy / ilp without lookahead / ilp with lookahead) and one table of
the issue's bar per scenario, each item with its numbers and met / not met.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from gangs_compare import ROWS, _get, fmt  # noqa: E402

NAMES = {"greedy": "greedy", "ilp": "ilp (default: no lookahead)", "ilp-lookahead": "ilp, lookahead"}


def _v(m, *path):
    return _get(m, path)


def _pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def _h(x):
    return "-" if x is None else f"{x / 3600:.1f} h"


def bar(name: str, ms: dict) -> list[tuple[str, str, bool | None]]:
    g, n, la = ms.get("greedy"), ms.get("ilp"), ms.get("ilp-lookahead")
    out = []
    lg, ll = _v(g, "waits", "large", "p90_s"), _v(la, "waits", "large", "p90_s")
    if lg is None:
        out.append(("large-job p90 <= half of greedy's", "no jobs >= 64 GPUs", None))
    else:
        n_large = _v(la, "waits", "large", "n")
        p50 = _h(_v(la, "waits", "large", "p50_s")), _h(_v(g, "waits", "large", "p50_s"))
        out.append(("large-job p90 <= half of greedy's",
                    f"{_h(ll)} vs greedy {_h(lg)} (half: {_h(lg / 2)}; over {n_large} jobs, "
                    f"p50 {p50[0]} vs {p50[1]})", ll <= lg / 2))
        ag, al = (_v(g, "waits", "large_allocated", "p90_s"),
                  _v(la, "waits", "large_allocated", "p90_s"))
        if ag is not None and al is not None:
            n_alloc = _v(la, "waits", "large_allocated", "n")
            out.append(("... of allocated large jobs (the gangs a reservation can serve)",
                        f"{_h(al)} vs greedy {_h(ag)} (half: {_h(ag / 2)}; over {n_alloc} jobs)",
                        al <= ag / 2))
    for label, path in (("owed delivered (hourly)", ("owed_delivered", "hourly")),
                        ("worst project (hourly)", ("owed_delivered", "worst_hourly", "value")),
                        ("occupancy (total)", ("occupancy", "total"))):
        a, b = _v(la, *path), _v(n, *path)
        out.append((f"{label} >= ilp without lookahead",
                    f"{_pct(a)} vs {_pct(b)} ({100 * (a - b):+.1f} pt)", a >= b))
    a, b = _v(la, "waits", "debug", "p90_s"), _v(n, "waits", "debug", "p90_s")
    if a is not None and b is not None:
        out.append(("debug p90 <= ilp without lookahead", f"{_h(a)} vs {_h(b)}", a <= b + 1e-6))
    if name == "gangs":
        o = _v(la, "occupancy", "of_limit")
        out.append(("occupancy >= 95% of the occupancy limit", _pct(o), o >= 0.95))
        w = _v(la, "owed_delivered", "worst_period", "value")
        who = _v(la, "owed_delivered", "worst_period", "project")
        out.append(("worst project >= 85% of owed over the period", f"{_pct(w)} ({who})",
                    w >= 0.85))
    return out


def main(paths: list[str]) -> int:
    for p in paths:
        ms = json.loads(Path(p).read_text())
        name = Path(p).stem
        names = [k for k in ("greedy", "ilp", "ilp-lookahead") if k in ms]
        print(f"### {name}\n")
        print("| metric | " + " | ".join(NAMES[k] for k in names) + " |")
        print("|---" * (len(names) + 1) + "|")
        for label, path, kind in ROWS:
            print(f"| {label} | " + " | ".join(fmt(_get(ms[k], path), kind) for k in names)
                  + " |")
        print("| wall | " + " | ".join(f"{ms[k]['wall_s']:.0f} s" for k in names) + " |")
        if len(names) == 3:
            print("\n| bar item | numbers | met |\n|---|---|---|")
            for item, nums, ok in bar(name, ms):
                print(f"| {item} | {nums} | {'n/a' if ok is None else 'yes' if ok else '**no**'} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
