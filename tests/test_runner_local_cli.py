"""`optalloc submit`, `optalloc jobs`, `optalloc gpus`, and the local runner behind
`optalloc epoch --runner local` from the command line."""

from __future__ import annotations

import json

import pytest

from optalloc.cli import main
from optalloc.state import StateStore
from optalloc.runners import nvml
from optalloc.types import Job
from tests.conftest import FakeGpu, kill_local_runs, wait_until

CONFIG = """
gpu_types: [{name: h100}]
nodes: [{name: box, gpu_type: h100, gpus: 4}]
org: {name: root, children: [{name: A1, share: 1}, {name: B1, share: 1}]}
policy: {grace: 5s}
"""


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(nvml, "_warned", set())
    (tmp_path / "cfg.yaml").write_text(CONFIG)
    yield tmp_path
    kill_local_runs(tmp_path / "st.db")  # stop anything the local runner started


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_job_submitted_with_flags_is_validated_and_queued(env, capsys):
    code, out, _ = run(capsys, "submit", "--config", "cfg.yaml", "--state", "st.db",
                       "--project", "A1", "--gpus", "2", "--min-runtime", "2h", "--no-resumable",
                       "--priority", "3", "--gpu-type", "h100", "--id", "t1", "--now", "100",
                       "--", "python", "train.py", "--lr", "3e-4")
    assert (code, out) == (0, "queued t1: project A1, 2 GPUs, min_runtime 2h, not resumable\n")
    with StateStore(env / "st.db") as store:
        assert store.get_job("t1") == Job(
            "t1", "A1", 2, gpu_types=("h100",), min_runtime_s=7200.0, resumable=False,
            priority=3, submit_time=100.0, command=("python", "train.py", "--lr", "3e-4"))
    code, out, _ = run(capsys, "jobs", "--state", "st.db", "--json")
    (row,) = json.loads(out)
    assert row.pop("wait_s") > 0  # since submit, by the clock: no epoch has run yet
    assert row == {"id": "t1", "project": "A1", "gpus": 2, "state": "queued", "start": None,
                   "placement": None, "gpu_type": None, "types": "h100", "nodes": "",
                   "code": None, "message": "submitted after the latest epoch; the next epoch "
                   "plans it", "reason": "submitted: via local", "priority": 3, "class": "other",
                   "allocated": True, "protected_until": None, "ratios": {}, "util_pct": None,
                   "idle_s": None}


def test_a_job_file_is_submitted_with_the_config_loaders_validation(env, capsys):
    (env / "jobs.yaml").write_text(
        "jobs:\n  - {id: f1, project: B1, gpus: 1, command: [sleep, '1']}\n"
        "  - {id: f2, project: A1, gpus: 4, min_runtime: 15m, command: ['true']}\n")
    code, out, _ = run(capsys, "submit", "--config", "cfg.yaml", "--state", "st.db",
                       "jobs.yaml", "--now", "50")
    assert code == 0 and out.splitlines() == [
        "queued f1: project B1, 1 GPUs, unallocated, resumable",
        "queued f2: project A1, 4 GPUs, min_runtime 15m, resumable"]
    with StateStore(env / "st.db") as store:
        assert [(j.id, j.submit_time) for j in store.list_jobs()] == [("f1", 50.0), ("f2", 50.0)]


@pytest.mark.parametrize("argv, message", [
    (["--project", "Z", "--gpus", "1", "--", "true"],
     "<command line>: project: unknown project 'Z'; use one of the org tree's leaves: A1, B1"),
    (["--project", "A1", "--gpus", "1"], "give the command after `--`"),
    (["--project", "A1", "--", "true"], "--gpus N is required with --project"),
    (["a.yaml", "b.yaml"], "give one job file, or --project/--gpus and the command after `--`"),
])
def test_a_bad_submission_is_a_located_error_and_queues_nothing(env, capsys, argv, message):
    code, out, err = run(capsys, "submit", "--config", "cfg.yaml", "--state", "st.db", *argv)
    assert code == 2 and out == ""
    assert err.startswith("optalloc submit: ") and message in err
    assert "Traceback" not in err
    if (env / "st.db").exists():
        with StateStore(env / "st.db") as store:
            assert store.list_jobs() == []


def test_a_job_id_cannot_be_submitted_twice(env, capsys):
    argv = ["submit", "--config", "cfg.yaml", "--state", "st.db", "--project", "A1", "--gpus",
            "1", "--id", "dup", "--", "true"]
    assert run(capsys, *argv)[0] == 0
    code, _, err = run(capsys, *argv)
    assert code == 2 and "job id 'dup' already exists" in err


