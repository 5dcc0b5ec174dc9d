"""How the state DB is opened, written and read, for everything that keeps tables in it: the
state store (optalloc.state.store) and the runners' tables (local_tables, slurm_tables).

* `open_state_db(path)`: the path gets the state file's checks (optalloc.state.check) and mode
  0600 before SQLite opens it; optalloc's mark (`PRAGMA application_id`) is claimed in the first
  write transaction, before anything else is written (WAL mode included), so another
  program's SQLite file is refused untouched; then WAL. Both first steps retry while another
  process holds the lock (`retry_locked`).
* `write_transaction(conn)`: BEGIN IMMEDIATE ... COMMIT, one writer at a time (two optalloc
  processes that apply at once cannot both start the same job); nested use joins the outer
  transaction; anything raised inside rolls it back.
* `sqlite_errors(path)`: SQLite's errors as StateError naming the file and what to do.
* `copy_state_db(path, to)`: one consistent copy, made without writing a byte of the state DB
  (a dry run works on it).
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
import urllib.parse
from contextlib import contextmanager
from typing import Callable, Iterator

from optalloc.errors import StateError
from optalloc.state.check import check_state_file
from optalloc.statefile import claim_sqlite, create_private_file

BUSY_TIMEOUT_S = 30.0


def _locked(err: BaseException) -> bool:
    return isinstance(err, sqlite3.OperationalError) and (
        "locked" in str(err) or "busy" in str(err))


@contextmanager
def sqlite_errors(path: str, busy_timeout_s: float = BUSY_TIMEOUT_S) -> Iterator[None]:
    """SQLite errors inside the block become StateError (the cause kept as __cause__)."""
    try:
        yield
    except sqlite3.OperationalError as err:
        if _locked(err):
            raise StateError(
                f"state DB {path} stayed locked by another process for more than "
                f"{busy_timeout_s:g}s; retry, or look for a stuck optalloc process"
            ) from err
        raise StateError(f"state DB {path}: {err}") from err
    except sqlite3.DatabaseError as err:
        raise StateError(
            f"state DB {path} is not a usable SQLite database ({err}); point --state at "
            "an optalloc state file or a new path"
        ) from err


def retry_locked(step: Callable[[], object], path: str,
                 busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
    """Run `step`, retrying while another process holds the lock, up to the busy timeout.

    SQLite answers "database is locked" at once, without calling its busy handler, when two
    processes open a new file together and both switch it to WAL or create the schema; the
    handler only covers ordinary lock waits. Seen as 11 failures in 200 three-way races."""
    deadline = time.monotonic() + busy_timeout_s
    delay = 0.005
    while True:
        try:
            with sqlite_errors(path, busy_timeout_s):
                step()
            return
        except StateError as err:
            if not _locked(err.__cause__) or time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(0.1, delay * 2)


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT (see the module doc); SQLite errors become StateError."""
    if conn.in_transaction:
        yield conn
        return
    path = db_path(conn)
    with sqlite_errors(path):
        conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException as err:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if isinstance(err, sqlite3.Error):
            raise StateError(f"state DB {path}: {err}; nothing was written") from err
        raise
    with sqlite_errors(path):
        conn.execute("COMMIT")


def db_path(conn: sqlite3.Connection) -> str:
    """The file a connection has open (for messages)."""
    try:
        row = conn.execute("PRAGMA database_list").fetchone()
    except sqlite3.Error:
        return "?"
    return (row[2] if row else "") or ":memory:"


def _no_other_read(full: str) -> None:
    """An existing state DB others may read (made by `touch` or sqlite3 under umask 022), and
    its WAL files, lose other users' bits before it holds jobs' argv: the group's are kept
    (README, "Running unattended"), optalloc never widens a mode. A reader that does not own
    them (an operator in the group) leaves them to the owner's next run (cron's epoch)."""
    for f in (full, full + "-wal", full + "-shm"):
        try:
            st = os.lstat(f)  # a link is never followed (optalloc.statefile)
        except FileNotFoundError:
            continue
        if (stat.S_ISREG(st.st_mode) and st.st_mode & 0o007
                and os.geteuid() in (0, st.st_uid)):
            os.chmod(f, st.st_mode & 0o7770)


def open_state_db(
    path: str | os.PathLike,
    *,
    init: Callable[[sqlite3.Connection], None] | None = None,
    busy_timeout_s: float = BUSY_TIMEOUT_S,
    synchronous: str | None = None,
    check_same_thread: bool = True,
) -> sqlite3.Connection:
    """A connection to the state DB at `path` (autocommit; writes go in write_transaction).
    `init(conn)` runs inside the first write transaction, right after the mark is claimed
    (the store creates its schema there). `synchronous`: e.g. "NORMAL" (default: SQLite's
    FULL). StateError for any problem, with what to do."""
    text = os.fspath(path)
    full = check_state_file(text)
    try:
        if not create_private_file(full):  # 0600 from the start: SQLite would use the umask
            _no_other_read(full)
    except OSError as err:
        raise StateError(f"state DB {text}: cannot create it ({err.strerror})") from None
    try:
        conn = sqlite3.connect(full, timeout=busy_timeout_s, isolation_level=None,
                               check_same_thread=check_same_thread)
    except sqlite3.Error as err:
        raise StateError(f"state DB {text}: cannot open ({err})") from err
    try:
        with sqlite_errors(text, busy_timeout_s):
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")

        def first() -> None:
            with write_transaction(conn):
                claim_sqlite(conn, text)
                if init is not None:
                    init(conn)

        retry_locked(first, text, busy_timeout_s)
        retry_locked(lambda: conn.execute("PRAGMA journal_mode = WAL"), text, busy_timeout_s)
        if synchronous is not None:
            with sqlite_errors(text, busy_timeout_s):
                conn.execute(f"PRAGMA synchronous = {synchronous}")
    except BaseException:
        conn.close()
        raise
    return conn


def copy_state_db(path: str | os.PathLike, to: str | os.PathLike) -> None:
    """Copy the state DB at `path` into the new file `to` (mode 0600): one consistent snapshot
    (SQLite's backup API, committed -wal content included). Not a byte of the state DB, its
    -wal or its -journal is written: with one of those beside it (another process has it open,
    or one stopped uncleanly) it is read in SQLite's read-only mode, which never checkpoints
    or rolls back; without, through a connection that refuses writes (`query_only`) and, as
    the last to close, removes the -wal and -shm files that reading made (a read-only one
    would leave them behind)."""
    text = os.fspath(path)
    full = check_state_file(text)
    if not create_private_file(os.fspath(to)):
        raise StateError(f"cannot copy the state DB {text} to {os.fspath(to)}: it exists")
    side = any(os.path.lexists(full + s) for s in ("-wal", "-journal"))
    uri = f"file:{urllib.parse.quote(full)}?mode={'ro' if side else 'rw'}"
    with sqlite_errors(text):
        src = sqlite3.connect(uri, uri=True, isolation_level=None)
        try:
            src.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            src.execute("PRAGMA query_only = ON")
            dst = sqlite3.connect(os.fspath(to))
            try:
                src.backup(dst)
            finally:
                dst.close()
        finally:
            src.close()
