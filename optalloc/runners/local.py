"""The local runner: applies plans on this one machine by starting jobs as child processes.

What it does each epoch (the loop calls `observe` then, after planning, `apply`):

- **Start** each placed job that is not running: its argv (`Job.command`, never a shell string)
  runs in its own process group (session) with `CUDA_VISIBLE_DEVICES` (GPU UUIDs when NVML
  knows them, else indices), `OPTALLOC_JOB_ID`, `OPTALLOC_GPUS`, `OPTALLOC_MIN_RUNTIME`,
  `OPTALLOC_PROTECTED_UNTIL`, `OPTALLOC_CHECKPOINT_INTERVAL`, `OPTALLOC_RESUMABLE`,
  `OPTALLOC_PREEMPT_SIGNAL`, `OPTALLOC_GRACE` and `OPTALLOC_REQUEUE_EXIT_CODE`; stdout and
  stderr go to `<run_dir>/<job>.<run>.log`.
- **Preempt** with notice: the notice signal (SIGTERM unless configured) goes to the process
  group; SIGKILL follows only once the plan's grace period has passed, at the first
  `observe`/`apply` after the deadline. A preempted resumable job is reported REQUEUED, a
  non-resumable one PREEMPTED (it ends), whatever its exit code.
- **Reconcile**: a run that ended by itself is reported FINISHED (exit 0) or FAILED (non-zero).
  Requeue on failure happens only when the job asks for it: a *resumable* job that exits with
  `REQUEUE_EXIT_CODE` (75, EX_TEMPFAIL; also in its environment as OPTALLOC_REQUEUE_EXIT_CODE)
  is reported REQUEUED. A running job that a plan no longer lists keeps running (only a
  preemption stops it). GPU processes that optalloc did not start are listed in
  `Observation.unknown`, never killed.
- **Restarts** lose nothing: runs live in the table `runner_local_runs` of the state database
  (its own sqlite3 connection, WAL). A new LocalRunner re-adopts live runs by pid plus the
  kernel's process start time (so a reused pid is not mistaken for the job), learns the exit
  status of runs that ended meanwhile from their exit file, and never starts a job twice (a
  partial unique index allows one live run per job; starts happen inside BEGIN IMMEDIATE).

Starts are reported by `ApplyResult.started` and `Observation.running` (placement and start
time), not as events. Every end event carries the exact run interval: `JobEvent.time` is when
the run ended, `JobEvent.run_start` its start; the message repeats both. The end of a run is
the exit file's modification time (when the wrapper saw the job exit), mapped onto the
runner's clock and clamped to [start, now].

Linux only (process identity reads /proc/<pid>/stat).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping

from optalloc.codec import placement_from_dict, to_dict
from optalloc.runners.base import ApplyResult, EventKind, JobEvent, Observation
from optalloc.runners.nvml import GpuInfo, GpuInventory, config_gpus
from optalloc.types import Job, Node, NodeState, Placement, Plan, Policy

log = logging.getLogger(__name__)

REQUEUE_EXIT_CODE = 75  # EX_TEMPFAIL: "requeue me" from a resumable job

# The wrapper keeps the job's exit status on disk so a restarted optalloc (no longer the
# parent) still learns it. It is argv-safe ("$@"), and its own traps only make it outlive the
# notice signal; the job itself gets default dispositions (handlers reset on exec). POSIX:
# a trap runs after the foreground command completes and leaves $? unchanged.
_WRAPPER = (
    'trap ":" HUP INT TERM USR1 USR2; "$@"; rc=$?; '
    'echo "$rc" > "$0.tmp" && mv -f "$0.tmp" "$0"'
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runner_local_runs (
    run_id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    node TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('running', 'stopping', 'ended')),
    pid INTEGER NOT NULL,
    proc_start INTEGER,          -- /proc/<pid>/stat starttime: identity of the pid
    start_time REAL NOT NULL,
    end_time REAL,
    placement TEXT NOT NULL,     -- JSON (optalloc.codec)
    resumable INTEGER NOT NULL,
    log_path TEXT NOT NULL,
    exit_path TEXT NOT NULL,
    notice_time REAL,            -- preemption notice sent
    kill_deadline REAL,          -- SIGKILL from here on
    kill_time REAL,
    preempt_code TEXT,
    exit_code INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS runner_local_one_live_run
    ON runner_local_runs(job_id) WHERE state != 'ended';
CREATE TABLE IF NOT EXISTS runner_local_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    time REAL NOT NULL,
    run_start REAL,
    placement TEXT,
    exit_code INTEGER,
    message TEXT NOT NULL,
    delivered INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS runner_local_utilization (
    time REAL NOT NULL,
    job_id TEXT NOT NULL,
    gpu_index INTEGER NOT NULL,
    gpu_uuid TEXT,
    gpu_util_pct REAL,
    memory_used_bytes INTEGER
);
"""


