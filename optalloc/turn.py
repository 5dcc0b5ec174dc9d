"""One scheduling turn: the code cron (optalloc.cycle) and the simulator (optalloc.sim.engine)
both run, so a simulated result says what the cron epoch would do.

    observe -> queue transitions -> intervals, demand and capacity samples -> ledger
      -> snapshot -> decide (any Scheduler) -> plan -> runner

The queue (job id -> Job, queued and running) belongs to the caller: cron loads it from the
state DB each turn and records what the turn collected inside its transactions; the simulator
keeps it in memory and calls the same pieces at its own event times (transitions whenever the
runner reports something, samples when they change, `decide` and `apply_plan` at decision
points). The runner, the scheduler and the time (`now`, read once from an injected clock) are
the caller's; nothing here does I/O or knows whether it is simulated.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass
from typing import Iterable, Mapping, Protocol, Sequence

from optalloc.demand import Demand  # noqa: F401 (the turn's demand samples; re-exported)
from optalloc.holds import Holds
from optalloc.ledger import Ledger
from optalloc.runners.base import ApplyResult, EventKind, JobEvent, Observation, Runner
from optalloc.snapshot import Snapshot, build_snapshot
from optalloc.types import (GpuType, Interval, Job, JobState, Node, NodeState, Placement, Plan,
                            Reservation, ReservationIdle)


class Decides(Protocol):
    """What the turn uses of a scheduler (optalloc.sim.policies' Schedulers: ilp, greedy,
    priority): a plan from the read-only snapshot."""

    def decide(self, snapshot: Snapshot) -> Plan: ...


FINAL_STATUS = {
    EventKind.FINISHED: "finished",
    EventKind.FAILED: "failed",
    EventKind.PREEMPTED: "cancelled",
}
STALE_RUN_S = 60.0  # an end event of a run that started this much before the job's current
# run is a repeat (runs of one job are epochs apart); less is the runner's clock vs ours


# --------------------------------------------------------------------------- runs


def interval(job: Job, end: float) -> Interval | None:
    """The run of a running job from its start to `end` (None if it took no time). Charged
    as allocated work exactly when its placement says so (Placement.allocated: False for
    unallocated work and on a gpu_type where the project has no share)."""
    if job.placement is None or job.start_time is None or end <= job.start_time:
        return None
    return Interval(
        job_id=job.id,
        project=job.project,
        gpu_type=job.placement.gpu_type,
        gpus=job.placement.gpus,
        start=job.start_time,
        end=end,
        allocated=job.placement.allocated,
    )


def open_intervals(jobs: Iterable[Job], now: float) -> list[Interval]:
    """The runs of running jobs so far (the ledger counts them in the usage ratios at `now`)."""
    return [iv for j in jobs if j.running and (iv := interval(j, now)) is not None]


def as_queued(job: Job, work_left_s: float | None = None) -> Job:
    """The job back in the queue; a runner that knows the work left sets its duration."""
    out = dataclasses.replace(job, state=JobState.QUEUED, start_time=None, placement=None)
    return out if work_left_s is None else dataclasses.replace(out, duration_s=work_left_s)


def run_of(job: Job, ev: JobEvent) -> Job | None:
    """The job as it ran in the run `ev` ends; None if that run ended before the job's
    current run began (a repeated event). A run the queue never saw start (a crash after the
    runner started it, before the start was recorded) is taken from the runner's record."""
    if ev.run_start is None:
        return job
    if job.running and job.start_time is not None and ev.run_start < job.start_time - STALE_RUN_S:
        return None
    placement = ev.placement or (job.placement if job.running else None)
    if placement is None:
        return job
    return dataclasses.replace(job, state=JobState.RUNNING, start_time=ev.run_start,
                               placement=placement)


# --------------------------------------------------------------------------- transitions


@dataclass(frozen=True)
class Started:
    job: Job  # as it runs now (its start may lie after a grace period)


@dataclass(frozen=True)
class Ended:
    event: JobEvent
    run: Job  # the job as it ran
    interval: Interval | None  # None: the run took no time
    status: str | None  # finished | failed | cancelled; None: back in the queue


class Transitions:
    """Applies runner events to a queue and collects what the ledger and the store need:
    the closed run intervals, the jobs that ended, the events applied, and per event what
    happened (`outcomes`, in order). An end event repeated after a crash changes nothing."""

    def __init__(self, queue: dict[str, Job]):
        self.queue = queue
        self.intervals: list[Interval] = []
        self.finished: list[tuple[Job, str, float, str]] = []  # job, status, time, message
        self.events: list[JobEvent] = []
        self.outcomes: list[Started | Ended] = []
        self.queued_delta = 0  # change in the number of queued (not running) jobs

    def apply(self, events: Iterable[JobEvent]) -> "Transitions":
        for ev in sorted(events, key=lambda e: e.time):
            job = self.queue.get(ev.job_id)
            if job is None:
                continue  # ended already (an end event repeated after a crash) or unknown
            if ev.kind is EventKind.STARTED:
                self.events.append(ev)
                self._run(job, ev.placement or job.placement, ev.time)
                continue
            ran = run_of(job, ev)
            if ran is None:
                continue  # the end of an earlier run, recorded before a crash repeated it
            self.events.append(ev)
            iv = interval(ran, ev.time) if ran.running else None
            if iv is not None:
                self.intervals.append(iv)
            if ev.kind is EventKind.REQUEUED:
                self.queue[job.id] = as_queued(ran, ev.work_left_s)
                self.queued_delta += job.running
                self.outcomes.append(Ended(ev, ran, iv, None))
            else:
                status = FINAL_STATUS[ev.kind]
                self.finished.append((ran, status, ev.time, ev.message))
                del self.queue[job.id]
                self.queued_delta -= not job.running
                self.outcomes.append(Ended(ev, ran, iv, status))
        return self

    def start(self, job_id: str, placement: Placement, t: float) -> None:
        """A start the runner reported without a STARTED event (ApplyResult.started)."""
        job = self.queue.get(job_id)
        if job is not None and not job.running:
            self._run(job, placement, t)

    def _run(self, job: Job, placement: Placement | None, t: float) -> None:
        running = dataclasses.replace(job, state=JobState.RUNNING, start_time=t,
                                      placement=placement)
        self.queue[job.id] = running
        self.queued_delta -= not job.running
        self.outcomes.append(Started(running))


