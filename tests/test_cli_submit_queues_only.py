"""`optalloc submit FILE` only queues jobs: a job file entry that says it already runs (a
state other than queued, a start_time or a placement) is refused with exit status 2 naming the
file, the job and the key, and nothing is written; a runner starts jobs when a plan places
them, so submit must not plant a "running" job no runner started."""

from __future__ import annotations

import pytest

from optalloc.cli import main
from optalloc.state import StateStore
from tests.test_cli_runner_flags import lab  # noqa: F401  (the fixture: a folder with cfg.yaml)

RUNNING = ("{id: j, project: A1, gpus: 4, min_runtime: 8h, command: ['true'], state: running, "
           "start_time: 0, placement: {gpu_type: h100, nodes: [{node: n1, gpus: [0,1,2,3]}]}}")
FIX = "remove it: submit only queues jobs (a runner starts them when a plan places them)"


def submit(path: str) -> int:
    return main(["submit", "--config", "cfg.yaml", "--state", "st.db", path])


def test_submit_refuses_a_job_file_entry_that_claims_to_be_running(lab, capsys):
    (lab / "run.yaml").write_text(f"jobs: [{RUNNING}]\n")
    assert submit("run.yaml") == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for key in ("state", "start_time", "placement"):
        assert f"run.yaml: jobs[0].{key}: job 'j' sets `{key}:`; {FIX}" in err, err
    assert not (lab / "st.db").exists()


def test_submit_refuses_run_keys_in_a_one_job_file_naming_the_key(lab, capsys):
    (lab / "one.yaml").write_text("{id: k, project: A1, gpus: 1, command: ['true'], "
                                  "start_time: 5}\n")
    assert submit("one.yaml") == 2
    err = capsys.readouterr().err
    assert f"one.yaml: start_time: job 'k' sets `start_time:`; {FIX}" in err, err
    assert not (lab / "st.db").exists()


def test_submit_refuses_run_keys_in_a_state_db_that_exists_and_changes_nothing(lab, capsys):
    (lab / "ok.yaml").write_text("jobs: [{id: a, project: A1, gpus: 1, command: ['true']}]\n")
    assert submit("ok.yaml") == 0
    (lab / "run.yaml").write_text(f"jobs: [{RUNNING}]\n")
    before = (lab / "st.db").read_bytes()
    assert submit("run.yaml") == 2
    assert "jobs[0].state" in capsys.readouterr().err
    assert (lab / "st.db").read_bytes() == before
    with StateStore(str(lab / "st.db")) as store:
        assert store.get_job("j") is None


def test_submit_still_takes_an_explicit_queued_state(lab, capsys):
    (lab / "q.yaml").write_text("jobs: [{id: q, project: A1, gpus: 1, command: ['true'], "
                                "state: queued}]\n")
    assert submit("q.yaml") == 0, capsys.readouterr().err
    with StateStore(str(lab / "st.db")) as store:
        assert store.get_job("q").state.value == "queued"
