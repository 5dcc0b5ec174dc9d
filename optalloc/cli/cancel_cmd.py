"""`optalloc cancel JOB... --state DB`: take queued jobs out of the queue.

A queued job (held ones included: `UnknownProject`, `UnknownGpuType`, `RunnerRefused`) ends
as `cancelled`, kept as history (`optalloc jobs --all`); the next epoch no longer plans it.
Under the state lock, so it never interleaves with an epoch. All or nothing: a job that is
not queued, or that a runner may still be starting (a local run not yet ended, runner events
not yet recorded) or that Slurm holds (`submit --runner slurm`), refuses the whole command
with the reason and changes nothing. A running job is never stopped here (only a plan's
preemption stops one)."""

from __future__ import annotations

import argparse
import os
import time

from optalloc.errors import OptallocError


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser(
        "cancel", help="take queued jobs out of the queue (they end as cancelled)",
        description="Cancel queued jobs (held ones included): each ends as `cancelled` and the "
                    "next epoch no longer plans it. All or nothing; a running job is refused "
                    "(only a preemption stops one).")
    c.add_argument("jobs", nargs="+", metavar="JOB", help="job id (repeat for several)")
    c.add_argument("--state", required=True, help="state DB (SQLite)")
    c.add_argument("--wait", default="0", help="wait up to S seconds for the lock (up to a day)")
    c.set_defaults(func=cmd_cancel)


def _row(store, table: str, sql: str, job_id: str) -> tuple | None:
    """The first row of `sql` for the job, None where it has none or the runner's table was
    never made (a state DB no such runner has used)."""
    conn = store._conn
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                    (table,)).fetchone() is None:
        return None
    return conn.execute(sql, (job_id,)).fetchone()


def _refusal(store, job_id: str) -> str | None:
    status = store.job_status(job_id) if store.get_job(job_id) is not None else None
    if status is None:  # an id typed with escape bytes is shown escaped, never sent raw
        return f"{job_id if job_id.isprintable() else repr(job_id)}: no such job"
    if status != "queued":
        return (f"{job_id}: it is {status}; only a queued job can be cancelled"
                + (" (a running job is stopped only by a plan's preemption)"
                   if status == "running" else ""))
    if (_row(store, "runner_local_runs", "SELECT 1 FROM runner_local_runs WHERE job_id = ? "
             "AND state != 'ended'", job_id)
            or _row(store, "runner_local_events", "SELECT 1 FROM runner_local_events "
                    "WHERE job_id = ? AND delivered = 0", job_id)):
        return (f"{job_id}: the local runner has a start or an end of it not yet recorded; "
                "run `optalloc epoch` first")
    slurm = _row(store, "runner_slurm_jobs",
                 "SELECT slurm_id FROM runner_slurm_jobs WHERE job_id = ?", job_id)
    if slurm is not None:
        return (f"{job_id}: it was submitted to Slurm as job {slurm[0]}; `scancel {slurm[0]}` "
                "removes it there, and the next epoch ends it")
    return None


def cmd_cancel(args: argparse.Namespace) -> int:
    from optalloc.cli.epoch_cmd import _seconds
    from optalloc.state import StateStore, check_state_file
    from optalloc.statefile import StateLock

    wait = _seconds(args.wait, "--wait")
    check_state_file(args.state)
    if not os.path.lexists(args.state):
        raise OptallocError(f"state DB {args.state} does not exist; nothing to cancel")
    if os.path.isfile(args.state) and os.path.getsize(args.state) == 0:  # it was made one
        raise OptallocError(f"state DB {args.state} is an empty file, not a state DB with jobs; "
                            "nothing to cancel (point --state at the DB `optalloc epoch` uses)")
    ids = list(dict.fromkeys(args.jobs))
    with StateLock(args.state, wait_s=wait), StateStore(args.state) as store:
        with store.transaction():
            refused = [r for r in (_refusal(store, j) for j in ids) if r]
            if refused:
                raise OptallocError("nothing was cancelled:\n  " + "\n  ".join(refused))
            now = time.time()
            for job_id in ids:
                store.finish_job(job_id, "cancelled", now, "cancelled by optalloc cancel")
    for job_id in ids:
        print(f"cancelled {job_id}")
    return 0
