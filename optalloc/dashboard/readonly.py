"""Read-only access to the state DB for the dashboard, `serve` and the metrics.

`ReadOnlyStore` is a `StateStore` whose connection is opened with SQLite's `mode=ro`: every
reading method works, any write fails inside SQLite, and opening it never takes the write lock
(a plain StateStore checks its schema in a write transaction, which would queue behind a cron
epoch). It relies on StateStore keeping its connection in `_conn` and on its read methods;
tests/test_dashboard_data.py pins both.

The runner tables of the local runner (`runner_local_utilization`) are read here too, tolerating
their absence (the noop and Slurm runners never create them).
"""

from __future__ import annotations

import os
import sqlite3
import time
import urllib.parse

from optalloc.errors import StateError
from optalloc.state import SCHEMA_VERSION, StateStore
from optalloc.state.check import schema_version_of
from optalloc.statefile import refuse_foreign


def _connect(path: str, timeout: float) -> sqlite3.Connection:
    """A connection that reads the state DB and never writes it, by what this user may do:

    * a -wal or -journal beside it (an epoch is writing, or one stopped uncleanly): SQLite's
      read-only mode, which reads the -wal through the -shm and never checkpoints;
    * else, where this user may write the DB and its directory: read-write with writes
      refused (`query_only`), so the last connection to close removes the -wal and -shm files
      that reading in WAL mode makes (a read-only one left them behind, in the owner's mode);
    * else (a group that may only read, as README "Files and modes" sets up: SQLite's
      read-only mode cannot make the -shm it needs there, "attempt to write a readonly
      database"): a copy of the file in memory, taken while it did not change (`_image`).
      Without a -wal every committed write is in the file; an epoch that starts meanwhile
      writes its own -wal first and the file only at its checkpoint, which the copy's
      before-and-after check catches."""
    full = os.path.abspath(path)
    kw = dict(timeout=timeout, isolation_level=None, check_same_thread=False)
    if any(os.path.lexists(full + s) for s in ("-wal", "-journal")):
        return sqlite3.connect(f"file:{urllib.parse.quote(full)}?mode=ro", uri=True, **kw)
    if os.access(full, os.W_OK) and os.access(os.path.dirname(full), os.W_OK | os.X_OK):
        conn = sqlite3.connect(f"file:{urllib.parse.quote(full)}?mode=rw", uri=True, **kw)
        conn.execute("PRAGMA query_only = ON")
        return conn
    conn = sqlite3.connect(":memory:", **kw)
    conn.deserialize(_image(full))
    conn.execute("PRAGMA query_only = ON")
    return conn


def _image(full: str, tries: int = 5) -> bytes:
    """The state DB's bytes, read while its size, time and inode stayed the same and no
    -wal appeared beside it (else read again, `tries` times), marked as a rollback-journal
    file: SQLite cannot open a WAL-mode file held in memory."""
    for _ in range(tries):
        before = os.stat(full)
        with open(full, "rb") as f:
            data = bytearray(f.read())
        after = os.stat(full)
        same = (before.st_ino, before.st_size, before.st_mtime_ns) == \
            (after.st_ino, after.st_size, after.st_mtime_ns)
        if same and len(data) == after.st_size and not os.path.lexists(full + "-wal"):
            if len(data) >= 20 and data[18:20] == b"\x02\x02":
                data[18:20] = b"\x01\x01"
            return bytes(data)
        time.sleep(0.2)
    raise sqlite3.OperationalError(f"it changed while it was read, {tries} times; retry")


class ReadOnlyStore(StateStore):
    def __init__(self, path: str | os.PathLike, *, busy_timeout_s: float = 30.0):
        self.path = os.fspath(path)
        self.busy_timeout_s = float(busy_timeout_s)
        self._depth = 0
        self._name_ids: dict[tuple[str, str], int] = {}
        if not os.path.isfile(self.path):
            raise StateError(f"--state {self.path}: no such state DB; run `optalloc epoch` "
                             "first (it creates one)")
        try:
            self._conn = _connect(self.path, self.busy_timeout_s)
        except sqlite3.Error as err:
            raise StateError(
                f"state DB {self.path}: cannot open read-only ({err}); this user must be able "
                "to read the state DB (and its -wal and -shm files while an epoch runs)"
            ) from err
        try:
            with self._sqlite_errors():
                self._conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
                (app_id,) = self._conn.execute("PRAGMA application_id").fetchone()
                tables = [n for (n,) in self._conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'")]
                refuse_foreign(self.path, app_id, tables, "it is not an optalloc state file")
                if "meta" not in tables:
                    raise StateError(f"state DB {self.path} is not an optalloc state file (no "
                                     "meta table); point --state at the file `optalloc epoch` "
                                     "writes")
                row = self._conn.execute(
                    "SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                version = None if row is None else schema_version_of(self.path, row[0])
        except StateError:
            self._conn.close()
            raise
        if version is None or version > SCHEMA_VERSION:
            self._conn.close()
            raise StateError(
                f"state DB {self.path} has schema version {None if row is None else row[0]}, "
                f"which this optalloc cannot read ({SCHEMA_VERSION}); upgrade optalloc")

    def has_table(self, name: str) -> bool:
        return bool(self._read("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                               (name,)))

    def last_epoch_id(self) -> int | None:
        (v,) = self._read("SELECT MAX(id) FROM epochs")[0]
        return None if v is None else int(v)

    def epoch_ids(self, limit: int) -> list[tuple[int, float]]:
        """(id, time) of the latest `limit` epochs, newest first."""
        return [(int(i), float(t)) for i, t in self._read(
            "SELECT id, time FROM epochs ORDER BY id DESC LIMIT ?", (int(limit),))]

    def epochs_by_id(self, ids: list[int]) -> list[dict]:
        """Epoch records {id, time, plan, report, degraded} of the given ids, newest first."""
        if not ids:
            return []
        rows = self._read(
            f"SELECT id, time, plan, report, degraded FROM epochs WHERE id IN "
            f"({', '.join('?' * len(ids))}) ORDER BY id DESC", [int(i) for i in ids])
        return [self._epoch_dict(r) for r in rows]

    def utilization_samples(self, since: float) -> list[tuple]:
        """(time, job_id, gpu_index, gpu_util_pct, memory_used_bytes) sampled by the local
        runner at or after `since`, by time; [] when that runner never ran on this DB."""
        if not self.has_table("runner_local_utilization"):
            return []
        return self._read(
            "SELECT time, job_id, gpu_index, gpu_util_pct, memory_used_bytes "
            "FROM runner_local_utilization WHERE time >= ? ORDER BY time", (float(since),))
