"""Simulated runs as text and data files: the side-by-side terminal table, the what-if diff,
summary.json and timeseries.csv. Every number comes from optalloc.sim.metrics and
optalloc.sim.compare; this module only formats."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from optalloc.statefile import write_atomic
from optalloc.sim.compare import HEADLINE, compare, lookup
from optalloc.sim.timeseries import TimeSeries
from optalloc.units import format_duration

PLOT_CLASSES = ("debug", "large", "other", "unallocated")  # the wait classes the reports draw
MAX_PROJECT_PANELS = 16


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


def grid(header: Sequence[str], rows: Sequence[Sequence[str]], align_first_left: bool = True) -> str:
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
    out = [grid(["metric", *policies], rows)]
    projects = project_names(metrics_by_policy)
    if projects:
        prow = []
        for proj in projects:
            cells = [proj]
            for p in policies:
                v = lookup(metrics_by_policy[p], f"projects.{proj}") or {}
                cells.append(f"{format_value(v.get('hourly'), 'pct')} / {format_value(v.get('period'), 'pct')}")
            prow.append(cells)
        out.append("")
        out.append(grid(["owed delivered (hourly / period)", *policies], prow))
    return "\n".join(out)


def project_names(metrics_by_policy: Mapping[str, Mapping[str, Any]]) -> list[str]:
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
    out = [grid(["metric", bname, vname, "change"], rows)]
    projects = project_names({"a": base, "b": variant})
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
            grid(
                ["project", "hourly", "", "change", "period", "", "change", "delivered GPU-h", "", "change"],
                prow,
            )
        )
    return "\n".join(out)


def dropped_line(dropped: Mapping[str, int] | None) -> str | None:
    """'trace jobs dropped (cannot run on this cluster): N (reason: n; ...)' when the workload
    left jobs out (`WorkloadSummary.dropped`: reason -> count), else None: the terminal's line
    and report.md's."""
    if not dropped:
        return None
    why = "; ".join(f"{reason}: {n}" for reason, n in dropped.items())
    return f"trace jobs dropped (cannot run on this cluster): {sum(dropped.values())} ({why})"


def write_summary(metrics: Mapping[str, Mapping[str, Any]], path: Path, *,
                  dropped: Mapping[str, int] | None = None) -> Path:
    """summary.json; with `dropped` (reason -> count of workload jobs left out because they
    cannot run on this cluster) also `jobs_dropped: {total, by_reason}`."""
    doc = {"policies": list(metrics), "metrics": metrics, "comparison": compare(metrics)}
    if dropped is not None:
        doc["jobs_dropped"] = {"total": int(sum(dropped.values())), "by_reason": dict(dropped)}
    write_atomic(path, json.dumps(_clean(doc), indent=2, sort_keys=False) + "\n")
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
    f = io.StringIO(newline="")
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
    write_atomic(path, f.getvalue())  # one write, renamed over the path
    return path


def _fmt(x: float) -> str:
    return "" if not np.isfinite(x) else f"{x:.6g}"
