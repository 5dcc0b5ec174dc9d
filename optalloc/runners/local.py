"""The local runner: applies plans on this one machine by starting jobs as child processes.

What it does each epoch (the loop calls `observe` then, after planning, `apply`):

- **Start** each placed job that is not running: its argv (`Job.command`, never a shell string)
  runs in its own process group (session) with a clean environment (optalloc.runners.
  local_proc: an allow-list of optalloc's variables that the config's `job_env` extends) plus
  `CUDA_VISIBLE_DEVICES` (GPU UUIDs when NVML knows them, else indices), `OPTALLOC_JOB_ID`,
  `OPTALLOC_GPUS`, `OPTALLOC_MIN_RUNTIME`, `OPTALLOC_PROTECTED_UNTIL`,
  `OPTALLOC_CHECKPOINT_INTERVAL`, `OPTALLOC_RESUMABLE`, `OPTALLOC_PREEMPT_SIGNAL`,
  `OPTALLOC_GRACE`, `OPTALLOC_REQUEUE_EXIT_CODE` and `OPTALLOC_RESTART_COUNT`; stdout and
  stderr go to `<run_dir>/<job>.<run>.log` (created 0600, O_EXCL | O_NOFOLLOW; the directory
  0700). A start whose spawn fails is dropped (nothing ran, nothing is charged) and the job
  sits out 1, 2, 4, ... epochs before it is tried again (optalloc.runners.local_backoff).
- **Preempt** with notice: the notice signal (SIGTERM unless configured) goes to the process
  group; SIGKILL follows only once the plan's grace period has passed, at the first
  `observe`/`apply` after the deadline. A preempted resumable job is reported REQUEUED, a
  non-resumable one PREEMPTED (it ends), whatever its exit code.
- **Reconcile**: a run that ended by itself is reported FINISHED (exit 0) or FAILED (non-zero).
  Requeue on failure happens only when the job asks for it: a *resumable* job that exits with
  `REQUEUE_EXIT_CODE` (75, EX_TEMPFAIL) is reported REQUEUED. A running job that a plan no
  longer lists keeps running (only a preemption stops it). GPU processes that optalloc did not
  start are listed in `Observation.unknown`, never killed.

**Intent first.** Every action is recorded and committed before it is taken, then confirmed:
a start is a `starting` row (committed), then the spawn, then the pid; a preemption is a
`stopping` row with its notice time (committed), then the signal, then `notice_sent`. So a
kill -9 at any instruction leaves a record of what may have happened, and a restarted runner
reconciles it with what really runs: a `starting` row is adopted when its wrapper is alive
(found by the run's exit file in its command line; identity then by pid + kernel start time),
ended from its exit file if it already finished, and dropped as never started once no process
has appeared for `start_settle_s`; a notice that may not have gone out is sent again (a job
may see the notice twice, never zero times). One live run per job (a partial unique index):
a job is never started twice. Events stay in the state DB until `ack_events()`, which the
cycle calls once it has recorded them: a crash in between redelivers them, never loses them.

Starts are reported by `ApplyResult.started` and `Observation.running` (placement and start
time), not as events. Every end event carries the exact run interval: `JobEvent.time` is when
the run ended, `JobEvent.run_start` its start; the message repeats both. The end of a run is
the exit file's modification time (when the wrapper saw the job exit), mapped onto the
runner's clock and clamped to [start, now].

Linux only (process identity reads /proc).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Mapping

from optalloc.faults import fault_point
from optalloc.runners.base import (
    REQUEUE_EXIT_CODE,
    ApplyResult,
    EventKind,
    JobEvent,
    Observation,
    Runner,
    moved_ids,
    moving_message,
    parse_signal,
)
from optalloc.runners.local_proc import comm, process_start_ticks
from optalloc.runners.local_start import StartsMixin
from optalloc.runners.local_stop import StopsMixin
from optalloc.runners.local_util import JobGpuSample, UtilizationStore
from optalloc.runners.nvml import GpuInfo, GpuInventory, config_gpus
from optalloc.state.local_tables import (
    Run,
    create_tables,
    get_run,
    live_runs,
    open_runner_db,
    run_dir_of,
    write_transaction,
)
from optalloc.statefile import ensure_private_dir
from optalloc.types import Job, JobEnv, Node, NodeState, Placement, Plan, Policy

log = logging.getLogger(__name__)

__all__ = ["LocalRunner", "JobGpuSample", "REQUEUE_EXIT_CODE", "process_start_ticks"]

START_SETTLE_S = 5.0  # a start intent with no process after this long never started


class LocalRunner(StartsMixin, StopsMixin, Runner):
    """Runs jobs as processes on this machine, which is the config node `node`.

    state_path: the optalloc state database (SQLite); runner tables are prefixed `runner_`.
    run_dir: where job logs and exit files go (default: `<state dir>/runs`).
    inventory: an opened GpuInventory (None: GPUs come from `node` of the config).
    policy: supplies min_runtime cap, checkpoint interval and grace for the job environment.
    notice_signal: the preemption notice (SIGTERM by default).
    kill_wait_s: after SIGKILL, how long observe waits for the process group to vanish.
    clock: wall time source (tests inject a fake one); `now` arguments take precedence.
    base_env: optalloc's own environment (default os.environ); only its allow-listed part
      reaches jobs. job_env: the config's additions to the allow-list and fixed values.
    start_settle_s: how long a start intent without a process may still become one (default
      START_SETTLE_S, read when the runner is made).
    """

    name = "local"
    authoritative = True  # Observation.running is the truth about what runs here

    def __init__(
        self,
        state_path: str | os.PathLike,
        node: Node,
        *,
        run_dir: str | os.PathLike | None = None,
        inventory: GpuInventory | None = None,
        policy: Policy | None = None,
        notice_signal: int | str = signal.SIGTERM,
        kill_wait_s: float = 2.0,
        workdir: str | os.PathLike | None = None,
        clock: Callable[[], float] = time.time,
        base_env: Mapping[str, str] | None = None,
        job_env: JobEnv | None = None,
        start_settle_s: float | None = None,
    ):
        self.node = node
        self.policy = policy or Policy()
        self.notice_signal = parse_signal(notice_signal)
        self.kill_wait_s = float(kill_wait_s)
        self.start_settle_s = START_SETTLE_S if start_settle_s is None else float(start_settle_s)
        self.clock = clock
        self.inventory = inventory
        self.workdir = str(workdir or os.getcwd())
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.job_env = job_env or JobEnv()
        self.conn = open_runner_db(state_path)  # checks the state path before anything else
        self.run_dir = Path(run_dir) if run_dir else run_dir_of(state_path)
        try:
            ensure_private_dir(self.run_dir, "local runner: job log directory")
            create_tables(self.conn)
        except BaseException:
            self.conn.close()
            raise
        self.util = UtilizationStore(self.conn)
        self._children: dict[int, subprocess.Popen] = {}  # pid -> child we started
        self._observed_seq = 0  # events up to here were handed out by the last observe
        self._observed_now: float | None = None  # the turn's clock, for refuses' backoff

    # ------------------------------------------------------------------ inventory
    def gpus(self) -> tuple[GpuInfo, ...]:
        """This machine's GPUs: from NVML when it answers, else as the config declares."""
        if self.inventory is not None and self.inventory.available:
            return self.inventory.gpus()
        return config_gpus(self.node)

    # ------------------------------------------------------------------ protocol
    def observe(self, now: float) -> Observation:
        """Reconcile recorded intents and reap ended runs (reporting FINISHED/FAILED/REQUEUED/
        PREEMPTED with their interval), escalate overdue preemptions to SIGKILL, and report
        what runs, node health and GPU processes optalloc did not start. The events are those
        not yet acknowledged (`ack_events`)."""
        self._observed_now = now  # the turn asks `refuses` next, at this same time
        self._reconcile(now)
        rows = self.conn.execute(
            "SELECT seq, job_id, kind, time, run_start, placement, exit_code, message "
            "FROM runner_local_events WHERE delivered = 0 ORDER BY seq").fetchall()
        if rows:
            self._observed_seq = rows[-1][0]
        events = tuple(
            JobEvent(job_id=j, kind=EventKind(k), time=t, run_start=rs,
                     placement=None if p is None else _placement(p), exit_code=ec, message=m)
            for _seq, j, k, t, rs, p, ec, m in rows
        )
        live = self._live_runs()
        gpus = self.gpus()
        node_states = {}
        if self.inventory is not None and self.inventory.available:
            node_states[self.node.name] = (
                NodeState.UP if all(g.healthy for g in gpus) else NodeState.DRAIN)
        return Observation(
            now=now,
            running={r.job_id: (r.placement, r.start_time) for r in live},
            events=events,
            node_states=node_states,
            unknown=self._unknown_gpu_processes(live),
        )

    def ack_events(self) -> None:
        """The events of the last `observe` are recorded by the caller: do not hand them out
        again. (Without this call the next observe repeats them: delivery is at least once.)"""
        with write_transaction(self.conn):
            self.conn.execute("UPDATE runner_local_events SET delivered = 1 "
                              "WHERE seq <= ? AND delivered = 0", (self._observed_seq,))

    def apply(self, plan: Plan, jobs: Mapping[str, Job], now: float) -> ApplyResult:
        """Send notices for the plan's preemptions, start its placements that are not running,
        keep everything else as it is. Problems are returned per job, never raised."""
        self._reap_children()
        self._settle_starts()
        errors: dict[str, str] = {}
        waiting: dict[str, str] = {}
        started: list[str] = []
        preempting: list[str] = []
        notices: list[int] = []
        intents: list[tuple[int, Job, Placement]] = []
        preempted_ids = {p.job_id for p in plan.preemptions}
        moved = moved_ids(plan)
        with write_transaction(self.conn):  # 1. record what is about to happen
            live = {r.job_id: r for r in self._live_runs()}
            for pre in plan.preemptions:
                run = live.get(pre.job_id)
                if run is None:
                    errors[pre.job_id] = (
                        f"preemption of {pre.job_id}: it is not running under the local runner "
                        f"on {self.node.name}; nothing to stop")
                    continue
                if run.state == "running":
                    self.conn.execute(
                        "UPDATE runner_local_runs SET state = 'stopping', notice_time = ?, "
                        "kill_deadline = ?, preempt_code = ?, notice_sent = 0 WHERE run_id = ?",
                        (now, now + max(0.0, pre.grace_s), pre.code.value, run.run_id))
                    notices.append(run.run_id)
                preempting.append(pre.job_id)
            used = {k for r in live.values() for k in r.placement.gpu_keys}
            # GPUs of jobs leaving after a notice (this plan's or an earlier one's)
            grace = {x.job_id: now + max(0.0, x.grace_s) for x in plan.preemptions}
            leaving = {k: (r.job_id, r.kill_deadline or grace.get(r.job_id))
                       for r in live.values() if r.state == "stopping" or r.job_id in grace
                       for k in r.placement.gpu_keys}
            for pl in plan.placements:
                if pl.job_id in moved:  # it stops first; a later epoch starts it again
                    waiting[pl.job_id] = moving_message(pl)
                    continue
                if pl.job_id in preempted_ids:
                    errors[pl.job_id] = f"{pl.job_id} is both placed and preempted in one plan"
                    continue
                run = live.get(pl.job_id)
                if run is not None:
                    err = self._check_kept(run, pl)
                    if err:
                        errors[pl.job_id] = err
                    continue
                wait = _waits_for(pl, used, leaving)
                if wait:
                    waiting[pl.job_id] = wait
                    continue
                job = jobs.get(pl.job_id)
                err = self._check_startable(pl, job, used)
                if err:
                    errors[pl.job_id] = err
                    continue
                assert job is not None
                intents.append((self._record_intent(job, pl, now), job, pl))
                used |= set(pl.gpu_keys)
        for run_id in notices:  # 2. act, then confirm each
            fault_point("runner.after_notice_intent")
            self._send_notice(get_run(self.conn, run_id), fresh=True)
        for run_id, job, pl in intents:
            fault_point("runner.after_intent")
            err = self._start(get_run(self.conn, run_id), job, pl, now)
            if err:
                errors[pl.job_id] = err
            else:
                started.append(pl.job_id)
        self._escalate(now)
        return ApplyResult(started=tuple(started), preempting=tuple(preempting), errors=errors,
                           waiting=waiting)

    # ------------------------------------------------------------------ utilization
    def sample_utilization(self, now: float | None = None) -> tuple[JobGpuSample, ...]:
        """Utilization and memory use of every GPU of every running job, now; the samples
        are also stored in `runner_local_utilization`. Empty without NVML."""
        if self.inventory is None or not self.inventory.available:
            return ()
        now = self.clock() if now is None else now
        return self.util.sample(self.inventory, self.node.name, self._live_runs(), now)

    def mean_utilization(self, job_id: str) -> float | None:
        """Mean GPU utilization (percent) of all samples stored for a job, or None."""
        return self.util.mean(job_id)

    def log_path(self, job_id: str) -> Path | None:
        """Log file of the job's latest run."""
        row = self.conn.execute(
            "SELECT log_path FROM runner_local_runs WHERE job_id = ? ORDER BY run_id DESC LIMIT 1",
            (job_id,)).fetchone()
        return None if row is None else Path(row[0])

    def close(self) -> None:
        self.conn.close()

    def _reap_children(self) -> None:
        for proc in list(self._children.values()):
            proc.poll()  # reaps a zombie; keeps the object for its return code

    def _alive(self, run: Run) -> bool:
        if run.pid is None:
            return False
        proc = self._children.get(run.pid)
        if proc is not None and proc.poll() is not None:
            return False
        ticks = process_start_ticks(run.pid)
        return ticks is not None and (run.proc_start is None or ticks == run.proc_start)

    def _live_runs(self) -> list[Run]:
        return live_runs(self.conn, self.node.name)

    def _unknown_gpu_processes(self, live: list[Run]) -> tuple[str, ...]:
        if self.inventory is None or not self.inventory.available:
            return ()
        ours = {r.pid for r in live if r.pid}  # pgid of a run = pid of its wrapper
        out = []
        for s in self.inventory.sample():
            for p in s.processes:
                try:
                    pgid = os.getpgid(p.pid)
                except (ProcessLookupError, PermissionError):
                    pgid = None
                if pgid in ours:
                    continue
                out.append(f"pid {p.pid} ({comm(p.pid)}) uses GPU {s.index}"
                           f"{f' ({s.uuid})' if s.uuid else ''} on {self.node.name} "
                           "and was not started by optalloc")
        return tuple(out)


# ---------------------------------------------------------------------- helpers


def _placement(text: str) -> Placement:
    from optalloc.codec import placement_from_dict

    return placement_from_dict(json.loads(text))


def _waits_for(pl: Placement, used: set, leaving: dict) -> str:
    """Why a placement starts later, or "": every GPU of it that is in use is held by a job
    leaving after a preemption notice (it gets SIGKILL at its deadline at the latest)."""
    held = set(pl.gpu_keys) & used
    if not held or not held <= leaving.keys():
        return ""
    runs = dict(leaving[k] for k in sorted(held))
    by = ", ".join(
        f"{jid} (notice sent; killed at {time.strftime('%H:%M:%S', time.gmtime(dl))} UTC at "
        f"the latest)" if dl else jid for jid, dl in runs.items())
    return (f"{pl.job_id} starts once {by} has left "
            f"{', '.join(f'{n}:{g}' for n, g in sorted(held))}: an epoch after that starts it")
