"""The state lock makes two cron runs safe, and plan files are never torn."""

import multiprocessing as mp
import os
import time

import pytest

from optalloc.statefile import StateLock, write_atomic
from optalloc.errors import LockBusy


def _hold(path, ready, release):
    with StateLock(path):
        ready.set()
        release.wait(10)


def test_a_second_run_exits_with_a_clear_message_while_the_first_holds_the_lock(tmp_path):
    db = str(tmp_path / "state.db")
    ctx = mp.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(db, ready, release))
    holder.start()
    try:
        assert ready.wait(10)
        with pytest.raises(LockBusy) as err:
            with StateLock(db, wait_s=0.2):
                pass
        msg = str(err.value)
        assert f"pid {holder.pid}" in msg and "changed nothing" in msg and "--wait" in msg
    finally:
        release.set()
        holder.join(10)
    with StateLock(db, wait_s=1.0):  # free again once the holder is gone
        pass


def test_a_waiting_run_gets_the_lock_when_the_holder_finishes(tmp_path):
    db = str(tmp_path / "state.db")
    ctx = mp.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(db, ready, release))
    holder.start()
    assert ready.wait(10)
    release.set()
    with StateLock(db, wait_s=10.0):
        assert not holder.is_alive() or holder.join(5) is None
    holder.join(10)


def test_the_lock_of_a_killed_holder_is_released_by_the_kernel(tmp_path):
    db = str(tmp_path / "state.db")
    ctx = mp.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(db, ready, release))
    holder.start()
    assert ready.wait(10)
    holder.kill()
    holder.join(10)
    with StateLock(db, wait_s=2.0):
        pass


def test_write_atomic_replaces_the_whole_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "plan.json"
    target.write_text("old")
    write_atomic(str(target), '{"new": true}\n')
    assert target.read_text() == '{"new": true}\n'
    assert os.listdir(tmp_path) == ["plan.json"]
