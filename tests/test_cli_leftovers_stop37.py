"""Leftovers of the CLI's write-nothing rule. `submit --runner slurm` asks Slurm first: a
refused sbatch leaves no state DB, log directory or lock behind (and records nothing in an
existing DB), and jobs Slurm took before a refusal are cancelled again. `epoch --dry-run`
with the local or the Slurm runner plans on a copy of the state DB: the runner observes and
reconciles as in a real epoch (the same plan), and the state DB's bytes do not change. Slurm
is faked by small scripts on PATH; the local runner runs real processes."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from optalloc.cli import main
from optalloc.errors import StateError
from optalloc.state import StateStore
from tests.conftest import kill_local_runs, make_lab, wait_until
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
    d = make_lab(tmp_path, monkeypatch, CONFIG)
    yield d
    kill_local_runs(d / "st.db")  # stop anything the local runner started


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
    refused(capsys, TO_SLURM, "job id 's1' already exists in st.db; choose a new id with --id")
    assert calls(lab) == []


def test_a_job_files_taken_id_is_refused_at_its_key_path(lab, capsys, monkeypatch):
    # the message named the state DB but not the file or the job's place in it
    assert main(SUBMIT + ["--project", "B1", "--gpus", "1", "--id", "s1", "--", "true"]) == 0
    (lab / "jobs.yaml").write_text(
        "jobs:\n"
        "  - {id: fresh, project: A1, gpus: 1, command: [echo, a]}\n"
        "  - {id: s1, project: A1, gpus: 1, command: [echo, b]}\n")
    data = state_bytes(lab)
    refused(capsys, SUBMIT + ["jobs.yaml"],
            "jobs.yaml: jobs[1].id: job 's1' already exists in st.db; choose a new id")
    assert state_bytes(lab) == data


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


# --------------------------------------------------------------------------- dry runs


def epoch(capsys, *flags: str) -> tuple[int, str]:
    code = main(["epoch", "--config", "cfg.yaml", "--state", "st.db", *flags])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out


def planned(out: str) -> tuple:
    plan = json.loads(out)
    return ([(p["job_id"], p["nodes"]) for p in plan["placements"]],
            [p["job_id"] for p in plan["preemptions"]],
            [(p["job_id"], p["code"]) for p in plan["pending"]])


def test_a_dry_run_with_the_local_runner_writes_nothing_and_plans_what_an_epoch_does(
        lab, capsys, no_pynvml):
    local = ["--runner", "local", "--runner-dir", "runs"]
    assert main(SUBMIT + ["--project", "A1", "--gpus", "4", "--id", "a", "--", "sh", "-c",
                          "while [ ! -e a.go ]; do sleep 0.02; done"]) == 0
    assert epoch(capsys, *local)[0] == 0  # a starts
    assert main(SUBMIT + ["--project", "B1", "--gpus", "4", "--id", "b", "--", "true"]) == 0
    (lab / "a.go").touch()
    wait_until(lambda: (lab / "runs" / "a.1.exit").exists())  # a has ended: not observed yet
    capsys.readouterr()
    before, data = entries(lab), state_bytes(lab)

    code, dry = epoch(capsys, *local, "--dry-run", "--json")
    assert code == 0
    assert entries(lab) == before and state_bytes(lab) == data  # a's end is not recorded
    code, real = epoch(capsys, *local, "--json")
    assert code == 0
    assert planned(dry) == planned(real) == ([("b", [{"node": "box", "gpus": [0, 1, 2, 3]}])],
                                             [], [])
    assert rows(lab / "st.db", "SELECT id, status FROM jobs WHERE id = 'a'") == [
        ("a", "finished")]  # the real epoch got the end the dry run saw


def test_a_dry_run_with_the_slurm_runner_writes_nothing_and_plans_what_an_epoch_does(
        lab, capsys, monkeypatch):
    slurm = ["--runner", "slurm"]
    fake(lab, monkeypatch, sbatch="echo 4242")
    assert main(TO_SLURM) == 0
    # Slurm lost the held job: observing it ends the job, and a held one of a user (optalloc's
    # comment) is adopted; both are writes of the runner's own tables
    squeue = {"jobs": [{"job_id": 77, "name": "u1", "job_state": "PENDING",
                        "state_reason": "JobHeldUser", "comment": "optalloc:project=B1",
                        "tres_per_node": "gres:gpu:2", "node_count": 1, "submit_time": 5}]}
    fake(lab, monkeypatch, sbatch="echo 4243", squeue=f"echo '{json.dumps(squeue)}'")
    capsys.readouterr()
    (lab.parent / "calls.txt").unlink()
    before, data = entries(lab), state_bytes(lab)

    code, dry = epoch(capsys, *slurm, "--dry-run", "--json")
    assert code == 0
    # (the dry run takes the state lock, as an epoch does: submit alone made no lock file)
    assert entries(lab) - {"st.db.lock"} == before and state_bytes(lab) == data
    assert {c.split()[0] for c in calls(lab)} == {"squeue", "sinfo"}  # it only looked
    code, real = epoch(capsys, *slurm, "--json")
    assert code == 0
    assert planned(dry) == planned(real)
    assert [p for p, _ in planned(real)[0]] == ["u1"]
    assert rows(lab / "st.db", "SELECT id, status FROM jobs ORDER BY id") == [
        ("s1", "failed"), ("u1", None)]
    assert rows(lab / "st.db", "SELECT job_id, state FROM runner_slurm_jobs ORDER BY job_id") \
        == [("s1", "done"), ("u1", "placed")]


def test_a_dry_run_reads_a_state_db_another_process_holds_open_without_writing_its_wal(
        lab, capsys):
    assert main(SUBMIT + ["--project", "A1", "--gpus", "4", "--id", "a", "--", "true"]) == 0
    capsys.readouterr()
    holder = sqlite3.connect(lab / "st.db", isolation_level=None)  # a reader that stays
    try:
        holder.execute("PRAGMA wal_autocheckpoint = 0")
        holder.execute("INSERT INTO events (time, kind) VALUES (1, 'note')")  # a frame in -wal
        assert (lab / "st.db-wal").stat().st_size > 0
        before, data = entries(lab), state_bytes(lab)
        code, dry = epoch(capsys, "--dry-run", "--json")
        assert code == 0 and [p for p, _ in planned(dry)[0]] == ["a"]
        assert entries(lab) == before | {"st.db.lock"} and state_bytes(lab) == data
    finally:
        holder.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (ended, not yet reaped by its runner) is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_dry_run_sends_no_signal_to_a_job_past_its_grace_period(lab, capsys, no_pynvml):
    """Unallocated a (ignoring SIGTERM) gets its notice for allocated b; its 1 s grace
    passes. A real epoch would SIGKILL it; a dry run only looks (Runner.passive), so a still
    runs after it, and the next real epoch kills it."""
    (lab / "cfg.yaml").write_text(CONFIG + "policy: {grace: 1s}\n")
    local = ["--runner", "local", "--runner-dir", "runs"]
    assert main(SUBMIT + ["--project", "A1", "--gpus", "4", "--id", "a", "--", "sh", "-c",
                          "trap '' TERM; while true; do sleep 0.05; done"]) == 0
    assert epoch(capsys, *local)[0] == 0  # a starts
    assert main(SUBMIT + ["--project", "B1", "--gpus", "4", "--id", "b", "--min-runtime", "1h",
                          "--", "true"]) == 0
    capsys.readouterr()
    code, out = epoch(capsys, *local, "--json")
    assert code == 0 and planned(out)[1] == ["a"]  # the notice goes to a
    (pid,) = rows(lab / "st.db", "SELECT pid FROM runner_local_runs WHERE job_id = 'a'")[0]
    wait_until(lambda: rows(lab / "st.db", "SELECT notice_sent FROM runner_local_runs "
                                           "WHERE job_id = 'a'") == [(1,)])
    time.sleep(1.2)  # past the grace period
    data = state_bytes(lab)
    code, dry = epoch(capsys, *local, "--dry-run", "--json")
    assert code == 0 and state_bytes(lab) == data
    assert _alive(pid)  # no SIGKILL from the dry run
    assert epoch(capsys, *local)[0] == 0  # the real epoch kills it
    wait_until(lambda: not _alive(pid))
