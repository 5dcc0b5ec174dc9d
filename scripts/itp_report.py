"""The tables of results/itp.md from scripts/gangs_compare.py's JSON files (one per scenario).

    python scripts/itp_report.py results/itp/*.json > /tmp/itp-tables.md

One row per scenario and policy (greedy, ilp, ilp with the lookahead), then the per-project
owed-delivered table of each scenario. Every number comes from the JSON: nothing is typed in.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

NAMES = {"priority": "priority", "greedy": "greedy", "ilp": "ilp",
         "ilp-lookahead": "ilp + lookahead"}


sys.path.insert(0, str(Path(__file__).parent))
from gangs_report import _pct as pct, _v as _get, bar as gang_bar  # noqa: E402


def wait(m, cls, count: bool = False) -> str:
    """The class's p90 wait; with `count`, how many jobs it is over (a p90 of 6 jobs is
    about the slowest one)."""
    w = _get(m, "waits", cls)
    if not w or not w.get("n"):
        return "-"
    s = w["p90_s"]
    out = f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.1f} min"
    return f"{out} (n {w['n']})" if count else out


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
        wait(m, "debug"), wait(m, "large", count=True), wait(m, "other"),
        f"{pre.get('per_1000_gpu_h', 0):.2f}", f"{pre.get('lost_gpu_h', 0):,.0f}",
        f"{res.get('kept', 0)} / {res.get('dropped', 0)}" if res.get("made") else "-",
        f"{1000 * solver.get('mean_s', 0):.0f} ms",
        f"{m.get('wall_s', 0):.0f} s",
    ]
    return "| " + " | ".join(cells) + " |"


HEAD = ("| scenario | policy | owed (hourly) | owed (period) | worst project (hourly) | "
        "occupancy / limit (of limit) | demand ratio | debug p90 | large p90 (jobs) | other p90 | "
        "preempt / 1000 GPU-h | GPU-h lost | reservations kept / dropped | solver mean | wall |")


def _p90(m, cls):
    w = _get(m, "waits", cls)
    return w["p90_s"] if w and w.get("n") else None


def scheme_bar(name: str, ms: dict, epoch_s: float = 300.0) -> list[tuple[str, str, bool | None]]:
    """The bar of the issue "Epoch decisions that follow the published scheme exactly": ilp
    against greedy in the same run, each item with its numbers."""
    g, i = ms.get("greedy"), ms.get("ilp")
    if g is None or i is None:
        return []
    out = []
    a, b = _get(i, "owed_delivered", "hourly"), _get(g, "owed_delivered", "hourly")
    out.append(("owed (hourly) >= greedy's and >= 98%", f"{pct(a)} vs {pct(b)}",
                a >= b and a >= 0.98))
    a = _get(i, "owed_delivered", "worst_hourly", "value")
    out.append(("worst project (hourly) >= 95%", pct(a), a >= 0.95))
    a, b = _p90(i, "debug"), _p90(g, "debug")
    if a is None or b is None:
        out.append(("debug p90 <= greedy's and <= 2 epochs", "no debug jobs", None))
    else:
        out.append(("debug p90 <= greedy's and <= 2 epochs",
                    f"{a / 60:.1f} min vs {b / 60:.1f} min (2 epochs: {2 * epoch_s / 60:.0f} min)",
                    a <= b + 1e-6 and a <= 2 * epoch_s))
    a, b = _p90(i, "other"), _p90(g, "other")
    out.append(("other p90 <= greedy's", f"{(a or 0) / 3600:.2f} h vs {(b or 0) / 3600:.2f} h",
                (a or 0) <= (b or 0) + 1e-6))
    a, b = _get(i, "preemptions", "per_1000_gpu_h"), _get(g, "preemptions", "per_1000_gpu_h")
    out.append(("preemptions / 1000 GPU-h <= greedy's", f"{a:.2f} vs {b:.2f}", a <= b + 1e-9))
    a, b = _get(i, "occupancy", "total"), _get(g, "occupancy", "total")
    out.append(("occupancy >= greedy's", f"{pct(a)} vs {pct(b)}", a >= b - 1e-9))
    return out


def bar_table(title: str, rows: list) -> None:
    print(f"\n{title}\n\n| bar item | numbers | met |\n|---|---|---|")
    for item, nums, ok in rows:
        print(f"| {item} | {nums} | {'n/a' if ok is None else 'yes' if ok else '**no**'} |")


def main(paths: list[str]) -> int:
    runs = [(Path(p).stem, json.loads(Path(p).read_text())) for p in paths]
    print(HEAD)
    print("|" + "---|" * (HEAD.count("|") - 1))
    for name, ms in runs:
        for pol in ("priority", "greedy", "ilp", "ilp-lookahead"):
            if pol in ms:
                print(row(name, pol, ms[pol]))
    for name, ms in runs:
        bar_table(f"#### {name}: the scheme's bar (ilp vs greedy)", scheme_bar(name, ms))
        if all(k in ms for k in ("greedy", "ilp", "ilp-lookahead")):
            bar_table(f"#### {name}: the large-gang bar (lookahead)", gang_bar(name, ms))
    for name, ms in runs:
        pols = [p for p in ("greedy", "ilp", "ilp-lookahead") if p in ms]
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
