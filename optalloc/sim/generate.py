"""Synthetic Philly-like workloads from a seeded numpy Generator.

A job is either a *debug* job (probability `debug_fraction`: 1-8 GPUs, log-uniform duration
between `debug_duration` bounds, by default 1-15 minutes) or a *training* job: GPU count drawn
from `sizes` (Philly-like: mostly 1 GPU, a long tail of 8-64+ GPU gangs) and a heavy-tailed
duration, log-normal with median `duration_median` and log-sd `duration_sigma`, clipped to
[`min_duration`, `max_duration`]. Teams are drawn with Zipf-like skew: team i (0-based, in the
order given) has weight 1 / (i + 1) ** `team_skew` (0 = uniform).

Arrivals are uniform over the horizon (a Poisson process given its count), and the count is
the smallest whose total work reaches the target offered load exactly:

    n = the k for which sum_{i<=k} gpus_i * duration_i is closest to
        offered_load * capacity_gpus * horizon_s

(a free Poisson count would miss the target by +-40% over a week: the heavy tail makes the
work of a few hundred jobs very noisy). Offered load is GPU-hours submitted per hour /
capacity; it is NOT the demand ratio (DESIGN.md section 6): a load above 1 grows the queue
without bound. Pick ~0.9-1.0 for a demand ratio of 2-4.

The same spec, seed, capacity and horizon always give the same jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from optalloc.sim.traces import RawJobs
from optalloc.types import frozen_map

# GPUs per job and their probabilities, after Philly (Jeon et al., ATC'19): most jobs use one
# GPU; multi-GPU jobs come in powers of two with a thin tail of large gangs.
PHILLY_SIZES: Mapping[int, float] = frozen_map(
    {1: 0.70, 2: 0.07, 4: 0.10, 8: 0.09, 16: 0.025, 32: 0.01, 64: 0.004, 128: 0.001}
)
DEBUG_SIZES: Mapping[int, float] = frozen_map({1: 0.6, 2: 0.15, 4: 0.15, 8: 0.10})


@dataclass(frozen=True)
class SyntheticSpec:
    teams: tuple[str, ...]
    offered_load: float = 0.95
    sizes: Mapping[int, float] = field(default_factory=lambda: PHILLY_SIZES)
    duration_median_s: float = 2 * 3600.0
    duration_sigma: float = 1.6
    min_duration_s: float = 5 * 60.0
    max_duration_s: float = 14 * 86400.0
    debug_fraction: float = 0.3
    debug_sizes: Mapping[int, float] = field(default_factory=lambda: DEBUG_SIZES)
    debug_duration_s: tuple[float, float] = (60.0, 15 * 60.0)
    team_skew: float = 1.0
    max_gpus: int | None = None  # drop sizes above this (e.g. the cluster's capacity)
    id_prefix: str = "syn"


def team_weights(n: int, skew: float) -> np.ndarray:
    """Zipf-like weights 1/(i+1)^skew, normalized to sum 1."""
    w = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** float(skew)
    return w / w.sum()


def _normalized(sizes: Mapping[int, float], max_gpus: int | None) -> tuple[np.ndarray, np.ndarray]:
    g = np.array(sorted(int(k) for k in sizes), dtype=np.int64)
    p = np.array([float(sizes[k]) for k in sorted(sizes, key=int)], dtype=np.float64)
    if max_gpus is not None:
        keep = g <= max_gpus
        g, p = g[keep], p[keep]
    if len(g) == 0 or p.sum() <= 0:
        raise ValueError("no job size left with positive probability; allow smaller sizes")
    return g, p / p.sum()


def draw_jobs(spec: SyntheticSpec, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n jobs' (gpus, duration_s, is_debug) drawn independently of arrivals."""
    debug = rng.random(n) < spec.debug_fraction
    g, p = _normalized(spec.sizes, spec.max_gpus)
    dg, dp = _normalized(spec.debug_sizes, spec.max_gpus)
    gpus = np.where(debug, rng.choice(dg, size=n, p=dp), rng.choice(g, size=n, p=p))
    lo, hi = spec.debug_duration_s
    debug_dur = np.exp(rng.uniform(np.log(lo), np.log(hi), size=n))
    train_dur = np.clip(
        spec.duration_median_s * np.exp(spec.duration_sigma * rng.standard_normal(n)),
        spec.min_duration_s,
        spec.max_duration_s,
    )
    return gpus.astype(np.int64), np.where(debug, debug_dur, train_dur), debug


def closest_prefix(work: np.ndarray, target: float) -> int:
    """The n >= 1 whose prefix sum work[:n].sum() is closest to target (the first such n on a
    tie); `work` >= 0 and its total must reach target."""
    cum = np.cumsum(work)
    k = min(int(np.searchsorted(cum, target)), len(cum) - 1)  # cum[k] >= target > cum[k - 1]
    return k if k > 0 and target - cum[k - 1] <= cum[k] - target else k + 1


def generate(spec: SyntheticSpec, *, capacity_gpus: int, horizon_s: float, seed: int) -> RawJobs:
    """Jobs arriving in [0, horizon_s) whose total work is `offered_load` of `capacity_gpus`
    over the horizon (to within half of one job's work)."""
    if capacity_gpus <= 0 or horizon_s <= 0:
        raise ValueError("capacity_gpus and horizon_s must be > 0")
    if not spec.teams:
        raise ValueError("a synthetic workload needs at least one team")
    target = spec.offered_load * capacity_gpus * horizon_s  # GPU-seconds
    rng = np.random.default_rng(seed)
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    work = 0.0
    batch = 256
    while work < target:
        gpus_b, dur_b, debug_b = draw_jobs(spec, batch, rng)
        parts.append((gpus_b, dur_b, debug_b))
        work += float(np.sum(gpus_b * dur_b))
        batch = min(batch * 2, 1 << 20)
    gpus = np.concatenate([p[0] for p in parts])
    dur = np.concatenate([p[1] for p in parts])
    n = closest_prefix(gpus * dur, target)
    gpus, dur = gpus[:n], dur[:n]
    arrivals = np.sort(rng.uniform(0.0, horizon_s, size=n))
    w = team_weights(len(spec.teams), spec.team_skew)
    team = np.asarray(spec.teams, dtype=object)[rng.choice(len(spec.teams), size=n, p=w)]
    width = max(5, len(str(n - 1)))
    ids = np.array([f"{spec.id_prefix}-{i:0{width}d}" for i in range(n)], dtype=object)
    return RawJobs(
        job_id=ids,
        submit_time=arrivals,
        duration_s=dur,
        gpus=gpus,
        team=team.astype(str),
        source=f"synthetic(seed={seed}, load={spec.offered_load:g}, capacity={capacity_gpus})",
    )
