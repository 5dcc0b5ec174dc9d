"""The simulator's metrics (DESIGN.md section 6), defined once here and reused by every report.

All quantities come from one `SimResult` over its horizon [start, end]:

* **owed delivered** (per project and overall, hourly and period forms) and the worst project:
  the ledger's `Ledger.owed_delivered` (`optalloc/ledger/owed.py` has the formulas): owed =
  min(entitled, demanded) GPU-hours per hour, delivered = allocated GPU-hours.
* **occupancy** = allocated GPU-time / available GPU-time, where available = integral of the
  GPUs on nodes that are up (`SimResult.capacity`); **total occupancy** adds unallocated
  GPU-time. (Jobs finishing on a draining node are delivered but not available, so occupancy can
  exceed 1 while nodes drain.)
* **demand ratio** = time-average over the horizon of D(t) / C(t), D = GPUs asked by queued +
  running jobs (all, unallocated included), C = available GPUs; instants with C = 0 are left out.
* **occupancy limit** = integral of min(C, D) / integral of C: the most GPU-time any policy
  could deliver. With constant capacity it is the time-average of min(1, demand ratio)
  (DESIGN.md); weighting by capacity keeps total occupancy <= limit when nodes go down.
  `occupancy.of_limit` = total occupancy / limit.
* **unallocated share** = unallocated GPU-time / all delivered GPU-time.
* **waits** (submit -> first start) p50/p90/p99 by class: *debug* (0 < min_runtime <= 15 min),
  *large* (>= 64 GPUs or >= 8 nodes), *unallocated* (min_runtime 0), *other*; and *all*; plus
  *large_allocated*, the large jobs with min_runtime > 0 (the gangs a reservation can serve: a
  large unallocated job runs only on GPUs no allocated job wants, so its wait measures idle
  capacity, not the scheduler's service to gangs), split into *large_within_share* (the gang's
  GPUs fit its project's entitled GPUs on the whole cluster) and *large_beyond_share* (they do
  not: it can run only on share its project saved over the window or others left unused). Jobs never started
  are censored at the horizon: their wait counts as `end - submit` (a lower bound, so the
  percentiles are lower bounds too); `n_censored` says how many. Jobs submitted before the
  horizon (a scenario that starts from a live queue) wait from `start`: the run cannot change
  what happened before it. Percentiles are numpy's linear interpolation.
* **preemptions** per 1000 delivered GPU-hours (allocated + unallocated); GPU-hours lost to
  preemption (work since the last checkpoint, from the engine's `JobRecord.lost_gpu_s`).
* **solver** seconds per epoch (mean, p50, p99, max) and the largest reported gap.
* **reservations** (the lookahead for large gangs): made (distinct reservations), kept (its
  gang started while it held the reservation), dropped (by reason: cancelled, outranked,
  order, unplaceable, off), still open at the end; GPU-hours held idle by them (each plan's
  `Reservation.idle_gpus`, the GPUs of its nodes nobody uses after that plan, until the next
  decision) and that as a share of the available GPU-hours; hours from a kept reservation's
  first epoch to its gang's start (mean, max).
* **jobs** submitted, started, completed.

`compute_metrics` returns a JSON-ready dict (undefined values are None);
`optalloc.sim.timeseries.time_series` the hourly series behind the plots (optalloc.sim.compare
puts policies side by side).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from optalloc.ledger import Ledger, OwedDelivered
from optalloc.org import OrgTree
from optalloc.sim.result import SimResult

DEBUG_MAX_MIN_RUNTIME_S = 15 * 60.0
LARGE_GPUS = 64
LARGE_NODES = 8  # DESIGN.md section 6: large is >= 64 GPUs or >= 8 nodes (as the lookahead's)
WAIT_CLASSES = ("debug", "large", "other", "unallocated", "all")
HOUR = 3600.0


# --------------------------------------------------------------------------- columns


@dataclass(frozen=True, eq=False)
class _Columns:
    """The SimResult as arrays, clipped to the horizon."""

    start: float
    end: float
    iv_start: np.ndarray
    iv_end: np.ndarray
    iv_gpus: np.ndarray
    iv_alloc: np.ndarray
    iv_project: np.ndarray  # index into `projects`, -1 unknown
    projects: tuple[str, ...]
    cap_t: np.ndarray  # (K,) sorted
    cap_total: np.ndarray  # (K,) GPUs up, all types
    dem_t: np.ndarray  # (M,) sorted
    dem_total: np.ndarray  # (M,) GPUs asked, all jobs


def _columns(result: SimResult, projects: Sequence[str]) -> _Columns:
    ivs = result.intervals
    n = len(ivs)
    pidx = {p: i for i, p in enumerate(projects)}
    s = np.fromiter((iv.start for iv in ivs), np.float64, n)
    e = np.fromiter((iv.end for iv in ivs), np.float64, n)
    s = np.clip(s, result.start, result.end)
    e = np.clip(e, result.start, result.end)
    cap = sorted(result.capacity, key=lambda c: c.time)
    dem = sorted(result.demand, key=lambda d: d.time)
    return _Columns(
        start=float(result.start),
        end=float(result.end),
        iv_start=s,
        iv_end=np.maximum(e, s),
        iv_gpus=np.fromiter((iv.gpus for iv in ivs), np.float64, n),
        iv_alloc=np.fromiter((iv.allocated for iv in ivs), bool, n),
        iv_project=np.fromiter((pidx.get(iv.project, -1) for iv in ivs), np.int64, n),
        projects=tuple(projects),
        cap_t=np.array([c.time for c in cap], dtype=np.float64),
        cap_total=np.array([sum(c.by_type.values()) for c in cap], dtype=np.float64),
        dem_t=np.array([d.time for d in dem], dtype=np.float64),
        dem_total=np.array([d.total_gpus for d in dem], dtype=np.float64),
    )


def build_ledger(result: SimResult) -> Ledger:
    """A ledger holding the run's intervals, demand and capacity samples."""
    cfg = result.config
    tree = OrgTree.build(cfg.org, [g.name for g in cfg.gpu_types])
    ledger = Ledger(cfg.gpu_types, tree, cfg.policy)
    ledger.record_intervals(result.intervals)
    for c in sorted(result.capacity, key=lambda c: c.time):
        ledger.record_capacity(c.time, c.by_type)
    for d in sorted(result.demand, key=lambda d: d.time):
        ledger.record_demand(d.time, d.allocated_by_project, d.placeable_by_project)
    return ledger


