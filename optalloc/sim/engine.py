"""The event-driven simulator: the cron epoch's turn (optalloc.turn) with a simulated clock and
cluster injected. What the engine adds is only *when* things happen; what happens is the turn's
code: the queue transitions of runner events, the run intervals, the demand and capacity
samples, the ledger's usage ratios, the snapshot, the policy's decision and the plan applied.

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
Every run interval goes to the ledger (usage ratios) and into the SimResult, as do demand
samples (whenever demand changes) and capacity samples (whenever a node changes);
`check_conservation` proves the ledger charged exactly what the cluster ran.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from dataclasses import dataclass

from optalloc.clock import SimClock
from optalloc.contract import protection_s
from optalloc.holds import hold_unknown
from optalloc.ledger import Ledger
from optalloc.org import OrgTree
from optalloc.sim.invariants import (
    SimulationInvariantError,
    check_cluster,
    check_conservation,
    check_plan,
)
from optalloc.sim.policies.base import Scheduler
from optalloc.sim.result import (CapacitySample, DemandSample, EpochRecord, JobRecord, SimResult,
                                 job_nodes, widest_node)
from optalloc.sim.runner import SimulatedRunner
from optalloc.sim.scenario.spec import Scenario
from optalloc.sim.tick_demand import TickDemand
from optalloc.turn import (
    Demand,
    Ended,
    Started,
    Transitions,
    apply_plan,
    as_queued,
    capacity_by_type,
    decide,
    interval,
)
from optalloc.types import Interval, Job, Node, NodeState

__all__ = ["check_conservation", "simulate"]


@dataclass
class _Rec:
    job: Job
    first_start: float | None = None
    end_time: float | None = None
    completed: bool = False


def simulate(
    scenario: Scenario,
    policy: Scheduler,
    *,
    progress: bool = False,
    check: bool = False,
    refresh_s: float = 3600.0,
) -> SimResult:
    """Replay `scenario` under `policy`; see the module docstring for the loop."""
    return _Simulation(scenario, policy, check=check, refresh_s=refresh_s).run(progress)


class _Simulation:
    def __init__(self, scenario: Scenario, policy: Scheduler, *, check: bool, refresh_s: float):
        self.sc = scenario
        self.policy = policy
        self.check = check
        self.refresh_s = float(refresh_s)
        # the scenario's epoch and checkpoint interval win; the policies see the same values
        pol = scenario.config.policy
        self.epoch_s = float(scenario.epoch_s or pol.epoch_s)
        ci = float(scenario.checkpoint_interval_s or pol.checkpoint_interval_s)
        pol = dataclasses.replace(pol, epoch_s=self.epoch_s, checkpoint_interval_s=ci)
        cfg = dataclasses.replace(scenario.config, policy=pol)
        self.cfg = cfg
        self.clock = SimClock(0.0)
        self.runner = SimulatedRunner(cfg.nodes, grace_s=pol.grace_s, checkpoint_interval_s=ci)
        tree = OrgTree.build(cfg.org, [g.name for g in cfg.gpu_types])
        self.ledger = Ledger(cfg.gpu_types, tree, pol)
        self.nodes: dict[str, Node] = {n.name: n for n in cfg.nodes}
        self.cap_rt = pol.min_runtime_cap_s
        self.subs = [as_queued(j) for j in sorted(scenario.jobs, key=lambda j: (j.submit_time, j.id))]
        self.node_events = sorted(
            ((float(e.time), name, NodeState(e.state)) for e in scenario.node_events
             for name in e.nodes),
            key=lambda e: e[0],
        )
        self.end = math.inf if scenario.duration_s is None else float(scenario.duration_s)
        # state
        self.queue: dict[str, Job] = {}  # queued + running jobs, current view
        self.recs: dict[str, _Rec] = {}
        self.intervals: list[Interval] = []
        self.expiries: list[tuple[float, str, float]] = []  # (time, job, run start)
        self.epochs: list[EpochRecord] = []
        self.demand_samples: list[DemandSample] = []
        self.capacity_samples: list[CapacitySample] = []
        self.demand = Demand(tree, self.nodes.values())
        self.demand_changed = True
        self.ticks = TickDemand(tree, self.nodes.values(), self.ledger, self.epoch_s)
        self.dirty = True
        self.last_decision = -math.inf
        self.decision_wanted_at = math.inf
        self.n_queued = 0  # queued, not running
        self.draining = any(n.state is NodeState.DRAIN for n in self.nodes.values())
        self.reservations: tuple = ()  # the last plan's (Plan.reservations)
        self.reservation_idle: tuple = ()  # and its Plan.reservation_idle

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
                self.node_events[ni][0] if ni < len(self.node_events) else math.inf,
                self._next_expiry(),
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
                self._observe(t)
                break
            if bar is not None:
                bar.update((t_next - t) / 3600.0)
            t = t_next
            self.clock.advance_to(t)
            if self.runner.next_event_time() <= t:  # observe only when the cluster changed
                self._observe(t)
            while ni < len(self.node_events) and self.node_events[ni][0] <= t:
                self._node_event(*self.node_events[ni][1:], t)
                ni += 1
            want = False
            while si < len(self.subs) and self.subs[si].submit_time <= t:
                self._submit(self.subs[si])
                si += 1
                want = want or self.sc.early_solve
            while self.expiries and self.expiries[0][0] <= t:
                _, jid, start = heapq.heappop(self.expiries)
                if self._runs(jid, start):
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
                # (a decision put off to the end of a grace period is dropped too, else the
                # loop would stop at that time for ever)
                want = self.dirty = False
                self.decision_wanted_at = math.inf
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

    def _next_expiry(self) -> float:
        """When the next protection of a run still going ends: expiries of runs that already
        ended (a job finished or stopped inside its protection) are dropped, so they neither
        wake the loop nor keep an open-ended run going past its last job."""
        while self.expiries:
            if self._runs(*self.expiries[0][1:]):
                return self.expiries[0][0]
            heapq.heappop(self.expiries)
        return math.inf

    def _runs(self, jid: str, start: float) -> bool:
        """Whether job `jid`'s run that started at `start` still goes (an expiry's run)."""
        job = self.queue.get(jid)
        return job is not None and job.running and job.start_time == start

    def _finished(self, si: int, ni: int, t_event: float) -> bool:
        """Open-ended runs stop when nothing can change any more: no submissions, node events
        or cluster transitions ahead, and the last decision saw the current state."""
        if si < len(self.subs) or ni < len(self.node_events) or math.isfinite(t_event):
            return False
        return not self.queue or (not self.runner.runs and not self.dirty)

    # ------------------------------------------------------------------ the turn's pieces

    def _decide(self, now: float) -> None:
        """The turn's decision (ledger -> snapshot -> policy), checked, then applied."""
        holds = hold_unknown(self.cfg, self.queue.values())
        d = decide(holds, now, self.queue, self.ledger, self.nodes.values(), self.policy,
                   reservations=self.reservations, reservation_idle=self.reservation_idle)
        self.reservations = d.plan.reservations  # the next snapshot carries them (lookahead)
        self.reservation_idle = d.plan.reservation_idle
        if self.check:
            check_plan(d.snapshot, d.plan)
        self.dirty = False  # transitions from here on (requeues at apply) count as changes
        res, tr = apply_plan(self.runner, d.plan, self.queue, now)
        if res.errors:
            raise SimulationInvariantError(f"t={now:g}: the cluster refused the plan: {dict(res.errors)}")
        self._handle(tr)
        if self.check:
            check_cluster(self.runner.runs, now)
        rep = d.plan.report
        snap = d.snapshot
        self.epochs.append(
            EpochRecord(
                time=now,
                solve_s=d.decide_s,
                status=rep.status if rep else "heuristic",
                n_queued=int((~snap.job_running).sum()),
                n_running=int(snap.job_running.sum()),
                n_started=len(res.started),
                n_preempted=len(res.preempting),
                gap=rep.gap if rep else None,
                reservations=d.plan.reservations,
                reservations_ended=d.plan.reservations_ended,
            )
        )
        self.last_decision = now

    def _observe(self, now: float) -> None:
        self._handle(Transitions(self.queue).apply(self.runner.observe(now).events))

    def _handle(self, tr: Transitions) -> None:
        """What the engine keeps of the turn's transitions: intervals into the ledger and the
        result, protection expiries, first starts and ends, demand, whether anything changed."""
        self.n_queued += tr.queued_delta
        for o in tr.outcomes:
            if isinstance(o, Started):
                job, rec = o.job, self.recs[o.job.id]
                if rec.first_start is None or job.start_time < rec.first_start:
                    rec.first_start = job.start_time  # (an unbegun run may start earlier)
                if job.placement.allocated:  # unallocated runs have no protection to expire
                    end = job.start_time + protection_s(job.min_runtime_s, self.cap_rt)
                    heapq.heappush(self.expiries, (end, job.id, job.start_time))
                continue
            assert isinstance(o, Ended)
            jid = o.event.job_id
            rec = self.recs[jid]
            self.dirty = True
            if o.interval is not None:
                self.intervals.append(o.interval)
                self.ledger.record_interval(o.interval)
            elif rec.first_start == o.run.start_time:
                # stopped before it ever ran: an earlier run that ran would have started
                # earlier (before, `runs == 1` kept the start of a second unbegun run)
                rec.first_start = None
            if o.status is not None:  # finished, failed, or preempted without resume: gone
                rec.end_time = o.event.time
                rec.completed = o.status == "finished"
                self.demand.add(o.run, -1)
                self.demand_changed = True
                self.ticks.end(o.run, o.event.time)

    def _submit(self, job: Job) -> None:
        self.queue[job.id] = job
        self.recs[job.id] = _Rec(job)
        self.n_queued += 1
        self.demand.add(job)
        self.demand_changed = True
        self.ticks.submit(job)
        self.dirty = True

    def _node_event(self, name: str, state: NodeState, now: float) -> None:
        node = self.nodes.get(name)
        if node is None:
            raise SimulationInvariantError(
                f"node event at t={now:g} names node {name!r}, which is not in the config"
            )
        self.nodes[name] = dataclasses.replace(node, state=state)
        self.runner.set_node_state(name, state, now)
        self._observe(now)
        self._record_capacity(now)
        if self.demand.set_nodes(self.nodes.values()):  # what can run changed
            self.demand_changed = True
        self.ticks.nodes_changed()
        self.draining = any(n.state is NodeState.DRAIN for n in self.nodes.values())
        self.dirty = True

    # ------------------------------------------------------------------ samples

    def _record_demand(self, t: float) -> None:
        # the decisions' ledger sees demand as cron does (optalloc.sim.tick_demand); the
        # metrics keep the exact times
        self.ticks.tick(t, self.nodes.values())
        if not self.demand_changed:
            return
        self.demand_changed = False
        by, fit = self.demand.by_project(), self.demand.placeable_by_project()
        sample = DemandSample(t, by, self.demand.total, fit)
        if self.demand_samples and self.demand_samples[-1].time == t:
            self.demand_samples[-1] = sample
        else:
            self.demand_samples.append(sample)

    def _record_capacity(self, t: float) -> None:
        by = capacity_by_type(self.cfg.gpu_types, self.nodes.values())
        sample = CapacitySample(t, by)
        if self.capacity_samples and self.capacity_samples[-1].time == t:
            self.capacity_samples[-1] = sample
        else:
            self.capacity_samples.append(sample)
        self.ledger.record_capacity(t, by)

    # ------------------------------------------------------------------ result

    def _result(self, end: float) -> SimResult:
        running = [j for j in self.queue.values() if j.running]
        # the cluster's own count of allocated GPU-seconds, runs still open counted to the end
        ran_s = sum(st.charged_gpu_s for st in self.runner.stats.values()) + sum(
            (end - j.start_time) * j.gpus for j in running
            if j.placement.allocated and end > j.start_time
        )
        for job in running:  # runs still open are cut at the end
            iv = interval(job, end)
            if iv is not None:
                self.intervals.append(iv)
                self.ledger.record_interval(iv)
        if self.check:
            cols = self.ledger.columns()
            alloc = cols["allocated"]
            charged_s = float(((cols["gpus"] * (cols["end"] - cols["start"]))[alloc]).sum())
            if not math.isclose(charged_s, ran_s, rel_tol=1e-9, abs_tol=1e-3):
                raise SimulationInvariantError(
                    f"the ledger charged {charged_s / 3600:.6f} GPU-hours but the cluster ran "
                    f"allocated jobs for {ran_s / 3600:.6f}"
                )
        # jobs still running at the end keep no end time
        recs = []
        widest = widest_node(self.cfg.nodes)
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
                    nodes=job_nodes(rec.job, widest),
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
            demand=tuple(self.demand_samples),
            capacity=tuple(self.capacity_samples),
            seed=self.sc.seed,
        )


def _bar(progress: bool, end: float, scenario: str, policy: str):
    if not progress:
        return None
    from tqdm import tqdm

    total = end / 3600.0 if math.isfinite(end) else None
    return tqdm(
        total=total, desc=f"{scenario}/{policy}", unit="sim-h", leave=False, mininterval=1.0,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} simulated hours [{elapsed}<{remaining}]",
    )
