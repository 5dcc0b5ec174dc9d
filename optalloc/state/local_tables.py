"""The local runner's tables in the state database (opened and written through
optalloc.state.db).

A run row is written *before* its process exists (state `starting`: the intent), confirmed
with the pid once it does (`running`), marked `stopping` before the preemption notice is sent
(`notice_sent` once it was), and `ended` when the process is gone. One live (not ended) run per
job: a partial unique index. Events wait in `runner_local_events` until the cycle has recorded
them and acknowledges them (`delivered`).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from optalloc.codec import placement_from_dict
from optalloc.state.db import open_state_db, write_transaction
from optalloc.types import Placement

__all__ = ["Run", "create_tables", "get_run", "live_runs", "open_runner_db", "run_dir_of",
           "write_transaction"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS runner_local_runs (
    run_id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    node TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('starting', 'running', 'stopping', 'ended')),
    pid INTEGER,                 -- NULL while starting: the intent is recorded, no process yet
    proc_start INTEGER,          -- /proc/<pid>/stat starttime: identity of the pid
    start_time REAL NOT NULL,
    end_time REAL,
    placement TEXT NOT NULL,     -- JSON (optalloc.codec)
    resumable INTEGER NOT NULL,
    log_path TEXT NOT NULL,
    exit_path TEXT NOT NULL,
    notice_time REAL,            -- preemption decided (committed before the signal)
    kill_deadline REAL,          -- SIGKILL from here on
    kill_time REAL,
    preempt_code TEXT,
    exit_code INTEGER,
    intent_wall REAL,            -- wall clock when the start intent was committed
    notice_sent INTEGER NOT NULL DEFAULT 0  -- 1 once the notice signal went out
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
-- events of one kind, per job: the backoff after failed starts reads every job's streak
-- each epoch (its `start_failed` events, since the job's last `started` one) without a scan
-- of the whole audit table, which grows with every start and stop
CREATE INDEX IF NOT EXISTS runner_local_events_kind ON runner_local_events(kind, job_id);
CREATE TABLE IF NOT EXISTS runner_local_utilization (
    time REAL NOT NULL,
    job_id TEXT NOT NULL,
    gpu_index INTEGER NOT NULL,
    gpu_uuid TEXT,
    gpu_util_pct REAL,
    memory_used_bytes INTEGER
);
"""

_RUN_COLUMNS = ("run_id, job_id, state, pid, proc_start, start_time, placement, resumable, "
                "log_path, exit_path, notice_time, kill_deadline, kill_time, preempt_code, "
                "intent_wall, notice_sent")


@dataclass(frozen=True)
class Run:
    run_id: int
    job_id: str
    state: str
    pid: int | None
    proc_start: int | None
    start_time: float
    placement: Placement
    resumable: bool
    log_path: str
    exit_path: str
    notice_time: float | None
    kill_deadline: float | None
    kill_time: float | None
    preempt_code: str | None
    intent_wall: float | None
    notice_sent: bool


def open_runner_db(path) -> sqlite3.Connection:
    """A connection for runner tables in the state database (optalloc.state.db: the state
    file's checks, mode 0600, optalloc's mark claimed first, WAL, locked retries, StateError
    for SQLite's errors). One runner per thread at a time may use it."""
    return open_state_db(path, check_same_thread=False)


def create_tables(conn: sqlite3.Connection) -> None:
    """The local runner's tables; a runs table from before start intents is migrated."""
    with write_transaction(conn):
        cols = [r[1] for r in conn.execute("PRAGMA table_info(runner_local_runs)")]
        if cols and "intent_wall" not in cols:
            conn.execute("DROP INDEX IF EXISTS runner_local_one_live_run")
            conn.execute("ALTER TABLE runner_local_runs RENAME TO runner_local_runs_v1")
            for stmt in SCHEMA.split(";"):
                if "runner_local_runs" in stmt and stmt.strip():
                    conn.execute(stmt)
            keep = ", ".join(cols)
            conn.execute(f"INSERT INTO runner_local_runs ({keep}) SELECT {keep} "
                         "FROM runner_local_runs_v1")
            conn.execute("DROP TABLE runner_local_runs_v1")
        for stmt in SCHEMA.split(";"):
            if stmt.strip():
                conn.execute(stmt)


def live_runs(conn: sqlite3.Connection, node: str) -> list[Run]:
    rows = conn.execute(
        f"SELECT {_RUN_COLUMNS} FROM runner_local_runs WHERE state != 'ended' AND node = ? "
        "ORDER BY run_id", (node,)).fetchall()
    return [_run(r) for r in rows]


def get_run(conn: sqlite3.Connection, run_id: int) -> Run:
    row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runner_local_runs WHERE run_id = ?",
                       (run_id,)).fetchone()
    return _run(row)


def _run(r: tuple) -> Run:
    return Run(r[0], r[1], r[2], r[3], r[4], r[5], placement_from_dict(json.loads(r[6])),
               bool(r[7]), r[8], r[9], r[10], r[11], r[12], r[13], r[14], bool(r[15]))


def run_dir_of(state_path) -> Path:
    return Path(state_path).resolve().parent / "runs"
