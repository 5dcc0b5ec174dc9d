"""The sweep's run store: a file is whole or absent (a write that fails leaves the old file and
no temporary behind), and only a readable record of a successful run with the right key counts
as finished."""

from __future__ import annotations

import json

import pytest

from optalloc.errors import OptallocError
from optalloc.sim.sweep.store import RunStore, atomic_write, write_json


def test_a_write_that_fails_halfway_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "results.csv"
    target.write_text("old\n")

    def half(p):
        p.write_text("new, but only ha")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, half)
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]


def test_a_write_replaces_the_file_whole_and_readable_by_all(tmp_path):
    path = write_json(tmp_path / "r.json", {"a": [1, 2.5, None]})
    assert json.loads(path.read_text()) == {"a": [1, 2.5, None]}
    assert path.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


@pytest.mark.parametrize(
    "content, finished",
    [
        ('{"key": "k1", "status": "ok", "metrics": {}}', True),
        ('{"key": "k1", "status": "failed", "error": "RuntimeError: x"}', False),  # retried
        ('{"key": "k2", "status": "ok"}', False),  # another run's record under this name
        ('{"key": "k1", "status": "ok"', False),  # cut short (not by us: writes are atomic)
        ("[1, 2]", False),
        (None, False),  # absent
    ],
)
def test_only_a_whole_successful_record_of_this_run_counts_as_finished(tmp_path, content, finished):
    store = RunStore(tmp_path / "out")
    store.prepare()
    if content is not None:
        store.path("k1").write_text(content)
    assert (store.finished("k1") is not None) == finished


def test_an_out_path_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "out").write_text("x")
    with pytest.raises(OptallocError, match="is a file; give a directory"):
        RunStore(tmp_path / "out").prepare()