def owed_delivered(result: SimResult, step: float = HOUR) -> OwedDelivered:
    return build_ledger(result).owed_delivered(result.start, result.end, step)


def _edges(start: float, end: float, step: float) -> np.ndarray:
    n_bins = max(1, int(math.ceil((end - start) / step - 1e-9)))
    edges = np.minimum(start + step * np.arange(n_bins + 1), end)
    edges[-1] = end
    return edges


def _step_at(times: np.ndarray, values: np.ndarray, at: np.ndarray, before: float | None) -> np.ndarray:
    """Right-continuous step function at `at`; before the first time: `before` (None: first value)."""
    if len(times) == 0:
        return np.zeros(len(at))
    k = np.searchsorted(times, at, side="right") - 1
    out = values[np.maximum(k, 0)]
    first = values[0] if before is None else before
    return np.where(k >= 0, out, first)


def _capacity_demand_integrals(c: _Columns) -> dict[str, float]:
    """Exact integrals over [start, end] of C, D, min(C, D) and the time-average of D / C."""
    times = np.concatenate([c.cap_t, c.dem_t])
    pts = np.union1d([c.start, c.end], times[(times > c.start) & (times < c.end)])
    left, width = pts[:-1], np.diff(pts)
    cap = _step_at(c.cap_t, c.cap_total, left, None)
    dem = _step_at(c.dem_t, c.dem_total, left, 0.0)
    up = cap > 0
    ratio_time = float(width[up].sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(up, dem / np.where(up, cap, 1.0), 0.0)
    return {
        "capacity_s": float(np.sum(cap * width)),
        "demand_s": float(np.sum(dem * width)),
        "limit_s": float(np.sum(np.minimum(cap, dem) * width)),
        "demand_ratio": float(np.sum(ratio * width) / ratio_time) if ratio_time > 0 else math.nan,
    }


# --------------------------------------------------------------------------- waits


def wait_classes(min_runtime_s: np.ndarray, gpus: np.ndarray,
                 nodes: np.ndarray | None = None) -> np.ndarray:
    """Class name per job: debug (0 < min_runtime <= 15 min) first, then large (>= 64 GPUs or
    >= 8 nodes: `nodes`, the nodes each spans, None for one each), then unallocated
    (min_runtime 0), else other."""
    mr = np.asarray(min_runtime_s, dtype=np.float64)
    g = np.asarray(gpus)
    large = g >= LARGE_GPUS
    if nodes is not None:
        large = large | (np.asarray(nodes) >= LARGE_NODES)
    return np.where(
        (mr > 0) & (mr <= DEBUG_MAX_MIN_RUNTIME_S),
        "debug",
        np.where(large, "large", np.where(mr <= 0, "unallocated", "other")),
    )


def job_waits(result: SimResult) -> dict[str, np.ndarray]:
    """Per job submitted by the end of the horizon: wait seconds (from max(submit, start);
    censored at the horizon), whether it is censored, and its class."""
    jobs = [j for j in result.jobs if j.submit_time <= result.end]
    n = len(jobs)
    submit = np.maximum(np.fromiter((j.submit_time for j in jobs), np.float64, n), result.start)
    first = np.fromiter((np.nan if j.first_start is None else j.first_start for j in jobs), np.float64, n)
    censored = np.isnan(first)
    wait = np.where(censored, result.end - submit, first - submit)
    cls = wait_classes(
        np.fromiter((j.min_runtime_s for j in jobs), np.float64, n),
        np.fromiter((j.gpus for j in jobs), np.int64, n),
        np.fromiter((j.nodes for j in jobs), np.int64, n),
    )
    allocated = np.fromiter((j.min_runtime_s > 0 for j in jobs), bool, n)
    return {"wait_s": np.maximum(wait, 0.0), "censored": censored, "cls": cls,
            "allocated": allocated, "gpus": np.fromiter((j.gpus for j in jobs), np.int64, n),
            "project": np.array([j.project for j in jobs], dtype=object)}


def entitled_gpus(result: SimResult) -> dict[str, float]:
    """Each project's entitled GPUs on the whole configured cluster (its share of every
    type's GPUs, summed)."""
    cfg = result.config
    types = [g.name for g in cfg.gpu_types]
    tree = OrgTree.build(cfg.org, types)
    cap = np.zeros(len(types))
    for nd in cfg.nodes:
        cap[types.index(nd.gpu_type)] += nd.gpus
    ent = tree.entitlement @ cap
    return {nm: float(ent[i]) for i, nm in enumerate(tree.names)}


def _wait_stats(wait: np.ndarray, censored: np.ndarray) -> dict[str, Any]:
    if len(wait) == 0:
        return {"n": 0, "n_censored": 0, "mean_s": None, "p50_s": None, "p90_s": None, "p99_s": None, "max_s": None}
    p50, p90, p99 = np.percentile(wait, [50, 90, 99])
    return {
        "n": int(len(wait)),
        "n_censored": int(censored.sum()),
        "mean_s": float(wait.mean()),
        "p50_s": float(p50),
        "p90_s": float(p90),
        "p99_s": float(p99),
        "max_s": float(wait.max()),
    }


# --------------------------------------------------------------------------- metrics


def reservation_stats(result: SimResult) -> dict[str, Any]:
    """The lookahead's reservations over the run (module doc); zeros for a policy that makes
    none."""
    epochs = sorted(result.epochs, key=lambda e: e.time)
    idle_s = 0.0
    made: set = set()
    open_now: set = set()
    kept, dropped, waits = 0, {}, []
    for i, e in enumerate(epochs):
        nxt = epochs[i + 1].time if i + 1 < len(epochs) else result.end
        dt = max(0.0, min(nxt, result.end) - max(e.time, result.start))
        idle_s += dt * sum(r.idle_gpus for r in e.reservations)
        for r in e.reservations_ended:
            key = (r.job_id, r.since)
            made.add(key)
            open_now.discard(key)
            if r.outcome == "started":
                kept += 1
                if r.since is not None:
                    waits.append(e.time - r.since)
            else:
                dropped[r.outcome] = dropped.get(r.outcome, 0) + 1
        for r in e.reservations:
            made.add((r.job_id, r.since))
        open_now = {(r.job_id, r.since) for r in e.reservations}
    return {
        "made": len(made),
        "kept": kept,
        "dropped": int(sum(dropped.values())),
        "dropped_by": dropped,
        "open_at_end": len(open_now),
        "idle_gpu_h": idle_s / HOUR,
        "held_to_start_mean_h": float(np.mean(waits)) / HOUR if waits else None,
        "held_to_start_max_h": float(np.max(waits)) / HOUR if waits else None,
    }


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _ratio(num: float, den: float) -> float | None:
    return float(num / den) if den > 0 else None


def compute_metrics(result: SimResult) -> dict[str, Any]:
    """Every DESIGN.md section 6 metric of one run, JSON-ready (None where undefined)."""
    od = owed_delivered(result)
    c = _columns(result, od.projects)
    integ = _capacity_demand_integrals(c)
    dur = c.iv_gpus * (c.iv_end - c.iv_start)  # GPU-seconds per interval
    alloc_s = float(dur[c.iv_alloc].sum())
    unalloc_s = float(dur[~c.iv_alloc].sum())
    delivered_s = alloc_s + unalloc_s
    cap_s = integ["capacity_s"]

    occ_alloc = _ratio(alloc_s, cap_s)
    occ_total = _ratio(delivered_s, cap_s)
    limit = _ratio(integ["limit_s"], cap_s)

    per_proj = od.by_project()
    unalloc_by_proj = np.bincount(
        np.maximum(c.iv_project[~c.iv_alloc], 0),
        weights=np.where(c.iv_project[~c.iv_alloc] >= 0, dur[~c.iv_alloc], 0.0),
        minlength=len(od.projects),
    )
    projects = {
        p: {
            "owed_gpu_h": v["owed_gpu_h"],
            "delivered_gpu_h": v["delivered_gpu_h"],
            "hourly": _num(v["hourly"]),
            "period": _num(v["period"]),
            "unallocated_gpu_h": float(unalloc_by_proj[i] / HOUR),
        }
        for i, (p, v) in enumerate(per_proj.items())
    }
    worst_h, worst_h_v = od.worst("hourly")
    worst_p, worst_p_v = od.worst("period")

    w = job_waits(result)
    waits = {}
    for k in WAIT_CLASSES:
        sel = np.ones(len(w["cls"]), dtype=bool) if k == "all" else w["cls"] == k
        waits[k] = _wait_stats(w["wait_s"][sel], w["censored"][sel])
    # the large jobs a reservation can serve: allocated gangs (unallocated work, large or not,
    # runs only on GPUs no allocated job wants, so its wait measures idle capacity)
    sel = (w["cls"] == "large") & w["allocated"]
    waits["large_allocated"] = _wait_stats(w["wait_s"][sel], w["censored"][sel])
    # ... split by whether the gang fits its project's entitled GPUs: one that does not runs
    # only on share its project saved or others left unused (the budget over the window)
    ent = entitled_gpus(result)
    within = np.array([g <= ent.get(p, 0.0) + 1e-9 for g, p in zip(w["gpus"], w["project"])],
                      dtype=bool)
    for k, m in (("large_within_share", sel & within), ("large_beyond_share", sel & ~within)):
        waits[k] = _wait_stats(w["wait_s"][m], w["censored"][m])

    n_pre = int(sum(j.preemptions for j in result.jobs))
    lost_s = float(sum(j.lost_gpu_s for j in result.jobs))
    solve = np.array([e.solve_s for e in result.epochs], dtype=np.float64)
    gaps = [e.gap for e in result.epochs if e.gap is not None and math.isfinite(e.gap)]
    statuses: dict[str, int] = {}
    for e in result.epochs:
        statuses[e.status] = statuses.get(e.status, 0) + 1

    return {
        "policy": result.policy,
        "scenario": result.scenario,
        "seed": result.seed,
        "horizon_h": (result.end - result.start) / HOUR,
        "owed_delivered": {
            "hourly": _num(od.hourly_overall()),
            "period": _num(od.period_overall()),
            "worst_hourly": {"project": worst_h, "value": _num(worst_h_v)},
            "worst_period": {"project": worst_p, "value": _num(worst_p_v)},
        },
        "projects": projects,
        "occupancy": {
            "allocated": occ_alloc,
            "total": occ_total,
            "limit": limit,
            "of_limit": _ratio(occ_total, limit) if occ_total is not None and limit else None,
        },
        "demand_ratio": _num(integ["demand_ratio"]),
        "unallocated_share": _ratio(unalloc_s, delivered_s),
        "gpu_hours": {
            "available": cap_s / HOUR,
            "demanded": integ["demand_s"] / HOUR,
            "delivered": delivered_s / HOUR,
            "allocated": alloc_s / HOUR,
            "unallocated": unalloc_s / HOUR,
        },
        "waits": waits,
        "preemptions": {
            "count": n_pre,
            "per_1000_gpu_h": _ratio(n_pre * 1000.0, delivered_s / HOUR),
            "lost_gpu_h": lost_s / HOUR,
        },
        "solver": {
            "epochs": int(len(solve)),
            "mean_s": float(solve.mean()) if len(solve) else None,
            "p50_s": float(np.percentile(solve, 50)) if len(solve) else None,
            "p99_s": float(np.percentile(solve, 99)) if len(solve) else None,
            "max_s": float(solve.max()) if len(solve) else None,
            "total_s": float(solve.sum()),
            "max_gap": max(gaps) if gaps else None,
            "status": statuses,
        },
        "reservations": {**(res := reservation_stats(result)),
                         "idle_share": _ratio(res["idle_gpu_h"] * HOUR, cap_s)},
        "jobs": {
            "submitted": int(len(w["cls"])),
            "started": int((~w["censored"]).sum()),
            "completed": int(sum(1 for j in result.jobs if j.completed)),
        },
    }
