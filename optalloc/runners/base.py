"""The Runner protocol: where a Plan meets the machines.

A runner executes plans (`apply`) and reports what actually happened (`observe`). optalloc's
epoch loop is: observe -> update queue + ledger -> snapshot -> plan -> apply. Runners: local
(subprocesses + pynvml), slurm (sbatch/scontrol/scancel), simulated (the simulator's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping, Protocol, runtime_checkable

from optalloc.types import Job, NodeState, Placement, Plan, frozen_map


class EventKind(str, Enum):
    STARTED = "started"
    FINISHED = "finished"  # exited 0 / completed its work
    FAILED = "failed"  # exited non-zero, not by preemption
    PREEMPTED = "preempted"  # stopped by optalloc (after notice)
    REQUEUED = "requeued"  # preempted and back in the queue (resumable)


@dataclass(frozen=True)
class JobEvent:
    job_id: str
    kind: EventKind
    time: float
    placement: Placement | None = None
    exit_code: int | None = None
    message: str = ""
    # start of the run this event ends (finished/failed/preempted/requeued) or begins (started):
    # with `time` it is the exact run interval the ledger records
    run_start: float | None = None


@dataclass(frozen=True)
class Observation:
    """What the runner sees at `now`: jobs running (with their placement and start time), events
    since the last observation, node states where the runner knows them, and processes/jobs it
    found that optalloc did not start (reported, never silently killed)."""

    now: float
    running: Mapping[str, tuple[Placement, float]] = field(default_factory=frozen_map)
    events: tuple[JobEvent, ...] = ()
    node_states: Mapping[str, NodeState] = field(default_factory=frozen_map)
    unknown: tuple[str, ...] = ()


@dataclass(frozen=True)
class ApplyResult:
    started: tuple[str, ...] = ()
    preempting: tuple[str, ...] = ()  # notice sent, grace period running
    errors: Mapping[str, str] = field(default_factory=frozen_map)  # job id -> what failed
    events: tuple[JobEvent, ...] = ()  # transitions already complete at apply time (e.g. a
    # preemption of a job with nothing to signal); handled exactly like observed events


@runtime_checkable
class Runner(Protocol):
    name: str

    def observe(self, now: float) -> Observation:
        """Report running jobs and events since the last call."""
        ...

    def apply(self, plan: Plan, jobs: Mapping[str, Job], now: float) -> ApplyResult:
        """Start the plan's new placements and preempt its preemptions (with notice)."""
        ...
