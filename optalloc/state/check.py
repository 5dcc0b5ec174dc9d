"""What can be known about a state DB path without writing a byte: the CLI checks it before
it takes the lock, and StateStore again when it opens the file."""

from __future__ import annotations

import os
import sqlite3
from typing import Any
from urllib.parse import quote

from optalloc.errors import StateError
from optalloc.statefile import check_state_path, refuse_foreign, sqlite_header

SCHEMA_VERSION = 1


def check_state_file(path: str | os.PathLike) -> str:
    """Everything that can be known about a state path without writing anything (so the CLI
    refuses a bad --state before it even takes the lock): check_state_path, then for an
    existing file: a SQLite file, not another program's, a schema version this optalloc reads.
    Returns the absolute path; StateError otherwise."""
    full = check_state_path(path)
    text = os.fspath(path)
    head = sqlite_header(full)
    if head is None:
        return full
    is_sqlite, app_id = head
    if not is_sqlite:
        raise StateError(
            f"state DB {text} is not a usable SQLite database (it does not start with the "
            "SQLite header); point --state at an optalloc state file or a new path")
    refuse_foreign(text, app_id, ())
    # ours (its schema version too: one from a newer optalloc is refused before the lock is
    # taken, or its file created), or an unmarked SQLite file: optalloc's from before the
    # mark, or another program's. Look inside without writing a byte (immutable: no locks, no
    # -wal/-shm files; what only the -wal holds is checked again once opened)
    try:
        conn = sqlite3.connect(f"file:{quote(full)}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error:
        return full  # checked again once opened, under the lock
    try:
        tables = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        refuse_foreign(text, app_id, tables)
        if "meta" in tables:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is not None:
                schema_version_of(text, row[0])
    except sqlite3.Error:
        pass  # e.g. a WAL file that cannot be read without writing: checked once opened
    finally:
        conn.close()
    return full


def schema_version_of(path: str, value: Any) -> int:
    try:
        version = int(value)
        if isinstance(value, float) and value != version:
            raise ValueError  # 1.9 is no schema version (int() would read it as 1)
    except (TypeError, ValueError):
        raise StateError(
            f"state DB {path} has schema_version {str(value)[:40]!r}, which is not an integer: "
            "the file is damaged or was not written by optalloc; restore it from a backup or "
            "use another --state file"
        ) from None
    if version > SCHEMA_VERSION:
        raise StateError(
            f"state DB {path} has schema version {version}, newer than this optalloc "
            f"understands ({SCHEMA_VERSION}); upgrade optalloc, or use another --state file"
        )
    return version
