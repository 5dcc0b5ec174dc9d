"""The read-only commands (`jobs`, `gpus`, `dashboard`, `serve`) read the state DB as whoever
runs them: its owner, or a group README "Files and modes" lets read (directory g+rx, DB g+r).
SQLite's read-only mode could not open a WAL-mode DB there ("attempt to write a readonly
database": it must make a -shm file), and as the owner it left -wal and -shm files behind.
optalloc.dashboard.readonly._connect picks the way by what the user may do."""

from __future__ import annotations

import os
import shutil
import sqlite3

import pytest

from optalloc.dashboard import readonly
from optalloc.dashboard.readonly import ReadOnlyStore
from optalloc.errors import StateError


@pytest.fixture()
def state(demo_state, tmp_path):
    db = tmp_path / "state" / "state.db"
    db.parent.mkdir()
    shutil.copy(demo_state.state, db)
    return db


def _side_files(db) -> list[str]:
    return sorted(p.name for p in db.parent.iterdir() if p.name != db.name)


def test_the_owner_reads_every_epoch_and_leaves_no_wal_or_shm_file_behind(state):
    before = state.read_bytes()
    with ReadOnlyStore(state) as store:
        assert [i for i, _ in store.epoch_ids(5)] == [2, 1]
        with pytest.raises(StateError, match="readonly"):
            store.record_event(0.0, None, "x")
    assert _side_files(state) == []
    assert state.read_bytes() == before


def test_a_group_that_may_only_read_gets_every_epoch_from_a_copy_and_writes_nothing(
        state, monkeypatch):
    # as a member of the state directory's group: no write permission on the DB or the folder
    real = os.access
    monkeypatch.setattr(readonly.os, "access",
                        lambda p, mode: False if mode & os.W_OK else real(p, mode))
    before = state.read_bytes()
    with ReadOnlyStore(state) as store:
        assert [i for i, _ in store.epoch_ids(5)] == [2, 1]
        assert len(store.list_jobs()) > 0
        assert store.epochs_by_id([2])[0]["plan"] is not None
        with pytest.raises(StateError, match="readonly"):
            store.record_event(0.0, None, "x")
    assert _side_files(state) == []
    assert state.read_bytes() == before


def test_while_an_epoch_holds_the_db_open_its_committed_wal_content_is_read(state):
    writer = sqlite3.connect(state, isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")  # the new row stays in the -wal
        writer.execute("INSERT INTO events (time, job_id, kind, message) "
                       "VALUES (1.0, NULL, 'probe', 'in the wal')")
        assert (state.parent / "state.db-wal").exists()
        with ReadOnlyStore(state) as store:
            assert any(e["kind"] == "probe" for e in store.events(limit=1000))
    finally:
        writer.close()


def test_a_file_that_changes_under_every_read_is_refused_with_a_retry_hint(state, monkeypatch):
    # a -wal appearing beside the file while it is read means an epoch started: read again,
    # and after five tries tell the user to retry rather than show a torn copy
    (state.parent / "state.db-wal").write_bytes(b"")
    monkeypatch.setattr(readonly.time, "sleep", lambda s: None)
    with pytest.raises(sqlite3.OperationalError, match="changed while it was read, 5 times"):
        readonly._image(str(state))


def test_a_db_this_user_cannot_read_is_refused_naming_what_it_needs(state, monkeypatch):
    def deny(*a, **k):
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(readonly.sqlite3, "connect", deny)
    with pytest.raises(StateError, match="this user must be able to read the state DB"):
        ReadOnlyStore(state)


def test_another_programs_sqlite_file_with_our_table_names_is_refused_not_read(tmp_path):
    # a file with a meta table and a schema_version row, but another program's application
    # id: `jobs --state` on it read its rows as optalloc's
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.commit()
    conn.close()
    with pytest.raises(StateError, match=r"another program's SQLite database \(application "
                                         r"id 1234"):
        ReadOnlyStore(other)
