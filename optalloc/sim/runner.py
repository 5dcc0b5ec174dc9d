"""SimulatedRunner: the simulated cluster behind the Runner protocol.

It executes plans the way real nodes would and reports what happened:

* A started job runs at the speed of its gpu_type (`Job.speedup`, default 1.0): its remaining
  work (seconds at speed 1.0, from `duration_s`) decreases by elapsed * speed, and it finishes
  when the work is done. A job without `duration_s` runs until stopped.
* A preempted job gets its notice at the decision time and stops `grace_s` later (it keeps its
  GPUs, and keeps working, during the grace period). A new job whose GPUs are still held by
  a stopping job starts when they are released.
* A stopped resumable job loses the work done since its last checkpoint (checkpoints every
  `checkpoint_interval_s` of run time; the job's own interval wins) and is requeued
  (REQUEUED); a stopped non-resumable job loses its whole run and ends (PREEMPTED).
* A node that goes down kills its jobs at once (no grace), with the same loss rules. A node
  that starts draining takes no new work: a start there still waiting for GPUs in a grace
  period goes back to the queue, unbegun.

Time moves only when the engine says so: `observe(now)` reports every transition up to `now`,
`next_event_time()` says when the next one happens, `quiet_at()` when the last grace period
ends.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Iterable, Mapping

from optalloc.runners.base import ApplyResult, EventKind, JobEvent, Observation, Runner
from optalloc.types import Job, Node, NodeState, Placement, Plan, ReasonCode


@dataclass
class _Run:
    job: Job
    placement: Placement
    start: float  # when the GPUs are taken (after a grace period, possibly in the future)
    speed: float
    work_at_start: float  # remaining work (speed-1 seconds) when this run started
    seq: int  # run number of this job (stale heap entries are skipped)
    stop_at: float | None = None
    stop_message: str = ""

    @property
    def finish_at(self) -> float:
        return self.start + self.work_at_start / self.speed


@dataclass
class JobStats:
    """What the cluster did to one job over the whole simulation."""

    remaining: float  # work left, speed-1 seconds (inf: no known duration)
    runs: int = 0
    preemptions: int = 0
    lost_gpu_s: float = 0.0
    ran_gpu_s: float = 0.0  # GPU-seconds of finished runs (the cluster's own count)
    charged_gpu_s: float = 0.0  # of which as allocated work (Placement.allocated)
    completed: bool = False


class SimulatedRunner(Runner):
    name = "simulated"
    authoritative = True  # it is the cluster: its running set is the truth

    def __init__(
        self,
        nodes: Iterable[Node],
        *,
        grace_s: float = 0.0,
        checkpoint_interval_s: float = 3600.0,
    ):
        self.nodes: dict[str, Node] = {n.name: n for n in nodes}
        self.grace_s = float(grace_s)
        self.checkpoint_interval_s = float(checkpoint_interval_s)
        self.runs: dict[str, _Run] = {}
        self.stats: dict[str, JobStats] = {}
        self._heap: list[tuple[float, int, str, int]] = []  # (time, kind, job, seq)
        self._seq = 0
        self._outbox: list[JobEvent] = []
        self._gpu_free_at: dict[tuple[str, int], float] = {}  # GPUs held by stopping jobs
        self._stopping: dict[str, float] = {}  # job -> stop time, for jobs given notice
        self._restarts: dict[str, tuple[Job, Placement, float]] = {}  # moved jobs

    # ------------------------------------------------------------------ Runner protocol

    def observe(self, now: float) -> Observation:
        """Run every transition up to `now` and report it (with its exact time)."""
        while self._heap and self._heap[0][0] <= now:
            t, kind, jid, seq = heapq.heappop(self._heap)
            run = self.runs.get(jid)
            if run is None or run.seq != seq:
                continue  # stale: that run already ended
            if kind == _STOP:
                self._end(jid, t, completed=False, message=run.stop_message)
            else:
                self._end(jid, t, completed=True, message="work done")
        events, self._outbox = tuple(self._outbox), []
        return Observation(
            now=now,
            running={jid: (r.placement, r.start) for jid, r in self.runs.items()},
            events=events,
            node_states={n: node.state for n, node in self.nodes.items()},
        )

    def apply(self, plan: Plan, jobs: Mapping[str, Job], now: float) -> ApplyResult:
        """Send notices for the plan's preemptions (the stop comes after the grace period, at
        once when it is 0), then start its new placements (when their GPUs are released). A
        running job whose placement changes is moved: stopped, then started again."""
        preempting = []
        for pre in plan.preemptions:
            run = self.runs.get(pre.job_id)
            if run is not None and run.stop_at is None:
                preempting.append(pre.job_id)
                self._notice(pre.job_id, now, min(self.grace_s, pre.grace_s), pre.code.value)
        started, errors = [], {}
        for pl in plan.placements:
            run = self.runs.get(pl.job_id)
            if run is not None and run.placement == pl and run.stop_at is None:
                continue  # kept where it is
            job = jobs.get(pl.job_id)
            if job is None:
                errors[pl.job_id] = "not a known job"
                continue
            start = self._free_at(pl.gpu_keys, now)
            started.append(pl.job_id)
            if run is None:
                self._start(job, pl, start)
                continue
            # moved: its own stop frees its old GPUs; it starts again on the new ones
            self._restarts[pl.job_id] = (job, pl, start)
            if run.stop_at is None:
                preempting.append(pl.job_id)
                self._notice(pl.job_id, now, self.grace_s, ReasonCode.MOVED.value)
        events, self._outbox = tuple(self._outbox), []
        return ApplyResult(
            started=tuple(started), preempting=tuple(preempting), errors=errors, events=events
        )

    # ------------------------------------------------------------------ engine hooks

    def next_event_time(self) -> float:
        while self._heap:
            t, kind, jid, seq = self._heap[0]
            run = self.runs.get(jid)
            if run is not None and run.seq == seq:
                return t
            heapq.heappop(self._heap)
        return math.inf

    def quiet_at(self) -> float:
        """When the last pending stop completes (decisions wait until then)."""
        return max(self._stopping.values(), default=-math.inf)

    def set_node_state(self, name: str, state: NodeState, now: float) -> list[str]:
        """Change a node's state; a node going down kills its jobs at once, a draining one
        sends back to the queue the starts not yet begun there (rule 5); a job moving onto
        either is requeued at its stop. Returns the jobs ended now."""
        node = self.nodes[name]
        self.nodes[name] = Node(node.name, node.gpu_type, node.gpus, state)
        killed = []
        if state is NodeState.DOWN:
            for jid, run in list(self.runs.items()):
                if name in run.placement.node_names:
                    killed.append(jid)
                    self._restarts.pop(jid, None)
                    self._end(jid, now, completed=False, message=f"node {name} went down")
        elif state is NodeState.DRAIN:
            # a drain node takes no new work: a start still waiting there for GPUs in a grace
            # period (or released at this very instant) has done nothing; it goes back to the
            # queue (a later plan places it)
            for jid, run in list(self.runs.items()):
                if run.start >= now and name in run.placement.node_names:
                    killed.append(jid)
                    self._end(jid, now, completed=False, message=f"node {name} is draining")
        if state is not NodeState.UP:
            for jid, (_, pl, _) in list(self._restarts.items()):
                if name in pl.node_names:  # a move onto it, waiting for its own stop: the
                    del self._restarts[jid]  # stop requeues it instead
        return killed

    def work_left(self, job_id: str) -> float:
        st = self.stats.get(job_id)
        return st.remaining if st else math.inf

    # ------------------------------------------------------------------ internals

    def _stats(self, job: Job) -> JobStats:
        st = self.stats.get(job.id)
        if st is None:
            st = JobStats(remaining=math.inf if job.duration_s is None else float(job.duration_s))
            self.stats[job.id] = st
        return st

    def _start(self, job: Job, pl: Placement, start: float) -> None:
        st = self._stats(job)
        st.runs += 1
        speed = max(float(job.speedup.get(pl.gpu_type, 1.0)), 1e-9)
        self._seq += 1
        run = _Run(job, pl, start, speed, st.remaining, self._seq)
        self.runs[job.id] = run
        if math.isfinite(run.finish_at):
            heapq.heappush(self._heap, (run.finish_at, _FINISH, job.id, run.seq))
        self._outbox.append(JobEvent(job.id, EventKind.STARTED, start, pl, None, "started"))

    def _notice(self, jid: str, now: float, grace: float, message: str) -> None:
        run = self.runs[jid]
        run.stop_at = max(now + grace, run.start)
        run.stop_message = message
        if run.stop_at <= now:
            self._end(jid, now, completed=False, message=message)
            return
        if run.stop_at < run.finish_at:  # else it finishes during its grace period
            heapq.heappush(self._heap, (run.stop_at, _STOP, jid, run.seq))
        self._stopping[jid] = run.stop_at
        for k in run.placement.gpu_keys:
            self._gpu_free_at[k] = max(self._gpu_free_at.get(k, now), run.stop_at)

    def _end(self, jid: str, t: float, *, completed: bool, message: str) -> None:
        run = self.runs.pop(jid)
        self._stopping.pop(jid, None)
        st = self.stats[jid]
        job = run.job
        elapsed = max(0.0, t - run.start)
        st.ran_gpu_s += elapsed * job.gpus
        if run.placement.allocated:
            st.charged_gpu_s += elapsed * job.gpus
        if completed:
            st.remaining = 0.0
            st.completed = True
            kind = EventKind.FINISHED
        else:
            if t > run.start:  # a start sent back unbegun (its node went down or drained
                st.preemptions += 1  # during the grace it waited out) was never preempted
            # a run killed before it began (its node went down during a grace period it
            # waited out) did no work: it goes back to the queue, resumable or not
            if job.resumable or t <= run.start:
                ci = job.checkpoint_interval_s or self.checkpoint_interval_s
                lost = elapsed % ci if ci > 0 else elapsed
                st.remaining = max(0.0, run.work_at_start - (elapsed - lost) * run.speed)
                kind = EventKind.REQUEUED
            else:
                lost = elapsed
                kind = EventKind.PREEMPTED
            st.lost_gpu_s += lost * job.gpus
        left = st.remaining if kind is EventKind.REQUEUED and math.isfinite(st.remaining) else None
        self._outbox.append(
            JobEvent(jid, kind, t, run.placement, 0 if completed else None, message,
                     run_start=run.start, work_left_s=left)
        )
        self._release(run.placement.gpu_keys, t)
        restart = self._restarts.pop(jid, None)
        if restart is not None and kind is EventKind.REQUEUED:
            job, pl, start = restart
            self._start(job, pl, self._free_at(pl.gpu_keys, t))

    def _release(self, keys, t: float) -> None:
        """GPUs `keys` of a run that ended at `t` are free, unless another stopping run
        still holds them; a run waiting for them starts as soon as all of its GPUs are free
        (a job that finishes inside its grace period releases them before its stop time)."""
        keys = set(keys)
        if keys.isdisjoint(self._gpu_free_at):
            return  # no run was given notice on them: nothing waits for them, none stops there
        for k in keys:
            self._gpu_free_at.pop(k, None)
        for jid, stop in self._stopping.items():
            for k in keys.intersection(self.runs[jid].placement.gpu_keys):
                self._gpu_free_at[k] = max(self._gpu_free_at.get(k, t), stop)
        for jid, run in list(self.runs.items()):
            if run.start <= t or keys.isdisjoint(run.placement.gpu_keys):
                continue
            if any(self.nodes[n].state is NodeState.DOWN for n in run.placement.node_names
                   if n in self.nodes):
                continue  # its node went down (set_node_state): it is killed, never started
            start = self._free_at(run.placement.gpu_keys, t)
            if start < run.start:
                self._move_start(run, start)

    def _free_at(self, keys, t: float) -> float:
        """When GPUs `keys` are all free, from `t` on (held by stopping runs until their stop)."""
        return max([t] + [self._gpu_free_at.get(k, t) for k in keys])

    def _move_start(self, run: _Run, start: float) -> None:
        """An unbegun run starts earlier (its GPUs were released early): new heap entries,
        and a STARTED event with the new time (the turn's queue takes the start it says)."""
        run.start = start
        self._seq += 1
        run.seq = self._seq
        if math.isfinite(run.finish_at):
            heapq.heappush(self._heap, (run.finish_at, _FINISH, run.job.id, run.seq))
        if run.stop_at is not None and run.stop_at < run.finish_at:
            heapq.heappush(self._heap, (run.stop_at, _STOP, run.job.id, run.seq))
        self._outbox.append(JobEvent(run.job.id, EventKind.STARTED, start, run.placement, None,
                                     "started (its GPUs were released early)"))


_STOP, _FINISH = 0, 1  # a stop and a finish at the same instant: the stop wins
