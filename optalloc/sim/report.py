"""Reports of simulated runs: a terminal table, a what-if diff, and a report folder
(summary.json, timeseries.csv, three PNG plots, report.md embedding them, and report.html with
the same content as interactive plotly charts: see report_html.py).

Every number comes from `optalloc.sim.metrics` (compute_metrics / time_series / job_waits);
this module only formats and draws.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from optalloc.sim.metrics import (
    HEADLINE,
    HOUR,
    TimeSeries,
    compare,
    job_waits,
    lookup,
    time_series,
)
from optalloc.sim.result import SimResult
from optalloc.units import format_duration

PLOT_CLASSES = ("debug", "large", "other", "unallocated")
MAX_PROJECT_PANELS = 16


# --------------------------------------------------------------------------- formatting


def format_value(value: Any, kind: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if kind == "pct":
        return f"{100.0 * value:.1f}%"
    if kind == "seconds":
        return format_duration(value) if value > 0 else "0s"
    if kind == "count":
        return f"{int(value):d}"
    if kind == "hours":
        return f"{value:,.1f}"
    if kind == "ratio":
        return f"{value:.2f}"
    return f"{value:.3g}"


def format_delta(delta: float | None, kind: str) -> str:
    if delta is None or not math.isfinite(delta):
        return "-"
    sign = "+" if delta >= 0 else "-"
    mag = abs(delta)
    if kind == "pct":
        return f"{sign}{100.0 * mag:.1f}pp"
    if kind == "seconds":
        return f"{sign}{format_duration(mag) if mag > 0 else '0s'}"
    if kind == "count":
        return f"{sign}{int(round(mag))}"
    if kind == "hours":
        return f"{sign}{mag:,.1f}"
    return f"{sign}{mag:.3g}"


def _grid(header: Sequence[str], rows: Sequence[Sequence[str]], align_first_left: bool = True) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        out = []
        for i, cell in enumerate(cells):
            out.append(str(cell).ljust(widths[i]) if i == 0 and align_first_left else str(cell).rjust(widths[i]))
        return "  ".join(out).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), sep, *(line(r) for r in rows)])


def format_table(metrics_by_policy: Mapping[str, Mapping[str, Any]]) -> str:
    """Headline metrics side by side (best value per row marked *), then owed delivered per
    project (hourly / period)."""
    policies = list(metrics_by_policy)
    rows = []
    for r in compare(metrics_by_policy):
        cells = [r["label"]]
        for p in policies:
            mark = "*" if p in r["best"] else " "
            cells.append(format_value(r["values"][p], r["kind"]) + mark)
        rows.append(cells)
    out = [_grid(["metric", *policies], rows)]
    projects = _project_names(metrics_by_policy)
    if projects:
        prow = []
        for proj in projects:
            cells = [proj]
            for p in policies:
                v = lookup(metrics_by_policy[p], f"projects.{proj}") or {}
                cells.append(f"{format_value(v.get('hourly'), 'pct')} / {format_value(v.get('period'), 'pct')}")
            prow.append(cells)
        out.append("")
        out.append(_grid(["owed delivered (hourly / period)", *policies], prow))
    return "\n".join(out)


def _project_names(metrics_by_policy: Mapping[str, Mapping[str, Any]]) -> list[str]:
    names: list[str] = []
    for m in metrics_by_policy.values():
        for p in (m.get("projects") or {}):
            if p not in names:
                names.append(p)
    return names


def format_diff(base: Mapping[str, Any], variant: Mapping[str, Any]) -> str:
    """What-if: every headline metric and every project's owed delivered, base vs variant and
    the difference (percentage points for fractions)."""
    bname = str(base.get("policy") or "base")
    vname = str(variant.get("policy") or "variant")
    if bname == vname:
        bname, vname = f"{bname} (base)", f"{vname} (variant)"
    rows = []
    for row in HEADLINE:
        a, b = lookup(base, row.key), lookup(variant, row.key)
        delta = b - a if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None
        rows.append([row.label, format_value(a, row.kind), format_value(b, row.kind), format_delta(delta, row.kind)])
    out = [_grid(["metric", bname, vname, "change"], rows)]
    projects = _project_names({"a": base, "b": variant})
    if projects:
        prow = []
        for proj in projects:
            pa = lookup(base, f"projects.{proj}") or {}
            pb = lookup(variant, f"projects.{proj}") or {}
            cells = [proj]
            for key, kind in (("hourly", "pct"), ("period", "pct"), ("delivered_gpu_h", "hours")):
                a, b = pa.get(key), pb.get(key)
                delta = b - a if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None
                cells += [format_value(a, kind), format_value(b, kind), format_delta(delta, kind)]
            prow.append(cells)
        out.append("")
        out.append(
            _grid(
                ["project", "hourly", "", "change", "period", "", "change", "delivered GPU-h", "", "change"],
                prow,
            )
        )
    return "\n".join(out)


# --------------------------------------------------------------------------- files


def write_summary(metrics: Mapping[str, Mapping[str, Any]], path: Path) -> Path:
    doc = {"policies": list(metrics), "metrics": metrics, "comparison": compare(metrics)}
    path.write_text(json.dumps(_clean(doc), indent=2, sort_keys=False) + "\n")
    return path


def _clean(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def write_timeseries_csv(series: Mapping[str, TimeSeries], path: Path) -> Path:
    """One row per policy and bin: time, occupancy, demand ratio, capacity, queue length, and
    delivered / owed GPU-hours of every project."""
    projects: list[str] = []
    for ts in series.values():
        projects += [p for p in ts.projects if p not in projects]
    header = ["policy", "start_s", "hour", "occupancy_allocated", "occupancy_total", "demand_ratio",
              "capacity_gpus", "queue_length"]
    header += [f"delivered_gpu_h:{p}" for p in projects] + [f"owed_gpu_h:{p}" for p in projects]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for policy, ts in series.items():
            pos = {p: i for i, p in enumerate(ts.projects)}
            for h in range(len(ts.edges) - 1):
                row = [policy, f"{ts.edges[h]:.0f}", f"{ts.hours[h]:g}",
                       _fmt(ts.occupancy_allocated[h]), _fmt(ts.occupancy_total[h]),
                       _fmt(ts.demand_ratio[h]), _fmt(ts.capacity[h]), _fmt(ts.queue_length[h])]
                row += [_fmt(ts.delivered_h[pos[p], h]) if p in pos else "" for p in projects]
                row += [_fmt(ts.owed_h[pos[p], h]) if p in pos else "" for p in projects]
                w.writerow(row)
    return path


def _fmt(x: float) -> str:
    return "" if not np.isfinite(x) else f"{x:.6g}"


# --------------------------------------------------------------------------- plots


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _bin_factor(ts: TimeSeries) -> tuple[int, str]:
    """Aggregate hourly bins to days when the horizon is longer than a week."""
    horizon_h = (ts.edges[-1] - ts.edges[0]) / HOUR
    return (24, "day") if horizon_h > 7 * 24 else (1, "hour")


def _coarsen(values: np.ndarray, k: int) -> np.ndarray:
    """Mean over groups of k consecutive bins along the last axis (the tail group may be short)."""
    if k == 1:
        return values
    n = values.shape[-1]
    groups = np.arange(n) // k
    m = groups[-1] + 1 if n else 0
    flat = values.reshape(-1, n)
    out = np.empty((flat.shape[0], m))
    for i, row in enumerate(flat):
        ok = np.isfinite(row)
        sums = np.bincount(groups[ok], weights=row[ok], minlength=m)
        cnt = np.bincount(groups[ok], minlength=m)
        out[i] = np.where(cnt > 0, sums / np.maximum(cnt, 1), np.nan)
    return out.reshape(values.shape[:-1] + (m,))


def plot_owed_delivered(series: Mapping[str, TimeSeries], path: Path) -> Path:
    """Per project (the most-owed first): delivered (solid) vs owed (dashed) mean GPUs per bin."""
    plt = _plt()
    first = next(iter(series.values()))
    k, unit = _bin_factor(first)
    owed_tot = sum(ts.owed_h.sum(axis=1) for ts in series.values())
    order = [first.projects[i] for i in np.argsort(-owed_tot, kind="stable")][:MAX_PROJECT_PANELS]
    n = max(1, len(order))
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.6 * rows), squeeze=False, sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax_i, proj in enumerate(order):
        ax = axes[ax_i // cols][ax_i % cols]
        for pi, (policy, ts) in enumerate(series.items()):
            if proj not in ts.projects:
                continue
            j = ts.projects.index(proj)
            x = _coarsen(ts.hours, k) / (24 if unit == "day" else 1)
            c = colors[pi % len(colors)]
            ax.plot(x, _coarsen(ts.delivered_h[j], k), color=c, lw=1.2, label=f"{policy} delivered")
            ax.plot(x, _coarsen(ts.owed_h[j], k), color=c, lw=1.0, ls="--", label=f"{policy} owed")
        ax.set_title(proj, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax_i in range(len(order), rows * cols):
        axes[ax_i // cols][ax_i % cols].axis("off")
    for ax in axes[-1]:
        ax.set_xlabel(f"time ({unit}s)", fontsize=8)
    for row in axes:
        row[0].set_ylabel("GPUs (mean)", fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8, frameon=False)
    fig.suptitle("Owed vs delivered allocated GPUs per project", fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 0.96))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_wait_cdf(results: Mapping[str, SimResult], path: Path) -> Path:
    """CDF of wait (submit -> first start, censored at the horizon) per class, one line per
    policy, log time axis."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(PLOT_CLASSES), figsize=(4 * len(PLOT_CLASSES), 3.2), squeeze=False)
    for ci, cls in enumerate(PLOT_CLASSES):
        ax = axes[0][ci]
        drew = False
        for policy, res in results.items():
            w = job_waits(res)
            x = np.sort(w["wait_s"][w["cls"] == cls])
            if len(x) == 0:
                continue
            y = np.arange(1, len(x) + 1) / len(x)
            ax.step(np.maximum(x, 1.0), y, where="post", label=f"{policy} (n={len(x)})")
            drew = True
        ax.set_xscale("log")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{cls} jobs", fontsize=10)
        ax.set_xlabel("wait (s, log; never started = censored at horizon)", fontsize=7)
        ax.grid(alpha=0.3)
        if drew:
            ax.legend(fontsize=7, loc="lower right")
        else:
            ax.text(0.5, 0.5, "no jobs", ha="center", va="center", transform=ax.transAxes)
    axes[0][0].set_ylabel("fraction of jobs")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_occupancy(series: Mapping[str, TimeSeries], path: Path) -> Path:
    """Total and allocated occupancy over time per policy against the occupancy limit
    min(1, demand ratio); queue length below."""
    plt = _plt()
    first = next(iter(series.values()))
    k, unit = _bin_factor(first)
    fig, (ax, axq) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for pi, (policy, ts) in enumerate(series.items()):
        x = _coarsen(ts.hours, k) / (24 if unit == "day" else 1)
        c = colors[pi % len(colors)]
        ax.plot(x, _coarsen(ts.occupancy_total, k), color=c, lw=1.3, label=f"{policy} total")
        ax.plot(x, _coarsen(ts.occupancy_allocated, k), color=c, lw=1.0, ls=":", label=f"{policy} allocated")
        ax.plot(x, _coarsen(np.minimum(1.0, ts.demand_ratio), k), color=c, lw=0.8, ls="--", alpha=0.6,
                label=f"{policy} limit min(1, demand ratio)")
        axq.plot(x, _coarsen(ts.queue_length, k), color=c, lw=1.0, label=policy)
    ax.set_ylabel("occupancy")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=3, loc="lower right")
    axq.set_ylabel("queued jobs (mean)")
    axq.set_xlabel(f"time ({unit}s)")
    axq.grid(alpha=0.3)
    axq.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- report


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def write_report(
    results: Mapping[str, SimResult],
    metrics: Mapping[str, Mapping[str, Any]],
    out_dir: str | Path,
) -> dict[str, Path]:
    """Write summary.json, timeseries.csv, owed_delivered.png, wait_cdf.png, occupancy.png,
    report.md (embedding the PNGs) and report.html (the same, interactive) under out_dir. `results` and `metrics` are keyed by policy
    name (metrics as compute_metrics returns them). Returns the paths by file name."""
    if not results:
        raise ValueError("write_report needs at least one result")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    series = {p: time_series(r) for p, r in results.items()}
    paths = {
        "summary.json": write_summary(metrics, out / "summary.json"),
        "timeseries.csv": write_timeseries_csv(series, out / "timeseries.csv"),
        "owed_delivered.png": plot_owed_delivered(series, out / "owed_delivered.png"),
        "wait_cdf.png": plot_wait_cdf(results, out / "wait_cdf.png"),
        "occupancy.png": plot_occupancy(series, out / "occupancy.png"),
    }
    paths["report.md"] = _write_markdown(results, metrics, out / "report.md")
    from optalloc.sim.report_html import write_html_report

    paths["report.html"] = write_html_report(results, metrics, out / "report.html")
    return paths


def _write_markdown(results: Mapping[str, SimResult], metrics: Mapping[str, Mapping[str, Any]], path: Path) -> Path:
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
    projects = _project_names(metrics)
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
        ">= 64 GPUs; unallocated: min_runtime 0.",
        "- data: summary.json (all metrics), timeseries.csv (hourly series); report.html is "
        "this report with interactive charts.",
        "",
    ]
    path.write_text("\n".join(lines))
    return path
