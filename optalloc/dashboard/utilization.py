"""GPU utilization per running job and project, and the idle flag (the metrics pyramid's fourth
layer: a job that holds GPUs it does not use is the squatting the scheme was built against).

The local runner samples NVML once per epoch for every GPU of every job it runs
(`runner_local_utilization`: time, job, GPU index, utilization %, memory used). Per job, only
samples of its current run count (time >= its start). At each sample time the job's utilization
is the mean over its GPUs that answered. A job is **idle** when its samples have stayed under
`policy.idle_util_pct` for `policy.idle_after_s` or longer: the trailing stretch of samples
under the threshold, measured from the first of them to the latest, is at least that long. The
stretch starts at the first low sample, so the flag never fires early (the job may have gone
quiet up to one sampling interval before).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from optalloc.types import Job, Policy


@dataclass(frozen=True)
class JobUtil:
    job_id: str
    project: str
    gpus: int
    samples: int  # sample times in the current run
    mean_util_pct: float | None  # over the current run
    recent_util_pct: float | None  # over the last idle_after_s of samples
    memory_used_bytes: int | None  # latest sample, summed over the job's GPUs
    idle_s: float  # trailing stretch under the threshold (0: the latest sample is above it)
    idle: bool  # idle_s >= policy.idle_after_s
    last_sample: float | None


@dataclass(frozen=True)
class ProjectUtil:
    project: str
    jobs_sampled: int
    gpus_sampled: int
    mean_util_pct: float | None  # GPU-weighted mean of the jobs' recent utilization
    idle_jobs: int
    idle_gpus: int


def job_utilization(samples: Sequence[tuple], jobs: Iterable[Job], policy: Policy) -> list[JobUtil]:
    """One JobUtil per running job (in the order given) from raw samples
    (time, job_id, gpu_index, gpu_util_pct, memory_used_bytes)."""
    running = [j for j in jobs if j.running]
    if not samples:
        return [JobUtil(j.id, j.project, j.gpus, 0, None, None, None, 0.0, False, None)
                for j in running]
    t = np.array([s[0] for s in samples], dtype=float)
    ids = np.array([s[1] for s in samples], dtype=object)
    util = np.array([np.nan if s[3] is None else s[3] for s in samples], dtype=float)
    mem = np.array([np.nan if s[4] is None else s[4] for s in samples], dtype=float)
    out = []
    for job in running:
        start = -np.inf if job.start_time is None else job.start_time
        sel = (ids == job.id) & (t >= start)
        out.append(_one(job, t[sel], util[sel], mem[sel], policy))
    return out


def _one(job: Job, t: np.ndarray, util: np.ndarray, mem: np.ndarray, policy: Policy) -> JobUtil:
    if t.size == 0:
        return JobUtil(job.id, job.project, job.gpus, 0, None, None, None, 0.0, False, None)
    times, inv = np.unique(t, return_inverse=True)
    ok = ~np.isnan(util)
    n_ok = np.bincount(inv[ok], minlength=len(times))
    per_t = np.bincount(inv[ok], weights=util[ok], minlength=len(times))
    has = n_ok > 0
    per_t = np.where(has, per_t / np.maximum(n_ok, 1), np.nan)
    mem_ok = ~np.isnan(mem)
    mem_t = np.bincount(inv[mem_ok], weights=mem[mem_ok], minlength=len(times))
    last_mem = inv[mem_ok]
    memory = int(mem_t[len(times) - 1]) if (last_mem == len(times) - 1).any() else None
    times, per_t = times[has], per_t[has]
    if times.size == 0:
        return JobUtil(job.id, job.project, job.gpus, 0, None, None, memory, 0.0, False, None)
    low = per_t < policy.idle_util_pct
    idle_s = 0.0
    if low[-1]:
        above = np.flatnonzero(~low)
        first_low = 0 if above.size == 0 else int(above[-1]) + 1
        idle_s = float(times[-1] - times[first_low])
    recent = per_t[times >= times[-1] - policy.idle_after_s]
    return JobUtil(
        job_id=job.id,
        project=job.project,
        gpus=job.gpus,
        samples=int(times.size),
        mean_util_pct=float(per_t.mean()),
        recent_util_pct=float(recent.mean()),
        memory_used_bytes=memory,
        idle_s=idle_s,
        idle=bool(low[-1] and idle_s >= policy.idle_after_s),
        last_sample=float(times[-1]),
    )


def project_utilization(utils: Iterable[JobUtil]) -> list[ProjectUtil]:
    """Per project with at least one sampled job, in order of first appearance."""
    by: dict[str, list[JobUtil]] = {}
    for u in utils:
        if u.samples:
            by.setdefault(u.project, []).append(u)
    out = []
    for project, us in by.items():
        gpus = np.array([u.gpus for u in us], dtype=float)
        recent = np.array([u.recent_util_pct for u in us], dtype=float)
        out.append(ProjectUtil(
            project=project,
            jobs_sampled=len(us),
            gpus_sampled=int(gpus.sum()),
            mean_util_pct=float((gpus * recent).sum() / gpus.sum()) if gpus.sum() else None,
            idle_jobs=sum(u.idle for u in us),
            idle_gpus=sum(u.gpus for u in us if u.idle),
        ))
    return out
