"""The Slurm runner's tables in the state database: per optalloc job its Slurm id, where it
stands (held, placed, running, stopping, done), its placement, run start and preemption notice,
so a restarted runner re-adopts everything; and its events, kept until the cycle has recorded
them and acknowledges them (a crash in between hands them out again, never loses them). Opened
and written through optalloc.state.db."""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from typing import Iterable

from optalloc.codec import placement_from_dict, to_dict
from optalloc.state.db import open_state_db, write_transaction
from optalloc.types import Placement

__all__ = ["SlurmRow", "SlurmTable", "write_transaction"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS runner_slurm_jobs (
    job_id TEXT PRIMARY KEY,
    slurm_id TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('held', 'placed', 'running', 'stopping', 'done')),
    resumable INTEGER NOT NULL,
    placement TEXT,          -- the plan's placement (JSON) while placed/running
    placed_time REAL,
    run_start REAL,          -- Slurm's start_time of the current run
    notice_time REAL,
    kill_deadline REAL,
    preempt_code TEXT
);
CREATE TABLE IF NOT EXISTS runner_slurm_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    time REAL NOT NULL,
    run_start REAL,
    placement TEXT,
    exit_code INTEGER,
    message TEXT NOT NULL,
    delivered INTEGER NOT NULL DEFAULT 0
)
"""
_COLUMNS = ("job_id, slurm_id, state, resumable, placement, placed_time, run_start, "
            "notice_time, kill_deadline, preempt_code")


@dataclass(frozen=True)
class SlurmRow:
    job_id: str
    slurm_id: str
    state: str
    resumable: bool
    placement: Placement | None
    placed_time: float | None
    run_start: float | None
    notice_time: float | None
    kill_deadline: float | None
    preempt_code: str | None


class SlurmTable:
    """`runner_slurm_jobs` in the state DB at `state_path` (None: a private in-memory table,
    for a runner that keeps no state)."""

    def __init__(self, state_path: str | os.PathLike | None = None):
        if state_path is None:
            self.conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        else:
            self.conn = open_state_db(state_path, check_same_thread=False)
        try:
            with write_transaction(self.conn):
                for stmt in SCHEMA.split(";"):
                    self.conn.execute(stmt)
        except BaseException:
            self.conn.close()
            raise

    def transaction(self):
        return write_transaction(self.conn)

    def rows(self, include_done: bool = False) -> list[SlurmRow]:
        q = f"SELECT {_COLUMNS} FROM runner_slurm_jobs"
        if not include_done:
            q += " WHERE state != 'done'"
        return [
            SlurmRow(r[0], r[1], r[2], bool(r[3]),
                     None if r[4] is None else placement_from_dict(json.loads(r[4])), *r[5:])
            for r in self.conn.execute(q + " ORDER BY job_id").fetchall()
        ]

    def row(self, job_id: str) -> SlurmRow | None:
        r = self.conn.execute(f"SELECT {_COLUMNS} FROM runner_slurm_jobs WHERE job_id = ?",
                              (job_id,)).fetchone()
        if r is None:
            return None
        return SlurmRow(r[0], r[1], r[2], bool(r[3]),
                        None if r[4] is None else placement_from_dict(json.loads(r[4])), *r[5:])

    def slurm_id(self, job_id: str) -> str | None:
        row = self.conn.execute("SELECT slurm_id FROM runner_slurm_jobs WHERE job_id = ?",
                                (job_id,)).fetchone()
        return None if row is None else row[0]

    def add_held(self, job_id: str, slurm_id: str, resumable: bool) -> None:
        """A Slurm job optalloc now knows, held until a plan places it (replaces an old row)."""
        with write_transaction(self.conn):
            self.conn.execute(
                "INSERT OR REPLACE INTO runner_slurm_jobs (job_id, slurm_id, state, resumable) "
                "VALUES (?, ?, 'held', ?)", (job_id, slurm_id, int(resumable)))

    def placed(self, job_id: str, placement: Placement, now: float) -> None:
        """Released on the plan's nodes: a new run (no start, notice or deadline yet)."""
        self.conn.execute(
            "UPDATE runner_slurm_jobs SET state = 'placed', placement = ?, placed_time = ?, "
            "run_start = NULL, notice_time = NULL, kill_deadline = NULL, preempt_code = NULL "
            "WHERE job_id = ?", (json.dumps(to_dict(placement)), now, job_id))

    def set(self, job_id: str, **cols) -> None:
        if "placement" in cols and cols["placement"] is not None:
            cols["placement"] = json.dumps(to_dict(cols["placement"]))
        sets = ", ".join(f"{k} = ?" for k in cols)
        self.conn.execute(f"UPDATE runner_slurm_jobs SET {sets} WHERE job_id = ?",
                          (*cols.values(), job_id))

    def checkpoint(self) -> None:
        """Commit what the open transaction wrote so far and go on in a new one (an action's
        intent made durable before the action)."""
        if self.conn.in_transaction:
            self.conn.execute("COMMIT")
            self.conn.execute("BEGIN IMMEDIATE")

    # ------------------------------------------------------------------ events
    # an event is (job_id, kind, time, run_start, placement, exit_code, message), the fields
    # of optalloc.runners.base.JobEvent (the runner makes them into JobEvents)
    def emit(self, events: Iterable[tuple]) -> None:
        """Keep events until they are acknowledged (inside the caller's transaction, with the
        row changes they report)."""
        self.conn.executemany(
            "INSERT INTO runner_slurm_events (job_id, kind, time, run_start, placement, "
            "exit_code, message) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(j, k, t, rs, None if pl is None else json.dumps(to_dict(pl)), ec, m)
             for j, k, t, rs, pl, ec, m in events])

    def undelivered(self) -> tuple[int, list[tuple]]:
        """(highest seq handed out, events not yet acknowledged, oldest first)."""
        rows = self.conn.execute(
            "SELECT seq, job_id, kind, time, run_start, placement, exit_code, message "
            "FROM runner_slurm_events WHERE delivered = 0 ORDER BY seq").fetchall()
        events = [(j, k, t, rs, None if p is None else placement_from_dict(json.loads(p)), ec, m)
                  for _seq, j, k, t, rs, p, ec, m in rows]
        return (rows[-1][0] if rows else 0), events

    def last_seq(self) -> int:
        (seq,) = self.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM runner_slurm_events").fetchone()
        return int(seq)

    def ack(self, upto: int) -> None:
        with write_transaction(self.conn):
            self.conn.execute("UPDATE runner_slurm_events SET delivered = 1 "
                              "WHERE seq <= ? AND delivered = 0", (upto,))

    def close(self) -> None:
        self.conn.close()