def test_gpus_without_a_driver_shows_the_configured_inventory(env, capsys, no_pynvml):
    code, out, _ = run(capsys, "gpus", "--config", "cfg.yaml", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["source"] == "config node box"
    assert [(g["index"], g["gpu_type"], g["uuid"], g["healthy"]) for g in doc["gpus"]] == [
        (i, "h100", None, True) for i in range(4)]
    code, _, err = run(capsys, "gpus")
    assert code == 2 and "no NVIDIA GPUs visible" in err and "pass --config" in err


def test_gpus_with_nvml_shows_model_health_and_use(env, capsys, fake_pynvml):
    fake_pynvml([FakeGpu(uuid="GPU-a", util_gpu=55, processes=[(77, 2**30)]),
                 FakeGpu(name="NVIDIA B200", uuid="GPU-b", ecc_uncorrected=1)])
    code, out, _ = run(capsys, "gpus", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["source"] == "nvml"
    assert [(g["gpu_type"], g["uuid"], g["healthy"], g["gpu_util_pct"], g["processes"])
            for g in doc["gpus"]] == [("h100", "GPU-a", True, 55.0, [77]),
                                      ("b200", "GPU-b", False, 0.0, [])]
    code, out, _ = run(capsys, "gpus")
    assert "1 uncorrected ECC errors since boot" in out


def test_epochs_with_the_local_runner_start_jobs_and_record_their_end(env, capsys, no_pynvml):
    run(capsys, "submit", "--config", "cfg.yaml", "--state", "st.db", "--project", "A1",
        "--gpus", "2", "--min-runtime", "1h", "--id", "a", "--",
        "sh", "-c", 'echo "$CUDA_VISIBLE_DEVICES $OPTALLOC_JOB_ID" > a.out; '
                    'while [ ! -e a.go ]; do sleep 0.02; done')
    code, _, err = run(capsys, "epoch", "--config", "cfg.yaml", "--state", "st.db",
                       "--runner", "local", "--runner-dir", "runs")
    assert code == 0, err
    assert wait_until(lambda: (env / "a.out").exists() and (env / "a.out").read_text()) == \
        "0,1 a\n"
    rows = json.loads(run(capsys, "jobs", "--state", "st.db", "--json")[1])
    assert [(r["id"], r["state"], r["placement"]) for r in rows] == [
        ("a", "running", [{"node": "box", "gpus": [0, 1]}])]
    (env / "a.go").touch()
    wait_until(lambda: (env / "runs" / "a.1.exit").exists())  # the wrapper saw it exit
    assert run(capsys, "epoch", "--config", "cfg.yaml", "--state", "st.db", "--runner",
               "local", "--runner-dir", "runs")[0] == 0
    rows = json.loads(run(capsys, "jobs", "--state", "st.db", "--json", "--all")[1])
    assert [(r["id"], r["state"]) for r in rows] == [("a", "finished")]
    assert rows[0]["reason"].startswith("finished: exited 0; ran ")
    with StateStore(env / "st.db") as store:
        (iv,) = store.intervals()
    assert (iv.job_id, iv.project, iv.gpus, iv.gpu_type) == ("a", "A1", 2, "h100")


def test_the_epoch_summary_counts_what_the_runner_started_and_names_what_it_refused(
        env, capsys, no_pynvml):
    run(capsys, "submit", "--config", "cfg.yaml", "--state", "st.db", "--project", "A1",
        "--gpus", "2", "--id", "ghost", "--", "no-such-program-xyz")
    run(capsys, "submit", "--config", "cfg.yaml", "--state", "st.db", "--project", "B1",
        "--gpus", "2", "--id", "real", "--", "sleep", "30")
    code, out, err = run(capsys, "epoch", "--config", "cfg.yaml", "--state", "st.db",
                         "--runner", "local", "--now", "1000")
    assert code == 0, err
    lines = out.splitlines()
    # a job the runner can never start is held before the decision (stop 52: before, the
    # plan gave it GPUs at every epoch, the runner refused it, and they stayed idle)
    assert "jobs     1 in queue: 0 kept running, 1 started, 0 preempted, 1 pending" in lines
    assert "pending  RunnerRefused 1" in lines
    rows = {r["id"]: r for r in json.loads(run(capsys, "jobs", "--state", "st.db", "--json")[1])}
    assert (rows["ghost"]["state"], rows["real"]["state"]) == ("pending", "running")
    assert rows["ghost"]["reason"] == (
        "RunnerRefused: held: the local runner cannot start it: ghost: command "
        "'no-such-program-xyz' is not an executable file or on PATH; the runner is asked "
        "again at every epoch (or cancel it)")


def test_explain_of_a_job_held_for_a_removed_project_says_why(env, capsys):
    run(capsys, "submit", "--config", "cfg.yaml", "--state", "st.db", "--project", "B1",
        "--gpus", "2", "--id", "b", "--", "true")
    (env / "cfg.yaml").write_text(CONFIG.replace("{name: B1, share: 1}", "{name: C1, share: 1}"))
    code, out, err = run(capsys, "epoch", "--config", "cfg.yaml", "--state", "st.db",
                         "--now", "1000")
    assert code == 0, err
    assert "pending  UnknownProject 1" in out
    code, out, _ = run(capsys, "explain", "b", "--config", "cfg.yaml", "--state", "st.db")
    assert (code, out) == (0, "b: held (UnknownProject): held: its project 'B1' is not in the "
                              "org tree any more; it waits until the config has the project "
                              "again, or cancel it\n")
