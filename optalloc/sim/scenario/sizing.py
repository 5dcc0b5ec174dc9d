"""Sizing a cluster to a workload: the node count whose measured demand ratio lies in a target
band (DESIGN.md section 6), by doubling / halving and then bisecting on simulations."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from optalloc.sim.workload import offered_load


@dataclass(frozen=True)
class ClusterSize:
    nodes: int
    gpus: int
    demand_ratio: float
    tried: tuple[tuple[int, float], ...] = field(default_factory=tuple)  # (nodes, measured ratio)


def nodes_for_offered_load(jobs, target_load: float, gpus_per_node: int, horizon_s: float | None = None) -> int:
    """Nodes whose capacity the jobs load to `target_load` (a first guess for the search)."""
    load_per_gpu = offered_load(jobs, 1.0, horizon_s)  # = GPU demand in GPUs
    return max(1, math.ceil(load_per_gpu / target_load / gpus_per_node))


def scale_cluster_to_demand_ratio(
    measure: Callable[[int], float],
    *,
    gpus_per_node: int = 8,
    target: tuple[float, float] = (2.0, 3.0),
    start_nodes: int = 8,
    max_nodes: int = 4096,
    max_runs: int = 12,
) -> ClusterSize:
    """Find a node count whose *measured* demand ratio lies in `target` (DESIGN.md section 6).

    `measure(nodes)` runs a simulation on a cluster of that many nodes and returns the
    realised demand ratio (time-average of GPUs asked by queued + running jobs / capacity);
    the ratio falls as nodes grow. Doubles/halves from `start_nodes` (e.g.
    `nodes_for_offered_load(jobs, 0.95, 8)`) until the target is bracketed, then bisects.
    Returns the closest node count found within `max_runs` simulations."""
    lo_t, hi_t = target
    if not 0 < lo_t <= hi_t:
        raise ValueError("target must be (low, high) with 0 < low <= high")
    mid_t = 0.5 * (lo_t + hi_t)
    tried: list[tuple[int, float]] = []

    def run(n: int) -> float:
        r = float(measure(n))
        tried.append((n, r))
        return r

    n = max(1, start_nodes)
    r = run(n)
    small, big = None, None  # small: too few nodes (ratio > hi); big: too many (ratio < lo)
    while not (lo_t <= r <= hi_t) and len(tried) < max_runs:
        if r > hi_t:
            small = n
            n = (n + big) // 2 if big is not None else min(max_nodes, n * 2)
        else:
            big = n
            n = (n + small) // 2 if small is not None else max(1, n // 2)
        if any(t == n for t, _ in tried):
            break
        r = run(n)
    best_n, best_r = min(tried, key=lambda x: (not (lo_t <= x[1] <= hi_t), abs(x[1] - mid_t)))
    return ClusterSize(nodes=best_n, gpus=best_n * gpus_per_node, demand_ratio=best_r, tried=tuple(tried))
