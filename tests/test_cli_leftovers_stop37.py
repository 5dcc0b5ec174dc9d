"""Leftovers of the CLI's write-nothing rule. `submit --runner slurm` asks Slurm first: a
refused sbatch leaves no state DB, log directory or lock behind (and records nothing in an
existing DB), and jobs Slurm took before a refusal are cancelled again. Slurm is faked by
small scripts on PATH."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from optalloc.cli import main
from optalloc.errors import StateError
from optalloc.state import StateStore
from tests.test_cli_input_ranges import entries, refused

CONFIG = """gpu_types: [{name: h100}]
nodes: [{name: box, gpu_type: h100, gpus: 4}]
org: {name: lab, children: [{name: A1, share: 1}, {name: B1, share: 1}]}
"""
SUBMIT = ["submit", "--config", "cfg.yaml", "--state", "st.db"]
TO_SLURM = SUBMIT + ["--runner", "slurm", "--project", "A1", "--gpus", "1", "--id", "s1", "--",
                     "echo", "hi"]
REFUSED = "sbatch: error: Batch job submission failed: Invalid partition name specified"


@pytest.fixture
def lab(tmp_path, monkeypatch):
    d = tmp_path / "lab"
    d.mkdir(mode=0o700)
    (d / "cfg.yaml").write_text(CONFIG)
    monkeypatch.chdir(d)
    yield d
    db = d / "st.db"
    if db.exists():  # stop anything the local runner started
        conn = sqlite3.connect(db)
        try:
            pids = conn.execute("SELECT pid FROM runner_local_runs WHERE state != 'ended' "
                                "AND pid IS NOT NULL").fetchall()
        except sqlite3.OperationalError:
            pids = []
        conn.close()
        for (pid,) in pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def fake(lab: Path, monkeypatch, **bodies: str) -> Path:
    """Slurm commands on PATH as shell scripts (name -> body after `#!/bin/sh`); each call's
    argv is appended to calls.txt as one line. A command not given prints nothing."""
    bin_ = lab.parent / "bin"  # outside the lab: entries(lab) stay what optalloc made
    bin_.mkdir(exist_ok=True)
    for cmd in ("sbatch", "squeue", "sinfo", "scontrol", "scancel"):
        body = bodies.get(cmd, "")
        (bin_ / cmd).write_text(f'#!/bin/sh\necho "{cmd} $*" >> "{lab.parent}/calls.txt"\n'
                                f"cat >/dev/null\n{body}\n")
        (bin_ / cmd).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:{os.environ['PATH']}")
    return lab.parent / "calls.txt"


def calls(lab: Path) -> list[str]:
    path = lab.parent / "calls.txt"
    return path.read_text().splitlines() if path.exists() else []


def state_bytes(lab: Path) -> dict[str, str]:
    """The state DB and its -wal/-journal, by content."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(lab.iterdir()) if p.name in ("st.db", "st.db-wal", "st.db-journal")}