def reconcile(queue: dict[str, Job], running: Mapping[str, tuple[Placement, float]]) -> None:
    """An authoritative runner's running set is the truth: jobs it runs are running (where it
    says, since when it says), and a job it has no trace of never started."""
    for job_id, (placement, start) in running.items():
        job = queue.get(job_id)
        if job is not None and (not job.running or job.placement != placement):
            queue[job_id] = dataclasses.replace(
                job, state=JobState.RUNNING, start_time=start, placement=placement)
    for job_id, job in list(queue.items()):
        if job.running and job_id not in running:
            queue[job_id] = as_queued(job)


def observe(runner: Runner, queue: dict[str, Job], now: float) -> tuple[Observation, Transitions]:
    """The runner's view at `now` applied to the queue: its events, then (an authoritative
    runner) its running set."""
    obs = runner.observe(now)
    tr = Transitions(queue).apply(obs.events)
    if runner.authoritative:
        reconcile(queue, obs.running)
    return obs, tr


# --------------------------------------------------------------------------- samples


def effective_nodes(nodes: Iterable[Node], node_states: Mapping[str, NodeState]) -> tuple[Node, ...]:
    """Config nodes with the states the runner reports (e.g. Slurm drain/down) applied."""
    return tuple(
        dataclasses.replace(n, state=node_states[n.name]) if n.name in node_states else n
        for n in nodes
    )


def capacity_by_type(gpu_types: Iterable[GpuType], nodes: Iterable[Node]) -> dict[str, int]:
    """GPUs on up nodes per gpu_type (every type, 0 when none is up): entitled time."""
    out = {g.name: 0 for g in gpu_types}
    for n in nodes:
        if n.state is NodeState.UP and n.gpu_type in out:
            out[n.gpu_type] += n.gpus
    return out


# --------------------------------------------------------------------------- decide and apply


@dataclass(frozen=True)
class Decision:
    snapshot: Snapshot
    plan: Plan  # the scheduler's plan, plus the held jobs' pending reasons
    ratios: Mapping[str, float]  # usage ratio per org node at `now`
    jobs: tuple[Job, ...]  # the snapshot's jobs
    decide_s: float  # wall seconds the scheduler took (build + solve + place for the ILP)


def decide(holds: Holds, now: float, queue: Mapping[str, Job], ledger: Ledger,
           nodes: Iterable[Node], scheduler: Decides,
           reservations: Sequence[Reservation] = (),
           reservation_idle: Sequence[ReservationIdle] = ()) -> Decision:
    """Usage ratios at `now` (running jobs' runs so far included) -> read-only snapshot of
    the jobs the config fits (`holds = optalloc.holds.hold_unknown(config, queue)`), in
    submission order -> the scheduler's plan, plus the held jobs' pending reasons.
    `reservations`: the previous plan's (the lookahead keeps them stable), and
    `reservation_idle` its idle GPU-hours of reservations that ended (charged to their projects
    over the lookback window)."""
    running = open_intervals(queue.values(), now)
    ratios = ledger.usage_ratios(now, open_intervals=running)

    marks = ledger.marks()  # the ledger as the decision sees it, whenever it is asked

    @functools.cache
    def shortfalls() -> tuple[dict[str, float], dict[str, float]]:  # only where read, once
        return ledger.shortfalls(now, open_intervals=running, marks=marks)

    jobs = tuple(sorted(holds.jobs, key=lambda j: (j.submit_time, j.id)))
    snapshot = build_snapshot(holds.config, now, jobs=jobs, usage_ratio=ratios, nodes=tuple(nodes),
                              reservations=reservations, reservation_idle=reservation_idle,
                              shortfall=lambda: shortfalls()[0],
                              fair_shortfall=lambda: shortfalls()[1])
    t0 = time.perf_counter()
    plan = scheduler.decide(snapshot)
    decide_s = time.perf_counter() - t0
    if holds.held:
        plan = dataclasses.replace(plan, pending=plan.pending + holds.held)
    return Decision(snapshot, plan, ratios, jobs, decide_s)


def apply_plan(runner: Runner, plan: Plan, queue: dict[str, Job],
               now: float) -> tuple[ApplyResult, Transitions]:
    """The runner applies the plan; its immediate transitions (events first, they carry the
    exact times; then starts it reported without an event, at `now`) go to the queue."""
    applied = runner.apply(plan, dict(queue), now)
    tr = Transitions(queue).apply(applied.events)
    placements = {p.job_id: p for p in plan.placements}
    for job_id in applied.started:
        if job_id in placements:
            tr.start(job_id, placements[job_id], now)
    return applied, tr
