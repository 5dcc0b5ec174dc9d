"""`optalloc epoch` and `optalloc explain` as cron and on-call engineers use them."""

from __future__ import annotations

import json
import textwrap

import pytest

from optalloc.cli import main
from optalloc.statefile import StateLock

CONFIG = textwrap.dedent(
    """
    gpu_types: [{name: h100}]
    nodes: [{name: "n[1-2]", gpu_type: h100, gpus: 8}]
    org:
      name: root
      children:
        - {name: a, share: 3}
        - {name: b, share: 1}
    policy: {solver: {backend: highs, time_limit: 10s}}
    jobs:
      - {id: a1, project: a, gpus: 8, min_runtime: 1h, duration: 2h}
      - {id: a2, project: a, gpus: 8, min_runtime: 1h, duration: 2h}
      - {id: b1, project: b, gpus: 8, min_runtime: 1h, duration: 2h}
    """
)


@pytest.fixture
def paths(tmp_path):
    cfg = tmp_path / "cluster.yaml"
    cfg.write_text(CONFIG)
    return cfg, tmp_path / "state.db", tmp_path / "plan.json"


def epoch(cfg, db, *extra):
    return main(["epoch", "--config", str(cfg), "--state", str(db), *extra])


def test_an_epoch_writes_the_plan_file_and_prints_a_summary(paths, capsys):
    cfg, db, out = paths
    assert epoch(cfg, db, "--now", "2026-11-29T12:00:00Z", "--out", str(out)) == 0
    text = capsys.readouterr().out
    assert "epoch at 2026-11-29 12:00:00 UTC" in text
    assert "2 started" in text and "1 pending" in text
    plan = json.loads(out.read_text())
    assert plan["schema_version"] == 1
    assert sorted(p["job_id"] for p in plan["placements"]) in (["a1", "b1"], ["a1", "a2"], ["a2", "b1"])
    assert [p["job_id"] for p in plan["pending"]] != []
    assert all(p["code"] and p["message"] for p in plan["pending"])


def test_jobs_placed_by_one_epoch_are_kept_by_the_next_inside_their_min_runtime(paths, capsys):
    cfg, db, out = paths
    epoch(cfg, db, "--now", "0", "--out", str(out))
    first = {p["job_id"] for p in json.loads(out.read_text())["placements"]}
    epoch(cfg, db, "--now", "600", "--out", str(out))
    second = json.loads(out.read_text())
    assert {p["job_id"] for p in second["placements"]} == first
    assert second["preemptions"] == []


def test_a_dry_run_leaves_no_state_behind(paths, capsys):
    cfg, db, out = paths
    assert epoch(cfg, db, "--now", "0", "--dry-run") == 0
    assert "dry run" in capsys.readouterr().out
    epoch(cfg, db, "--now", "0", "--json")
    plan = json.loads(capsys.readouterr().out)
    assert len(plan["placements"]) == 2  # the dry run had not marked anything running


def test_a_second_concurrent_run_exits_75_with_a_clear_message_and_changes_nothing(paths, capsys):
    cfg, db, _ = paths
    with StateLock(str(db)):
        assert epoch(cfg, db, "--now", "0") == 75
    err = capsys.readouterr().err
    assert "holds the state lock" in err and "changed nothing" in err
    assert not db.exists()  # the blocked run did not even open the state DB
    assert epoch(cfg, db, "--now", "0") == 0


def test_an_unknown_backend_is_refused_with_the_known_ones_listed(paths, capsys):
    cfg, db, _ = paths
    assert epoch(cfg, db, "--backend", "gurobi") == 2
    err = capsys.readouterr().err
    assert "--backend 'gurobi' is unknown" in err and "highs" in err


@pytest.mark.parametrize("flags, message", [
    (["--policy", "fifo"], "--policy 'fifo' is unknown; use one of: priority, greedy, ilp"),
    (["--policy", "greedy", "--backend", "highs"],
     "--backend sets the optimizer, which --policy greedy does not use; leave it out or use "
     "--policy ilp"),
    (["--policy", "priority", "--backend", "highs", "--time-limit", "5"],
     "--backend and --time-limit set the optimizer, which --policy priority does not use; leave "
     "them out or use --policy ilp"),
], ids=["unknown policy", "a solver flag with a baseline", "two solver flags with a baseline"])
def test_a_bad_policy_flag_is_refused_before_anything_is_written(paths, capsys, flags, message):
    cfg, db, _ = paths
    assert epoch(cfg, db, "--now", "0", *flags) == 2
    assert capsys.readouterr().err == f"optalloc epoch: {message}\n"
    if db.exists():  # the state DB may be created; nothing is recorded in it
        import sqlite3

        conn = sqlite3.connect(db)
        assert [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("jobs", "epochs", "intervals", "events")] == [0, 0, 0, 0]
        conn.close()


