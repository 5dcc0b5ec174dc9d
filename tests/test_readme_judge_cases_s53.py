"""What the README tells a user, checked by doing it (outside judge, stop 53): `optalloc
cancel` for a queued or held job (the README and the hold messages say "or cancel it"), the
plan file's keys, the scenario keys block, the metrics table, the job environment list, the
policy defaults and a range message that names the number it refused."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import yaml

from optalloc.cli import main
from optalloc.config import parse_config
from optalloc.types import Policy

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()

LAB = """gpu_types: [{name: h100}]
nodes: [{name: workstation, gpu_type: h100, gpus: 4}]
org: {name: lab, children: [{name: alice, share: 1}, {name: bob, share: 1}]}
policy: {epoch: 1m, grace: 10s}
"""


def _lab(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lab.yaml").write_text(LAB)
    return ["--config", "lab.yaml", "--state", "state.db"]


def _submit(cs, job_id, project="alice", gpus=2, now="1000"):
    assert main(["submit", *cs, "--project", project, "--gpus", str(gpus), "--min-runtime",
                 "20s", "--id", job_id, "--now", now, "--", "true"]) == 0


def _jobs(capsys) -> dict[str, str]:
    capsys.readouterr()
    assert main(["jobs", "--state", "state.db", "--all", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    rows = rows["jobs"] if isinstance(rows, dict) else rows
    return {r["id"]: r["state"] for r in rows}


def test_cancel_ends_a_queued_job_as_cancelled_and_the_next_epoch_plans_without_it(
        tmp_path, monkeypatch, capsys):
    cs = _lab(tmp_path, monkeypatch)
    for j in ("a1", "a2", "b1"):
        _submit(cs, j, "bob" if j == "b1" else "alice")
    capsys.readouterr()
    assert main(["cancel", "a2", "--state", "state.db"]) == 0
    assert capsys.readouterr().out == "cancelled a2\n"
    assert _jobs(capsys) == {"a1": "queued", "a2": "cancelled", "b1": "queued"}
    assert main(["epoch", *cs, "--now", "1010", "--out", "plan.json"]) == 0
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert sorted(p["job_id"] for p in plan["placements"]) == ["a1", "b1"]
    assert plan["pending"] == []


def test_cancel_refuses_a_running_job_and_an_unknown_id_and_then_cancels_nothing(
        tmp_path, monkeypatch, capsys):
    cs = _lab(tmp_path, monkeypatch)
    _submit(cs, "a1")
    _submit(cs, "a2")
    _submit(cs, "a3", gpus=4)
    assert main(["epoch", *cs, "--now", "1010"]) == 0  # noop runner: a1, a2 run; a3 waits
    before = _jobs(capsys)
    assert before == {"a1": "running", "a2": "running", "a3": "pending"}
    assert main(["cancel", "a3", "a1", "zz", "--state", "state.db"]) == 2
    err = capsys.readouterr().err
    assert err == ("optalloc cancel: nothing was cancelled:\n"
                   "  a1: it is running; only a queued job can be cancelled (a running job is "
                   "stopped only by a plan's preemption)\n"
                   "  zz: no such job\n")
    assert _jobs(capsys) == before


def test_cancel_takes_the_state_lock_and_says_so_when_an_epoch_holds_it(
        tmp_path, monkeypatch, capsys):
    import fcntl

    cs = _lab(tmp_path, monkeypatch)
    _submit(cs, "a1")
    fd = os.open(tmp_path / "state.db.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        capsys.readouterr()
        assert main(["cancel", "a1", "--state", "state.db"]) == 75
        assert "another optalloc run holds the state lock" in capsys.readouterr().err
    finally:
        os.close(fd)
    assert _jobs(capsys) == {"a1": "queued"}


def test_the_plan_file_holds_exactly_the_keys_the_readme_lists_and_is_mode_0600(
        tmp_path, monkeypatch):
    cs = _lab(tmp_path, monkeypatch)
    _submit(cs, "a1")
    os.umask(0)
    try:
        assert main(["epoch", *cs, "--now", "1010", "--out", "plan.json"]) == 0
    finally:
        os.umask(0o022)
    plan = json.loads((tmp_path / "plan.json").read_text())
    section = README.split("### The plan file")[1].split("## How an epoch decides")[0]
    documented = {k for k in re.findall(r"`([a-z_]+)`", section) if k in plan}
    assert set(plan) == documented == {
        "schema_version", "now", "placements", "preemptions", "pending", "floor_violations",
        "report", "degraded", "drains", "reservations", "reservations_ended",
        "reservation_idle"}
    assert plan["schema_version"] == 1
    assert stat.S_IMODE((tmp_path / "plan.json").stat().st_mode) == 0o600


def test_the_readme_scenario_block_validates_as_a_synthetic_scenario(tmp_path):
    from optalloc.sim.scenario import load_scenario

    block = re.search(r"A scenario is a config.*?```yaml\n(.*?)```", README, re.S).group(1)
    sections = yaml.safe_load(block)
    sections["workload"]["source"] = "synthetic"
    del sections["workload"]["cluster"]
    sections["simulation"]["duration"] = "1d"
    sections["simulation"]["node_events"][0]["at"] = "12h"
    doc = {"gpu_types": [{"name": "h100"}],
           "nodes": [{"name": "h100-[001-004]", "gpu_type": "h100", "gpus": 8}],
           "org": {"name": "r", "children": [{"name": "A1"}, {"name": "B1"}]}, **sections}
    path = tmp_path / "sc.yaml"
    path.write_text(yaml.safe_dump(doc))
    sc = load_scenario(str(path))
    assert sc.duration_s == 86400.0 and sc.epoch_s == 300.0 and sc.jobs
    assert {j.project for j in sc.jobs} <= {"A1", "B1"}


def test_every_metric_optalloc_writes_is_in_the_readme_table(tmp_path, monkeypatch):
    from optalloc.dashboard import metrics

    src = Path(metrics.__file__).read_text()
    written = set(re.findall(r'"(optalloc_[a-z_]+)"', src))
    table = README.split("**Prometheus**")[1].split("On the demo")[0]
    documented = set(re.findall(r"`(optalloc_[a-z_]+)", table))
    for short in re.findall(r"`(_[a-z_]+)", table):  # `_delivered_gpu_hours` beside its family
        documented |= {n for n in written if n.endswith(short)}
    assert written == documented
    assert re.search(r"\| `optalloc_reservations` \| \|", table)  # a count, no node label


def test_the_walkthrough_lists_every_optalloc_variable_a_job_gets():
    from optalloc.runners import local_start

    given = set(re.findall(r'"(OPTALLOC_[A-Z_]+)"', Path(local_start.__file__).read_text()))
    walk = README.split("## A 5-minute walkthrough")[1].split("```bash")[0]
    assert given == set(re.findall(r"`(OPTALLOC_[A-Z_]+)`", walk))


def test_the_policy_defaults_in_the_readme_block_are_the_code_defaults():
    block = re.search(r"```yaml\n(gpu_types:.*?)```", README, re.S).group(1)
    config, _ = parse_config(yaml.safe_load(block), "README.md")
    assert config.policy == Policy()


def test_a_share_just_over_the_limit_is_refused_with_the_number_given(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("gpu_types: [{name: h100}]\nnodes: [{name: n1, gpu_type: h100, gpus: 8}]\n"
                    "org: {name: r, children: [{name: A, share: 1000000001}, {name: B}]}\n")
    assert main(["validate", str(path)]) == 2
    assert capsys.readouterr().err.endswith(
        "org.children[0].share: must be <= 1e+09, got 1000000001; use a value of at most "
        "1e+09\n")


def test_a_job_held_for_a_removed_project_is_cancelled_and_leaves_the_next_plan(
        tmp_path, monkeypatch, capsys):
    cs = _lab(tmp_path, monkeypatch)
    _submit(cs, "b1", "bob")
    (tmp_path / "lab.yaml").write_text(LAB.replace(", {name: bob, share: 1}", ""))
    assert main(["epoch", *cs, "--now", "1010", "--out", "plan.json"]) == 0
    (held,) = json.loads((tmp_path / "plan.json").read_text())["pending"]
    assert (held["job_id"], held["code"]) == ("b1", "UnknownProject")
    assert held["message"].endswith("or cancel it")
    assert main(["cancel", "b1", "--state", "state.db"]) == 0
    assert main(["epoch", *cs, "--now", "1020", "--out", "plan.json"]) == 0
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert (plan["placements"], plan["pending"]) == ([], [])
    assert _jobs(capsys) == {"b1": "cancelled"}


def test_a_mistyped_optalloc_fault_makes_epoch_refuse_cleanly_and_other_commands_work(
        tmp_path, monkeypatch):
    import subprocess
    import sys

    _lab(tmp_path, monkeypatch)
    env = {**os.environ, "OPTALLOC_FAULT": "runner.after_spwan",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}

    def run(*argv):
        return subprocess.run([sys.executable, "-m", "optalloc", *argv], env=env,
                              capture_output=True, text=True, timeout=120)

    epoch = run("epoch", "--config", "lab.yaml", "--state", "state.db", "--now", "1000")
    assert (epoch.returncode, epoch.stdout) == (2, "")
    assert epoch.stderr.startswith("optalloc epoch: OPTALLOC_FAULT='runner.after_spwan': "
                                   "unknown fault point 'runner.after_spwan'; known: ")
    assert "Traceback" not in epoch.stderr and not (tmp_path / "state.db").exists()
    validate = run("validate", "lab.yaml")
    assert validate.returncode == 0 and validate.stdout.startswith("OK: lab.yaml")


def test_the_dashboard_creates_its_folder_0700_but_not_a_missing_parent_naming_the_flag(
        tmp_path, monkeypatch, capsys):
    cs = _lab(tmp_path, monkeypatch)
    _submit(cs, "a1")
    assert main(["epoch", *cs, "--now", "1010"]) == 0
    capsys.readouterr()
    os.umask(0)
    try:
        assert main(["dashboard", *cs, "--out", "site"]) == 0
        assert main(["dashboard", *cs, "--out", "no/site"]) == 2
        assert capsys.readouterr().err == (
            f"optalloc dashboard: --out no/site: directory {tmp_path / 'no'} does not exist; "
            "create it first\n")
        assert main(["epoch", *cs, "--now", "1020", "--dashboard", "no/site"]) == 2
        assert capsys.readouterr().err == (
            f"optalloc epoch: --dashboard no/site: directory {tmp_path / 'no'} does not exist; "
            "create it first\n")
    finally:
        os.umask(0o022)
    assert stat.S_IMODE((tmp_path / "site").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "site" / "index.html").stat().st_mode) == 0o644
    assert not (tmp_path / "no").exists()


def test_a_node_range_past_100000_nodes_is_refused_with_its_size_and_the_limit(
        tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text('gpu_types: [{name: h100}]\nnodes: [{name: "n[1-100001]", gpu_type: h100, '
                    'gpus: 1}]\norg: {name: r, children: [{name: A}]}\n')
    assert main(["validate", str(path)]) == 2
    assert capsys.readouterr().err.endswith(
        "nodes[0].name: range 1-100001 in 'n[1-100001]' is 100001 names, more than 100000 "
        "(the most nodes of a cluster)\n")


def test_cancel_refuses_a_job_slurm_holds_and_names_the_scancel_that_removes_it(
        tmp_path, monkeypatch, capsys):
    from optalloc.state.slurm_tables import SlurmTable

    cs = _lab(tmp_path, monkeypatch)
    _submit(cs, "a1")
    table = SlurmTable("state.db")
    try:
        table.add_held("a1", "4242", True)
    finally:
        table.close()
    capsys.readouterr()
    assert main(["cancel", "a1", "--state", "state.db"]) == 2
    assert capsys.readouterr().err == (
        "optalloc cancel: nothing was cancelled:\n"
        "  a1: it was submitted to Slurm as job 4242; `scancel 4242` removes it there, and the "
        "next epoch ends it\n")
    assert _jobs(capsys) == {"a1": "queued"}
