"""Bad trace files are refused at load: exit status 2, a message naming the file, the column
and the data rows (counted from 1 after the header), no traceback and no --out written. And
trace jobs too large for the cluster are not lost without a word: the terminal, report.md
and summary.json say how many were dropped and why."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from optalloc.cli import main
from optalloc.errors import ConfigError
from optalloc.sim.traces import read_itp, read_philly, read_throughputs
from tests.test_cli_input_ranges import refused

HEADER = "job_id,submission_time,duration,num_gpu"
SCENARIO = textwrap.dedent(
    """
    gpu_types: [{name: a100}]
    nodes: [{name: "a100-[01-04]", gpu_type: a100, gpus: 8}]
    org: {name: r, children: [{name: a}, {name: b}]}
    policy: {lookback: 1d, min_runtime_cap: 8h, epoch: 5m}
    workload: {source: itp, file: trace.csv}
    simulation: {duration: 1d, seed: 1}
    """
)


def write_trace(d: Path, rows: list[str], header: str = HEADER) -> Path:
    (d / "trace.csv").write_bytes(("\n".join([header, *rows]) + "\n").encode("utf-8"))
    (d / "sc.yaml").write_text(SCENARIO)
    return d / "trace.csv"


# --------------------------------------------------------------------------- ITP via the CLI

BAD_ITP = [
    ("a job id used twice is refused with both rows",
     ["j1,100,3600,1", "j2,150,60,1", "j1,200,600,2"],
     ["column job_id: 1 row(s) repeat the id of an earlier row (data rows 3, e.g. 'j1' as on "
      "data row 1); give every job a unique id"]),
    ("an empty job id is refused, not read as nan",
     ["nan,100,3600,1", ",200,600,2", "NA,300,600,1"],
     ["column job_id: 1 row(s) have no id (data rows 2); give every job an id"]),
    ("an id of blanks is refused as empty",
     ["j1,100,3600,1", "   ,200,600,2"],
     ["column job_id: 1 row(s) have no id (data rows 2)"]),
    ("ids that read as nan twice are a duplicate, not a collision of NAs",
     ["nan,100,3600,1", "nan,200,600,2"],
     ["column job_id: 1 row(s) repeat the id of an earlier row (data rows 2, e.g. 'nan' as on data row 1)"]),
    ("an id with a NUL character is refused",
     ["j1,100,3600,1", '"j2\x00",200,600,2'],
     ["column job_id: 1 row(s) have an id that is not valid (data rows 2, e.g. 'j2\\x00' contains "
      "the control character '\\x00')", "at most 200 characters"]),
    ("an id with a zero-width space is refused",
     ["j1\u200b,100,3600,1"],
     ["column job_id: 1 row(s) have an id that is not valid (data rows 1", "U+200B"]),
    ("an id longer than 200 characters is refused",
     ["j" * 201 + ",100,3600,1"],
     ["column job_id: 1 row(s) have an id that is not valid (data rows 1", "is 201 characters long"]),
    ("an id with surrounding white space is refused",
     [" j1,100,3600,1"],
     ["column job_id: 1 row(s) have an id that is not valid (data rows 1, e.g. ' j1' starts or ends "
      "with white space)"]),
    ("a duration over ten years is refused",
     ["j1,100,1e30,1", "j2,200,600,2"],
     ["column duration: 1 row(s) more than 315576000 s (ten years) (data rows 1, e.g. 1e+30); "
      "fix or remove those rows"]),
    ("a submission time after 2100 is refused",
     ["j1,100,60,1", "j2,5e9,60,1"],
     ["column submission_time: 1 row(s) more than 4102444800 s (times end at 2100) (data rows 2, "
      "e.g. 5e+09)"]),
    ("more GPUs than a job may ask for is refused",
     ["j1,100,60,2000000"],
     ["column num_gpu: 1 row(s) more than 1000000 (the most GPUs a job may ask for) (data rows 1"]),
    ("a row with an extra field is named, and only that row",
     ["j1,100,3600,1,extra", "j2,200,600,2"],
     ["1 row(s) do not have the 4 fields of the header (job_id, submission_time, duration, "
      "num_gpu) separated by ',' (data rows 1, e.g. 5 fields); fix or remove those rows"]),
    ("a row with a missing field is named",
     ["j1,100,3600,1", "j2,200,600"],
     ["1 row(s) do not have the 4 fields of the header", "(data rows 2, e.g. 3 fields)"]),
    ("an extra field further down is named by its data row",
     ["j1,100,3600,1", "j2,200,600,2", "j3,300,600,2,x,y"],
     ["(data rows 3, e.g. 6 fields)"]),
]


@pytest.mark.parametrize("rows, needles", [c[1:] for c in BAD_ITP], ids=[c[0] for c in BAD_ITP])
def test_a_bad_itp_trace_is_refused_naming_file_column_and_rows(tmp_path, capsys, rows, needles):
    trace = write_trace(tmp_path, rows)
    argv = ["simulate", "--scenario", str(tmp_path / "sc.yaml"), "--policies", "greedy",
            "--no-progress", "--out", str(tmp_path / "out")]
    err = refused(capsys, argv, f"{trace}: ", *needles)
    assert "workload.file" in err
    assert not (tmp_path / "out").exists()


def test_the_shipped_itp_trace_shape_still_reads_with_ids_kept_as_text(tmp_path):
    p = write_trace(tmp_path, ["007,100,3600,1", "NA,50,60,2", "nan,70,60,1"])
    r = read_itp(p)
    assert r.job_id.tolist() == ["NA", "nan", "007"]  # as written: no NA conversion, no 007 -> 7
    assert r.gpus.tolist() == [2, 1, 1]


def test_every_id_problem_of_a_file_is_listed_at_once(tmp_path):
    p = write_trace(tmp_path, [",1,60,1", "a\x01,2,60,1", "b,3,60,1", "b,4,60,1"])
    with pytest.raises(ConfigError) as err:
        read_itp(p)
    text = "\n".join(err.value.problems)
    assert "have no id (data rows 1)" in text
    assert "not valid (data rows 2" in text
    assert "repeat the id of an earlier row (data rows 4, e.g. 'b' as on data row 3)" in text


# --------------------------------------------------------------------------- Philly

THROUGHPUTS = {"v100": {"('ResNet-18 (batch size 32)', 1)": {"null": 10.0},
                        "('ResNet-18 (batch size 32)', 2)": {"null": 18.0}},
               "k80": {"('ResNet-18 (batch size 32)', 1)": {"null": 2.0}}}


def philly_folder(d: Path, rows_by_team: dict[str, list[str]], throughputs=THROUGHPUTS) -> Path:
    folder = d / "ph"
    folder.mkdir()
    for team, rows in rows_by_team.items():
        (folder / f"{team}.trace").write_text("".join(r + "\n" for r in rows))
    (folder / "simulation_throughputs.json").write_text(json.dumps(throughputs))
    return folder


def prow(steps="1000", arrival="0", gpus="1", job="ResNet-18 (batch size 32)") -> str:
    return "\t".join([job, "cd x && python3 train.py", "-n", "1", steps, arrival, gpus])


@pytest.mark.parametrize("data, kind", [
    ([], "list"), ("v100", "string"), (3, "number"), (None, "null"),
])
def test_a_throughputs_file_that_is_not_a_mapping_is_refused_naming_it(tmp_path, data, kind):
    p = tmp_path / "simulation_throughputs.json"
    p.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as err:
        read_throughputs(p)
    (msg,) = err.value.problems
    assert msg.startswith(f"{p}: the top level is a {kind}; expected a mapping of gpu_type")
    assert "restore the original file" in msg


@pytest.mark.parametrize("entry", [
    {"('ResNet-18 (batch size 32)', 1)": {"null": "nan"}},
    {"('ResNet-18 (batch size 32)', 1)": {"null": -1}},
    {"('ResNet-18 (batch size 32)', 'two')": {"null": 1}},
    {"('ResNet-18 (batch size 32)', 1)": [1]},
], ids=["nan throughput", "negative throughput", "GPU count not a number", "entry not a mapping"])
def test_a_bad_throughput_entry_is_refused_naming_the_key(tmp_path, entry):
    p = tmp_path / "simulation_throughputs.json"
    p.write_text(json.dumps({"v100": entry, "k80": entry}))
    with pytest.raises(ConfigError, match=r"v100\.\('ResNet-18 \(batch size 32\)', .*a number >= 0"):
        read_throughputs(p, ("v100", "k80"))


def test_a_throughputs_list_via_the_cli_is_exit_2_naming_the_file(tmp_path, capsys):
    folder = philly_folder(tmp_path, {"tm": [prow()]}, throughputs=[1, 2])
    (tmp_path / "sc.yaml").write_text(textwrap.dedent(
        """
        gpu_types: [{name: k80}, {name: v100}]
        nodes: [{name: "v-[1-2]", gpu_type: v100, gpus: 8}, {name: "k-1", gpu_type: k80, gpus: 8}]
        org: {name: r, children: [{name: tm}, {name: other}]}
        policy: {lookback: 1d, min_runtime_cap: 8h, epoch: 5m}
        workload: {source: philly, file: ph, base_gpu_type: v100}
        simulation: {duration: 1d, seed: 1}
        """))
    refused(capsys, ["simulate", "--scenario", str(tmp_path / "sc.yaml"), "--policies", "greedy",
                     "--no-progress", "--out", str(tmp_path / "out")],
            f"{folder / 'simulation_throughputs.json'}: the top level is a list; expected a mapping")
    assert not (tmp_path / "out").exists()


def test_philly_rows_are_counted_per_team_file(tmp_path):
    folder = philly_folder(tmp_path, {"a": [prow(), prow()], "b": [prow(), prow(gpus="x")]})
    with pytest.raises(ConfigError) as err:
        read_philly(folder, gpu_types=("k80", "v100"))
    assert err.value.problems == [
        f"{folder / 'b.trace'}: column num_gpus: 1 row(s) are not numbers (data rows 2); fix or "
        "remove those rows"]


def test_a_philly_row_with_a_wrong_field_count_is_named(tmp_path):
    folder = philly_folder(tmp_path, {"a": [prow(), prow() + "\textra", prow()]})
    with pytest.raises(ConfigError) as err:
        read_philly(folder, gpu_types=("k80", "v100"))
    (msg,) = err.value.problems
    assert msg.startswith(f"{folder / 'a.trace'}: 1 row(s) do not have 7 fields (job_type, command,")
    assert "separated by tab (data rows 2, e.g. 8 fields)" in msg


@pytest.mark.parametrize("row, needle", [
    (prow(steps="1e30"), "column total_steps: 1 row(s) need more than 315576000 s (ten years) on "
                         "v100 (total_steps / throughput; data rows 2, e.g. 1e+29 s)"),
    (prow(arrival="1e12"), "column arrival_s: 1 row(s) more than 4102444800 s (times end at 2100) "
                           "(data rows 2"),
    (prow(gpus="5000000"), "column num_gpus: 1 row(s) more than 1000000"),
], ids=["work over ten years", "arrival after 2100", "too many GPUs"])
def test_philly_numbers_out_of_range_are_refused_naming_file_column_and_rows(tmp_path, row, needle):
    folder = philly_folder(tmp_path, {"a": [prow(), row]})
    with pytest.raises(ConfigError) as err:
        read_philly(folder, gpu_types=("k80", "v100"))
    (msg,) = err.value.problems
    assert msg.startswith(f"{folder / 'a.trace'}: ")
    assert needle in msg


def test_philly_job_ids_stay_team_dash_row_and_unique(tmp_path):
    folder = philly_folder(tmp_path, {"a": [prow(), prow(arrival="5")], "b": [prow(arrival="1")]})
    r = read_philly(folder, gpu_types=("k80", "v100"))
    assert r.job_id.tolist() == ["a-0", "b-0", "a-1"]
    assert len(set(r.job_id)) == len(r)
    assert np.allclose(r.duration_s, 100.0)


# --------------------------------------------------------------------------- dropped jobs


def test_trace_jobs_larger_than_the_cluster_are_counted_on_the_terminal_and_in_the_report(
        tmp_path, capsys):
    write_trace(tmp_path, ["j1,100,3600,64", "j2,200,600,2"])
    out = tmp_path / "out"
    assert main(["simulate", "--scenario", str(tmp_path / "sc.yaml"), "--policies", "greedy",
                 "--no-progress", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    line = ("trace jobs dropped (cannot run on this cluster): 1 (more GPUs than the cluster has "
            "of its types: 1)")
    assert line in err
    assert ("Trace jobs dropped (cannot run on this cluster): 1 (more GPUs than the cluster has "
            "of its types: 1).") in (out / "report.md").read_text()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs_dropped"] == {
        "total": 1, "by_reason": {"more GPUs than the cluster has of its types": 1}}


def test_a_trace_that_fits_reports_zero_dropped_and_no_terminal_line(tmp_path, capsys):
    write_trace(tmp_path, ["j1,100,600,1"])
    out = tmp_path / "out"
    assert main(["simulate", "--scenario", str(tmp_path / "sc.yaml"), "--policies", "greedy",
                 "--no-progress", "--out", str(out)]) == 0
    assert "dropped (cannot run" not in capsys.readouterr().err
    assert "dropped (cannot run" not in (out / "report.md").read_text()
    assert json.loads((out / "summary.json").read_text())["jobs_dropped"] == {"total": 0, "by_reason": {}}
