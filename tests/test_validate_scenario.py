"""`optalloc validate` checks a scenario as the simulator reads it: a trace that is missing or
broken is refused there (exit 2, file, column and rows named, no traceback), not first in
`optalloc sim`; a good one is summarized with its workload and the trace jobs the cluster
cannot run (a helper's robustness sweep at stop 42 found validate passing scenarios whose
trace the simulator then refused). `optalloc whatif` names the dropped trace jobs as
`optalloc simulate` does."""

from __future__ import annotations

import json
import textwrap

from optalloc.cli import main
from tests.test_cli_input_ranges import refused
from tests.test_trace_input_stop42 import write_trace


def test_a_scenario_whose_trace_has_a_repeated_id_is_refused_by_validate(tmp_path, capsys):
    write_trace(tmp_path, ["j1,100,3600,1", "j1,200,600,2"])
    refused(capsys, ["validate", str(tmp_path / "sc.yaml")], "trace.csv",
            "column job_id: 1 row(s) repeat the id of an earlier row")


def test_a_scenario_whose_trace_file_is_missing_is_refused_by_validate(tmp_path, capsys):
    write_trace(tmp_path, ["j1,100,3600,1"])
    (tmp_path / "trace.csv").unlink()
    refused(capsys, ["validate", str(tmp_path / "sc.yaml")], "trace.csv")


def test_a_good_scenario_is_summarized_with_its_workload_and_dropped_jobs(tmp_path, capsys):
    write_trace(tmp_path, ["j1,100,3600,64", "j2,200,600,2", "j3,300,7200,4"])
    assert main(["validate", str(tmp_path / "sc.yaml")]) == 0
    out = capsys.readouterr().out
    assert ("scenario: itp workload, 2 jobs (1 debug, 0 unallocated, 8 GPU-hours of work), "
            "duration 1d, epoch 5m, seed 1") in out
    assert ("trace jobs dropped (cannot run on this cluster): 1 (more GPUs than the cluster "
            "has of its types: 1)") in out
    assert main(["validate", str(tmp_path / "sc.yaml"), "--json"]) == 0
    sc = json.loads(capsys.readouterr().out)["scenario"]
    assert sc == {"workload": "itp", "jobs": 2, "debug": 1, "unallocated": 0,
                  "gpu_hours": 2 * 600 / 3600 + 4 * 2, "dropped": {"more GPUs than the cluster has of its types": 1},
                  "duration": "1d", "epoch": "5m", "seed": 1, "node_events": 0}


def test_a_scenario_with_a_bad_workload_key_is_refused_with_its_key_path(tmp_path, capsys):
    (tmp_path / "sc.yaml").write_text(textwrap.dedent(
        """
        gpu_types: [{name: a100}]
        nodes: [{name: "a100-[01-02]", gpu_type: a100, gpus: 8}]
        org: {name: r, children: [{name: a}]}
        workload: {source: synthetic, synthetic: {offered_load: -1}}
        simulation: {duration: 1d}
        """))
    refused(capsys, ["validate", str(tmp_path / "sc.yaml")], "workload.synthetic")


def test_whatif_says_which_trace_jobs_the_cluster_cannot_run_and_its_reports_count_them(
        tmp_path, capsys):
    write_trace(tmp_path, ["j1,100,3600,64", "j2,200,600,2"])
    out = tmp_path / "out"
    assert main(["whatif", "--scenario", str(tmp_path / "sc.yaml"), "--set", "org.b.share=2",
                 "--policy", "greedy", "--no-progress", "--out", str(out)]) == 0
    line = ("trace jobs dropped (cannot run on this cluster): 1 (more GPUs than the cluster has "
            "of its types: 1)")
    assert line in capsys.readouterr().err
    for side in ("base", "variant"):
        summary = json.loads((out / side / "summary.json").read_text())
        assert summary["jobs_dropped"] == {
            "total": 1, "by_reason": {"more GPUs than the cluster has of its types": 1}}
