"""The files of a deployment are private whatever the umask, and planted links are never
followed: the state DB, its lock, the plan file, the job logs and their directory."""

from __future__ import annotations

import os
import stat
import textwrap
from pathlib import Path

import pytest

from optalloc.cli import main
from optalloc.errors import StateError
from optalloc.state import STORED_PLANS, StateStore
from optalloc.runners import nvml
from optalloc.statefile import StateLock, write_atomic
from tests.conftest import kill_local_runs, make_lab, wait_until

CONFIG = textwrap.dedent(
    """
    gpu_types: [{name: h100}]
    nodes: [{name: box, gpu_type: h100, gpus: 2}]
    org: {name: lab, children: [{name: A1, share: 1}]}
    """
)


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


@pytest.fixture
def lab(tmp_path, monkeypatch, no_pynvml):
    monkeypatch.setattr(nvml, "_warned", set())
    d = make_lab(tmp_path, monkeypatch, CONFIG)
    yield d
    kill_local_runs(d / "st.db")


@pytest.fixture
def umask_000():
    old = os.umask(0)
    yield
    os.umask(old)


def test_every_file_optalloc_creates_is_private_even_under_umask_000(lab, umask_000, capsys):
    assert main(["submit", "--config", "cfg.yaml", "--state", "st.db", "--project", "A1",
                 "--gpus", "1", "--id", "tok", "--", "sh", "-c",
                 "echo secret-token-in-argv; exit 0"]) == 0
    assert main(["epoch", "--config", "cfg.yaml", "--state", "st.db", "--runner", "local",
                 "--out", "plan.json", "--now", "1000"]) == 0
    wait_until(lambda: (lab / "runs" / "tok.1.exit").exists())
    assert main(["epoch", "--config", "cfg.yaml", "--state", "st.db", "--runner", "local",
                 "--out", "plan.json", "--now", "1060"]) == 0
    capsys.readouterr()
    with StateStore(lab / "st.db") as store:  # an open writer: the WAL files exist
        store.record_event(1100.0, None, "look")
        made = {str(p.relative_to(lab)): mode(p) for p in lab.rglob("*") if p.name != "cfg.yaml"}
    assert made == {
        "st.db": 0o600,
        "st.db-wal": 0o600,
        "st.db-shm": 0o600,
        "st.db.lock": 0o600,
        "plan.json": 0o600,
        "runs": 0o700,
        "runs/tok.1.log": 0o600,
        "runs/tok.1.exit": 0o600,
    }
    assert "secret-token-in-argv" in (lab / "runs" / "tok.1.log").read_text()


def test_a_planted_link_at_the_old_predictable_temp_name_is_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    target = tmp_path / "plan.json"
    os.symlink(victim, tmp_path / f".plan.json.{os.getpid()}.tmp")
    write_atomic(str(target), '{"new": true}\n')
    assert victim.read_text() == "root's file\n"
    assert target.read_text() == '{"new": true}\n' and mode(target) == 0o600


def test_a_link_at_the_plan_path_itself_is_replaced_not_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    target = tmp_path / "plan.json"
    os.symlink(victim, target)
    write_atomic(str(target), "{}\n")
    assert victim.read_text() == "root's file\n"
    assert not target.is_symlink() and target.read_text() == "{}\n"


@pytest.mark.parametrize(
    "case, plant, message",
    [
        ("a symlink at the lock's name",
         lambda d: os.symlink(d / "victim", d / "st.db.lock"),
         "state lock {d}/st.db.lock is a symbolic link; remove it"),
        ("a hard link to another file at the lock's name",
         lambda d: os.link(d / "victim", d / "st.db.lock"),
         "state lock {d}/st.db.lock is not a plain file of its own"),
        ("a FIFO at the lock's name (O_RDWR does not block on Linux)",
         lambda d: os.mkfifo(d / "st.db.lock"),
         "state lock {d}/st.db.lock is not a plain file of its own"),
    ],
)
def test_a_lock_file_planted_by_someone_else_is_refused_and_its_target_untouched(
        tmp_path, case, plant, message):
    d = tmp_path / "state"
    d.mkdir(mode=0o700)
    (d / "victim").write_text("root's file\n")
    plant(d)
    with pytest.raises(StateError) as err:
        with StateLock(str(d / "st.db")):
            pass
    assert message.format(d=d) in str(err.value)
    assert (d / "victim").read_text() == "root's file\n"


def test_old_epochs_keep_their_report_but_not_their_plan(tmp_path):
    with StateStore(tmp_path / "s.db") as s:
        for i in range(STORED_PLANS + 2):
            s.record_epoch(float(i), {"now": float(i), "big": "x" * 100}, {"status": "optimal"},
                           None)
        rows = s._read("SELECT id, plan, report FROM epochs ORDER BY id")
    assert [(i, p) for i, p, _ in rows[:3]] == [(1, "{}"), (2, "{}"), (3, '{"now": 2.0, "big": "' + "x" * 100 + '"}')]
    assert all(r == '{"status": "optimal"}' for _, _, r in rows)
    assert sum(p != "{}" for _, p, _ in rows) == STORED_PLANS