@pytest.mark.parametrize("policy", ["greedy", "priority", "ilp", "ILP"])
def test_cron_runs_any_policy_on_the_same_state(paths, capsys, policy):
    """An operator migrating from the old system can run the baselines from cron side by side
    (a week of --policy priority, then ilp): the epoch is recorded the same way."""
    cfg, db, out = paths
    assert epoch(cfg, db, "--now", "0", "--policy", policy, "--out", str(out)) == 0
    plan = json.loads(out.read_text())
    assert len(plan["placements"]) == 2 and [p["code"] for p in plan["pending"]] == [
        "WaitingForCapacity"]
    solver = {"greedy": "greedy: heuristic", "priority": "priority: heuristic"}.get(
        policy, "highs: optimal")
    assert f"solver   {solver}" in capsys.readouterr().out
    assert epoch(cfg, db, "--now", "600", "--policy", policy, "--out", str(out)) == 0
    assert json.loads(out.read_text())["preemptions"] == []  # protected for their first hour


def test_explain_names_the_reason_of_a_pending_job(paths, capsys):
    cfg, db, out = paths
    epoch(cfg, db, "--now", "0", "--out", str(out))
    pending = json.loads(out.read_text())["pending"][0]
    capsys.readouterr()
    assert main(["explain", pending["job_id"], "--config", str(cfg), "--state", str(db), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert json.dumps(d).count(pending["code"]) >= 1


def test_explain_of_an_unknown_job_says_what_to_do(paths, capsys):
    cfg, db, _ = paths
    epoch(cfg, db, "--now", "0")
    capsys.readouterr()
    assert main(["explain", "nope", "--config", str(cfg), "--state", str(db)]) == 2
    assert "optalloc jobs" in capsys.readouterr().err


def test_explain_before_any_epoch_says_to_run_one(paths, capsys):
    cfg, db, _ = paths
    assert main(["explain", "a1", "--config", str(cfg), "--state", str(db)]) == 2
    assert "run `optalloc epoch` first" in capsys.readouterr().err


def test_a_broken_config_fails_with_located_problems_and_no_state(paths, capsys):
    cfg, db, _ = paths
    cfg.write_text(CONFIG.replace("share: 3", "share: -3"))
    assert epoch(cfg, db, "--now", "0") == 2
    err = capsys.readouterr().err
    assert "cluster.yaml" in err and "share" in err and "Traceback" not in err
    if db.exists():  # the state DB may be created; nothing is recorded in it
        import sqlite3

        conn = sqlite3.connect(db)
        assert [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("jobs", "epochs", "intervals", "events")] == [0, 0, 0, 0]
        conn.close()


def test_a_config_job_submitted_later_than_the_epoch_waits_for_its_submit_time(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CONFIG.replace("{id: b1, project: b, gpus: 8, min_runtime: 1h, duration: 2h}",
                                  "{id: b1, project: b, gpus: 8, min_runtime: 1h, duration: 2h, "
                                  "submit_time: 2026-11-29T13:00:00Z}"))
    db, out = tmp_path / "s.db", tmp_path / "plan.json"
    assert epoch(cfg, db, "--now", "2026-11-29T12:00:00Z", "--out", str(out)) == 0
    plan = json.loads(out.read_text())
    assert "b1" not in {p["job_id"] for p in plan["placements"]} | {
        p["job_id"] for p in plan["pending"]}
    assert epoch(cfg, db, "--now", "2026-11-29T13:00:00Z", "--out", str(out)) == 0
    plan = json.loads(out.read_text())
    assert "b1" in {p["job_id"] for p in plan["placements"]} | {
        p["job_id"] for p in plan["pending"]}


def test_a_running_config_job_that_started_after_the_epoch_is_refused(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(textwrap.dedent(
        """
        gpu_types: [{name: h100}]
        nodes: [{name: n1, gpu_type: h100, gpus: 8}]
        org: {name: root, children: [{name: a, share: 1}]}
        jobs:
          - {id: r1, project: a, gpus: 8, min_runtime: 1h, state: running,
             start_time: 2026-11-29T13:00:00Z, placement: {gpu_type: h100, nodes: [{node: n1, gpus: [0,1,2,3,4,5,6,7]}]}}
        """))
    db = tmp_path / "s.db"
    assert epoch(cfg, db, "--now", "2026-11-29T12:00:00Z") == 2
    err = capsys.readouterr().err
    assert "job r1: start_time 1795957200 = 2026-11-29T13:00:00Z is after this epoch" in err
    if db.exists():  # the state DB may be created; nothing is recorded in it
        import sqlite3

        conn = sqlite3.connect(db)
        assert [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("jobs", "epochs", "intervals", "events")] == [0, 0, 0, 0]
        conn.close()
