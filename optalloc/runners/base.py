"""The Runner interface: where a Plan meets the machines.

A runner executes plans (`apply`) and reports what actually happened (`observe`); the
scheduling turn (optalloc.turn) is observe -> queue transitions -> ledger -> snapshot -> plan ->
apply. Runners: noop, local (subprocesses + pynvml), slurm (sbatch/scontrol/scancel), simulated
(the simulator's cluster). The events' vocabulary and the requeue exit code are shared by all.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping

from optalloc.types import Job, NodeState, Placement, Plan, ReasonCode, frozen_map


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
    # a requeued job's expected remaining work (speed-1 seconds) when the runner knows it (the
    # simulated cluster does); the queue's copy of the job takes it as its duration
    work_left_s: float | None = None


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
    # job id -> why it starts later: its GPUs are still held by a job leaving after a
    # preemption notice (the plan's start stands; a later epoch starts it once they are free)
    waiting: Mapping[str, str] = field(default_factory=frozen_map)
    events: tuple[JobEvent, ...] = ()  # transitions already complete at apply time (e.g. a
    # preemption of a job with nothing to signal); handled exactly like observed events


def moved_ids(plan: Plan) -> frozenset[str]:
    """Jobs the plan both preempts with code Moved and places again (a move to another
    gpu_type, or a restart off a down node): a runner stops them first, then reports their
    new placement as waiting; the queue requeues them once stopped and a later epoch places
    them again (never two runs of one job at once)."""
    placed = {p.job_id for p in plan.placements}
    return frozenset(p.job_id for p in plan.preemptions
                     if p.code == ReasonCode.MOVED and p.job_id in placed)


def moving_message(pl: Placement) -> str:
    return (f"{pl.job_id} moves: it is stopping after its preemption notice and starts again "
            f"(the plan placed it on {pl.gpu_type} {','.join(pl.node_names)}) in a later "
            "epoch, once it has stopped")


REQUEUE_EXIT_CODE = 75  # EX_TEMPFAIL: a resumable job that exits with it asks to be requeued


def safe_file_name(job_id: str) -> str:
    """A job id as a file name stem for the job's logs: only letters, digits, '_', '.' and
    '-' (a '/' cannot leave the log directory; a '%' cannot become a Slurm filename
    pattern), at most 120 characters."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", job_id)[:120] or "job"


def parse_signal(sig: int | str) -> int:
    """A notice signal by number or name (TERM, SIGTERM, usr1); ValueError if unknown."""
    if isinstance(sig, str):
        name = sig.upper()
        name = name if name.startswith("SIG") else f"SIG{name}"
        try:
            return int(signal.Signals[name])
        except KeyError:
            raise ValueError(f"unknown signal {sig!r}; use e.g. TERM, INT or USR1") from None
    return int(signal.Signals(sig))


class Runner:
    """What the scheduling turn (optalloc.turn) uses of a runner; every runner subclasses this.

    `observe` and `apply` are the runner. The rest are capabilities with defaults that do
    nothing, so the turn calls them on every runner and never asks which it has:

    * `authoritative`: True when `Observation.running` is the truth about what runs (the turn
      then reconciles the queue with it); False for a runner that does not know (noop).
    * `discover_jobs()`: jobs submitted around optalloc that the queue should hold (Slurm's
      held jobs with an optalloc comment).
    * `set_jobs(jobs)`: the running jobs the state DB knows, before `observe` (the noop runner
      reports their completions from it).
    * `ack_events()`: the events handed out so far are recorded: do not hand them out again.
      Until then a runner that keeps its events repeats them (delivery at least once).
    * `sample_utilization(now)`: sample and store GPU utilization of running jobs.
    * `refuses(jobs)`: queued jobs it will not start at this epoch ({job id: why}, e.g. a
      program the local runner does not find, or a job sitting out failed starts); the turn
      holds them out of the decision. Called after `observe`, at the same `now`.
    * `passive`: set for a dry run (`optalloc epoch --dry-run`): `observe` only looks, it sends
      no signal and runs no command that changes a job (a notice not yet sent, a SIGKILL or a
      Slurm requeue/cancel after the grace period, a hold of a job Slurm requeued on its own);
      what it reports is what runs now, so such a job still shows as running.
    """

    name: str = "runner"
    authoritative: bool = True
    passive: bool = False

    def observe(self, now: float) -> Observation:
        """Report running jobs and events since the last acknowledgement."""
        raise NotImplementedError

    def apply(self, plan: Plan, jobs: Mapping[str, Job], now: float) -> ApplyResult:
        """Start the plan's new placements and preempt its preemptions (with notice)."""
        raise NotImplementedError

    def discover_jobs(self) -> tuple[Job, ...]:
        return ()

    def set_jobs(self, jobs: Mapping[str, Job]) -> None:
        return None

    def ack_events(self) -> None:
        return None

    def sample_utilization(self, now: float) -> tuple:
        return ()

    def refuses(self, jobs) -> Mapping[str, str]:
        return {}

    def close(self) -> None:
        return None
