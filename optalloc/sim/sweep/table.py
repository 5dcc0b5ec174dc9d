"""The sweep's tables.

**results**: one row per cell x policy x seed. Columns: `cell` (its index in grid order),
`label` (its overrides), one column per grid axis (named by its key, holding the value as
given), `policy`, `seed`, `status` (ok | failed), `error`, `wall_s`, `host`, then every
metric of `optalloc.sim.metrics.compute_metrics` flattened to dotted names
(`owed_delivered.hourly`, `waits.debug.p90_s`, `projects.B1.delivered_gpu_h`,
`solver.status.optimal`, ...). A failed run's metrics are empty.

**summary**: one row per cell x policy x numeric metric, over the seeds whose run succeeded:
`n`, `mean`, `std` (sample standard deviation, empty for one seed), `min`, `max`.

Columns that measure the machine rather than the policy (`wall_s`, `host` and the solver's
seconds per epoch) differ between two runs of the same sweep; `TIMING_COLUMNS` lists them
(the summary leaves out `wall_s` and `host` only).
"""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from optalloc.sim.sweep.cell import OK
from optalloc.sim.sweep.plan import SweepPlan

TIMING_COLUMNS = (
    "wall_s", "host", "solver.mean_s", "solver.p50_s", "solver.p99_s", "solver.max_s", "solver.total_s",
)
_DUPLICATES = ("policy", "seed")  # already columns of the run


def flatten(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested metrics to {dotted.name: value}, in the metrics' own order."""
    out: dict[str, Any] = {}
    for k, v in metrics.items():
        name = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, f"{name}."))
        else:
            out[name] = v
    return out


def results_table(plan: SweepPlan, records: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """The results table for the plan's runs that have a record (missing ones are left out)."""
    rows, metric_cols = [], {}
    axis_keys = [a.key for a in plan.axes]
    for run in plan.runs:
        rec = records.get(run.key)
        if rec is None:
            continue
        row: dict[str, Any] = {"cell": run.cell.index, "label": run.cell.label(plan.axes)}
        row.update(zip(axis_keys, run.cell.values))
        row.update(policy=run.policy, seed=run.seed, status=rec.get("status"), error=rec.get("error"),
                   wall_s=rec.get("wall_s"), host=rec.get("host"))
        flat = {k: v for k, v in flatten(rec.get("metrics") or {}).items() if k not in _DUPLICATES}
        for k in flat:
            metric_cols.setdefault(k, None)
        row.update(flat)
        rows.append(row)
    head = ["cell", "label", *axis_keys, "policy", "seed", "status", "error", "wall_s", "host"]
    df = pd.DataFrame(rows, columns=head + list(metric_cols))
    for c in metric_cols:  # a column of numbers with gaps is float, not object
        if df[c].map(lambda v: v is None or isinstance(v, (int, float)) and not isinstance(v, bool)).all():
            df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    df["cell"] = df["cell"].astype("int64")
    df["seed"] = df["seed"].astype("int64")
    return df


def metric_columns(table: pd.DataFrame, plan: SweepPlan) -> list[str]:
    """The numeric metric columns (not the run's own columns, not its wall time)."""
    own = {"cell", "label", *(a.key for a in plan.axes), "policy", "seed", "status", "error"}
    return [c for c in table.columns
            if c not in own and c not in ("wall_s", "host") and pd.api.types.is_numeric_dtype(table[c])]


def summary_table(table: pd.DataFrame, plan: SweepPlan) -> pd.DataFrame:
    """Mean and spread over seeds per cell x policy x metric (successful runs only)."""
    axis_keys = [a.key for a in plan.axes]
    group = ["cell", "label", *axis_keys, "policy"]
    cols = metric_columns(table, plan)
    ok = table[table["status"] == OK]
    out_cols = group + ["metric", "n", "mean", "std", "min", "max"]
    if ok.empty or not cols:
        return pd.DataFrame(columns=out_cols)
    long = ok.melt(id_vars=group, value_vars=cols, var_name="metric", value_name="value")
    long = long.dropna(subset=["value"])
    agg = long.groupby(group + ["metric"], sort=False)["value"].agg(["count", "mean", "std", "min", "max"])
    agg = agg.rename(columns={"count": "n"}).reset_index()
    order = {m: i for i, m in enumerate(cols)}
    agg["_m"] = agg["metric"].map(order)
    agg = agg.sort_values(["cell", "policy", "_m"], kind="stable").drop(columns="_m").reset_index(drop=True)
    agg["n"] = agg["n"].astype("int64")
    return agg[out_cols]