def rows(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:  # no such table
        return []
    finally:
        conn.close()


# --------------------------------------------------------------------------- submit to Slurm


def test_a_refused_sbatch_leaves_no_state_db_log_directory_or_lock_behind(lab, capsys,
                                                                            monkeypatch):
    fake(lab, monkeypatch, sbatch=f'echo "{REFUSED}" >&2\nexit 1')
    before = entries(lab)
    refused(capsys, TO_SLURM, "job s1 could not be submitted to Slurm", "`sbatch --parsable -H",
            f"failed (exit 1): {REFUSED}", "nothing was queued: no state DB was created",
            "submit again")
    assert entries(lab) == before  # no st.db, -wal, -shm, .lock, slurm-logs/


def test_a_refused_sbatch_records_nothing_in_an_existing_state_db(lab, capsys, monkeypatch):
    assert main(SUBMIT + ["--project", "B1", "--gpus", "1", "--id", "b1", "--", "true"]) == 0
    fake(lab, monkeypatch, sbatch=f'echo "{REFUSED}" >&2\nexit 1')
    before, data = entries(lab), state_bytes(lab)
    refused(capsys, TO_SLURM, f"failed (exit 1): {REFUSED}",
            "nothing was queued: the state DB st.db is unchanged")
    assert entries(lab) == before and state_bytes(lab) == data
    assert rows(lab / "st.db", "SELECT id FROM jobs") == [("b1",)]
    assert rows(lab / "st.db", "SELECT job_id FROM runner_slurm_jobs") == []


def test_a_taken_id_is_refused_before_slurm_sees_the_job(lab, capsys, monkeypatch):
    assert main(SUBMIT + ["--project", "B1", "--gpus", "1", "--id", "s1", "--", "true"]) == 0
    fake(lab, monkeypatch, sbatch="echo 4242")
    refused(capsys, TO_SLURM, "job id s1 already exists in st.db; choose a new id")
    assert calls(lab) == []


def test_jobs_slurm_took_before_it_refused_one_are_cancelled_and_nothing_is_queued(
        lab, capsys, monkeypatch):
    (lab / "jobs.yaml").write_text(
        "jobs:\n  - {id: j1, project: A1, gpus: 1, command: ['true']}\n"
        "  - {id: j2, project: B1, gpus: 1, command: ['true']}\n")
    # the first sbatch is taken (Slurm id 101), the second refused
    fake(lab, monkeypatch, sbatch=f'if grep -q "^sbatch" "{lab.parent}/calls.txt" && '
                                  f'[ "$(grep -c "^sbatch" "{lab.parent}/calls.txt")" -gt 1 ]; '
                                  f'then echo "{REFUSED}" >&2; exit 1; fi\necho 101')
    before = entries(lab)
    refused(capsys, SUBMIT + ["--runner", "slurm", "jobs.yaml"],
            "job j2 could not be submitted to Slurm", REFUSED,
            "Slurm job(s) 101 of this submission were cancelled", "no state DB was created")
    assert [c.split()[0] for c in calls(lab)] == ["sbatch", "sbatch", "scancel"]
    assert calls(lab)[-1] == "scancel 101"
    assert entries(lab) == before


def test_a_job_slurm_took_is_cancelled_when_its_log_directory_cannot_be_made(
        lab, capsys, monkeypatch):
    fake(lab, monkeypatch, sbatch="echo 4242")
    (lab / "slurm-logs").write_text("not a directory\n")
    before = entries(lab)
    refused(capsys, TO_SLURM, "the jobs' log directory could not be made",
            "slurm-logs is not a directory", "Slurm job(s) 4242 of this submission were "
            "cancelled", "no state DB was created")
    assert calls(lab)[-1] == "scancel 4242"
    assert entries(lab) == before


def test_jobs_slurm_took_are_cancelled_when_the_state_db_cannot_queue_them(
        lab, capsys, monkeypatch):
    fake(lab, monkeypatch, sbatch="echo 4242")

    def broken(self, job):
        raise StateError("state DB st.db: disk I/O error; nothing was written")

    monkeypatch.setattr(StateStore, "add_job", broken)
    refused(capsys, TO_SLURM, "disk I/O error", "nothing was queued; Slurm job(s) 4242 "
            "of this submission were cancelled")
    assert calls(lab)[-1] == "scancel 4242"
    assert rows(lab / "st.db", "SELECT id FROM jobs") == []
    assert rows(lab / "st.db", "SELECT job_id FROM runner_slurm_jobs") == []


def test_a_job_slurm_took_is_queued_with_its_slurm_id_and_a_private_log_directory(
        lab, capsys, monkeypatch):
    fake(lab, monkeypatch, sbatch="echo 4242")
    assert main(TO_SLURM) == 0
    assert capsys.readouterr().out.endswith(", slurm job 4242 (held)\n")
    db = lab / "st.db"
    assert rows(db, "SELECT id, state FROM jobs") == [("s1", "queued")]
    assert rows(db, "SELECT job_id, slurm_id, state FROM runner_slurm_jobs") == [
        ("s1", "4242", "held")]
    assert rows(db, "SELECT message FROM events WHERE job_id = 's1'") == [
        ("via slurm (slurm job 4242)",)]
    assert oct((lab / "slurm-logs").stat().st_mode & 0o777) == "0o700"

