"""What one simulated run produces: the contract between the simulation engine (producer) and
metrics / reports (consumers). Plain frozen records; no logic."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from optalloc.types import Config, Interval, frozen_map


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    project: str
    gpus: int
    min_runtime_s: float  # 0 = unallocated
    submit_time: float
    first_start: float | None  # None: never started within the simulated horizon
    end_time: float | None  # completion (or termination) time; None: still queued/running
    completed: bool  # finished all its work
    preemptions: int = 0
    lost_gpu_s: float = 0.0  # GPU-seconds of work lost to preemptions (since last checkpoint)
    nodes: int = 1  # nodes it spans (gpus_per_node's pieces, else whole largest nodes)

    @property
    def allocated(self) -> bool:
        return self.min_runtime_s > 0


@dataclass(frozen=True)
class DemandSample:
    """From `time` until the next sample: GPUs asked by queued + running jobs."""

    time: float
    allocated_by_project: Mapping[str, int] = field(default_factory=frozen_map)  # allocated jobs only
    total_gpus: int = 0  # all jobs, unallocated included (for the demand ratio)
    # of the allocated, the GPUs of jobs that could run on the up nodes (optalloc.demand: the
    # fair measure's demand); None: all of them
    placeable_by_project: Mapping[str, int] | None = None


@dataclass(frozen=True)
class CapacitySample:
    """From `time` until the next sample: GPUs per gpu_type on nodes that are up."""

    time: float
    by_type: Mapping[str, int] = field(default_factory=frozen_map)


@dataclass(frozen=True)
class EpochRecord:
    time: float
    solve_s: float  # wall seconds the policy took to decide (build + solve + place)
    status: str  # the policy's SolveReport.status, or "heuristic"
    n_queued: int
    n_running: int
    n_started: int = 0
    n_preempted: int = 0
    gap: float | None = None
    reservations: tuple = ()  # the plan's Reservation records (nodes held for waiting gangs)
    reservations_ended: tuple = ()  # its ReservationEnd records (started = kept, or dropped)


@dataclass(frozen=True)
class SimResult:
    policy: str
    scenario: str
    config: Config
    start: float
    end: float
    intervals: tuple[Interval, ...]  # every run interval, allocated and unallocated, clipped to [start, end]
    jobs: tuple[JobRecord, ...]
    epochs: tuple[EpochRecord, ...]
    demand: tuple[DemandSample, ...]
    capacity: tuple[CapacitySample, ...]
    seed: int | None = None


def widest_node(nodes) -> int:
    """GPUs of the largest node in `nodes` (Node or anything with `gpus`), 1 when none: what a
    job without `gpus_per_node` fills whole (`job_nodes`)."""
    return max((n.gpus for n in nodes), default=1)


def job_nodes(job, widest: int) -> int:
    """The nodes a job spans: its `gpus_per_node` pieces, else one node if it fits the widest
    node, else whole widest nodes (the metrics' large class counts them, DESIGN.md 6)."""
    if job.gpus_per_node:
        return -(-int(job.gpus) // int(job.gpus_per_node))
    return 1 if job.gpus <= widest else -(-int(job.gpus) // max(int(widest), 1))
