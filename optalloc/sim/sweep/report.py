"""The sweep's summary as text: a terminal table of a few headline metrics and `summary.md`
with all of them, each `mean ± sd` over seeds (`optalloc.sim.report_tables.format_value` formats the
numbers, so a sweep reads like `optalloc simulate`)."""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from optalloc.sim.compare import HEADLINE, MetricRow
from optalloc.sim.report_tables import format_value
from optalloc.sim.sweep.grid import format_seeds
from optalloc.sim.sweep.plan import SweepPlan

TERMINAL = (
    "owed_delivered.hourly",
    "owed_delivered.worst_hourly.value",
    "occupancy.of_limit",
    "waits.debug.p90_s",
    "waits.large.p90_s",
    "preemptions.per_1000_gpu_h",
)
_ROWS = {r.key: r for r in HEADLINE}


def _cell(mean: float | None, sd: float | None, kind: str) -> str:
    if mean is None or not math.isfinite(mean):
        return "-"
    text = format_value(mean, kind)
    if sd is not None and math.isfinite(sd) and sd > 0:
        text += f" ± {format_value(sd, kind)}"
    return text


def summary_rows(plan: SweepPlan, summary: pd.DataFrame, metrics: Sequence[MetricRow]) -> tuple[list[str], list[list[str]]]:
    header = ["cell", "policy"] + [m.label for m in metrics]
    stats = {(c, p, m): (mean, sd) for c, p, m, mean, sd in
             zip(summary["cell"], summary["policy"], summary["metric"], summary["mean"], summary["std"])}
    counts = {(c, p): n for c, p, n in zip(summary["cell"], summary["policy"], summary["n"])}
    rows = []
    for cell in plan.cells:
        for policy in plan.policies:
            n = counts.get((cell.index, policy), 0)
            label = cell.label(plan.axes) + ("" if n == len(plan.seeds) else f" ({n}/{len(plan.seeds)} seeds)")
            rows.append([label, policy] + [_cell(*stats.get((cell.index, policy, m.key), (None, None)), m.kind)
                                           for m in metrics])
    return header, rows


def format_summary(plan: SweepPlan, summary: pd.DataFrame, keys: Sequence[str] = TERMINAL) -> str:
    header, rows = summary_rows(plan, summary, [_ROWS[k] for k in keys])
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths)))]
    for r in rows:
        lines.append("  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)


def markdown_summary(plan: SweepPlan, summary: pd.DataFrame, table: pd.DataFrame, plots: Sequence[str]) -> str:
    header, rows = summary_rows(plan, summary, HEADLINE)
    out = [
        f"# Sweep: {plan.scenario}",
        "",
        f"{plan.size()}: policies {', '.join(plan.policies)}, seeds {format_seeds(plan.seeds)}"
        + (f"; every cell also sets {', '.join(plan.fixed)}" if plan.fixed else "") + ".",
        "Values are the mean ± sample standard deviation over seeds. Every metric of every run: "
        "`results.parquet` / `results.csv`; mean, sd, min and max of each: `summary.parquet` / `summary.csv`.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    failed = table[table["status"] != "ok"]
    if len(failed):
        out += ["", "## Failed runs (run the same command again to retry them)", ""]
        out += [f"- cell {r.cell} [{r.label}], {r.policy}, seed {r.seed}: {r.error}" for r in failed.itertuples()]
    if plots:
        out += ["", "## Plots", ""] + [f"- [{p}]({p})" for p in plots]
    return "\n".join(out) + "\n"
