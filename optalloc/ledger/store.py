"""The SQLite state store: the one state file of a deployment.

Holds the ledger (run intervals, demand and capacity samples), the job queue and its history,
the record of each epoch, and job events. Safe when several processes open it: WAL journal,
a busy timeout, and every write in a `BEGIN IMMEDIATE` transaction (writers queue, readers
never block). `transaction()` groups writes atomically; a transaction that raises leaves
nothing written. Transactions nest by joining the outermost one.

Schema version lives in the `meta` table; a file written by a newer optalloc is refused with a
StateError rather than misread.

Recording an interval with the same (job_id, start) again replaces it, so a retried epoch does
not charge twice.

The file is created mode 0600 (job argv and plans are in it) and only at a path that
`optalloc.statefile.check_state_path` accepts; a SQLite file made by another program is refused
(PRAGMA application_id marks optalloc's). Full plans are kept for the last STORED_PLANS epochs;
older epochs keep their time, solver report and degraded note.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from optalloc.codec import job_from_dict, to_dict
from optalloc.errors import OptallocError, StateError
from optalloc.ledger.memory import Ledger
from optalloc.ledger.state_check import SCHEMA_VERSION, check_state_file, schema_version_of
from optalloc.org import OrgTree
from optalloc.statefile import claim_sqlite, create_private_file
from optalloc.types import GpuType, Interval, Job, Policy

__all__ = ["SCHEMA_VERSION", "STORED_PLANS", "StateStore", "check_state_file"]
STORED_PLANS = 288  # full plan documents kept: one day of 5-minute epochs
FINISH_STATUSES = ("finished", "failed", "cancelled")

_SCHEMA = """
CREATE TABLE project_names (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE gpu_type_names (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE intervals (
    id INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL,
    project INTEGER NOT NULL REFERENCES project_names(id),
    gpu_type INTEGER NOT NULL REFERENCES gpu_type_names(id),
    gpus INTEGER NOT NULL,
    start REAL NOT NULL,
    end REAL NOT NULL,
    allocated INTEGER NOT NULL,
    UNIQUE (job_id, start)
);
CREATE INDEX intervals_end ON intervals(end);
CREATE TABLE demand (t REAL PRIMARY KEY, by_project TEXT NOT NULL);
CREATE TABLE capacity (t REAL PRIMARY KEY, by_type TEXT NOT NULL);
CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    state TEXT NOT NULL,          -- queued | running | finished (all ended jobs)
    status TEXT,                  -- NULL while live, else finished | failed | cancelled
    submit_time REAL NOT NULL,
    end_time REAL,
    message TEXT NOT NULL DEFAULT '',
    data TEXT NOT NULL            -- optalloc.codec.to_dict(job) as JSON
);
CREATE INDEX jobs_state ON jobs(state, submit_time);
CREATE INDEX jobs_project ON jobs(project);
CREATE TABLE epochs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    plan TEXT NOT NULL,
    report TEXT,
    degraded TEXT
);
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    job_id TEXT,
    kind TEXT NOT NULL,
    message TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_job ON events(job_id, id);
