"""The state store's queue and history tables: jobs (live and ended), epochs (each one's time,
solver report and, for the last STORED_PLANS, its plan) and job events. A mixin of StateStore
(it uses the store's connection, transactions and reads)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Mapping, Sequence

from optalloc.codec import job_from_dict, to_dict
from optalloc.errors import OptallocError, StateError
from optalloc.types import Job

STORED_PLANS = 288  # full plan documents kept: one day of 5-minute epochs
FINISH_STATUSES = ("finished", "failed", "cancelled")


class RecordsMixin:
    # ------------------------------------------------------------------ jobs

    @staticmethod
    def _job_row(job: Job) -> tuple:
        return (job.id, job.project, job.state.value, float(job.submit_time), json.dumps(to_dict(job)))

    def add_job(self, job: Job) -> None:
        """Add a new job; a job with the same id (live or finished) is an error."""
        with self.transaction():
            try:
                self._conn.execute(
                    "INSERT INTO jobs (id, project, state, submit_time, data) VALUES (?, ?, ?, ?, ?)",
                    self._job_row(job),
                )
            except sqlite3.IntegrityError as err:
                raise StateError(
                    f"job {job.id!r} already exists in {self.path}; choose a new job id"
                ) from err

    def upsert_job(self, job: Job) -> None:
        """Insert or replace a job (a finished job written again becomes live again)."""
        with self.transaction():
            self._conn.execute(
                "INSERT INTO jobs (id, project, state, submit_time, data) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET project = excluded.project, state = excluded.state, "
                "submit_time = excluded.submit_time, data = excluded.data, status = NULL, "
                "end_time = NULL, message = ''",
                self._job_row(job),
            )

    def get_job(self, job_id: str) -> Job | None:
        rows = self._read("SELECT data FROM jobs WHERE id = ?", (job_id,))
        return job_from_dict(json.loads(rows[0][0])) if rows else None

    def list_jobs(self, states: Sequence[str] = ("queued", "running")) -> list[Job]:
        """Jobs whose state is in `states`, by submit time then id. `finished` selects every
        ended job; `failed` / `cancelled` select ended jobs with that status."""
        states = tuple(states)
        unknown = set(states) - {"queued", "running", "finished", "failed", "cancelled"}
        if unknown:
            raise OptallocError(
                f"list_jobs: unknown states {sorted(unknown)}; use queued, running, finished, "
                "failed or cancelled"
            )
        live = [s for s in states if s in ("queued", "running", "finished")]
        ended = [s for s in states if s in ("failed", "cancelled")]
        conds, params = [], []
        if live:
            conds.append(f"state IN ({', '.join('?' * len(live))})")
            params += live
        if ended:
            conds.append(f"status IN ({', '.join('?' * len(ended))})")
            params += ended
        if not conds:
            return []
        rows = self._read(
            f"SELECT data FROM jobs WHERE {' OR '.join(conds)} ORDER BY submit_time, id", params
        )
        return [job_from_dict(json.loads(d)) for (d,) in rows]

    def finish_job(self, job_id: str, status: str, time: float, message: str = "") -> None:
        """End a job (kept as history) and record an event of kind `status`."""
        if status not in FINISH_STATUSES:
            raise OptallocError(f"finish_job: status must be one of {FINISH_STATUSES}, got {status!r}")
        with self.transaction():
            cur = self._conn.execute(
                "UPDATE jobs SET state = 'finished', status = ?, end_time = ?, message = ? WHERE id = ?",
                (status, float(time), message, job_id),
            )
            if cur.rowcount == 0:
                raise StateError(f"finish_job: no job {job_id!r} in {self.path}")
            self.record_event(time, job_id, status, message)

    def job_status(self, job_id: str) -> str:
        """queued | running while live; finished | failed | cancelled once ended."""
        rows = self._read("SELECT state, status FROM jobs WHERE id = ?", (job_id,))
        if not rows:
            raise StateError(f"no job {job_id!r} in {self.path}")
        state, status = rows[0]
        return status or state

    def job_end(self, job_id: str) -> tuple[float, str] | None:
        """(end time, message) of an ended job; None while it is live or unknown."""
        rows = self._read("SELECT end_time, message FROM jobs WHERE id = ? AND state = 'finished'",
                          (job_id,))
        if not rows or rows[0][0] is None:
            return None
        return float(rows[0][0]), rows[0][1] or ""

    # ------------------------------------------------------------------ epochs and events

    def record_epoch(
        self, now: float, plan: Mapping[str, Any], report: Mapping[str, Any] | None, degraded: str | None
    ) -> int:
        """Record an epoch; the plans of epochs older than the last STORED_PLANS are emptied
        (`{}`), so the file grows by a report per epoch, not by a plan."""
        with self.transaction():
            cur = self._conn.execute(
                "INSERT INTO epochs (time, plan, report, degraded) VALUES (?, ?, ?, ?)",
                (float(now), json.dumps(plan), None if report is None else json.dumps(report), degraded),
            )
            new_id = int(cur.lastrowid)
            cutoff = new_id - STORED_PLANS  # a bounded primary-key range: O(1) per epoch
            self._conn.execute(
                "UPDATE epochs SET plan = '{}' WHERE id > ? AND id <= ? AND plan != '{}'",
                (cutoff - 1000, cutoff),
            )
            return new_id

    def last_epoch_time(self) -> float | None:
        """The latest time an epoch was recorded at (None before the first)."""
        (t,) = self._read("SELECT MAX(time) FROM epochs")[0]
        return None if t is None else float(t)

    def _epoch_dict(self, row: tuple) -> dict:
        i, t, plan, report, degraded = row
        try:
            plan, report = json.loads(plan), None if report is None else json.loads(report)
            # a record that parses but is no object (a list, a string, a number) is damaged
            # too: every reader takes the plan and report for mappings
            for name, v in (("plan", plan), ("report", report)):
                if not isinstance(v, dict) and (name == "plan" or v is not None):
                    raise ValueError(f"its {name} is a JSON {type(v).__name__}, not an object")
        except (TypeError, ValueError) as err:
            raise StateError(
                f"state DB {self.path}: the record of epoch {i} is damaged ({err}); restore the "
                "file from a backup or use another --state file; nothing was written") from None
        return {"id": i, "time": t, "plan": plan, "report": report, "degraded": degraded}

    def last_epoch(self) -> dict | None:
        rows = self.epochs(limit=1)
        return rows[0] if rows else None

    def epochs(self, limit: int = 20) -> list[dict]:
        """The latest `limit` epochs, newest first: {id, time, plan, report, degraded}."""
        rows = self._read(
            "SELECT id, time, plan, report, degraded FROM epochs ORDER BY id DESC LIMIT ?", (int(limit),)
        )
        return [self._epoch_dict(r) for r in rows]

    def record_event(self, time: float, job_id: str | None, kind: str, message: str = "") -> None:
        with self.transaction():
            self._conn.execute(
                "INSERT INTO events (time, job_id, kind, message) VALUES (?, ?, ?, ?)",
                (float(time), job_id, str(kind), str(message)),
            )

    def record_event_once(self, time: float, job_id: str | None, kind: str, message: str = "") -> None:
        """record_event, unless this job already has an event of this kind at this time (a
        runner event repeated after a crash)."""
        with self.transaction():
            seen = self._conn.execute(
                "SELECT 1 FROM events WHERE job_id IS ? AND kind = ? AND time = ? LIMIT 1",
                (job_id, str(kind), float(time)),
            ).fetchone()
            if seen is None:
                self.record_event(time, job_id, kind, message)

    def events(self, job_id: str | None = None, limit: int = 100) -> list[dict]:
        """The latest `limit` events (of one job, or all), oldest first:
        {id, time, job_id, kind, message}."""
        where, params = ("WHERE job_id = ?", [job_id]) if job_id is not None else ("", [])
        rows = self._read(
            f"SELECT id, time, job_id, kind, message FROM events {where} ORDER BY id DESC LIMIT ?",
            params + [int(limit)],
        )
        return [
            {"id": i, "time": t, "job_id": j, "kind": k, "message": m} for i, t, j, k, m in reversed(rows)
        ]

