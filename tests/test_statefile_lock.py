"""The state lock makes two cron runs safe, and plan files are never torn."""

import multiprocessing as mp
import os

import pytest

from optalloc.statefile import StateLock, write_atomic
from optalloc.errors import LockBusy


def _hold(path, ready, release, released):
    with StateLock(path):
        ready.set()
        release.wait(10)
    released.set()


@pytest.fixture
def holder(tmp_path):
    """Another process holding the state lock of `db`: (db, process, release, released)."""
    db = str(tmp_path / "state.db")
    ctx = mp.get_context("fork")
    ready, release, released = ctx.Event(), ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(db, ready, release, released))
    proc.start()
    assert ready.wait(10)
    yield db, proc, release, released
    if proc.is_alive():  # (a killed waiter leaves the Event's condition unusable: no set())
        release.set()
        proc.join(10)


def test_a_second_run_exits_with_a_clear_message_while_the_first_holds_the_lock(holder):
    db, proc, release, _ = holder
    with pytest.raises(LockBusy) as err:
        with StateLock(db, wait_s=0.2):
            pass
    msg = str(err.value)
    assert f"pid {proc.pid}" in msg and "changed nothing" in msg and "--wait" in msg
    release.set()
    proc.join(10)
    with StateLock(db, wait_s=1.0):  # free again once the holder is gone
        pass


def test_a_waiting_run_gets_the_lock_once_the_holder_releases_it(holder):
    db, proc, release, _ = holder
    with pytest.raises(LockBusy):  # held: a run that does not wait is refused
        with StateLock(db, wait_s=0.0):
            pass
    release.set()
    with StateLock(db, wait_s=10.0):  # waits for the holder to let go
        proc.join(10)
        assert proc.exitcode == 0


def test_the_lock_of_a_killed_holder_is_released_by_the_kernel(holder):
    db, proc, _, released = holder
    proc.kill()
    proc.join(10)
    with StateLock(db, wait_s=2.0):
        assert not released.is_set()  # it never let go itself: the kernel did


def test_write_atomic_replaces_the_whole_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "plan.json"
    target.write_text("old")
    write_atomic(str(target), '{"new": true}\n')
    assert target.read_text() == '{"new": true}\n'
    assert os.listdir(tmp_path) == ["plan.json"]
