"""Policies side by side: the headline metrics (a dotted key into `compute_metrics`' dict, a
label, a kind for formatting, which direction is better) and the rows of a comparison table
that the terminal, Markdown, HTML and sweep reports print."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class MetricRow:
    key: str  # dotted path into compute_metrics' dict
    label: str
    kind: str  # pct | ratio | seconds | count | float | hours
    better: str = ""  # "higher" | "lower" | "" (no direction)


HEADLINE: tuple[MetricRow, ...] = (
    MetricRow("owed_delivered.hourly", "owed delivered (hourly)", "pct", "higher"),
    MetricRow("owed_delivered.period", "owed delivered (period)", "pct", "higher"),
    MetricRow("owed_delivered.worst_hourly.value", "worst project (hourly)", "pct", "higher"),
    MetricRow("owed_delivered.worst_period.value", "worst project (period)", "pct", "higher"),
    MetricRow("occupancy.allocated", "occupancy (allocated)", "pct", "higher"),
    MetricRow("occupancy.total", "occupancy (total)", "pct", "higher"),
    MetricRow("occupancy.limit", "occupancy limit", "pct", ""),
    MetricRow("occupancy.of_limit", "occupancy / limit", "pct", "higher"),
    MetricRow("demand_ratio", "demand ratio", "ratio", ""),
    MetricRow("unallocated_share", "unallocated share", "pct", ""),
    MetricRow("waits.debug.p50_s", "debug wait p50", "seconds", "lower"),
    MetricRow("waits.debug.p90_s", "debug wait p90", "seconds", "lower"),
    MetricRow("waits.debug.p99_s", "debug wait p99", "seconds", "lower"),
    MetricRow("waits.large.p50_s", "large wait p50", "seconds", "lower"),
    MetricRow("waits.large.p90_s", "large wait p90", "seconds", "lower"),
    MetricRow("waits.other.p50_s", "other wait p50", "seconds", "lower"),
    MetricRow("waits.other.p90_s", "other wait p90", "seconds", "lower"),
    MetricRow("waits.all.p99_s", "all wait p99", "seconds", "lower"),
    MetricRow("preemptions.per_1000_gpu_h", "preemptions / 1000 GPU-h", "float", "lower"),
    MetricRow("preemptions.lost_gpu_h", "GPU-h lost to preemption", "hours", "lower"),
    MetricRow("reservations.kept", "reservations kept", "count", ""),
    MetricRow("reservations.dropped", "reservations dropped", "count", "lower"),
    MetricRow("reservations.idle_gpu_h", "GPU-h held idle by reservations", "hours", ""),
    MetricRow("solver.mean_s", "solver s/epoch (mean)", "float", "lower"),
    MetricRow("solver.p99_s", "solver s/epoch (p99)", "float", "lower"),
    MetricRow("solver.max_s", "solver s/epoch (max)", "float", "lower"),
    MetricRow("jobs.completed", "jobs completed", "count", "higher"),
)


def lookup(metrics: Mapping[str, Any], key: str) -> Any:
    """The value at a dotted path (None when absent)."""
    cur: Any = metrics
    for part in key.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def compare(
    metrics_by_policy: Mapping[str, Mapping[str, Any]], rows: Sequence[MetricRow] = HEADLINE
) -> list[dict[str, Any]]:
    """Side-by-side rows: {"key", "label", "kind", "better", "values": {policy: value}, "best":
    [policies with the best value]} for each headline metric."""
    out = []
    for row in rows:
        values = {p: lookup(m, row.key) for p, m in metrics_by_policy.items()}
        nums = {p: v for p, v in values.items() if isinstance(v, (int, float)) and math.isfinite(v)}
        best: list[str] = []
        if row.better and len(nums) > 1:
            target = max(nums.values()) if row.better == "higher" else min(nums.values())
            best = [p for p, v in nums.items() if math.isclose(v, target, rel_tol=1e-9, abs_tol=1e-12)]
        out.append(
            {"key": row.key, "label": row.label, "kind": row.kind, "better": row.better,
             "values": values, "best": best}
        )
    return out
