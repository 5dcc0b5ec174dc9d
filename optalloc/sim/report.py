"""Reports of simulated runs: a terminal table, a what-if diff, and a report folder
(summary.json, timeseries.csv, three PNG plots, report.md embedding them, and report.html with
the same content as interactive plotly charts).

Every number comes from `optalloc.sim.metrics` (compute_metrics / time_series / job_waits) and
`optalloc.sim.compare`; report_tables formats them, report_plots draws the PNGs, report_html
the interactive page, and this module writes the folder and report.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from optalloc.statefile import write_atomic
from optalloc.sim.compare import compare, lookup
from optalloc.sim.timeseries import time_series
from optalloc.sim.report_plots import plot_occupancy, plot_owed_delivered, plot_wait_cdf
from optalloc.sim.report_tables import (
    dropped_line,
    format_delta,
    format_diff,
    format_table,
    format_value,
    project_names,
    write_summary,
    write_timeseries_csv,
)
from optalloc.sim.result import SimResult
from optalloc.outdir import make_private_dirs
from optalloc.units import format_duration

__all__ = ["format_delta", "format_diff", "format_table", "format_value", "write_report"]


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def write_report(
    results: Mapping[str, SimResult],
    metrics: Mapping[str, Mapping[str, Any]],
    out_dir: str | Path,
    *,
    dropped: Mapping[str, int] | None = None,
) -> dict[str, Path]:
    """Write summary.json, timeseries.csv, owed_delivered.png, wait_cdf.png, occupancy.png,
    report.md (embedding the PNGs) and report.html (the same, interactive) under out_dir. `results` and `metrics` are keyed by policy
    name (metrics as compute_metrics returns them). `dropped` (the workload's
    `WorkloadSummary.dropped`: reason -> count of trace jobs left out because they cannot run
    on this cluster) goes into summary.json (`jobs_dropped`) and report.md. Returns the paths
    by file name."""
    if not results:
        raise ValueError("write_report needs at least one result")
    out = Path(out_dir)
    make_private_dirs(out)
    series = {p: time_series(r) for p, r in results.items()}
    paths = {
        "summary.json": write_summary(metrics, out / "summary.json", dropped=dropped),
        "timeseries.csv": write_timeseries_csv(series, out / "timeseries.csv"),
        "owed_delivered.png": plot_owed_delivered(series, out / "owed_delivered.png"),
        "wait_cdf.png": plot_wait_cdf(results, out / "wait_cdf.png"),
        "occupancy.png": plot_occupancy(series, out / "occupancy.png"),
    }
    paths["report.md"] = _write_markdown(results, metrics, out / "report.md", dropped)
    from optalloc.sim.report_html import write_html_report  # plotly: only when writing it

    paths["report.html"] = write_html_report(results, metrics, out / "report.html")
    return paths


def _write_markdown(results: Mapping[str, SimResult], metrics: Mapping[str, Mapping[str, Any]], path: Path,
                    dropped: Mapping[str, int] | None = None) -> Path:
    policies = list(metrics)
    first = next(iter(results.values()))
    horizon = format_duration(first.end - first.start)
    lines = [
        f"# Simulation report: {first.scenario}",
        "",
        f"Policies: {', '.join(policies)}. Horizon: {horizon}. Cluster: "
        f"{sum(n.gpus for n in first.config.nodes)} GPUs on {len(first.config.nodes)} nodes. "
        f"Seed: {first.seed}.",
        "",
    ]
    if (line := dropped_line(dropped)) is not None:
        lines += [f"{line[0].upper()}{line[1:]}.", ""]
    lines += [
        "## Headline metrics",
        "",
    ]
    rows = []
    for r in compare(metrics):
        rows.append([r["label"]] + [
            ("**" + format_value(r["values"][p], r["kind"]) + "**") if p in r["best"]
            else format_value(r["values"][p], r["kind"])
            for p in policies
        ])
    lines += [_md_table(["metric", *policies], rows), "", "Bold: best value of the row.", ""]
    projects = project_names(metrics)
    if projects:
        prow = []
        for proj in projects:
            cells = [proj]
            for p in policies:
                v = lookup(metrics[p], f"projects.{proj}") or {}
                cells.append(
                    f"{format_value(v.get('hourly'), 'pct')} / {format_value(v.get('period'), 'pct')} "
                    f"({format_value(v.get('delivered_gpu_h'), 'hours')} of {format_value(v.get('owed_gpu_h'), 'hours')} GPU-h)"
                )
            prow.append(cells)
        lines += ["## Owed GPU-hours delivered per project", "",
                  "hourly / period (delivered of owed allocated GPU-hours).", "",
                  _md_table(["project", *policies], prow), ""]
    lines += [
        "## Owed vs delivered over time", "", "![owed vs delivered](owed_delivered.png)", "",
        "## Wait time by class", "", "![wait CDF](wait_cdf.png)", "",
        "## Occupancy and queue", "", "![occupancy](occupancy.png)", "",
        "## Definitions", "",
        "- owed = min(entitled, demanded) allocated GPU-hours per hour; *hourly* = sum of "
        "min(delivered, owed) / sum of owed (a shortfall is never repaid), *period* = "
        "min(total delivered, total owed) / total owed.",
        "- occupancy = delivered GPU-time / available GPU-time (nodes up); limit = "
        "integral of min(capacity, demand) / integral of capacity.",
        "- waits: submit to first start; jobs never started count as waiting until the horizon "
        "(censored, so percentiles are lower bounds). debug: 0 < min_runtime <= 15 min; large: "
        ">= 64 GPUs or >= 8 nodes; unallocated: min_runtime 0.",
        "- data: summary.json (all metrics), timeseries.csv (hourly series); report.html is "
        "this report with interactive charts.",
        "",
    ]
    write_atomic(path, "\n".join(lines))
    return path
