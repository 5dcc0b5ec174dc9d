"""The state file stays whole: two processes writing at once, a transaction that raises or a
process that dies mid-transaction, a newer schema, a file that is not a database."""

from __future__ import annotations

import multiprocessing as mp
import os
import sqlite3

import pytest

from optalloc.errors import StateError
from optalloc.state import SCHEMA_VERSION, StateStore
from optalloc.types import Interval, Job

# fork keeps child start-up cheap; no parent connection is open when children start
CTX = mp.get_context("fork")


def _writer(path: str, tag: str, n: int, barrier) -> None:
    barrier.wait()  # both processes create/open the fresh file at the same moment
    with StateStore(path) as s:
        for i in range(n):
            with s.transaction():
                s.record_interval(Interval(f"{tag}-{i}", f"proj-{tag}", "h100", 1, float(i), i + 1.0))
                s.record_event(float(i), f"{tag}-{i}", "started")
            s.add_job(Job(f"{tag}-{i}", f"proj-{tag}", 1, submit_time=float(i)))


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = str(tmp_path / "state.db")
    barrier = CTX.Barrier(2)
    procs = [CTX.Process(target=_writer, args=(path, tag, 60, barrier)) for tag in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    with StateStore(path) as s:
        ivs = s.intervals()
        assert len(ivs) == 120
        assert {iv.project for iv in ivs} == {"proj-a", "proj-b"}
        assert len(s.events(limit=1000)) == 120
        assert len(s.list_jobs()) == 120
        assert s.schema_version() == SCHEMA_VERSION
        assert s._read("PRAGMA journal_mode")[0][0] == "wal"


def test_a_transaction_that_raises_leaves_nothing_written(tmp_path):
    with StateStore(tmp_path / "s.db") as s:
        with pytest.raises(RuntimeError, match="boom"):
            with s.transaction():
                s.record_interval(Interval("j", "new-project", "h100", 8, 0, 10))
                s.add_job(Job("j", "A1", 8))
                s.record_epoch(10.0, {"now": 10.0}, None, None)
                with s.transaction():  # nested: joins the outer one
                    s.record_event(10.0, "j", "started")
                raise RuntimeError("boom")
        assert (s.intervals(), s.list_jobs(), s.last_epoch(), s.events()) == ([], [], None, [])
        # name ids from the rolled-back transaction are not reused from a stale cache
        s.record_interval(Interval("k", "new-project", "h100", 1, 0, 10))
        assert s.intervals() == [Interval("k", "new-project", "h100", 1, 0, 10)]


def _die_mid_transaction(path: str) -> None:
    s = StateStore(path)
    tx = s.transaction()  # keep a reference: a collected generator would roll back
    tx.__enter__()
    s.record_interval(Interval("j", "A1", "h100", 8, 0, 10))
    s.add_job(Job("j", "A1", 8))
    os._exit(3)  # killed before COMMIT: no cleanup runs


def test_a_process_killed_mid_transaction_leaves_nothing_written(tmp_path):
    path = str(tmp_path / "s.db")
    StateStore(path).close()
    p = CTX.Process(target=_die_mid_transaction, args=(path,))
    p.start()
    p.join(30)
    assert p.exitcode == 3
    with StateStore(path) as s:
        assert (s.intervals(), s.list_jobs()) == ([], [])
        s.record_interval(Interval("k", "A1", "h100", 1, 0, 10))  # and the file is writable
        assert s.n_intervals() == 1


def test_a_writer_held_up_past_the_busy_timeout_gets_a_clear_error(tmp_path):
    path = tmp_path / "s.db"
    holder = StateStore(path)
    waiter = StateStore(path, busy_timeout_s=0.2)
    with holder.transaction():
        holder.record_event(0.0, None, "maintenance")
        with pytest.raises(StateError, match=r"stayed locked by another process for more than 0.2s"):
            waiter.record_event(1.0, None, "blocked")
        assert waiter.events() == []  # readers are not blocked by the writer (WAL)
    waiter.record_event(2.0, None, "after")
    assert [e["kind"] for e in waiter.events()] == ["maintenance", "after"]
    holder.close()
    waiter.close()


def test_a_state_file_from_a_newer_optalloc_is_refused(tmp_path):
    path = tmp_path / "s.db"
    StateStore(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(StateError, match=rf"schema version {SCHEMA_VERSION + 1}, newer than this "
                                         rf"optalloc understands \({SCHEMA_VERSION}\)"):
        StateStore(path)


@pytest.mark.parametrize(
    "case, content, message",
    [
        ("a text file is not a state DB", b"hello, not sqlite\n" * 200, "is not a usable SQLite database"),
    ],
)
def test_a_file_that_is_not_a_database_is_refused(tmp_path, case, content, message):
    path = tmp_path / "s.db"
    path.write_bytes(content)
    with pytest.raises(StateError, match=message):
        StateStore(path)


def test_a_state_path_in_a_missing_directory_is_refused(tmp_path):
    with pytest.raises(StateError, match="directory .*missing.* does not exist"):
        StateStore(tmp_path / "missing" / "s.db")


def _open_fresh(path: str, barrier, errors) -> None:
    barrier.wait()
    try:
        StateStore(path).close()
    except StateError as err:
        errors.put(str(err))


def test_processes_creating_the_same_new_state_file_together_all_succeed(tmp_path):
    # SQLite reports "locked" at once (no busy wait) when new files are switched to WAL
    # concurrently; before the retry this failed about 1 race in 20
    errors = CTX.Queue()
    for i in range(30):
        path = str(tmp_path / f"s{i}.db")
        barrier = CTX.Barrier(3)
        procs = [CTX.Process(target=_open_fresh, args=(path, barrier, errors)) for _ in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0, 0, 0]
    assert errors.empty()
