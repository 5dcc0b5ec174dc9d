"""The SQLite state store: the one state file of a deployment.

Holds the ledger (run intervals, demand and capacity samples), the job queue and its history,
the record of each epoch, and job events. Safe when several processes open it: WAL journal,
a busy timeout, and every write in a `BEGIN IMMEDIATE` transaction (writers queue, readers
never block). `transaction()` groups writes atomically; a transaction that raises leaves
nothing written. Transactions nest by joining the outermost one.

Schema version lives in the `meta` table; a file written by a newer optalloc is refused with a
StateError rather than misread. Columns added since (nullable, so an older optalloc still
reads and writes the file right and the version stays) are added when a writable store opens
a file that lacks them (`_MIGRATIONS`), and read as absent where it does not (the read-only
store): `demand.placeable` (the fair measure's placeable demand, optalloc.demand) reads, NULL
or missing, as all the sample's demand, as before it was kept.

Recording an interval with the same (job_id, start) again replaces it, so a retried epoch does
not charge twice.

The file is opened by optalloc.state.db (mode 0600: job argv and plans are in it; only at a
path `optalloc.state.check` accepts; a SQLite file made by another program is refused, PRAGMA
application_id marks optalloc's). The jobs, epochs and events tables are in records.py: full
plans are kept for the last STORED_PLANS epochs; older epochs keep their time, solver report and
degraded note.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from optalloc.confined import sample_gpus
from optalloc.errors import OptallocError, StateError
from optalloc.ledger.memory import Ledger
from optalloc.org import OrgTree
from optalloc.state.check import SCHEMA_VERSION, check_state_file, schema_version_of
from optalloc.state.db import BUSY_TIMEOUT_S, open_state_db, sqlite_errors
from optalloc.state.records import STORED_PLANS, RecordsMixin
from optalloc.types import GpuType, Interval, Policy

__all__ = ["SCHEMA_VERSION", "STORED_PLANS", "StateStore", "check_state_file"]

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
CREATE TABLE demand (t REAL PRIMARY KEY, by_project TEXT NOT NULL, placeable TEXT);
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


# (table, column, type): added to a file written before they were (see the module doc)
_MIGRATIONS = (("demand", "placeable", "TEXT"),)


class StateStore(RecordsMixin):
    """Open (creating if needed) the state DB at `path`."""

    def __init__(self, path: str | os.PathLike, *, busy_timeout_s: float = BUSY_TIMEOUT_S):
        self.path = os.fspath(path)
        self.busy_timeout_s = float(busy_timeout_s)
        self._depth = 0
        self._name_ids: dict[tuple[str, str], int] = {}
        self._conn = open_state_db(self.path, init=self._init_schema,
                                   busy_timeout_s=self.busy_timeout_s, synchronous="NORMAL")

    # ------------------------------------------------------------------ plumbing

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "StateStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _sqlite_errors(self):
        return sqlite_errors(self.path, self.busy_timeout_s)

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

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        """Inside open_state_db's first write transaction, after the mark is claimed."""
        conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                         (str(SCHEMA_VERSION),))
            return
        schema_version_of(self.path, row[0])
        for table, column, kind in _MIGRATIONS:
            if column not in _columns(conn, table):
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

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

    def record_demand(self, t: float, by_project: Mapping[str, int],
                      placeable: Mapping[str, int] | None = None) -> None:
        """GPUs asked per project from `t` (a second sample at the same `t` replaces it);
        `placeable`: of those, the GPUs of jobs that could run on the up nodes (None: all)."""
        doc = json.dumps({str(k): int(v) for k, v in by_project.items()}, sort_keys=True)
        fit = (None if placeable is None else
               json.dumps({str(k): sample_gpus(v) for k, v in placeable.items()}, sort_keys=True))
        with self.transaction():
            self._conn.execute("INSERT OR REPLACE INTO demand (t, by_project, placeable) "
                               "VALUES (?, ?, ?)", (float(t), doc, fit))

    def record_capacity(self, t: float, by_type: Mapping[str, int]) -> None:
        """GPUs per gpu_type on up nodes from `t` (a second sample at the same `t` replaces it)."""
        doc = json.dumps({str(k): int(v) for k, v in by_type.items()}, sort_keys=True)
        with self.transaction():
            self._conn.execute("INSERT OR REPLACE INTO capacity (t, by_type) VALUES (?, ?)", (float(t), doc))

    def _samples(self, table: str, column: str, since: float | None) -> list[tuple[float, Any]]:
        """(t, the column's JSON) in time order; a NULL column reads as None."""
        if since is None:
            rows = self._read(f"SELECT t, {column} FROM {table} ORDER BY t")
        else:  # the last sample at or before `since` still applies after it
            rows = self._read(
                f"SELECT t, {column} FROM {table} WHERE t >= "
                f"COALESCE((SELECT MAX(t) FROM {table} WHERE t <= ?), ?) ORDER BY t",
                (float(since), float(since)),
            )
        return [(float(t), None if doc is None else json.loads(doc)) for t, doc in rows]

    def demand_samples(self, since: float | None = None) -> list[tuple[float, dict]]:
        """(t, GPUs asked per project) in time order; with `since`, the ones in force from it."""
        return self._samples("demand", "by_project", since)

    def placeable_demand_samples(self, since: float | None = None
                                 ) -> list[tuple[float, dict | None]]:
        """(t, GPUs of jobs that could run on the up nodes per project, None where the sample
        did not keep them: all its demand) in time order, as `demand_samples`."""
        if "placeable" not in {r[1] for r in self._read("PRAGMA table_info(demand)")}:
            # a file from before it was kept, opened read-only (a writable store adds it)
            return [(t, None) for t, _ in self.demand_samples(since)]
        return self._samples("demand", "placeable", since)

    def capacity_samples(self, since: float | None = None) -> list[tuple[float, dict]]:
        """(t, GPUs per gpu_type on up nodes) in time order; with `since`, those in force from it."""
        return self._samples("capacity", "by_type", since)

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
            placeable = self.placeable_demand_samples(since)
            capacity = self._samples("capacity", "by_type", since)
        led.record_columns(
            start=arr["start"], end=arr["end"], gpus=arr["gpus"],
            project_code=arr["project"], project_names=projects,
            type_code=arr["gpu_type"], type_names=types,
            allocated=arr["allocated"],
        )
        for (t, by_project), (_, fit) in zip(demand, placeable):
            led.record_demand(t, by_project, fit)
        for t, by_type in capacity:
            led.record_capacity(t, by_type)
        return led


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}

