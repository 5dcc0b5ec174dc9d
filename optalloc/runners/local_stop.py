"""How the local runner stops and ends runs: a preemption's notice is committed, then sent,
then confirmed (a notice that may not have gone out is sent again after a restart); SIGKILL
goes to the process group once the grace period is over; a run whose process is gone is ended
from its exit file (or, without one, from the child's return code) with the exact interval, and
its event waits in the state DB until the cycle acknowledges it.

A mixin of LocalRunner (it uses the runner's connection, children and notice signal).
"""

from __future__ import annotations

import json
import logging
import signal
import time
from pathlib import Path

from optalloc.codec import to_dict
from optalloc.faults import fault_point
from optalloc.runners.base import REQUEUE_EXIT_CODE, EventKind
from optalloc.runners.local_proc import killpg
from optalloc.runners.local_start import describe
from optalloc.state.local_tables import Run, write_transaction
from optalloc.types import Placement

log = logging.getLogger("optalloc.runners.local")


class StopsMixin:
    # ------------------------------------------------------------------ internals: stop
    def _send_notice(self, run: Run, fresh: bool = False) -> None:
        """The notice of a committed preemption, then its confirmation. `fresh`: committed by
        this apply a moment ago; a run whose process is already gone then ended on its own
        before any notice (it finished while the epoch decided): the preemption is withdrawn,
        so its end is recorded as it exited (exit 0: finished), not as a preemption. (A notice
        sent again after a restart keeps it: that job may have exited because of it.)"""
        if self._alive(run):
            killpg(run.pid, self.notice_signal)
            log.info("preemption notice (%s) to %s, SIGKILL at %.0f",
                     signal.Signals(self.notice_signal).name, run.job_id, run.kill_deadline)
        elif fresh:
            with write_transaction(self.conn):
                self.conn.execute(
                    "UPDATE runner_local_runs SET state = 'running', notice_time = NULL, "
                    "kill_deadline = NULL, preempt_code = NULL, notice_sent = 0 "
                    "WHERE run_id = ? AND state = 'stopping'", (run.run_id,))
            log.info("%s ended on its own before its preemption notice: no notice sent",
                     run.job_id)
            return
        fault_point("runner.after_notice")
        with write_transaction(self.conn):
            self.conn.execute("UPDATE runner_local_runs SET notice_sent = 1 WHERE run_id = ?",
                              (run.run_id,))

    def _escalate(self, now: float) -> None:
        """SIGKILL the process group of every run whose grace period is over."""
        overdue = [r for r in self._live_runs() if r.state == "stopping"
                   and r.kill_deadline is not None and now >= r.kill_deadline and self._alive(r)]
        for r in overdue:
            killpg(r.pid, signal.SIGKILL)
            with write_transaction(self.conn):
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
        self._settle_starts()
        if not self.passive:  # a dry run only looks (Runner.passive)
            for run in self._live_runs():  # a committed notice that may not have gone out
                if run.state == "stopping" and not run.notice_sent:
                    self._send_notice(run)
            self._escalate(now)
        self._reap_children()
        with write_transaction(self.conn):
            for run in self._live_runs():
                if run.state != "starting" and not self._alive(run):
                    self._record_end(run, now)

    def _record_end(self, run: Run, now: float) -> None:
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
        self._event(run.job_id, kind.value, end, run.start_time, run.placement, rc,
                    f"{why}; ran {run.start_time:.3f}-{end:.3f} on {describe(run.placement)}")

    def _exit_status(self, run: Run, now: float) -> tuple[int | None, float]:
        """(exit code or None, end time on the runner's clock)."""
        path = Path(run.exit_path)
        try:
            rc: int | None = int(path.read_text().strip())
            end = now - (time.time() - path.stat().st_mtime)
        except (FileNotFoundError, ValueError):
            proc = self._children.pop(run.pid, None) if run.pid else None
            rc = None if proc is None or proc.returncode is None else proc.returncode
            rc = None if rc is not None and rc < 0 else rc  # killed by a signal: no code
            end = run.kill_time if run.kill_time is not None else now
        else:
            if run.pid:
                self._children.pop(run.pid, None)
        return rc, min(max(end, run.start_time), now)

    def _event(self, job_id: str, kind: str, t: float, run_start: float | None,
               pl: Placement | None, exit_code: int | None, message: str,
               delivered: bool = False) -> None:
        self.conn.execute(
            "INSERT INTO runner_local_events (job_id, kind, time, run_start, placement, "
            "exit_code, message, delivered) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (job_id, kind, t, run_start, None if pl is None else json.dumps(to_dict(pl)),
             exit_code, message, int(delivered)))
