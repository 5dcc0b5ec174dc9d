"""GPU utilization per job and the idle flag (under policy.idle_util_below % for policy.idle_after
or longer): the computation, its config keys, and the whole path with the fake NVML: the local
runner samples, `optalloc jobs`, the dashboard page and the metrics report the idle job."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st
from prometheus_client.parser import text_string_to_metric_families

from optalloc.cli import main
from optalloc.config import parse_config
from optalloc.dashboard.utilization import job_utilization, project_utilization
from optalloc.errors import ConfigError
from optalloc.runners import nvml
from optalloc.types import Job, JobState, NodeAlloc, Placement, Policy
from tests.conftest import FakeGpu, kill_local_runs

M = 60.0
POLICY = Policy()  # idle under 5% for 30 minutes


def running(job_id="j", gpus=1, start=0.0, project="A1") -> Job:
    pl = Placement(job_id, "h100", (NodeAlloc("box", tuple(range(gpus))),))
    return Job(job_id, project, gpus, min_runtime_s=3600, state=JobState.RUNNING,
               start_time=start, placement=pl)


def samples(job_id, utils_by_minute, gpu=0):
    return [(m * M, job_id, gpu, u, 2**30) for m, u in utils_by_minute]


@pytest.mark.parametrize(
    "case, series, expected",
    [
        ("under 5% for 30 minutes is idle",
         [(m, 2.0) for m in range(0, 35, 5)], dict(idle=True, idle_s=30 * M, samples=7)),
        ("under 5% for 25 minutes is not idle yet",
         [(m, 2.0) for m in range(0, 30, 5)], dict(idle=False, idle_s=25 * M, samples=6)),
        ("a busy sample restarts the stretch",
         [(0, 1.0), (10, 1.0), (20, 1.0), (25, 80.0), (30, 1.0), (50, 1.0)],
         dict(idle=False, idle_s=20 * M, samples=6)),
        ("a job busy at its latest sample is never idle",
         [(0, 0.0), (40, 0.0), (45, 60.0)], dict(idle=False, idle_s=0.0, samples=3)),
        ("exactly at the threshold counts as used",
         [(0, 5.0), (40, 5.0)], dict(idle=False, idle_s=0.0, samples=2)),
    ],
)
def test_the_idle_flag_needs_the_whole_stretch_under_the_threshold(case, series, expected):
    (u,) = job_utilization(samples("j", series), [running()], POLICY)
    assert (u.idle, u.idle_s, u.samples) == (expected["idle"], expected["idle_s"],
                                             expected["samples"])


def test_a_jobs_gpus_are_averaged_and_only_its_current_run_counts():
    rows = (samples("j", [(-60, 0.0)])  # a previous run of the same job id
            + samples("j", [(0, 0.0), (40, 0.0)], gpu=0)
            + samples("j", [(0, 20.0), (40, 30.0)], gpu=1)
            + [(40 * M, "j", 2, None, None)])  # a GPU NVML could not read
    (u,) = job_utilization(rows, [running(gpus=3)], POLICY)
    assert (u.samples, u.mean_util_pct, u.recent_util_pct, u.idle, u.memory_used_bytes) == (
        2, 12.5, 15.0, False, 2 * 2**30)


def test_a_running_job_without_samples_has_none_and_a_queued_job_no_row():
    queued = Job("q", "A1", 1)
    (u,) = job_utilization(samples("other", [(0, 1.0)]), [running(), queued], POLICY)
    assert (u.job_id, u.samples, u.mean_util_pct, u.idle) == ("j", 0, None, False)
    assert job_utilization([], [queued], POLICY) == []


def test_the_threshold_and_the_stretch_come_from_the_policy():
    strict = Policy(idle_util_pct=50.0, idle_after_s=10 * M)
    (u,) = job_utilization(samples("j", [(0, 30.0), (10, 40.0)]), [running()], strict)
    assert (u.idle, u.idle_s) == (True, 10 * M)


def test_projects_sum_their_idle_jobs_and_weight_utilization_by_gpus():
    rows = (samples("a", [(0, 0.0), (30, 0.0)]) + samples("b", [(0, 90.0), (30, 90.0)])
            + samples("b", [(0, 90.0), (30, 90.0)], gpu=1))
    utils = job_utilization(rows, [running("a", 1), running("b", 2)], POLICY)
    (p,) = project_utilization(utils)
    assert (p.project, p.jobs_sampled, p.gpus_sampled, p.idle_jobs, p.idle_gpus) == (
        "A1", 2, 3, 1, 1)
    assert p.mean_util_pct == pytest.approx((0 * 1 + 90 * 2) / 3)


@given(st.lists(st.tuples(st.integers(0, 600), st.floats(0, 100)), min_size=1, max_size=40))
def test_idle_means_every_sample_of_the_stretch_is_under_the_threshold(series):
    (u,) = job_utilization(samples("j", series), [running()], POLICY)
    per_minute: dict[int, list[float]] = {}
    for m, v in series:
        per_minute.setdefault(m, []).append(v)
    times = sorted(per_minute)
    means = [sum(per_minute[t]) / len(per_minute[t]) for t in times]
    stretch = [t for t, v in zip(times, means) if t >= times[-1] - u.idle_s / M]
    if u.idle:
        assert u.idle_s >= POLICY.idle_after_s
        assert all(v < POLICY.idle_util_pct for t, v in zip(times, means) if t in stretch)
    assert 0 <= u.idle_s <= (times[-1] - times[0]) * M


BASE = """
gpu_types: [{name: h100}]
nodes: [{name: box, gpu_type: h100, gpus: 4}]
org: {name: root, children: [{name: A1}]}
"""


@pytest.mark.parametrize(
    "case, policy, expected",
    [
        ("the defaults flag 5% for 30 minutes", "{}", (5.0, 1800.0)),
        ("both keys are read", "{idle_util_below: 12.5, idle_after: 1h}", (12.5, 3600.0)),
    ],
)
def test_the_idle_policy_keys(case, policy, expected):
    import yaml

    config, _ = parse_config(yaml.safe_load(BASE + f"policy: {policy}\n"), "c.yaml")
    assert (config.policy.idle_util_pct, config.policy.idle_after_s) == expected


@pytest.mark.parametrize(
    "case, policy, message",
    [
        ("a percentage above 100", "{idle_util_below: 150}",
         "c.yaml: policy.idle_util_below: must be <= 100, got 150"),
        ("a percentage as text", "{idle_util_below: '5%'}",
         "c.yaml: policy.idle_util_below: expected a number"),
        ("a zero stretch", "{idle_after: 0}", "c.yaml: policy.idle_after: must be > 0"),
        ("a stretch that is not a duration", "{idle_after: soon}",
         "c.yaml: policy.idle_after: expected a duration"),
    ],
)
def test_bad_idle_policy_values_are_located(case, policy, message):
    import yaml

    with pytest.raises(ConfigError) as err:
        parse_config(yaml.safe_load(BASE + f"policy: {policy}\n"), "c.yaml")
    assert len(err.value.problems) == 1 and err.value.problems[0].startswith(message)


# ---------------------------------------------------------------------- end to end, fake NVML

LAB = BASE + "policy: {epoch: 5m}\n"
T0 = 1_800_000_000.0


@pytest.fixture
def lab(tmp_path, monkeypatch, fake_pynvml):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(nvml, "_warned", set())
    (tmp_path / "lab.yaml").write_text(LAB)
    mod = fake_pynvml([FakeGpu(uuid=f"GPU-{i}", util_gpu=0) for i in range(4)])
    yield tmp_path, mod
    kill_local_runs(tmp_path / "st.db")  # stop what the local runner started


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_an_idle_job_is_flagged_in_jobs_the_dashboard_and_the_metrics(lab, capsys):
    tmp, mod = lab
    for job_id, gpus in (("squat", 2), ("busy", 2)):
        cli(capsys, "submit", "--config", "lab.yaml", "--state", "st.db", "--project", "A1",
            "--gpus", str(gpus), "--min-runtime", "1h", "--id", job_id, "--now", str(T0),
            "--", "sleep", "600")
    for k in range(8):  # epochs every 5 minutes: 35 minutes of samples
        if k == 1:  # the busy job's GPUs (the second placed) work; the squatter's stay at 1%
            busy_gpus = json.loads(cli(capsys, "jobs", "--state", "st.db", "--json"))
            busy = next(r for r in busy_gpus if r["id"] == "busy")["placement"][0]["gpus"]
            for i, g in enumerate(mod.gpus):
                g.util_gpu = 70 if i in busy else 1
        outputs = ["--dashboard", "site", "--metrics-file", "optalloc.prom"] if k == 7 else []
        cli(capsys, "epoch", "--config", "lab.yaml", "--state", "st.db", "--runner", "local",
            "--node", "box", "--now", str(T0 + 300 * k), *outputs)
    rows = {r["id"]: r for r in json.loads(cli(capsys, "jobs", "--state", "st.db", "--json",
                                               "--config", "lab.yaml"))}
    # 8 samples, one per epoch: the first (at start) reads 0% everywhere; "recent" is the
    # last 30 minutes of them (7 samples)
    assert rows["squat"]["idle_s"] == 35 * M and rows["squat"]["util_pct"] == 1.0
    assert rows["busy"]["idle_s"] is None and rows["busy"]["util_pct"] == 70.0
    table = cli(capsys, "jobs", "--state", "st.db", "--wide")
    squat_line = next(ln for ln in table.splitlines() if ln.startswith("squat"))
    assert "1% IDLE 35m" in squat_line
    page = (tmp / "site" / "utilization.html").read_text()
    assert 'data-job="squat"' in page and "idle 35m" in page
    metrics = {(f.name, s.labels.get("job"), s.labels.get("project")): s.value
               for f in text_string_to_metric_families((tmp / "optalloc.prom").read_text())
               for s in f.samples}
    assert metrics[("optalloc_job_idle_seconds", "squat", "A1")] == 35 * M
    assert ("optalloc_job_idle_seconds", "busy", "A1") not in metrics
    assert metrics[("optalloc_project_idle_gpus", None, "A1")] == 2
    assert metrics[("optalloc_job_gpu_utilization_percent", "busy", "A1")] == 70.0
