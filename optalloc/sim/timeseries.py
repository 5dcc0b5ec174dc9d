"""The hourly series behind the simulator's plots (optalloc.sim.report_*): owed and
delivered per project, occupancy, demand ratio, capacity and queue length per bin, from the
same columns and definitions as optalloc.sim.metrics."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optalloc.ledger.kernel import interval_bins, step_integrals
from optalloc.sim.metrics import HOUR, _columns, owed_delivered
from optalloc.sim.result import SimResult


@dataclass(frozen=True, eq=False)
class TimeSeries:
    """Per-bin series over the horizon (bins of `step` seconds; the last may be shorter)."""

    policy: str
    edges: np.ndarray  # (H + 1,) seconds
    projects: tuple[str, ...]
    delivered_h: np.ndarray  # (P, H) allocated GPU-hours per bin
    owed_h: np.ndarray  # (P, H) owed GPU-hours per bin
    occupancy_allocated: np.ndarray  # (H,) allocated GPU-time / available GPU-time
    occupancy_total: np.ndarray  # (H,) all delivered GPU-time / available GPU-time
    demand_ratio: np.ndarray  # (H,) integral of D / integral of C in the bin
    capacity: np.ndarray  # (H,) mean GPUs up
    queue_length: np.ndarray  # (H,) mean queued jobs at the epochs in the bin (NaN: no epoch)

    @property
    def hours(self) -> np.ndarray:
        return (self.edges[:-1] - self.edges[0]) / HOUR


def time_series(result: SimResult, step: float = HOUR) -> TimeSeries:
    od = owed_delivered(result, step)
    c = _columns(result, od.projects)
    edges = od.edges
    width = np.diff(edges)
    cap_s = step_integrals(c.cap_t, c.cap_total[:, None], edges, before="first")[:, 0]
    dem_s = step_integrals(c.dem_t, c.dem_total[:, None], edges, before="zero")[:, 0]
    group = c.iv_alloc.astype(np.int64)  # 0 unallocated, 1 allocated
    used = interval_bins(c.iv_start, c.iv_end, c.iv_gpus, group, 2, edges)  # (2, H)
    with np.errstate(divide="ignore", invalid="ignore"):
        occ_a = np.where(cap_s > 0, used[1] / cap_s, np.nan)
        occ_t = np.where(cap_s > 0, used.sum(axis=0) / cap_s, np.nan)
        dr = np.where(cap_s > 0, dem_s / cap_s, np.nan)
    et = np.array([e.time for e in result.epochs], dtype=np.float64)
    eq = np.array([e.n_queued for e in result.epochs], dtype=np.float64)
    n_bins = len(width)
    b = np.clip(np.searchsorted(edges, et, side="right") - 1, 0, n_bins - 1)
    inside = (et >= edges[0]) & (et <= edges[-1])
    cnt = np.bincount(b[inside], minlength=n_bins)
    tot = np.bincount(b[inside], weights=eq[inside], minlength=n_bins)
    with np.errstate(divide="ignore", invalid="ignore"):
        queue = np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)
    return TimeSeries(
        policy=result.policy,
        edges=edges,
        projects=od.projects,
        delivered_h=od.delivered_h,
        owed_h=od.owed_h,
        occupancy_allocated=occ_a,
        occupancy_total=occ_t,
        demand_ratio=dr,
        capacity=cap_s / width,
        queue_length=queue,
    )