@dataclass(frozen=True)
class JobGpuSample:
    """Utilization of one GPU of one running job at `time` (also stored in the state DB)."""

    job_id: str
    time: float
    gpu_index: int
    gpu_uuid: str | None
    gpu_util_pct: float | None
    memory_used_bytes: int | None


@dataclass(frozen=True)
class _Run:
    run_id: int
    job_id: str
    state: str
    pid: int
    proc_start: int | None
    start_time: float
    placement: Placement
    resumable: bool
    exit_path: str
    notice_time: float | None
    kill_deadline: float | None
    kill_time: float | None
    preempt_code: str | None


def open_runner_db(path: str | os.PathLike) -> sqlite3.Connection:
    """A connection for runner tables in the state database (autocommit, WAL, busy wait)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None,
                           check_same_thread=False)  # one runner per thread at a time
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA journal_mode = WAL")
    return conn


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT: one writer at a time, so two optalloc processes that
    apply at once cannot both start the same job. Nested use joins the outer transaction."""
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def process_start_ticks(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot), or None if no live
    process has that pid (zombies count as dead)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = data[data.rfind(")") + 2:].split()
    if not fields or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _safe_name(job_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", job_id)[:120] or "job"


class LocalRunner:
    """Runs jobs as processes on this machine, which is the config node `node`.

    state_path: the optalloc state database (SQLite); runner tables are prefixed `runner_`.
    run_dir: where job logs and exit files go (default: `<state dir>/runs`).
    inventory: an opened GpuInventory (None: GPUs come from `node` of the config).
    policy: supplies min_runtime cap, checkpoint interval and grace for the job environment.
    notice_signal: the preemption notice (SIGTERM by default).
    kill_wait_s: after SIGKILL, how long observe waits for the process group to vanish.
    clock: wall time source (tests inject a fake one); `now` arguments take precedence.
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
    ):
        self.node = node
        self.policy = policy or Policy()
        self.notice_signal = _parse_signal(notice_signal)
        self.kill_wait_s = float(kill_wait_s)
        self.clock = clock
        self.inventory = inventory
        self.workdir = str(workdir or os.getcwd())
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.run_dir = Path(run_dir) if run_dir else Path(state_path).resolve().parent / "runs"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.conn = open_runner_db(state_path)
        self.conn.executescript(_SCHEMA)
        self._children: dict[int, subprocess.Popen] = {}  # pid -> child we started

    # ------------------------------------------------------------------ inventory
    def gpus(self) -> tuple[GpuInfo, ...]:
        """This machine's GPUs: from NVML when it answers, else as the config declares."""
        if self.inventory is not None and self.inventory.available:
            return self.inventory.gpus()
        return config_gpus(self.node)

    # ------------------------------------------------------------------ protocol
    def observe(self, now: float) -> Observation:
        """Reap ended runs (reporting FINISHED/FAILED/REQUEUED/PREEMPTED with their interval),
        escalate overdue preemptions to SIGKILL, and report what runs, node health and GPU
        processes optalloc did not start."""
        self._reconcile(now)
        with write_transaction(self.conn):
            rows = self.conn.execute(
                "SELECT seq, job_id, kind, time, run_start, placement, exit_code, message "
                "FROM runner_local_events WHERE delivered = 0 ORDER BY seq").fetchall()
            if rows:
                self.conn.execute(
                    "UPDATE runner_local_events SET delivered = 1 WHERE seq <= ?", (rows[-1][0],))
        events = tuple(
            JobEvent(job_id=j, kind=EventKind(k), time=t, run_start=rs,
                     placement=None if p is None else placement_from_dict(json.loads(p)),
                     exit_code=ec, message=m)
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

    def apply(self, plan: Plan, jobs: Mapping[str, Job], now: float) -> ApplyResult:
        """Send notices for the plan's preemptions, start its placements that are not running,
        keep everything else as it is. Problems are returned per job, never raised."""
        self._reap_children()
        errors: dict[str, str] = {}
        started: list[str] = []
        preempting: list[str] = []
        preempted_ids = {p.job_id for p in plan.preemptions}
        with write_transaction(self.conn):
            live = {r.job_id: r for r in self._live_runs()}
            for pre in plan.preemptions:
                run = live.get(pre.job_id)
                if run is None:
                    errors[pre.job_id] = (
                        f"preemption of {pre.job_id}: it is not running under the local runner "
                        f"on {self.node.name}; nothing to stop")
                    continue
                if run.state == "running":
                    self._send_notice(run, now, pre.grace_s, pre.code.value)
                preempting.append(pre.job_id)
            used = {(a.node, g) for r in live.values() for a in r.placement.nodes for g in a.gpus}
            for pl in plan.placements:
                if pl.job_id in preempted_ids:
                    errors[pl.job_id] = f"{pl.job_id} is both placed and preempted in one plan"
                    continue
                run = live.get(pl.job_id)
                if run is not None:
                    err = self._check_kept(run, pl)
                    if err:
                        errors[pl.job_id] = err
                    continue
                job = jobs.get(pl.job_id)
                err = self._check_startable(pl, job, used)
                if err:
                    errors[pl.job_id] = err
                    continue
                assert job is not None
                try:
                    self._start(job, pl, now)
                except OSError as exc:
                    errors[pl.job_id] = f"could not start {job.id}: {exc}"
                    continue
                used |= {(a.node, g) for a in pl.nodes for g in a.gpus}
                started.append(pl.job_id)
        self._escalate(now)
        return ApplyResult(started=tuple(started), preempting=tuple(preempting), errors=errors)

    # ------------------------------------------------------------------ utilization
    def sample_utilization(self, now: float | None = None) -> tuple[JobGpuSample, ...]:
        """Utilization and memory use of every GPU of every running job, now; the samples
        are also stored in `runner_local_utilization`. Empty without NVML."""
        if self.inventory is None or not self.inventory.available:
            return ()
        now = self.clock() if now is None else now
        by_gpu = {}
        for r in self._live_runs():
            for a in r.placement.nodes:
                if a.node == self.node.name:
                    for g in a.gpus:
                        by_gpu[g] = r.job_id
        out = tuple(
            JobGpuSample(by_gpu[s.index], now, s.index, s.uuid, s.gpu_util_pct,
                         s.memory_used_bytes)
            for s in self.inventory.sample() if s.index in by_gpu
        )
        if out:
            with write_transaction(self.conn):
                self.conn.executemany(
                    "INSERT INTO runner_local_utilization VALUES (?, ?, ?, ?, ?, ?)",
                    [(s.time, s.job_id, s.gpu_index, s.gpu_uuid, s.gpu_util_pct,
                      s.memory_used_bytes) for s in out])
        return out

    def mean_utilization(self, job_id: str) -> float | None:
        """Mean GPU utilization (percent) of all samples stored for a job, or None."""
        (v,) = self.conn.execute(
            "SELECT AVG(gpu_util_pct) FROM runner_local_utilization WHERE job_id = ?",
            (job_id,)).fetchone()
        return v

    def log_path(self, job_id: str) -> Path | None:
        """Log file of the job's latest run."""
        row = self.conn.execute(
            "SELECT log_path FROM runner_local_runs WHERE job_id = ? ORDER BY run_id DESC LIMIT 1",
            (job_id,)).fetchone()
        return None if row is None else Path(row[0])

    def close(self) -> None:
        self.conn.close()

    # ------------------------------------------------------------------ internals: start
    def _check_kept(self, run: _Run, pl: Placement) -> str | None:
        if run.state == "stopping":
            return (f"{run.job_id} is still stopping after its preemption notice; it can start "
                    "again once it has exited")
        if _gpu_set(run.placement) != _gpu_set(pl):
            return (f"{run.job_id} already runs on {_describe(run.placement)}; moving it to "
                    f"{_describe(pl)} needs a preemption first")
        return None

    def _check_startable(self, pl: Placement, job: Job | None,
                         used: set[tuple[str, int]]) -> str | None:
        if job is None:
            return f"{pl.job_id} is placed but the plan's job list does not contain it"
        if not job.command:
            return f"{job.id} has no command (argv) to run; set `command:` in its job spec"
        foreign = sorted({a.node for a in pl.nodes} - {self.node.name})
        if foreign:
            return (f"{job.id} is placed on {', '.join(foreign)} but the local runner runs only "
                    f"node {self.node.name}; use the slurm runner for several nodes")
        n_gpus = len(self.gpus())
        for a in pl.nodes:
            for g in a.gpus:
                if not 0 <= g < n_gpus:
                    return f"{job.id}: GPU {g} does not exist on {self.node.name} ({n_gpus} GPUs)"
                if (a.node, g) in used:
                    return f"{job.id}: GPU {g} of {a.node} is in use by another running job"
        exe = job.command[0]
        if ("/" in exe and not os.access(os.path.join(self.workdir, exe), os.X_OK)) or (
                "/" not in exe and shutil.which(exe, path=self.base_env.get("PATH")) is None):
            return f"{job.id}: command {exe!r} is not an executable file or on PATH"
        return None

    def _start(self, job: Job, pl: Placement, now: float) -> None:
        (run_id,) = self.conn.execute(
            "SELECT COALESCE(MAX(run_id), 0) + 1 FROM runner_local_runs").fetchone()
        restarts = self.conn.execute(
            "SELECT COUNT(*) FROM runner_local_runs WHERE job_id = ?", (job.id,)).fetchone()[0]
        stem = self.run_dir / f"{_safe_name(job.id)}.{run_id}"
        log_path, exit_path = Path(f"{stem}.log"), Path(f"{stem}.exit")
        gpu_idx = [g for a in pl.nodes for g in a.gpus]
        env = dict(self.base_env)
        env.update(self._job_env(job, gpu_idx, now, restarts))
        with open(log_path, "ab") as logf:
            logf.write(f"# optalloc: job {job.id} run {run_id} on {self.node.name} GPUs "
                       f"{gpu_idx} started at {now:.3f}\n".encode())
            logf.flush()
            proc = subprocess.Popen(
                ["/bin/sh", "-c", _WRAPPER, str(exit_path), *job.command],
                stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                cwd=self.workdir, env=env, start_new_session=True, close_fds=True,
            )
        self._children[proc.pid] = proc
        self.conn.execute(
            "INSERT INTO runner_local_runs (run_id, job_id, node, state, pid, proc_start, "
            "start_time, placement, resumable, log_path, exit_path) "
            "VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)",
            (run_id, job.id, self.node.name, proc.pid, process_start_ticks(proc.pid), now,
             json.dumps(to_dict(pl)), int(job.resumable), str(log_path), str(exit_path)))
        # kept for the audit trail but not delivered: starts are reported by
        # ApplyResult.started and by Observation.running (placement + start time)
        self._event(job.id, EventKind.STARTED, now, now, pl, None,
                    f"started on {_describe(pl)} (pid {proc.pid}, log {log_path})",
                    delivered=True)
        log.info("started %s on %s (pid %d)", job.id, _describe(pl), proc.pid)

    def _job_env(self, job: Job, gpu_idx: list[int], now: float, restarts: int) -> dict[str, str]:
        uuids = {g.index: g.uuid for g in self.gpus()}
        if gpu_idx and all(uuids.get(i) for i in gpu_idx):
            visible = ",".join(str(uuids[i]) for i in gpu_idx)
        else:
            visible = ",".join(str(i) for i in gpu_idx)
        protected = min(job.min_runtime_s, self.policy.min_runtime_cap_s)
        ckpt = job.checkpoint_interval_s or self.policy.checkpoint_interval_s
        return {
            "CUDA_VISIBLE_DEVICES": visible,
            "OPTALLOC_JOB_ID": job.id,
            "OPTALLOC_GPUS": str(len(gpu_idx)),
            "OPTALLOC_MIN_RUNTIME": f"{protected:g}",
            "OPTALLOC_PROTECTED_UNTIL": f"{now + protected:.3f}",
            "OPTALLOC_CHECKPOINT_INTERVAL": f"{ckpt:g}",
            "OPTALLOC_RESUMABLE": "1" if job.resumable else "0",
            "OPTALLOC_PREEMPT_SIGNAL": signal.Signals(self.notice_signal).name,
            "OPTALLOC_GRACE": f"{self.policy.grace_s:g}",
            "OPTALLOC_REQUEUE_EXIT_CODE": str(REQUEUE_EXIT_CODE),
            "OPTALLOC_RESTART_COUNT": str(restarts),
        }

    # ------------------------------------------------------------------ internals: stop
    def _send_notice(self, run: _Run, now: float, grace_s: float, code: str) -> None:
        self.conn.execute(
            "UPDATE runner_local_runs SET state = 'stopping', notice_time = ?, kill_deadline = ?, "
            "preempt_code = ? WHERE run_id = ?", (now, now + max(0.0, grace_s), code, run.run_id))
        if self._alive(run):
            _killpg(run.pid, self.notice_signal)
            log.info("preemption notice (%s) to %s, SIGKILL after %.0fs",
                     signal.Signals(self.notice_signal).name, run.job_id, grace_s)

    def _escalate(self, now: float) -> None:
        """SIGKILL the process group of every run whose grace period is over."""
        overdue = [r for r in self._live_runs() if r.state == "stopping"
                   and r.kill_deadline is not None and now >= r.kill_deadline and self._alive(r)]
        for r in overdue:
            _killpg(r.pid, signal.SIGKILL)
            self.conn.execute("UPDATE runner_local_runs SET kill_time = ? WHERE run_id = ?",
                              (now, r.run_id))
            log.info("grace over: SIGKILL to %s", r.job_id)
        wait_until = time.monotonic() + self.kill_wait_s
        while overdue and time.monotonic() < wait_until:
            self._reap_children()
            overdue = [r for r in overdue if self._alive(r)]
            if overdue:
                time.sleep(0.02)

    # ------------------------------------------------------------------ internals: reconcile
    def _reconcile(self, now: float) -> None:
        self._reap_children()
        self._escalate(now)
        self._reap_children()
        with write_transaction(self.conn):
            for run in self._live_runs():
                if not self._alive(run):
                    self._record_end(run, now)

    def _record_end(self, run: _Run, now: float) -> None:
        rc, end = self._exit_status(run, now)
        if run.notice_time is not None:
            kind = EventKind.REQUEUED if run.resumable else EventKind.PREEMPTED
            how = ("killed after the grace period" if rc is None or run.kill_time is not None
                   else f"exited {rc} after the notice")
            why = f"preempted ({run.preempt_code}): notice at {run.notice_time:.3f}, {how}"
        elif rc == 0:
            kind, why = EventKind.FINISHED, "exited 0"
        elif rc == REQUEUE_EXIT_CODE and run.resumable:
            kind, why = EventKind.REQUEUED, f"exited {rc} (EX_TEMPFAIL): asked to be requeued"
        elif rc is None:
            kind, why = EventKind.FAILED, "vanished without an exit record (killed outside optalloc?)"
        else:
            kind, why = EventKind.FAILED, f"exited {rc}"
        self.conn.execute(
            "UPDATE runner_local_runs SET state = 'ended', end_time = ?, exit_code = ? "
            "WHERE run_id = ?", (end, rc, run.run_id))
        self._event(run.job_id, kind, end, run.start_time, run.placement, rc,
                    f"{why}; ran {run.start_time:.3f}-{end:.3f} on {_describe(run.placement)}")

    def _exit_status(self, run: _Run, now: float) -> tuple[int | None, float]:
        """(exit code or None, end time on the runner's clock)."""
        path = Path(run.exit_path)
        try:
            rc: int | None = int(path.read_text().strip())
            end = now - (time.time() - path.stat().st_mtime)
        except (FileNotFoundError, ValueError):
            proc = self._children.pop(run.pid, None)
            rc = None if proc is None or proc.returncode is None else proc.returncode
            rc = None if rc is not None and rc < 0 else rc  # killed by a signal: no code
            end = run.kill_time if run.kill_time is not None else now
        else:
            self._children.pop(run.pid, None)
        return rc, min(max(end, run.start_time), now)

    def _event(self, job_id: str, kind: EventKind, t: float, run_start: float | None,
               pl: Placement | None, exit_code: int | None, message: str,
               delivered: bool = False) -> None:
        self.conn.execute(
            "INSERT INTO runner_local_events (job_id, kind, time, run_start, placement, "
            "exit_code, message, delivered) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (job_id, kind.value, t, run_start, None if pl is None else json.dumps(to_dict(pl)),
             exit_code, message, int(delivered)))

    def _reap_children(self) -> None:
        for proc in list(self._children.values()):
            proc.poll()  # reaps a zombie; keeps the object for its return code

    def _alive(self, run: _Run) -> bool:
        proc = self._children.get(run.pid)
        if proc is not None and proc.poll() is not None:
            return False
        ticks = process_start_ticks(run.pid)
        return ticks is not None and (run.proc_start is None or ticks == run.proc_start)

    def _live_runs(self) -> list[_Run]:
        rows = self.conn.execute(
            "SELECT run_id, job_id, state, pid, proc_start, start_time, placement, resumable, "
            "exit_path, notice_time, kill_deadline, kill_time, preempt_code "
            "FROM runner_local_runs WHERE state != 'ended' AND node = ? ORDER BY run_id",
            (self.node.name,)).fetchall()
        return [
            _Run(r[0], r[1], r[2], r[3], r[4], r[5], placement_from_dict(json.loads(r[6])),
                 bool(r[7]), r[8], r[9], r[10], r[11], r[12])
            for r in rows
        ]

    def _unknown_gpu_processes(self, live: list[_Run]) -> tuple[str, ...]:
        if self.inventory is None or not self.inventory.available:
            return ()
        ours = {r.pid for r in live}  # pgid of a run = pid of its wrapper (session leader)
        out = []
        for s in self.inventory.sample():
            for p in s.processes:
                try:
                    pgid = os.getpgid(p.pid)
                except (ProcessLookupError, PermissionError):
                    pgid = None
                if pgid in ours:
                    continue
                out.append(f"pid {p.pid} ({_comm(p.pid)}) uses GPU {s.index}"
                           f"{f' ({s.uuid})' if s.uuid else ''} on {self.node.name} "
                           "and was not started by optalloc")
        return tuple(out)


# ---------------------------------------------------------------------- helpers


def _parse_signal(sig: int | str) -> int:
    if isinstance(sig, str):
        name = sig.upper()
        name = name if name.startswith("SIG") else f"SIG{name}"
        try:
            return int(signal.Signals[name])
        except KeyError:
            raise ValueError(f"unknown signal {sig!r}; use e.g. TERM, INT or USR1") from None
    return int(signal.Signals(sig))


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _gpu_set(pl: Placement) -> set[tuple[str, int]]:
    return {(a.node, g) for a in pl.nodes for g in a.gpus}


def _describe(pl: Placement) -> str:
    return "; ".join(f"{a.node} GPUs {','.join(map(str, a.gpus))}" for a in pl.nodes) or "no GPUs"
