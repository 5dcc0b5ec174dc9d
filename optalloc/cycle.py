"""One turn of the production loop, what `optalloc epoch` runs from cron.

Numbered phases (Kueue style); the optimizer itself (`optalloc.epoch.run_epoch`) is pure, and
this module is the only place where its inputs are gathered and its outputs recorded:

  0. clock      `now` may not be earlier than the last recorded epoch (checked under the
                caller's state lock): out-of-order turns would charge overlapping intervals
  1. queue      the state DB's queued/running jobs, plus config jobs it has never seen
  2. observe    the runner's events not yet acknowledged (finished, failed, preempted,
                requeued); an event repeated after a crash is recognised and not applied twice
  3. reconcile  an authoritative runner's running set wins over the DB's belief
  4. ledger     closed intervals + open intervals of running jobs -> usage ratios at `now`
  5. decide     jobs the config no longer fits are held (optalloc.holds); immutable
                snapshot -> run_epoch -> Plan
  6. record     one transaction: job states, intervals, demand/capacity samples, the epoch;
                then the runner's events are acknowledged (a crash before that repeats them)
  7. apply      runner.apply(plan) (the runner records each action before it takes it);
                starts and immediate transitions recorded in a second transaction (a crash
                between 6 and 7 loses no job: the next turn re-decides, and an authoritative
                runner reports what it did start)

With `dry_run`, phases 6-7 are skipped: nothing is written, started or acknowledged.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Iterable, Mapping

from optalloc.codec import plan_reservations_from_dict, plan_to_dict, to_dict
from optalloc.epoch import run_epoch
from optalloc.errors import OptallocError
from optalloc.faults import fault_point
from optalloc.holds import hold_unknown
from optalloc.runners.base import ApplyResult, EventKind, JobEvent, Runner
from optalloc.snapshot import Snapshot, build_snapshot
from optalloc.types import (
    Config,
    Interval,
    Job,
    JobState,
    Node,
    Plan,
    SolverSettings,
    UsageMode,
)

FINAL_STATUS = {
    EventKind.FINISHED: "finished",
    EventKind.FAILED: "failed",
    EventKind.PREEMPTED: "cancelled",
}


@dataclass(frozen=True)
class CycleResult:
    plan: Plan
    snapshot: Snapshot
    events: tuple[JobEvent, ...]  # observed + immediate transitions at apply
    applied: ApplyResult | None
    intervals: tuple[Interval, ...]  # closed this turn


# --------------------------------------------------------------------------- the turn


def _interval(job: Job, end: float) -> Interval | None:
    if job.placement is None or job.start_time is None or end <= job.start_time:
        return None
    return Interval(
        job_id=job.id,
        project=job.project,
        gpu_type=job.placement.gpu_type,
        gpus=job.placement.gpus,
        start=job.start_time,
        end=end,
        allocated=job.placement.allocated,  # unallocated work, or no share on the type
    )


def _as_queued(job: Job) -> Job:
    return dataclasses.replace(job, state=JobState.QUEUED, start_time=None, placement=None)


class _Transitions:
    """Applies runner events to an in-memory queue and collects what the store must record."""

    def __init__(self, queue: dict[str, Job]):
        self.queue = queue
        self.intervals: list[Interval] = []
        self.finished: list[tuple[Job, str, float, str]] = []  # job, status, time, message
        self.events: list[JobEvent] = []

    def apply(self, events: Iterable[JobEvent]) -> None:
        for ev in sorted(events, key=lambda e: e.time):
            job = self.queue.get(ev.job_id)
            if job is None:
                continue  # ended already (an end event repeated after a crash) or unknown
            if ev.kind is EventKind.STARTED:
                self.events.append(ev)
                placement = ev.placement or job.placement
                self.queue[job.id] = dataclasses.replace(
                    job, state=JobState.RUNNING, start_time=ev.time, placement=placement
                )
                continue
            job = _run_of(job, ev)
            if job is None:
                continue  # the end of an earlier run, recorded before a crash repeated it
            self.events.append(ev)
            iv = _interval(job, ev.time) if job.running else None
            if iv is not None:
                self.intervals.append(iv)
            if ev.kind is EventKind.REQUEUED:
                self.queue[job.id] = _as_queued(job)
            else:
                self.finished.append((job, FINAL_STATUS[ev.kind], ev.time, ev.message))
                del self.queue[job.id]

    def record(self, store) -> None:
        """Write the closed intervals, ended jobs and events (inside the caller's transaction).
        A job that ended gets one end event (finish_job's); an event repeated after a crash is
        not written twice (intervals are keyed by job and start, so they cannot be either)."""
        store.record_intervals(self.intervals)
        ended = set()
        for job, status, t, msg in self.finished:
            store.upsert_job(job)  # a config job may end before the DB ever stored it
            store.finish_job(job.id, status, t, msg)
            ended.add((job.id, t))
        for ev in self.events:
            if (ev.job_id, ev.time) not in ended:
                store.record_event_once(ev.time, ev.job_id, ev.kind.value, ev.message)


STALE_RUN_S = 60.0  # an end event of a run that started this much before the job's current
# run is a repeat (runs of one job are epochs apart); less is the runner's clock vs ours


def _run_of(job: Job, ev: JobEvent) -> Job | None:
    """The job as it ran in the run `ev` ends; None if that run ended before the job's
    current run began (a repeated event). A run the DB never saw start (a crash after the
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


def refuse_time_travel(store, now: float) -> None:
    """Phase 0: epochs move forward. An epoch earlier than the last recorded one would charge
    intervals that overlap the ones already charged."""
    last = store.last_epoch_time()
    if last is not None and now < last:
        raise OptallocError(
            f"--now {_when(now)} is earlier than the last recorded epoch ({_when(last)}); "
            "epochs must move forward in time (an earlier one would charge overlapping "
            f"intervals). Give a time at or after {_when(last)}, or leave --now out to use the "
            "clock; nothing was written"
        )


def _when(t: float) -> str:
    return f"{t:.0f} = {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(t))}"


def gather_queue(config: Config, store, discovered: Iterable[Job] = ()) -> dict[str, Job]:
    """Phase 1: the DB's live jobs plus jobs the DB has never seen (by id): the config's, and
    those the runner discovered (e.g. users' held `sbatch` jobs carrying optalloc's comment)."""
    queue = {j.id: j for j in store.list_jobs(states=("queued", "running"))}
    for job in (*config.jobs, *discovered):
        if job.id not in queue and store.get_job(job.id) is None:
            queue[job.id] = job
    return queue


def effective_nodes(config: Config, node_states: Mapping) -> tuple[Node, ...]:
    """Config nodes with states the runner reports (e.g. Slurm drain/down) applied."""
    return tuple(
        dataclasses.replace(n, state=node_states[n.name]) if n.name in node_states else n
        for n in config.nodes
    )


def demand_by_project(jobs: Iterable[Job]) -> dict[str, int]:
    """GPUs asked by queued + running allocated jobs, per project (owed time depends on it)."""
    out: dict[str, int] = {}
    for j in jobs:
        if j.allocated:
            out[j.project] = out.get(j.project, 0) + j.gpus
    return out


def run_cycle(
    config: Config,
    store,
    runner: Runner,
    now: float,
    *,
    settings: SolverSettings | None = None,
    dry_run: bool = False,
) -> CycleResult:
    # 0. clock
    refuse_time_travel(store, now)

    # 1. queue
    discovered = runner.discover_jobs() if hasattr(runner, "discover_jobs") else ()
    queue = gather_queue(config, store, discovered)
    if hasattr(runner, "set_jobs"):
        runner.set_jobs({k: j for k, j in queue.items() if j.running})

    # 2. observe
    obs = runner.observe(now)
    fault_point("cycle.after_observe")
    tr = _Transitions(queue)
    tr.apply(obs.events)

    # 3. reconcile: an authoritative runner's running set is the truth
    if getattr(runner, "authoritative", True):
        for job_id, (placement, start) in obs.running.items():
            job = queue.get(job_id)
            if job is not None and (not job.running or job.placement != placement):
                queue[job_id] = dataclasses.replace(
                    job, state=JobState.RUNNING, start_time=start, placement=placement
                )
        for job_id, job in list(queue.items()):
            if job.running and job_id not in obs.running:
                # the DB thought it ran, the runner has no trace of it: it never started
                queue[job_id] = _as_queued(job)

    # 4. ledger: usage ratios at now, counting what runs right now (the config the snapshot
    # sees keeps a zero-share stand-in for a removed project whose jobs still run)
    holds = hold_unknown(config, queue.values())
    nodes = effective_nodes(config, obs.node_states)
    snap0 = build_snapshot(holds.config, now, jobs=(), nodes=nodes)
    capacity = dict(zip(snap0.type_names, map(int, snap0.capacity_by_type())))
    demand = demand_by_project(queue.values())
    policy = config.policy
    since = now - policy.lookback_s if policy.usage_mode is UsageMode.WINDOW else None
    ledger = store.ledger(config.gpu_types, snap0.org, policy, since=since)
    ledger.record_intervals(tr.intervals)
    ledger.record_capacity(now, capacity)
    ledger.record_demand(now, demand)
    open_ivs = [iv for j in queue.values() if j.running and (iv := _interval(j, now))]
    ratios = ledger.usage_ratios(now, open_intervals=open_ivs)

    # 5. decide (jobs the config no longer fits are held, with their reason)
    jobs = tuple(sorted(holds.jobs, key=lambda j: (j.submit_time, j.id)))
    last = store.last_epoch()  # the previous plan's reservations keep the lookahead stable
    snapshot = build_snapshot(holds.config, now, jobs=jobs, usage_ratio=ratios, nodes=nodes,
                              reservations=plan_reservations_from_dict((last or {}).get("plan")))
    plan = run_epoch(snapshot, settings)
    if holds.held:
        plan = dataclasses.replace(plan, pending=plan.pending + holds.held)

    if dry_run:
        return CycleResult(plan, snapshot, tuple(tr.events), None, tuple(tr.intervals))

    # 6. record
    plan_record = plan_to_dict(plan)
    plan_record["inputs"] = {  # what `explain` needs (argv stays in the jobs table only)
        "jobs": [{k: v for k, v in to_dict(j).items() if k != "command"} for j in jobs],
        "usage_ratio": {k: (v if v != float("inf") else None) for k, v in ratios.items()},
        "nodes": [to_dict(n) for n in nodes],
    }
    with store.transaction():
        tr.record(store)
        for job in queue.values():
            store.upsert_job(job)
        store.record_capacity(now, capacity)
        store.record_demand(now, demand)
        store.record_epoch(
            now,
            plan_record,
            None if plan.report is None else to_dict(plan.report),
            plan.degraded,
        )
    fault_point("cycle.before_ack")
    if hasattr(runner, "ack_events"):  # the observed events are recorded: not again
        runner.ack_events()
    fault_point("cycle.between_transactions")

    # 7. apply (and sample GPU utilization per job where the runner can: the metrics pyramid's
    # utilization layer, stored by the runner)
    applied = runner.apply(plan, dict(queue), now)
    fault_point("cycle.after_apply")
    if hasattr(runner, "sample_utilization"):
        runner.sample_utilization(now)
    placements = {p.job_id: p for p in plan.placements}
    tr2 = _Transitions(queue)
    for job_id in applied.started:
        job = queue.get(job_id)
        if job is not None and job_id in placements:
            queue[job_id] = dataclasses.replace(
                job, state=JobState.RUNNING, start_time=now, placement=placements[job_id]
            )
    tr2.apply(applied.events)
    with store.transaction():
        for job_id in applied.started:
            if job_id in queue:
                store.upsert_job(queue[job_id])
                store.record_event(now, job_id, EventKind.STARTED.value, "placed by plan")
        for job_id in {ev.job_id for ev in tr2.events} & queue.keys():  # requeued at apply
            store.upsert_job(queue[job_id])
        tr2.record(store)
        for job_id, err in applied.errors.items():
            store.record_event(now, job_id, "error", err)
    return CycleResult(
        plan,
        snapshot,
        tuple(tr.events) + tuple(tr2.events),
        applied,
        tuple(tr.intervals) + tuple(tr2.intervals),
    )