"""


class StateStore:
    """Open (creating if needed) the state DB at `path`."""

    def __init__(self, path: str | os.PathLike, *, busy_timeout_s: float = 30.0):
        self.path = os.fspath(path)
        full = check_state_file(self.path)
        self.busy_timeout_s = float(busy_timeout_s)
        self._depth = 0
        self._name_ids: dict[tuple[str, str], int] = {}
        try:
            create_private_file(full)  # 0600 from the start: SQLite would use the umask
        except OSError as err:
            raise StateError(f"state DB {self.path}: cannot create it ({err.strerror})") from None
        try:
            self._conn = sqlite3.connect(full, timeout=self.busy_timeout_s, isolation_level=None)
        except sqlite3.Error as err:
            raise StateError(f"state DB {self.path}: cannot open ({err})") from err
        try:
            with self._sqlite_errors():
                self._conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            # ownership first (another program's file is refused before anything is written to
            # it, WAL mode included), then WAL
            self._retry_locked(self._init_schema)
            with self._sqlite_errors():
                self._retry_locked(lambda: self._conn.execute("PRAGMA journal_mode = WAL"))
                self._conn.execute("PRAGMA synchronous = NORMAL")
        except BaseException:
            self._conn.close()
            raise

    def _retry_locked(self, step) -> None:
        """Run `step`, retrying while another process holds the lock, up to the busy timeout.

        SQLite answers "database is locked" at once, without calling its busy handler, when two
        processes open a new file together and both switch it to WAL or create the schema; the
        handler only covers ordinary lock waits. Seen as 11 failures in 200 three-way races."""
        deadline = time.monotonic() + self.busy_timeout_s
        delay = 0.005
        while True:
            try:
                with self._sqlite_errors():
                    step()
                return
            except StateError as err:
                cause = err.__cause__
                locked = isinstance(cause, sqlite3.OperationalError) and (
                    "locked" in str(cause) or "busy" in str(cause)
                )
                if not locked or time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(0.1, delay * 2)

    # ------------------------------------------------------------------ plumbing

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "StateStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _sqlite_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as err:
            if "locked" in str(err) or "busy" in str(err):
                raise StateError(
                    f"state DB {self.path} stayed locked by another process for more than "
                    f"{self.busy_timeout_s:g}s; retry, or look for a stuck optalloc process"
                ) from err
            raise StateError(f"state DB {self.path}: {err}") from err
        except sqlite3.DatabaseError as err:
            raise StateError(
                f"state DB {self.path} is not a usable SQLite database ({err}); point --state at "
                "an optalloc state file or a new path"
            ) from err

    @contextmanager
    def transaction(self, *, write: bool = True) -> Iterator["StateStore"]:
        """Group writes atomically. Nested calls join the outermost transaction; if anything
        inside raises, every write of the outermost transaction is rolled back. `write=False`
        opens a read transaction (one consistent view; does not block writers)."""
        if self._depth:
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
            return
        with self._sqlite_errors():
            self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        self._depth = 1
        try:
            yield self
        except BaseException as err:
            self._depth = 0
            self._name_ids.clear()  # ids inserted in this transaction are gone
            self._conn.execute("ROLLBACK")
            if isinstance(err, sqlite3.Error):
                raise StateError(f"state DB {self.path}: {err}; nothing was written") from err
            raise
        self._depth = 0
        with self._sqlite_errors():
            self._conn.execute("COMMIT")

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._sqlite_errors():
            return self._conn.execute(sql, params).fetchall()

    def _init_schema(self) -> None:
        with self.transaction():
            claim_sqlite(self._conn, self.path)
            self._conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                for stmt in _SCHEMA.split(";"):
                    if stmt.strip():
                        self._conn.execute(stmt)
                self._conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
                return
            schema_version_of(self.path, row[0])

    def schema_version(self) -> int:
        return int(self._read("SELECT value FROM meta WHERE key = 'schema_version'")[0][0])

    # ------------------------------------------------------------------ names

    def _name_id(self, kind: str, name: str) -> int:
        key = (kind, name)
        got = self._name_ids.get(key)
        if got is None:
            table = "project_names" if kind == "project" else "gpu_type_names"
            self._conn.execute(f"INSERT OR IGNORE INTO {table} (name) VALUES (?)", (name,))
            got = self._conn.execute(f"SELECT id FROM {table} WHERE name = ?", (name,)).fetchone()[0]
            self._name_ids[key] = got
        return got

    def _names(self, table: str) -> list[str]:
        """Names indexed by id (position 0 and gaps are '')."""
        rows = self._read(f"SELECT id, name FROM {table}")
        out = [""] * (max((i for i, _ in rows), default=0) + 1)
        for i, name in rows:
            out[i] = name
        return out

    # ------------------------------------------------------------------ intervals

    def record_interval(self, iv: Interval) -> None:
        self.record_intervals([iv])

    def record_intervals(self, ivs: Iterable[Interval]) -> None:
        ivs = list(ivs)
        for iv in ivs:
            if not iv.end >= iv.start:
                raise OptallocError(
                    f"interval of job {iv.job_id!r} ends ({iv.end}) before it starts ({iv.start})"
                )
        if not ivs:
            return
        with self.transaction():
            rows = [
                (
                    iv.job_id,
                    self._name_id("project", iv.project),
                    self._name_id("gpu_type", iv.gpu_type),
                    int(iv.gpus),
                    float(iv.start),
                    float(iv.end),
                    int(bool(iv.allocated)),
                )
                for iv in ivs
            ]
            self._conn.executemany(
                "INSERT INTO intervals (job_id, project, gpu_type, gpus, start, end, allocated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id, start) DO UPDATE SET "
                "project = excluded.project, gpu_type = excluded.gpu_type, gpus = excluded.gpus, "
                "end = excluded.end, allocated = excluded.allocated",
                rows,
            )

    def intervals(self, since: float | None = None) -> list[Interval]:
        """Recorded intervals that end after `since` (all when None), ordered by start."""
        where, params = ("WHERE i.end > ?", (float(since),)) if since is not None else ("", ())
        rows = self._read(
            "SELECT i.job_id, p.name, g.name, i.gpus, i.start, i.end, i.allocated FROM intervals i "
            "JOIN project_names p ON p.id = i.project JOIN gpu_type_names g ON g.id = i.gpu_type "
            f"{where} ORDER BY i.start, i.id",
            params,
        )
        return [Interval(j, p, g, int(n), float(s), float(e), bool(a)) for j, p, g, n, s, e, a in rows]

    def n_intervals(self) -> int:
        return int(self._read("SELECT COUNT(*) FROM intervals")[0][0])

    # ------------------------------------------------------------------ demand and capacity

    def record_demand(self, t: float, by_project: Mapping[str, int]) -> None:
        """GPUs asked per project from `t` (a second sample at the same `t` replaces it)."""
        doc = json.dumps({str(k): int(v) for k, v in by_project.items()}, sort_keys=True)
        with self.transaction():
            self._conn.execute("INSERT OR REPLACE INTO demand (t, by_project) VALUES (?, ?)", (float(t), doc))

    def record_capacity(self, t: float, by_type: Mapping[str, int]) -> None:
        """GPUs per gpu_type on up nodes from `t` (a second sample at the same `t` replaces it)."""
        doc = json.dumps({str(k): int(v) for k, v in by_type.items()}, sort_keys=True)
        with self.transaction():
            self._conn.execute("INSERT OR REPLACE INTO capacity (t, by_type) VALUES (?, ?)", (float(t), doc))

    def _samples(self, table: str, column: str, since: float | None) -> list[tuple[float, dict]]:
        if since is None:
            rows = self._read(f"SELECT t, {column} FROM {table} ORDER BY t")
        else:  # the last sample at or before `since` still applies after it
            rows = self._read(
                f"SELECT t, {column} FROM {table} WHERE t >= "
                f"COALESCE((SELECT MAX(t) FROM {table} WHERE t <= ?), ?) ORDER BY t",
                (float(since), float(since)),
            )
        return [(float(t), json.loads(doc)) for t, doc in rows]

    # ------------------------------------------------------------------ the in-memory ledger

    def ledger(
        self,
        gpu_types: Sequence[GpuType],
        tree: OrgTree,
        policy: Policy | None = None,
        *,
        since: float | None = None,
    ) -> Ledger:
        """Load intervals and samples into an in-memory Ledger (columns read in bulk).

        `since` limits the load to intervals ending after it and samples in force from it
        (enough for window mode with since <= now - lookback; decay mode needs all history).
        Intervals of projects or gpu_types the config no longer has are kept unattributed
        (Ledger(strict=False)).
        """
        led = Ledger(gpu_types, tree, policy, strict=False)
        with self.transaction(write=False):  # one consistent read of every table
            projects = self._names("project_names")
            types = self._names("gpu_type_names")
            where, params = ("WHERE end > ?", (float(since),)) if since is not None else ("", ())
            n = int(self._conn.execute(f"SELECT COUNT(*) FROM intervals {where}", params).fetchone()[0])
            cur = self._conn.execute(
                f"SELECT start, end, gpus, project, gpu_type, allocated FROM intervals {where}", params
            )
            arr = np.fromiter(
                cur,
                dtype=[("start", "f8"), ("end", "f8"), ("gpus", "f8"), ("project", "i8"),
                       ("gpu_type", "i8"), ("allocated", "?")],
                count=n,
            )
            demand = self._samples("demand", "by_project", since)
            capacity = self._samples("capacity", "by_type", since)
        led.record_columns(
            start=arr["start"], end=arr["end"], gpus=arr["gpus"],
            project_code=arr["project"], project_names=projects,
            type_code=arr["gpu_type"], type_names=types,
            allocated=arr["allocated"],
        )
        for t, by_project in demand:
            led.record_demand(t, by_project)
        for t, by_type in capacity:
            led.record_capacity(t, by_type)
        return led

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

    @staticmethod
    def _epoch_dict(row: tuple) -> dict:
        i, t, plan, report, degraded = row
        return {
            "id": i,
            "time": t,
            "plan": json.loads(plan),
            "report": None if report is None else json.loads(report),
            "degraded": degraded,
        }

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
