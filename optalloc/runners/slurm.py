"""The Slurm runner: optalloc is the policy brain, Slurm executes on many nodes.

Jobs live in Slurm **held** until a plan places them. They get there by `sbatch -H` (a user, or
`optalloc submit --runner slurm`, or this runner when a plan places a job that has a command
but no Slurm job yet). The job name is the optalloc job id; `--comment` carries optalloc's
fields as `optalloc:project=A1;min_runtime=3600;resumable=1;priority=0[;gpu_types=h100,b200]`
(`discover_jobs()` turns such held jobs into optalloc Jobs for the queue).

Each epoch:
- `observe`: one `squeue --json` (22.05 ignores -t/-j, so it is filtered here) and one
  `sinfo -N -p <partition>` (drain/down nodes). A run's interval is Slurm's own start_time and
  end_time (no sacct without slurmdbd), recorded before a requeue overwrites them.
- `apply`: a placement pins the held job to the plan's nodes and per-node GPU count
  (`scontrol update jobid=X NodeList=... NumNodes=N Gres=gpu:G StartTime=now`) and releases
  it (`scontrol release`). A preemption sends the notice to the batch script
  (`scancel --signal=TERM --batch X`); once the job has exited, or the grace period is over,
  a resumable job is requeued *held* (`scontrol requeuehold`: it waits for optalloc's next
  placement) and reported REQUEUED; a non-resumable one is cancelled (`scancel`) and reported
  PREEMPTED.
- A run that ends by itself is FINISHED (COMPLETED, exit 0) or FAILED; a resumable job that
  exits 75 (EX_TEMPFAIL) asks to be requeued, as with the local runner. A job Slurm requeued on
  its own (node failure) is held again and reported REQUEUED. Slurm jobs without an optalloc
  comment are listed in `Observation.unknown`, never touched.

Every command is an argv list with a timeout. A failing command during `apply` becomes a
per-job message in `ApplyResult.errors`; when Slurm cannot be read at all, `observe` raises
`SlurmError` (an OptallocError: the CLI prints it, the epoch stops before planning on a
blind view). The runner's own bookkeeping (Slurm id, preemption notice time, run start) lives
in the table `runner_slurm_jobs` of the state database, so a restart re-adopts everything.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Mapping

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
from optalloc.runners.slurm_cli import (
    ACTIVE,
    TERMINAL,
    SlurmCli,
    SlurmError,
    SlurmJob,
    compress_hostlist,
)
from optalloc.runners.slurm_submit import SubmitMixin, job_from_slurm, signame
from optalloc.state.slurm_tables import SlurmRow, SlurmTable
from optalloc.types import Config, Job, NodeAlloc, Placement, Plan, Policy

__all__ = ["SlurmRunner", "job_from_slurm", "slurm_log_dir"]
log = logging.getLogger(__name__)


def slurm_log_dir(state_path: str | os.PathLike) -> Path:
    """Where jobs optalloc submits write their output: `slurm-logs` beside the state DB."""
    return Path(state_path).resolve().parent / "slurm-logs"


class SlurmRunner(SubmitMixin, Runner):
    """Drives a Slurm cluster through its CLI. `partition`: where jobs go and whose nodes are
    observed (default: Slurm's default partition); `slurm_conf`: SLURM_CONF for every command;
    `log_dir`: where jobs submitted by optalloc write their output."""

    name = "slurm"
    authoritative = True

    def __init__(
        self,
        state_path: str | os.PathLike | None = None,
        config: Config | None = None,
        *,
        partition: str | None = None,
        slurm_conf: str | None = None,
        timeout_s: float = 30.0,
        notice_signal: str | int = "TERM",
        policy: Policy | None = None,
        log_dir: str | os.PathLike | None = None,
        workdir: str | os.PathLike | None = None,
        cli: SlurmCli | None = None,
    ):
        self.config = config
        self.policy = policy or (config.policy if config else Policy())
        self.partition = partition
        self.cli = cli or SlurmCli(slurm_conf=slurm_conf, timeout_s=timeout_s)
        self.notice_signal = parse_signal(notice_signal)
        self.workdir = str(workdir or os.getcwd())
        self.table = SlurmTable(state_path)  # None: in memory
        self.conn = self.table.conn
        if state_path is None:
            self.log_dir = Path(log_dir or self.workdir)
        else:
            self.log_dir = Path(log_dir) if log_dir else slurm_log_dir(state_path)
        self._handed_seq = 0  # events up to here were handed out (observe or apply)

    # ------------------------------------------------------------------ protocol
    def observe(self, now: float) -> Observation:
        sjobs = {j.slurm_id: j for j in self.cli.jobs()}  # SlurmError: blind, stop the epoch
        events: list[JobEvent] = []
        with self.table.transaction():  # the row changes and the events they report, together
            for row in self.table.rows():
                events += self._reconcile(row, sjobs.get(row.slurm_id), now)
            events += self._escalate(sjobs, now)
            self.table.emit(_event_row(e) for e in events)
        # every event not yet acknowledged: a crash before the cycle recorded them repeats them
        self._handed_seq, rows = self.table.undelivered()
        events = [_event(r) for r in rows]
        running = {}
        for row in self.table.rows():
            if row.state in ("placed", "running", "stopping"):
                sj = sjobs.get(row.slurm_id)
                actual = self._placement(row, sj) if sj is not None else None
                start = row.run_start if row.run_start is not None else row.placed_time
                running[row.job_id] = (actual or row.placement, start if start is not None else now)
        ours = {r.slurm_id for r in self.table.rows(include_done=True)}
        unknown = tuple(
            f"slurm job {sj.slurm_id} ({sj.name}, user {sj.user}) is {sj.state.lower()} on "
            f"{','.join(sj.nodes)} and was not submitted through optalloc"
            for sj in sjobs.values()
            if sj.state in ACTIVE and sj.slurm_id not in ours and sj.optalloc_fields is None)
        try:
            node_states = self.cli.node_states(self.partition)
        except SlurmError as err:
            log.warning("node states unknown this epoch: %s", err)
            node_states = {}
        return Observation(now=now, running=running, events=tuple(events),
                           node_states=node_states, unknown=unknown)

    def apply(self, plan: Plan, jobs: Mapping[str, Job], now: float) -> ApplyResult:
        errors: dict[str, str] = {}
        waiting: dict[str, str] = {}
        started: list[str] = []
        preempting: list[str] = []
        events: list[JobEvent] = []
        try:
            sjobs = {j.slurm_id: j for j in self.cli.jobs()}
        except SlurmError as err:
            ids = [p.job_id for p in plan.placements] + [p.job_id for p in plan.preemptions]
            return ApplyResult(errors={j: str(err) for j in ids})
        with self.table.transaction():
            rows = {r.job_id: r for r in self.table.rows(include_done=True)}
            for pre in plan.preemptions:
                row = rows.get(pre.job_id)
                if row is None or row.state not in ("placed", "running", "stopping"):
                    errors[pre.job_id] = (f"preemption of {pre.job_id}: it is not running under "
                                          "Slurm through optalloc; nothing to stop")
                    continue
                try:
                    ev = self._preempt(row, sjobs.get(row.slurm_id), pre.grace_s,
                                       pre.code.value, now)
                except SlurmError as err:
                    errors[pre.job_id] = str(err)
                    continue
                if ev is not None:
                    events.append(ev)
                else:
                    preempting.append(pre.job_id)
            moved = moved_ids(plan)
            for pl in plan.placements:
                if pl.job_id in moved:  # it stops first; a later epoch places it again
                    waiting[pl.job_id] = moving_message(pl)
                    continue
                row = rows.get(pl.job_id)
                try:
                    err = self._place(pl, row, jobs.get(pl.job_id), sjobs, now)
                except SlurmError as exc:
                    err = str(exc)
                if err is None:
                    started.append(pl.job_id)
                elif err:
                    errors[pl.job_id] = err
            events += self._escalate(sjobs, now)
            self.table.emit(_event_row(e) for e in events)
        self._handed_seq = self.table.last_seq()
        return ApplyResult(started=tuple(started), preempting=tuple(preempting),
                           errors=errors, waiting=waiting, events=tuple(events))

    def ack_events(self) -> None:
        """The events handed out so far (by observe and apply) are recorded: they are not
        handed out again. Without this call the next observe repeats them."""
        self.table.ack(self._handed_seq)

    # ------------------------------------------------------------------ placing
    def _place(self, pl: Placement, row: SlurmRow | None, job: Job | None,
               sjobs: Mapping[str, SlurmJob], now: float) -> str | None:
        """None: released now; "": kept as it runs; else the error."""
        if row is not None and row.state in ("placed", "running", "stopping"):
            if row.state == "stopping":
                return (f"{pl.job_id} is still stopping after its preemption notice; it can be "
                        "placed again once Slurm has requeued it")
            if row.placement is not None and set(row.placement.node_names) != set(pl.node_names):
                return (f"{pl.job_id} already runs on {','.join(row.placement.node_names)}; "
                        f"moving it to {','.join(pl.node_names)} needs a preemption first")
            return ""
        counts = {len(a.gpus) for a in pl.nodes}
        if len(counts) != 1:
            return (f"{pl.job_id}: Slurm gives every node of a job the same GPU count, but the "
                    f"placement asks {[len(a.gpus) for a in pl.nodes]} per node")
        if row is None or row.state == "done":
            if job is None:
                return f"{pl.job_id} is placed but the plan's job list does not contain it"
            self.submit(job)
            row = self.table.row(pl.job_id)
            sj = None
        else:
            sj = sjobs.get(row.slurm_id)
            if sj is not None and sj.state in TERMINAL:
                self.cli.run(["scontrol", "requeuehold", row.slurm_id])
        assert row is not None
        (per_node,) = counts
        self.cli.run(["scontrol", "update", f"jobid={row.slurm_id}",
                      f"NodeList={compress_hostlist(pl.node_names)}",
                      f"NumNodes={len(pl.nodes)}", f"Gres=gpu:{per_node}", "StartTime=now"])
        if sj is None or sj.held or sj.state in TERMINAL:
            self.cli.run(["scontrol", "release", row.slurm_id])
        self.table.placed(pl.job_id, pl, now)
        log.info("released %s (slurm %s) on %s", pl.job_id, row.slurm_id, ",".join(pl.node_names))
        return None

    # ------------------------------------------------------------------ preempting
    def _preempt(self, row: SlurmRow, sj: SlurmJob | None, grace_s: float, code: str,
                 now: float) -> JobEvent | None:
        """Send the notice; a job that has not started yet is simply held again (returned
        as an immediate REQUEUED event)."""
        if row.state == "stopping":
            return None
        if row.state == "placed" and (sj is None or sj.state == "PENDING"):
            self.cli.run(["scontrol", "hold", row.slurm_id])
            self.table.set(row.job_id, state="held", placement=None)
            return JobEvent(row.job_id, EventKind.REQUEUED, now, row.placement, None,
                            f"preempted ({code}) before it started; held again", now)
        if sj is not None and sj.state in TERMINAL:
            # it ended on its own after the epoch observed it (it finished while the epoch
            # decided): no notice, and the next observation records it as it ended, not as
            # preempted and requeued to run again (as the local runner: local_stop)
            log.info("%s (slurm %s) ended on its own before its preemption notice (%s)",
                     row.job_id, row.slurm_id, sj.state)
            return None
        # the intent first, committed: a crash after the notice went out must not forget it
        # (a job that exits at the notice would read as finished, never to run again)
        self.table.set(row.job_id, state="stopping", notice_time=now,
                       kill_deadline=now + max(0.0, grace_s), preempt_code=code)
        self.table.checkpoint()
        try:
            self.cli.run(["scancel", f"--signal={signame(self.notice_signal)}", "--batch",
                          row.slurm_id])
        except SlurmError:
            self.table.set(row.job_id, state=row.state, notice_time=row.notice_time,
                           kill_deadline=row.kill_deadline, preempt_code=row.preempt_code)
            raise
        log.info("preemption notice to %s (slurm %s), grace %.0fs", row.job_id, row.slurm_id,
                 grace_s)
        return None

    def _escalate(self, sjobs: Mapping[str, SlurmJob], now: float) -> list[JobEvent]:
        """Grace over for a job still running: requeue it held (resumable) or cancel it (not
        in a dry run: Runner.passive)."""
        out = []
        if self.passive:
            return out
        for row in self.table.rows():
            sj = sjobs.get(row.slurm_id)
            if (row.state != "stopping" or row.kill_deadline is None or now < row.kill_deadline
                    or sj is None or sj.state not in ACTIVE):
                continue
            try:
                if row.resumable:
                    self.cli.run(["scontrol", "requeuehold", row.slurm_id])
                else:
                    self.cli.run(["scancel", row.slurm_id])
            except SlurmError as err:
                log.warning("could not stop %s after its grace period: %s", row.job_id, err)
                continue
            out.append(self._end(row, sj, now, self._preempted_kind(row),
                                 f"preempted ({row.preempt_code}): notice at "
                                 f"{row.notice_time:.0f}, stopped by Slurm after the grace period",
                                 requeue=False))
        return out

    # ------------------------------------------------------------------ reconciling
    def _reconcile(self, row: SlurmRow, sj: SlurmJob | None, now: float) -> list[JobEvent]:
        if sj is None:
            if row.state in ("placed", "running", "stopping"):
                return [self._end(row, None, now, EventKind.FAILED,
                                  f"Slurm job {row.slurm_id} vanished from the queue", False)]
            if row.state == "held":
                self.table.set(row.job_id, state="done")
                return [JobEvent(row.job_id, EventKind.FAILED, now, None, None,
                                 f"Slurm job {row.slurm_id} was removed while queued", None)]
            return []
        if sj.state in ACTIVE and row.state == "placed":
            self.table.set(row.job_id, state="running", run_start=sj.start_time)
            return []
        if sj.state in ACTIVE and row.state == "held":
            # Slurm runs a job this table says is held: `scontrol release` went through but the
            # row's "placed" was never committed (kill -9 inside apply). The run is adopted,
            # charged from Slurm's start like any other; never placed a second time.
            self.table.set(row.job_id, state="running", run_start=sj.start_time,
                           placed_time=sj.start_time, placement=self._adopted(row, sj))
            log.warning("%s (slurm %s) runs in Slurm without a recorded placement; adopted",
                        row.job_id, row.slurm_id)
            return []
        if sj.state == "PENDING" and not sj.held and row.state == "held" and not self.passive:
            self._try(["scontrol", "hold", row.slurm_id])  # released, never recorded: held again
            return []
        if sj.state in TERMINAL and row.state in ("placed", "running", "stopping"):
            if row.state == "stopping":
                kind = self._preempted_kind(row)
                why = (f"preempted ({row.preempt_code}): notice at {row.notice_time:.0f}, "
                       f"exited {sj.exit_code} ({sj.state})")
            elif sj.state == "COMPLETED" and sj.exit_code == 0:
                kind, why = EventKind.FINISHED, "completed (exit 0)"
            elif sj.exit_code == REQUEUE_EXIT_CODE and row.resumable:
                kind, why = EventKind.REQUEUED, f"exited {REQUEUE_EXIT_CODE}: asked to be requeued"
            else:
                kind, why = EventKind.FAILED, (f"{sj.state.lower()} (exit {sj.exit_code}, "
                                               f"reason {sj.reason})")
            return [self._end(row, sj, now, kind, why, requeue=kind is EventKind.REQUEUED)]
        if sj.state in TERMINAL and row.state == "held":
            self.table.set(row.job_id, state="done")
            return [JobEvent(row.job_id, EventKind.FAILED, now, None, sj.exit_code,
                             f"Slurm job {row.slurm_id} ended ({sj.state}) while held", None)]
        if sj.state == "PENDING" and row.state in ("running", "stopping"):
            # Slurm requeued it on its own (node failure): optalloc decides when it runs again
            if not self.passive:  # a dry run only looks (Runner.passive)
                self._try(["scontrol", "hold", row.slurm_id])
            return [self._end(row, None, now, EventKind.REQUEUED,
                              f"requeued by Slurm ({sj.reason}); held for optalloc", False)]
        return []

    def _end(self, row: SlurmRow, sj: SlurmJob | None, now: float, kind: EventKind, why: str,
             requeue: bool) -> JobEvent:
        """Close the run with Slurm's times, requeue (held) when asked, and make the event."""
        start = row.run_start
        if start is None and sj is not None:
            start = sj.start_time
        if start is None:
            start = row.placed_time if row.placed_time is not None else now
        # Slurm's own end time when the job has ended; else now (we stop it at this moment)
        end = sj.end_time if sj is not None and sj.state in TERMINAL and sj.end_time else now
        end = max(start, end)
        if requeue and not self.passive:
            self._try(["scontrol", "requeuehold", row.slurm_id])
        placement = (self._placement(row, sj) if sj is not None else None) or row.placement
        self.table.set(row.job_id, state="held" if kind is EventKind.REQUEUED else "done",
                  placement=None)
        return JobEvent(row.job_id, kind, end, placement, None if sj is None else sj.exit_code,
                        f"{why}; ran {start:.0f}-{end:.0f} on "
                        f"{','.join(placement.node_names) if placement else '?'}", start)

    def _preempted_kind(self, row: SlurmRow) -> EventKind:
        return EventKind.REQUEUED if row.resumable else EventKind.PREEMPTED

    def _placement(self, row: SlurmRow, sj: SlurmJob) -> Placement | None:
        """Where Slurm actually runs the job (nodes and GPU indices), or None if not yet."""
        if not sj.nodes or not sj.gpu_idx:
            return None
        gpu_type = sj.gpu_type or (row.placement.gpu_type if row.placement else None)
        if gpu_type is None and self.config is not None:
            types = {n.name: n.gpu_type for n in self.config.nodes}
            gpu_type = types.get(sj.nodes[0])
        allocated = row.placement.allocated if row.placement else True
        return Placement(row.job_id, gpu_type or "gpu",
                         tuple(NodeAlloc(n, g) for n, g in zip(sj.nodes, sj.gpu_idx)), allocated)

    def _adopted(self, row: SlurmRow, sj: SlurmJob) -> Placement | None:
        """Where an adopted run runs: Slurm's nodes and GPUs (its requested count per node when
        Slurm shows no indices), charged as allocated work when its comment gives it a
        min_runtime (the contract)."""
        fields = sj.optalloc_fields or {}
        try:
            allocated = float(fields.get("min_runtime", "0")) > 0
        except ValueError:
            allocated = True
        pl = self._placement(row, sj)
        if pl is None and sj.nodes:
            types = {n.name: n.gpu_type for n in (self.config.nodes if self.config else ())}
            pl = Placement(row.job_id, sj.gpu_type or types.get(sj.nodes[0], "gpu"),
                           tuple(NodeAlloc(n, tuple(range(max(sj.gpus_per_node, 1))))
                                 for n in sj.nodes))
        return None if pl is None else Placement(pl.job_id, pl.gpu_type, pl.nodes, allocated)

    def _try(self, argv: list[str]) -> None:
        try:
            self.cli.run(argv)
        except SlurmError as err:
            log.warning("%s", err)

    def close(self) -> None:
        self.table.close()


def _event_row(e: JobEvent) -> tuple:
    return (e.job_id, e.kind.value, e.time, e.run_start, e.placement, e.exit_code, e.message)


def _event(r: tuple) -> JobEvent:
    job_id, kind, t, run_start, placement, exit_code, message = r
    return JobEvent(job_id, EventKind(kind), t, placement, exit_code, message, run_start)
