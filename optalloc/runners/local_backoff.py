"""When the local runner tries a job again after its process failed to start.

A start can fail at spawn time although the job passed every check before the decision (an
OSError from the spawn: an argv or environment too long for the kernel, a permission lost
after the check, no file descriptors or processes left). Placing such a job again at the next
epoch would most likely fail again and leave its GPUs idle for that whole epoch, every epoch,
while jobs that could run wait (before stop 54 it did). So a job whose start failed is held
out of the decision (Runner.refuses: pending `RunnerRefused`) and sits out 1 epoch, then 2,
4, ... after each further failure in a row, at most BACKOFF_CAP_S; a start that succeeds ends
the streak.

No state of its own: the streak is read off the runner's audit events, the `start_failed`
events (one per failed spawn, written when the intent is dropped) since the job's last
`started` event (a real start, or the adoption of one after a restart). An intent dropped
because optalloc itself stopped before spawning it (`abandoned`) is not the job's doing and
counts for nothing.
"""

from __future__ import annotations

import sqlite3
import time

BACKOFF_CAP_S = 3600.0  # the longest a job sits out after failed starts (then tried hourly)
BASE_EPOCH_S = 300.0  # the epoch length assumed when the policy gives none
START_FAILED = "start_failed"  # the runner's audit event of a spawn that failed


def sits_out_s(failures: int, epoch_s: float) -> float:
    """How long a job sits out after `failures` failed starts in a row: 1 epoch, 2, 4, ...,
    at most BACKOFF_CAP_S (never less than one epoch)."""
    return min(epoch_s * 2.0 ** (failures - 1), max(BACKOFF_CAP_S, epoch_s))


def start_backoffs(conn: sqlite3.Connection, job_ids, epoch_s: float | None,
                   now: float) -> dict[str, str]:
    """{job id: why it is held} for the jobs among `job_ids` still sitting out failed starts
    at `now`. A job whose last failure was at t and that sits out s is tried again at the
    first epoch from t + s + epoch_s / 2: cron's turns drift by seconds, and half an epoch of
    slack makes "sits out 1 epoch" mean the next turn holds it and the one after tries it,
    whichever way the clock drifted."""
    wanted = set(job_ids)
    if not wanted:
        return {}
    epoch = float(epoch_s) if epoch_s and epoch_s > 0 else BASE_EPOCH_S
    rows = conn.execute(
        "SELECT e.job_id, e.time, e.message FROM runner_local_events e WHERE e.kind = ? AND "
        "e.seq > COALESCE((SELECT MAX(s.seq) FROM runner_local_events s "
        "WHERE s.job_id = e.job_id AND s.kind = 'started'), 0) ORDER BY e.seq",
        (START_FAILED,)).fetchall()
    streaks: dict[str, tuple[int, float, str]] = {}
    for job_id, t, message in rows:
        if job_id in wanted:
            n = streaks.get(job_id, (0, 0.0, ""))[0]
            streaks[job_id] = (n + 1, float(t), message)
    held = {}
    for job_id, (n, last, message) in streaks.items():
        out = sits_out_s(n, epoch)
        retry = last + out + epoch / 2.0
        if now < retry:
            held[job_id] = (
                f"its start failed {n} time{'s' if n > 1 else ''} in a row, last at "
                f"{_utc(last)} UTC ({message}); it sits out {out / epoch:g} epoch"
                f"{'s' if out != epoch else ''} ({out:g}s) and is tried again at the first "
                f"epoch from {_utc(retry)} UTC")
    return held


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))
