"""The event-driven simulator: production's epoch loop with an injected clock and runner.

Per decision point, the same phases as the cron path:

    observe (runner)  ->  update queue + ledger  ->  build_snapshot  ->  policy.decide  ->  apply

Time jumps between events: submissions, completions and stops (the SimulatedRunner's),
min-runtime expiries, node state changes and epoch ticks. A decision happens

* at an epoch tick when something changed since the last decision (a submission, an exit, a
  requeue, an expiry, a node change), or when jobs wait and `refresh_s` passed since the last
  one (usage ratios drift with time even when nothing happens);
* at a submission, at once, when the scenario says `early_solve` (debug jobs start within
  seconds instead of at the next tick);
* never when no job waits and no node drains (no plan could start or stop anything);
* never while a grace period runs: a decision wanted then waits for the last stop, so no plan
  is made on GPUs that are still being released.

Jobs enter the queue at their submit time (a scenario job declared running starts queued).
Every run interval goes to the ledger (usage ratios) and into the SimResult, as do demand and
capacity samples; `check_conservation` proves the ledger charged exactly what the cluster ran.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import numpy as np

from optalloc.ledger import Ledger
from optalloc.contract import protection_s
from optalloc.org import OrgTree
from optalloc.runners.base import EventKind, JobEvent
from optalloc.sim.clock import SimClock
from optalloc.sim.invariants import SimulationInvariantError, check_plan
from optalloc.sim.policies.base import Scheduler
from optalloc.sim.result import CapacitySample, DemandSample, EpochRecord, JobRecord, SimResult
from optalloc.sim.runner import SimulatedRunner
from optalloc.snapshot import build_snapshot
from optalloc.types import Config, Interval, Job, JobState, Node, NodeState


class NodeEventLike(Protocol):
    time: float
    nodes: Sequence[str]  # or a single `node`
    state: Any  # NodeState or its value


class ScenarioLike(Protocol):
    """What the engine reads from a scenario (optalloc.sim.scenario.Scenario has these)."""

    name: str
    config: Config
    jobs: Sequence[Job]
    duration_s: float | None
    epoch_s: float | None
    checkpoint_interval_s: float | None
    early_solve: Any
    seed: int | None
    node_events: Sequence[NodeEventLike]


@dataclass(frozen=True)
class NodeEvent:
    time: float
    node: str
    state: NodeState


@dataclass(frozen=True)
class SimScenario:
    """A scenario built in code (tests, notebooks): the fields the engine reads."""

    name: str
    config: Config
    jobs: tuple[Job, ...]
    duration_s: float | None = None  # None: until every job has ended
    epoch_s: float | None = None  # None: config.policy.epoch_s
    checkpoint_interval_s: float | None = None  # None: config.policy.checkpoint_interval_s
    early_solve: bool = True
    seed: int | None = None
    node_events: tuple[NodeEvent, ...] = ()
    source_path: str | None = None


@dataclass
class _Rec:
    job: Job
    first_start: float | None = None
    end_time: float | None = None
    completed: bool = False


def simulate(
    scenario: ScenarioLike,
    policy: Scheduler,
    *,
    progress: bool = False,
    check: bool = False,
    refresh_s: float = 3600.0,
) -> SimResult:
    """Replay `scenario` under `policy`; see the module docstring for the loop."""
    return _Simulation(scenario, policy, check=check, refresh_s=refresh_s).run(progress)


class _Simulation:
    def __init__(self, scenario: ScenarioLike, policy: Scheduler, *, check: bool, refresh_s: float):
        self.sc = scenario
        self.policy = policy
        self.check = check
        self.refresh_s = float(refresh_s)
        # the scenario's epoch and checkpoint interval win; the policies see the same values
        pol = scenario.config.policy
        self.epoch_s = float(getattr(scenario, "epoch_s", None) or pol.epoch_s)
        ci = float(getattr(scenario, "checkpoint_interval_s", None) or pol.checkpoint_interval_s)
        pol = dataclasses.replace(pol, epoch_s=self.epoch_s, checkpoint_interval_s=ci)
        cfg = dataclasses.replace(scenario.config, policy=pol)
        self.cfg = cfg
        self.clock = SimClock(0.0)
        self.runner = SimulatedRunner(cfg.nodes, grace_s=pol.grace_s, checkpoint_interval_s=ci)
        tree = OrgTree.build(cfg.org, [g.name for g in cfg.gpu_types])
        self.ledger = Ledger(cfg.gpu_types, tree, pol)
        self.nodes: dict[str, Node] = {n.name: n for n in cfg.nodes}
        self.cap_rt = pol.min_runtime_cap_s
        self.early_solve = bool(getattr(scenario, "early_solve", False))
        subs = sorted(scenario.jobs, key=lambda j: (j.submit_time, j.id))
        self.subs = [
            dataclasses.replace(j, state=JobState.QUEUED, start_time=None, placement=None)
            for j in subs
        ]
        self.node_events = sorted(
            (
                NodeEvent(float(e.time), name, NodeState(getattr(e.state, "value", e.state)))
                for e in (getattr(scenario, "node_events", None) or ())
                for name in (getattr(e, "nodes", None) or (e.node,))
            ),
            key=lambda e: e.time,
        )
        dur = getattr(scenario, "duration_s", None)
        self.end = float(dur) if dur is not None else math.inf
        # state
        self.queue: dict[str, Job] = {}  # queued + running jobs, current view
        self.recs: dict[str, _Rec] = {}
        self.open: dict[str, tuple[Job, Any, float]] = {}  # job -> (job, placement, start)
        self.intervals: list[Interval] = []
        self.expiries: list[tuple[float, str, float]] = []  # (time, job, run start)
        self.epochs: list[EpochRecord] = []
        self.demand: list[DemandSample] = []
        self.capacity: list[CapacitySample] = []
        self.alloc_by_proj: dict[str, int] = {}
        self.total_demand = 0
        self.demand_changed = True
        self.dirty = True
        self.last_decision = -math.inf
        self.decision_wanted_at = math.inf
        self.n_queued = 0  # queued, not running
        self.draining = any(n.state is NodeState.DRAIN for n in self.nodes.values())
        self.reservations: tuple = ()  # the last plan's (Plan.reservations)

    # ------------------------------------------------------------------ main loop

    def run(self, progress: bool) -> SimResult:
        bar = _bar(progress, self.end, self.sc.name, self.policy.name)
        si = ni = 0
        t = 0.0
        next_tick = 0.0
        self._record_capacity(0.0)
        while True:
            cand = [
                self.subs[si].submit_time if si < len(self.subs) else math.inf,
                self.node_events[ni].time if ni < len(self.node_events) else math.inf,
                self.expiries[0][0] if self.expiries else math.inf,
                self.runner.next_event_time(),
                self.decision_wanted_at,
            ]
            t_event = max(t, min(cand))
            if not math.isfinite(self.end) and self._finished(si, ni, t_event):
                break
            t_next = min(t_event, next_tick)
            if t_next >= self.end:
                if bar is not None:
                    bar.update((self.end - t) / 3600.0)
                t = self.end
                self.clock.advance_to(t)
                self._handle(self.runner.observe(t).events)
                break
            if bar is not None:
                bar.update((t_next - t) / 3600.0)
            t = t_next
            self.clock.advance_to(t)
            if self.runner.next_event_time() <= t:  # observe only when the cluster changed
                self._handle(self.runner.observe(t).events)
            while ni < len(self.node_events) and self.node_events[ni].time <= t:
                self._node_event(self.node_events[ni], t)
                ni += 1
            want = False
            while si < len(self.subs) and self.subs[si].submit_time <= t:
                self._submit(self.subs[si])
                si += 1
                want = want or self.early_solve
            while self.expiries and self.expiries[0][0] <= t:
                _, jid, start = heapq.heappop(self.expiries)
                if jid in self.open and self.open[jid][2] == start:
                    self.dirty = True
            if t >= next_tick:
                next_tick = (math.floor(t / self.epoch_s) + 1) * self.epoch_s
                if self.dirty or (
                    self.n_queued and t - self.last_decision >= self.refresh_s
                ):
                    want = True
            if t >= self.decision_wanted_at:
                want = True
            self._record_demand(t)
            if want and not self.n_queued and not self.draining:
                # nothing waits and no node is draining: no plan can start or stop anything
                want = self.dirty = False
            if want:
                quiet = self.runner.quiet_at()
                if quiet > t:
                    self.decision_wanted_at = quiet
                else:
                    self.decision_wanted_at = math.inf
                    self._decide(t)
                    self._record_demand(t)
        if bar is not None:
            bar.close()
        return self._result(t)

    def _finished(self, si: int, ni: int, t_event: float) -> bool:
        """Open-ended runs stop when nothing can change any more: no submissions, node events
        or cluster transitions ahead, and the last decision saw the current state."""
        if si < len(self.subs) or ni < len(self.node_events) or math.isfinite(t_event):
            return False
        return not self.queue or (not self.runner.runs and not self.dirty)

    # ------------------------------------------------------------------ phases

    def _decide(self, now: float) -> None:
        """snapshot -> decide -> (check) -> apply, then handle the transitions at apply."""
        open_ivs = [
            Interval(jid, job.project, pl.gpu_type, job.gpus, start, now, pl.allocated)
            for jid, (job, pl, start) in self.open.items()
            if start < now
        ]
        ratios = self.ledger.usage_ratios(now, open_ivs)
        jobs = list(self.queue.values())
        snap = build_snapshot(self.cfg, now, jobs, ratios, list(self.nodes.values()),
                              reservations=self.reservations)
        t0 = time.perf_counter()
        plan = self.policy.decide(snap)
        solve_s = time.perf_counter() - t0
        self.reservations = plan.reservations  # the next snapshot carries them (lookahead)
        if self.check:
            check_plan(snap, plan)
        self.dirty = False  # transitions from here on (requeues at apply) count as changes
        res = self.runner.apply(plan, self.queue, now)
        if res.errors:
            raise SimulationInvariantError(f"t={now:g}: the cluster refused the plan: {dict(res.errors)}")
        self._handle(res.events)
        if self.check:
            self._check_cluster(now)
        rep = plan.report
        self.epochs.append(
            EpochRecord(
                time=now,
                solve_s=solve_s,
                status=rep.status if rep else "heuristic",
                n_queued=int((~snap.job_running).sum()),
                n_running=int(snap.job_running.sum()),
                n_started=len(res.started),
                n_preempted=len(res.preempting),
                gap=rep.gap if rep else None,
                reservations=plan.reservations,
                reservations_ended=plan.reservations_ended,
            )
        )
        self.last_decision = now

    def _handle(self, events: Sequence[JobEvent]) -> None:
        for ev in events:
            rec = self.recs[ev.job_id]
            if ev.kind is EventKind.STARTED:
                job = self.queue[ev.job_id]
                self.queue[ev.job_id] = dataclasses.replace(
                    job, state=JobState.RUNNING, start_time=ev.time, placement=ev.placement
                )
                self.open[ev.job_id] = (job, ev.placement, ev.time)
                self.n_queued -= 1
                if rec.first_start is None:
                    rec.first_start = ev.time
                if ev.placement.allocated:  # unallocated runs have no protection to expire
                    heapq.heappush(
                        self.expiries, (ev.time + protection_s(job.min_runtime_s, self.cap_rt),
                                        job.id, ev.time)
                    )
                continue
            self._close(ev.job_id, ev.time)
            self.dirty = True
            job = self.queue[ev.job_id]
            if ev.kind is EventKind.REQUEUED:
                left = self.runner.work_left(ev.job_id)
                self.queue[ev.job_id] = dataclasses.replace(
                    rec.job,
                    duration_s=None if not math.isfinite(left) else left,
                )
                self.n_queued += 1
            else:  # finished, failed, or preempted without resume: gone
                del self.queue[ev.job_id]
                rec.end_time = ev.time
                rec.completed = ev.kind is EventKind.FINISHED
                self._demand_delta(job, -1)

    def _close(self, jid: str, t: float) -> None:
        job, pl, start = self.open.pop(jid)
        if t > start:
            iv = Interval(jid, job.project, pl.gpu_type, job.gpus, start, t, pl.allocated)
            self.intervals.append(iv)
            self.ledger.record_interval(iv)
        elif self.recs[jid].first_start == start and self.runner.stats[jid].runs == 1:
            self.recs[jid].first_start = None  # stopped before it ever ran

    def _submit(self, job: Job) -> None:
        self.queue[job.id] = job
        self.recs[job.id] = _Rec(job)
        self.n_queued += 1
        self._demand_delta(job, +1)
        self.dirty = True

    def _node_event(self, ev: NodeEvent, now: float) -> None:
        node = self.nodes.get(ev.node)
        if node is None:
            raise SimulationInvariantError(
                f"node event at t={ev.time:g} names node {ev.node!r}, which is not in the config"
            )
        self.nodes[ev.node] = dataclasses.replace(node, state=ev.state)
        self.runner.set_node_state(ev.node, ev.state, now)
        self._handle(self.runner.observe(now).events)
        self._record_capacity(now)
        self.draining = any(n.state is NodeState.DRAIN for n in self.nodes.values())
        self.dirty = True

    # ------------------------------------------------------------------ samples

    def _demand_delta(self, job: Job, sign: int) -> None:
        self.total_demand += sign * job.gpus
        if job.allocated:
            self.alloc_by_proj[job.project] = self.alloc_by_proj.get(job.project, 0) + sign * job.gpus
        self.demand_changed = True

    def _record_demand(self, t: float) -> None:
        if not self.demand_changed:
            return
        self.demand_changed = False
        by = {p: g for p, g in self.alloc_by_proj.items() if g}
        sample = DemandSample(t, by, self.total_demand)
        if self.demand and self.demand[-1].time == t:
            self.demand[-1] = sample
        else:
            self.demand.append(sample)
        self.ledger.record_demand(t, by)

    def _record_capacity(self, t: float) -> None:
        by: dict[str, int] = {g.name: 0 for g in self.cfg.gpu_types}
        for n in self.nodes.values():
            if n.state is NodeState.UP:
                by[n.gpu_type] += n.gpus
        sample = CapacitySample(t, by)
        if self.capacity and self.capacity[-1].time == t:
            self.capacity[-1] = sample
        else:
            self.capacity.append(sample)
        self.ledger.record_capacity(t, by)

    # ------------------------------------------------------------------ checks and result

    def _check_cluster(self, now: float) -> None:
        """No GPU is held by two runs at overlapping times (stopping and starting included)."""
        holders: dict[tuple[str, int], list] = {}
        for jid, run in self.runner.runs.items():
            span = (run.start, run.stop_at if run.stop_at is not None else math.inf)
            for a in run.placement.nodes:
                for g in a.gpus:
                    holders.setdefault((a.node, g), []).append((span, jid))
        for key, spans in holders.items():
            spans.sort()
            for (s1, j1), (s2, j2) in zip(spans, spans[1:]):
                if s2[0] < s1[1]:
                    raise SimulationInvariantError(
                        f"t={now:g}: GPU {key[0]}:{key[1]} is held by {j1} and {j2} at once"
                    )

    def _result(self, t_end: float) -> SimResult:
        end = t_end
        # the cluster's own count of allocated GPU-seconds, runs still open counted to the end
        ran_s = sum(st.charged_gpu_s for st in self.runner.stats.values()) + sum(
            (end - start) * job.gpus for job, pl, start in self.open.values()
            if pl.allocated and end > start
        )
        for jid in list(self.open):
            self._close(jid, end)
        if self.check:
            cols = self.ledger.columns()
            alloc = cols["allocated"]
            charged_s = float(np.sum((cols["gpus"] * (cols["end"] - cols["start"]))[alloc]))
            if not math.isclose(charged_s, ran_s, rel_tol=1e-9, abs_tol=1e-3):
                raise SimulationInvariantError(
                    f"the ledger charged {charged_s / 3600:.6f} GPU-hours but the cluster ran "
                    f"allocated jobs for {ran_s / 3600:.6f}"
                )
        # jobs still running at the end keep no end time
        recs = []
        for jid, rec in self.recs.items():
            st = self.runner.stats.get(jid)
            recs.append(
                JobRecord(
                    job_id=jid,
                    project=rec.job.project,
                    gpus=rec.job.gpus,
                    min_runtime_s=rec.job.min_runtime_s,
                    submit_time=rec.job.submit_time,
                    first_start=rec.first_start,
                    end_time=rec.end_time,
                    completed=rec.completed,
                    preemptions=st.preemptions if st else 0,
                    lost_gpu_s=st.lost_gpu_s if st else 0.0,
                )
            )
        return SimResult(
            policy=self.policy.name,
            scenario=self.sc.name,
            config=self.cfg,
            start=0.0,
            end=end,
            intervals=tuple(sorted(self.intervals, key=lambda iv: (iv.start, iv.end, iv.job_id))),
            jobs=tuple(recs),
            epochs=tuple(self.epochs),
            demand=tuple(self.demand),
            capacity=tuple(self.capacity),
            seed=getattr(self.sc, "seed", None),
        )


def check_conservation(result: SimResult, ledger: Ledger | None = None) -> tuple[float, float]:
    """(charged GPU-hours in a ledger fed the result's intervals, allocated GPU-hours of the run
    intervals). Raises SimulationInvariantError when they differ."""
    cfg = result.config
    if ledger is None:
        ledger = Ledger(cfg.gpu_types, OrgTree.build(cfg.org, [g.name for g in cfg.gpu_types]), cfg.policy)
        ledger.record_intervals(result.intervals)
    cols = ledger.columns()
    w = {g.name: g.billing_weight for g in cfg.gpu_types}
    charged = float(np.sum(cols["charge"] * (cols["end"] - cols["start"]))) / 3600.0
    ran = sum(iv.gpus * w[iv.gpu_type] * (iv.end - iv.start) for iv in result.intervals if iv.allocated) / 3600.0
    if not math.isclose(charged, ran, rel_tol=1e-9, abs_tol=1e-6):
        raise SimulationInvariantError(
            f"ledger charged {charged:.6f} GPU-hours but the run intervals hold {ran:.6f}"
        )
    return charged, ran


def _bar(progress: bool, end: float, scenario: str, policy: str):
    if not progress:
        return None
    from tqdm import tqdm

    total = end / 3600.0 if math.isfinite(end) else None
    return tqdm(
        total=total, desc=f"{scenario}/{policy}", unit="sim-h", leave=False, mininterval=1.0,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} simulated hours [{elapsed}<{remaining}]",
    )
