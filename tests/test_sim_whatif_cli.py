"""`optalloc simulate` and `optalloc whatif` end to end on a scenario file the test writes."""

from __future__ import annotations

import textwrap

import pytest

from optalloc.cli import main

SCENARIO = textwrap.dedent(
    """
    gpu_types: [{name: h100}]
    nodes: [{name: "n[1-2]", gpu_type: h100, gpus: 8}]
    org:
      name: lab
      children:
        - {name: A, share: 1, children: [{name: A1}]}
        - {name: B, share: 1, children: [{name: B1}]}
    policy: {epoch: 5m, grace: 0, lookback: 1d}
    jobs:
      - {id: a1, project: A1, gpus: 16, min_runtime: 1h, submit_time: 0, duration: 3h}
      - {id: b1, project: B1, gpus: 8, min_runtime: 1h, submit_time: 60, duration: 1h}
      - {id: b2, project: B1, gpus: 4, min_runtime: 15m, submit_time: 120, duration: 10m}
      - {id: u1, project: A1, gpus: 8, min_runtime: 0, submit_time: 0, duration: 2h}
    workload: {source: jobs}
    simulation: {duration: 8h, early_solve: true}
    """
)


@pytest.fixture
def scenario(tmp_path):
    p = tmp_path / "tiny.yaml"
    p.write_text(SCENARIO)
    return p


def test_simulate_prints_policies_side_by_side_and_writes_the_report(scenario, tmp_path, capsys):
    out = tmp_path / "report"
    rc = main(["simulate", "--scenario", str(scenario), "--policies", "priority,greedy",
               "--out", str(out), "--no-progress", "--check"])
    cap = capsys.readouterr()
    assert rc == 0
    header = cap.out.splitlines()[0].split()
    assert header == ["metric", "priority", "greedy"]
    assert "owed delivered (hourly)" in cap.out and "jobs completed" in cap.out
    assert "tiny: 4 jobs, 16 GPUs on 2 nodes" in cap.err
    assert {p.name for p in out.iterdir()} >= {"summary.json", "report.md", "timeseries.csv"}


def test_simulate_cuts_the_horizon_with_duration(scenario, capsys):
    assert main(["simulate", "--scenario", str(scenario), "--policies", "greedy",
                 "--duration", "90s", "--no-progress"]) == 0
    assert "tiny: 3 jobs" in capsys.readouterr().err  # b2 (submitted at 120 s) is dropped


def test_whatif_prints_base_variant_and_change_per_metric_and_project(scenario, capsys):
    rc = main(["whatif", "--scenario", str(scenario), "--set", "org.B.share=+100%",
               "--policy", "greedy", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.splitlines()[0] == "what if org.B.share=+100%  (tiny, policy greedy)"
    assert "greedy (base)" in out and "greedy (variant)" in out and "change" in out
    assert any(line.startswith("B1") for line in out.splitlines())


@pytest.mark.parametrize(
    "argv, message",
    [
        (["whatif", "--set", "org.C.share=2"], "org node 'C' is not a child of the root"),
        (["whatif", "--set", "org.B.share=2", "--policy", "best"], "unknown policy 'best'"),
        (["simulate", "--policies", "greedy,magic"], "unknown policy magic"),
        (["simulate", "--duration", "soon"], "--duration: expected a duration"),
        (["whatif", "--set", "org.B.share=2", "--duration", "20000d"],
         "--duration: duration 1728000000.0 is out of range; give 0 to 315576000 seconds (ten "
         "years)"),
        (["simulate", "--duration", "99999999999w"], "--duration: duration"),
        (["whatif", "--set", "org.B.share=2", "--set", "policy.lookback=3d",
          "--set", "org.B.share=+10%"],
         "--set org.B.share is given more than once; give each key one --set"),
    ],
)
def test_bad_arguments_are_one_clear_message_not_a_traceback(scenario, capsys, argv, message):
    rc = main([argv[0], "--scenario", str(scenario), *argv[1:], "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and "Traceback" not in err


def test_a_refused_whatif_writes_no_out_folder(scenario, capsys, tmp_path):
    out = tmp_path / "wi"
    assert main(["whatif", "--scenario", str(scenario), "--set", "policy.lookback=3d",
                 "--set", "policy.lookback=7d", "--out", str(out), "--no-progress"]) == 2
    assert "--set policy.lookback is given more than once" in capsys.readouterr().err
    assert not out.exists()
