"""Judge cases (s53): trace readers, scenario workloads and `optalloc simulate` on traces that are
not in the repository (hand-written ITP CSVs and Philly folders), and the metrics of tiny hand
traces whose whole outcome is worked out by hand in the comments."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from optalloc.cli import main
from optalloc.errors import ConfigError
from optalloc.sim.engine import simulate
from optalloc.sim.metrics import compute_metrics
from optalloc.sim.policies import make_policy
from optalloc.sim.scenario import load_scenario
from optalloc.sim.traces import read_itp, read_philly
from tests.test_cli_input_ranges import refused

HEADER = "job_id,submission_time,duration,num_gpu"
H = 3600.0

# 2 nodes x 8 GPUs, one project: every job maps to `a`; no unallocated job (share 0), all
# resumable; min_runtime = the 8 h cap (protected for their whole run), debug below 15 min.
TWO_NODES = """
gpu_types: [{name: h100}]
nodes: [{name: "n-[1-2]", gpu_type: h100, gpus: 8}]
org: {name: r, children: [{name: a}]}
policy: {lookback: 1d, min_runtime_cap: 8h, epoch: 5m}
workload:
  source: itp
  file: trace.csv
  mapping: {unallocated_share: 0, resumable_fraction: 1}
simulation: {duration: 3h, seed: 1}
"""
# 8 nodes x 2 GPUs: a 16-GPU job spans 8 nodes, so it is "large" (>= 8 nodes, DESIGN 6)
EIGHT_SMALL_NODES = TWO_NODES.replace('"n-[1-2]"', '"n-[1-8]"').replace("gpus: 8}", "gpus: 2}")


def scenario(d: Path, rows: list[str], yaml: str = TWO_NODES, header: str = HEADER,
             newline: str = "\n", bom: bool = False) -> Path:
    text = newline.join([header, *rows]) + newline if header is not None else newline.join(rows) + newline
    (d / "trace.csv").write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    (d / "sc.yaml").write_text(textwrap.dedent(yaml))
    return d / "sc.yaml"


def cli(d: Path, policies: str = "greedy") -> list[str]:
    return ["simulate", "--scenario", str(d / "sc.yaml"), "--policies", policies, "--no-progress",
            "--out", str(d / "out")]


def run(sc_path: Path, policy: str):
    sc = load_scenario(sc_path)
    res = simulate(sc, make_policy(policy))
    gpu_h: dict[str, float] = {}
    for iv in res.intervals:
        gpu_h[iv.job_id] = gpu_h.get(iv.job_id, 0.0) + iv.gpus * (iv.end - iv.start) / H
    jobs = {j.job_id: (j.first_start, j.end_time, j.completed) for j in res.jobs}
    return sc, res, jobs, gpu_h, compute_metrics(res)


# --------------------------------------------------------------------------- reading ITP files


def test_an_itp_file_with_a_bom_crlf_and_rows_out_of_order_reads_sorted_by_submit_time(tmp_path):
    # written j3 (300 s), j1 (0 s), j2 (120 s); a UTF-8 BOM before the header and CRLF endings
    # are encoding noise, not data: sorted by submit time -> j1, j2, j3 with their own numbers
    scenario(tmp_path, ["j3,300,60,4", "j1,0,3600,8", "j2,120,900.5,1"], newline="\r\n", bom=True)
    r = read_itp(tmp_path / "trace.csv")
    assert r.job_id.tolist() == ["j1", "j2", "j3"]
    assert r.submit_time.tolist() == [0.0, 120.0, 300.0]
    assert r.duration_s.tolist() == [3600.0, 900.5, 60.0]
    assert r.gpus.tolist() == [8, 1, 4]
    assert r.gpus.dtype.kind == "i"


def test_itp_columns_in_another_order_and_an_extra_column_are_read_by_header_name(tmp_path):
    # the header names the columns: num_gpu first, submission_time last, a `user` column extra
    scenario(tmp_path, ["x,2,7200,u1,50", "y,16,60,u2,10"],
             header="job_id,num_gpu,duration,user,submission_time")
    r = read_itp(tmp_path / "trace.csv")
    assert r.job_id.tolist() == ["y", "x"]
    assert r.submit_time.tolist() == [10.0, 50.0]
    assert r.duration_s.tolist() == [60.0, 7200.0]
    assert r.gpus.tolist() == [16, 2]


def test_an_itp_file_without_its_header_is_refused_naming_the_missing_columns(tmp_path, capsys):
    # the first data row cannot stand in for a header: all four names are missing
    scenario(tmp_path, ["j1,100,3600,1", "j2,200,60,2"], header=None)
    refused(capsys, cli(tmp_path), f"{tmp_path / 'trace.csv'}: missing column(s) job_id, "
            "submission_time, duration, num_gpu (found j1, 100, 3600, 1)", "workload.file")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("column, values", [
    ("submission_time", ("True", "False")),
    ("duration", ("true", "TRUE")),
    ("num_gpu", ("True", "True")),
])
def test_a_column_of_true_false_words_is_refused_as_not_numbers(tmp_path, capsys, column, values):
    # "True" is not a number of seconds or GPUs; pandas reads an all-boolean column as bools,
    # which to_numeric turned into 1.0 / 0.0 (a job at t = 1 s or one of 1 GPU) silently
    cells = {"submission_time": ("10", "20"), "duration": ("60", "60"), "num_gpu": ("1", "1")}
    cells[column] = values
    rows = [f"j{i},{cells['submission_time'][i]},{cells['duration'][i]},{cells['num_gpu'][i]}"
            for i in range(2)]
    scenario(tmp_path, rows)
    refused(capsys, cli(tmp_path), f"{tmp_path / 'trace.csv'}: column {column}: 2 row(s) are not "
            "numbers (data rows 1, 2); fix or remove those rows")
    assert not (tmp_path / "out").exists()


# Every bad row is named by its data row in the *file* (counted from 1 after the header), not by
# its place after sorting: each file below is out of submit order so the two would differ.
BAD_ROWS = [
    ("a repeated job id", ["b,500,60,1", "a,100,60,1", "b,50,60,2"],
     "column job_id: 1 row(s) repeat the id of an earlier row (data rows 3, e.g. 'b' as on data row 1)"),
    ("a zero duration", ["a,500,60,1", "b,100,0,1"],
     "column duration: 1 row(s) not > 0 (data rows 2, e.g. 0)"),
    ("a negative duration", ["a,500,60,1", "b,100,60,1", "c,5,-30,1"],
     "column duration: 1 row(s) not > 0 (data rows 3, e.g. -30)"),
    ("num_gpu 0", ["a,500,60,0", "b,100,60,1"],
     "column num_gpu: 1 row(s) not a whole number >= 1 (data rows 1, e.g. 0)"),
    ("a fractional num_gpu", ["a,500,60,1", "b,100,60,2.5"],
     "column num_gpu: 1 row(s) not a whole number >= 1 (data rows 2, e.g. 2.5)"),
    ("a NaN duration", ["a,500,NaN,1", "b,100,60,1"],
     "column duration: 1 row(s) are not numbers (data rows 1)"),
    ("an empty num_gpu", ["a,500,60,1", "b,100,60,"],
     "column num_gpu: 1 row(s) are not numbers (data rows 2)"),
    ("a negative submission time", ["a,500,60,1", "b,-100,60,1"],
     "column submission_time: 1 row(s) not >= 0 (data rows 2, e.g. -100)"),
    ("a huge num_gpu", ["a,500,60,1", "b,100,60,1e12"],
     "column num_gpu: 1 row(s) more than 1000000 (the most GPUs a job may ask for) (data rows 2"),
]


@pytest.mark.parametrize("rows, needle", [c[1:] for c in BAD_ROWS], ids=[c[0] for c in BAD_ROWS])
def test_a_bad_itp_row_is_refused_by_its_file_row_with_nothing_written(tmp_path, capsys, rows, needle):
    scenario(tmp_path, rows)
    err = refused(capsys, cli(tmp_path), f"{tmp_path / 'trace.csv'}: {needle}")
    assert "workload.file" in err
    assert not (tmp_path / "out").exists()


def test_a_trace_with_only_its_header_is_refused_as_having_no_jobs_naming_the_file(tmp_path, capsys):
    # an empty trace is the file's problem, not the window's: name the file, not "widen the window"
    scenario(tmp_path, [])
    err = refused(capsys, cli(tmp_path), "workload.file:", f"{tmp_path / 'trace.csv'}: the trace has no jobs")
    assert "window" not in err
    assert not (tmp_path / "out").exists()


def test_a_zero_byte_trace_is_refused_naming_the_file(tmp_path, capsys):
    scenario(tmp_path, [])
    (tmp_path / "trace.csv").write_bytes(b"")
    refused(capsys, cli(tmp_path), "workload.file:", f"{tmp_path / 'trace.csv'}: cannot be read as a trace")
    assert not (tmp_path / "out").exists()


def test_a_window_that_holds_no_job_is_refused_naming_the_window_and_the_trace_span(tmp_path, capsys):
    # jobs at 2 d and 3 d; the window [0, 1 d) holds none of them: the user must learn where the
    # trace's jobs are (172800 s .. 259200 s) to move the window
    yaml = TWO_NODES.replace("file: trace.csv", "file: trace.csv\n  window: {start: 0, end: 1d}")
    scenario(tmp_path, ["late,259200,60,1", "early,172800,60,1"], yaml=yaml)
    refused(capsys, cli(tmp_path), "workload.window: no job of", f"{tmp_path / 'trace.csv'} is submitted in "
            "[0s, 86400s) (its 2 jobs come from 172800s to 259200s)")
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- the traces folder

CLUSTER_YAML = TWO_NODES.replace("file: trace.csv", "cluster: cluster77")


def test_a_traces_folder_without_the_cluster_names_the_path_the_variable_and_what_is_there(
        tmp_path, capsys, monkeypatch):
    folder = tmp_path / "traces"
    (folder / "itp").mkdir(parents=True)
    (folder / "itp" / "cluster01.csv").write_text(HEADER + "\nj,0,60,1\n")
    monkeypatch.setenv("OPTALLOC_TRACES", str(folder))
    scenario(tmp_path, ["j,0,60,1"], yaml=CLUSTER_YAML)
    refused(capsys, cli(tmp_path), f"workload.cluster: no trace {folder / 'itp' / 'cluster77.csv'}",
            "ITP clusters there: cluster01", f"OPTALLOC_TRACES={folder}")
    assert not (tmp_path / "out").exists()


def test_a_traces_folder_without_philly_traces_names_the_variable(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "traces"
    folder.mkdir()
    monkeypatch.setenv("OPTALLOC_TRACES", str(folder))
    yaml = TWO_NODES.replace("source: itp\n  file: trace.csv", "source: philly")
    scenario(tmp_path, [], yaml=yaml)
    refused(capsys, cli(tmp_path), f"no Philly traces in {folder / 'philly-vc'}",
            f"OPTALLOC_TRACES={folder}")
    assert not (tmp_path / "out").exists()


def test_a_traces_variable_naming_no_folder_is_exit_2_naming_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPTALLOC_TRACES", str(tmp_path / "nowhere"))
    scenario(tmp_path, ["j,0,60,1"], yaml=CLUSTER_YAML)
    refused(capsys, cli(tmp_path), f"OPTALLOC_TRACES={tmp_path / 'nowhere'} is not a directory")
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- jobs the cluster cannot hold


def test_a_job_larger_than_the_cluster_is_dropped_and_counted_in_the_terminal_and_summary(tmp_path, capsys):
    # 16 GPUs in all: the 17-GPU job cannot run -> dropped, counted once; the 8-GPU job runs
    # at 0 for 1 h: 8 GPU-h delivered
    scenario(tmp_path, ["big,0,3600,17", "ok,0,3600,8"])
    assert main(cli(tmp_path)) == 0
    err = capsys.readouterr().err
    assert "trace jobs dropped (cannot run on this cluster): 1 (more GPUs than the cluster has of " \
           "its types: 1)" in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["jobs_dropped"] == {"total": 1, "by_reason": {"more GPUs than the cluster has of its types": 1}}
    m = summary["metrics"]["greedy"]
    assert m["jobs"] == {"submitted": 1, "started": 1, "completed": 1}
    assert m["gpu_hours"]["delivered"] == pytest.approx(8.0)


@pytest.mark.parametrize("policy", ["greedy", "ilp"])
def test_a_9_gpu_trace_job_on_two_8_gpu_nodes_runs_at_once_as_8_plus_1(tmp_path, policy):
    # shape rule (optalloc/shape.py): 9 GPUs, no gpus_per_node, on 8-GPU nodes = 8 + 1 on the two
    # nodes: it fits, so it starts at 0 and ends at 1 h (9 GPU-h). Reshaped to 3 x 3 it would
    # need three nodes and never start, while the same job from `jobs:` runs.
    sc_path = scenario(tmp_path, ["j9,0,3600,9"])
    sc, res, jobs, gpu_h, m = run(sc_path, policy)
    assert [(j.id, j.gpus, j.gpus_per_node) for j in sc.jobs] == [("j9", 9, None)]
    assert dict(sc.workload.dropped) == {}
    assert jobs == {"j9": (0.0, H, True)}
    assert gpu_h == pytest.approx({"j9": 9.0})
    assert m["gpu_hours"]["delivered"] == pytest.approx(9.0)


def test_a_12_gpu_job_no_shape_of_which_fits_nodes_of_8_2_and_2_is_dropped_and_counted(tmp_path):
    # nodes 8, 2, 2 (12 GPUs): 12 = 8 + 4 needs a second node with 4; pieces p | 12, p < 8:
    # 6 x 2 needs two nodes >= 6, 4 x 3 three >= 4, 3 x 4 four >= 3, 2 x 6 six >= 2, 1 x 12
    # twelve nodes: none fits, so it can never run -> dropped with its reason; the 2-GPU job stays
    yaml = TWO_NODES.replace('nodes: [{name: "n-[1-2]", gpu_type: h100, gpus: 8}]',
                             'nodes: [{name: big, gpu_type: h100, gpus: 8}, '
                             '{name: "s-[1-2]", gpu_type: h100, gpus: 2}]')
    sc = load_scenario(scenario(tmp_path, ["j12,0,3600,12", "j2,0,3600,2"], yaml=yaml))
    assert [j.id for j in sc.jobs] == ["j2"]
    assert dict(sc.workload.dropped) == {"no gang shape fits the nodes of its types": 1}


def test_a_12_gpu_job_on_two_8_gpu_nodes_keeps_its_6_plus_6_shape(tmp_path):
    # 12 on 8-GPU nodes: 6 x 2 fits the two nodes (the documented reshape), 1 h from 0: 12 GPU-h
    sc_path = scenario(tmp_path, ["j12,0,3600,12"])
    sc, res, jobs, gpu_h, m = run(sc_path, "greedy")
    assert [(j.id, j.gpus_per_node) for j in sc.jobs] == [("j12", 6)]
    assert sc.workload.reshaped == 1
    assert jobs == {"j12": (0.0, H, True)}
    assert gpu_h == pytest.approx({"j12": 12.0})


# --------------------------------------------------------------------------- metrics by hand

# 8 nodes x 2 GPUs = 16. Written out of order. One project, min_runtime 8 h (>= every job's
# length: none is ever preempted), j3 is 10 min long -> debug (min_runtime 15 min).
#   j1: t=0,    1 h,    16 GPUs (8 nodes: large) -> runs 0..3600,   wait 0
#   j2: t=600,  30 min,  8 GPUs (other)          -> runs 3600..5400, wait 3000
#   j3: t=1200, 10 min,  8 GPUs (debug)          -> runs 3600..4200, wait 2400
#   j4: t=3900, 1 h,    16 GPUs (large)          -> runs 5400..9000, wait 1500 (j2 holds 8 till 5400)
# Horizon 3 h: available 48 GPU-h; delivered 16 + 4 + 1.333 + 16 = 37.333 -> occupancy 0.7778.
# Demand D(t): 16 [0,600) 24 [600,1200) 32 [1200,3600) 16 [3600,3900) 32 [3900,4200) 24 [4200,5400)
#   16 [5400,9000) 0 after: integral 201600 GPU-s = 56 GPU-h; D/C averaged = 12600/10800 = 1.1667;
#   min(C, D) = 16 until 9000 -> limit 0.8333, occupancy / limit = 0.9333.
# Owed per hour = min(16 entitled, demanded): 16, 16 (20 asked), 8 -> 40; delivered per hour
#   16, 13.333, 8 -> hourly = period = 37.333 / 40 = 0.9333.
# Waits (numpy linear percentiles): large [0, 1500] p50 750, p90 1350; debug 2400; other 3000;
#   all [0, 1500, 2400, 3000] p50 1950, p90 2820, p99 2982.
HAND_ROWS = ["j4,3900,3600,16", "j2,600,1800,8", "j1,0,3600,16", "j3,1200,600,8"]


@pytest.mark.parametrize("policy", ["greedy", "ilp"])
def test_a_four_job_hand_trace_gives_the_hand_worked_waits_gpu_hours_occupancy_and_owed(tmp_path, policy):
    _, res, jobs, gpu_h, m = run(scenario(tmp_path, HAND_ROWS, yaml=EIGHT_SMALL_NODES), policy)
    assert jobs == {"j1": (0.0, 3600.0, True), "j2": (3600.0, 5400.0, True),
                    "j3": (3600.0, 4200.0, True), "j4": (5400.0, 9000.0, True)}
    assert gpu_h == pytest.approx({"j1": 16.0, "j2": 4.0, "j3": 8 / 6, "j4": 16.0})
    assert m["gpu_hours"] == pytest.approx({"available": 48.0, "demanded": 56.0, "delivered": 112 / 3,
                                            "allocated": 112 / 3, "unallocated": 0.0})
    assert m["occupancy"] == pytest.approx({"allocated": 7 / 9, "total": 7 / 9, "limit": 5 / 6,
                                            "of_limit": 14 / 15})
    assert m["demand_ratio"] == pytest.approx(7 / 6)
    assert m["unallocated_share"] == 0.0
    assert m["owed_delivered"]["hourly"] == pytest.approx(14 / 15)
    assert m["owed_delivered"]["period"] == pytest.approx(14 / 15)
    assert m["projects"]["a"]["owed_gpu_h"] == pytest.approx(40.0)
    assert m["projects"]["a"]["delivered_gpu_h"] == pytest.approx(112 / 3)
    w = m["waits"]
    assert (w["large"]["n"], w["large"]["p50_s"], w["large"]["p90_s"]) == (2, pytest.approx(750.0),
                                                                            pytest.approx(1350.0))
    assert (w["debug"]["n"], w["debug"]["p50_s"]) == (1, pytest.approx(2400.0))
    assert (w["other"]["n"], w["other"]["p50_s"]) == (1, pytest.approx(3000.0))
    assert w["unallocated"]["n"] == 0
    assert (w["all"]["p50_s"], w["all"]["p90_s"], w["all"]["p99_s"]) == pytest.approx((1950.0, 2820.0, 2982.0))
    assert sum(x["n_censored"] for k, x in w.items() if k in ("debug", "large", "other", "unallocated")) == 0
    assert m["jobs"] == {"submitted": 4, "started": 4, "completed": 4}
    assert m["preemptions"]["count"] == 0


def test_the_hand_trace_through_the_cli_writes_the_same_numbers_to_summary_timeseries_and_report(
        tmp_path, capsys):
    scenario(tmp_path, HAND_ROWS, yaml=EIGHT_SMALL_NODES)
    assert main(cli(tmp_path, "greedy,ilp")) == 0
    out = capsys.readouterr().out
    assert re.search(r"^large wait p90 +22\.5m\*? +22\.5m\*?$", out, re.M), out  # 1350 s, both policies
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert "jobs_dropped" in summary and summary["jobs_dropped"]["total"] == 0
    for pol in ("greedy", "ilp"):
        m = summary["metrics"][pol]
        assert m["occupancy"]["total"] == pytest.approx(7 / 9)
        assert m["waits"]["large"]["p90_s"] == pytest.approx(1350.0)
        assert m["gpu_hours"]["delivered"] == pytest.approx(112 / 3)
    # hourly series: delivered 16, 13.333, 8 GPU-h of owed 16, 16, 8; occupancy 1, 0.8333, 0.5;
    # D/C per hour: (600*1 + 600*1.5 + 2400*2)/3600 = 1.75, (300*1 + 300*2 + 1200*1.5 + 1800*1)/3600
    # = 1.25, 1800/3600 = 0.5
    lines = (tmp_path / "out" / "timeseries.csv").read_text().splitlines()
    head = lines[0].split(",")
    rows = [dict(zip(head, ln.split(","))) for ln in lines[1:] if ln.startswith("greedy,")]
    got = [(float(r["occupancy_total"]), float(r["demand_ratio"]), float(r["delivered_gpu_h:a"]),
            float(r["owed_gpu_h:a"])) for r in rows]
    want = [(1.0, 1.75, 16.0, 16.0), (5 / 6, 1.25, 40 / 3, 16.0), (0.5, 0.5, 8.0, 8.0)]
    assert np.allclose(got, want, rtol=1e-5)
    # the report's definition of "large" must be the one the numbers use (16 GPUs on 8 nodes)
    report = (tmp_path / "out" / "report.md").read_text()
    assert "large: >= 64 GPUs or >= 8 nodes" in report
    assert "large: &ge; 64 GPUs or &ge; 8 nodes" in (tmp_path / "out" / "report.html").read_text()


@pytest.mark.parametrize("policy", ["greedy", "ilp"])
def test_a_large_job_that_never_starts_counts_as_waiting_until_the_horizon(tmp_path, policy):
    # 8 x 2 GPUs; j1 16 GPUs for 3 h from 0 (protected: min_runtime 8 h); j2 16 GPUs at 600 s.
    # Horizon 2 h: j2 never starts -> censored wait 7200 - 600 = 6600; large waits [0, 6600]:
    # p50 3300, p90 5940. j1 runs the whole horizon: 32 GPU-h of 32 -> occupancy 1, owed 16 + 16
    # delivered in full; nothing completes.
    yaml = EIGHT_SMALL_NODES.replace("duration: 3h", "duration: 2h")
    _, res, jobs, gpu_h, m = run(scenario(tmp_path, ["j2,600,3600,16", "j1,0,10800,16"], yaml=yaml), policy)
    assert jobs == {"j1": (0.0, None, False), "j2": (None, None, False)}
    assert gpu_h == pytest.approx({"j1": 32.0})
    w = m["waits"]["large"]
    assert (w["n"], w["n_censored"]) == (2, 1)
    assert (w["p50_s"], w["p90_s"], w["max_s"]) == pytest.approx((3300.0, 5940.0, 6600.0))
    assert m["occupancy"]["total"] == pytest.approx(1.0)
    assert m["owed_delivered"]["hourly"] == pytest.approx(1.0)
    assert m["jobs"] == {"submitted": 2, "started": 1, "completed": 0}


# --------------------------------------------------------------------------- Philly folders

THROUGHPUTS = {"v100": {"('ResNet-18 (batch size 32)', 1)": {"null": 10.0},
                        "('ResNet-18 (batch size 32)', 2)": {"null": 18.0}},
               "p100": {"('ResNet-18 (batch size 32)', 1)": {"null": 5.0}},
               "k80": {"('ResNet-18 (batch size 32)', 1)": {"null": 2.0}}}
ROW = "ResNet-18 (batch size 32)\tcd x && python3 train.py\t-n\t1\t{steps}\t{arrival}\t{gpus}"


def philly(d: Path, teams: dict[str, bytes]) -> Path:
    folder = d / "pv"
    folder.mkdir()
    (folder / "simulation_throughputs.json").write_text(json.dumps(THROUGHPUTS))
    for team, data in teams.items():
        (folder / f"{team}.trace").write_bytes(data)
    return folder


def prow(steps, arrival, gpus) -> bytes:
    return ROW.format(steps=steps, arrival=arrival, gpus=gpus).encode()


def test_philly_rows_with_a_bom_and_crlf_read_with_hand_worked_durations_and_speedups(tmp_path):
    # team t: row 0 = 3600 steps on 1 GPU at 100 s, row 1 = 7200 steps on 2 GPUs at 0 s, row 2 =
    # 3600 steps on 3 GPUs at 50 s. v100 (base): 10/s (1 GPU), 18/s (2), 3 unmeasured -> 18 * 3/2
    # = 27/s: durations 360, 400, 133.33 s. k80 measures only 1 GPU (2/s): 2 GPUs 4/s, 3 GPUs
    # 6/s -> speedups 0.2, 4/18, 6/27. Order by arrival: t-1 (0), t-2 (50), t-0 (100).
    data = b"\xef\xbb\xbf" + b"\r\n".join([prow(3600, 100, 1), prow(7200, 0, 2), prow(3600, 50, 3)]) + b"\r\n"
    r = read_philly(philly(tmp_path, {"t": data}))
    assert r.job_id.tolist() == ["t-1", "t-2", "t-0"]
    assert r.submit_time.tolist() == [0.0, 50.0, 100.0]
    assert r.duration_s == pytest.approx([400.0, 3600 / 27, 360.0])
    assert r.gpus.tolist() == [2, 3, 1]
    assert r.speedup["k80"] == pytest.approx([4 / 18, 6 / 27, 0.2])
    assert r.speedup["p100"] == pytest.approx([10 / 18, 15 / 27, 0.5])
    assert r.team.tolist() == ["t", "t", "t"]


def test_a_philly_arrival_column_of_true_words_is_refused_as_not_numbers(tmp_path):
    folder = philly(tmp_path, {"t": prow(3600, "True", 1) + b"\n"})
    with pytest.raises(ConfigError) as err:
        read_philly(folder)
    assert err.value.problems == [f"{folder / 't.trace'}: column arrival_s: 1 row(s) are not numbers "
                                  "(data rows 1); fix or remove those rows"]


def test_a_philly_folder_with_two_teams_keeps_each_row_under_its_team(tmp_path):
    # teams a (rows at 30, 10) and b (row at 20): ids <team>-<row>, in arrival order a-1, b-0, a-0
    folder = philly(tmp_path, {"a": prow(100, 30, 1) + b"\n" + prow(200, 10, 1) + b"\n",
                               "b": prow(300, 20, 1) + b"\n"})
    r = read_philly(folder)
    assert r.job_id.tolist() == ["a-1", "b-0", "a-0"]
    assert r.team.tolist() == ["a", "b", "a"]
    assert r.duration_s == pytest.approx([20.0, 30.0, 10.0])
    assert np.all(r.speedup["v100"] == 1.0)


def test_a_trace_in_unix_seconds_without_a_window_is_refused_not_simulated_for_54_years(tmp_path, capsys):
    # submit times 1.7e9 s (Unix time, Nov 2023) are valid numbers (<= 2100), but with time 0 at
    # 1970 the default horizon is ceil(1700000600 / 86400) = 19676 days: the limit of
    # simulation.duration is ten years, so the derived one must keep it too (before: 54 years
    # simulated, occupancy 0.0%, minutes writing the report)
    yaml = TWO_NODES.replace("simulation: {duration: 3h, seed: 1}", "simulation: {seed: 1}")
    scenario(tmp_path, ["j1,1700000000,3600,8", "j2,1700000600,3600,8"], yaml=yaml)
    refused(capsys, cli(tmp_path), "simulation.duration: not given, and the workload implies 19676 days "
            "from time 0 (last job submitted at 1.7e+09s, window 0s..end, load_scale 1), more than ten "
            "years", "set workload.window")
    assert not (tmp_path / "out").exists()


def test_the_same_unix_second_trace_with_its_window_replays_from_its_first_job(tmp_path):
    # window start 1700000000 s -> j1 at 0, j2 at 600; 16 GPUs hold both 8-GPU jobs at once:
    # waits 0 and 0, each 8 GPU-h; horizon = the window's 1 d
    yaml = TWO_NODES.replace("simulation: {duration: 3h, seed: 1}", "simulation: {seed: 1}").replace(
        "file: trace.csv", "file: trace.csv\n  window: {start: 1700000000, end: 1700086400}")
    sc_path = scenario(tmp_path, ["j2,1700000600,3600,8", "j1,1700000000,3600,8"], yaml=yaml)
    sc, res, jobs, gpu_h, m = run(sc_path, "greedy")
    assert sc.duration_s == 86400.0
    assert jobs == {"j1": (0.0, 3600.0, True), "j2": (600.0, 4200.0, True)}
    assert gpu_h == pytest.approx({"j1": 8.0, "j2": 8.0})
    assert m["waits"]["all"]["max_s"] == 0.0


def test_a_window_in_iso_time_selects_a_unix_second_trace_like_its_seconds(tmp_path):
    # 2023-11-14T22:13:20Z = 1700000000 s: the same window as above, written as times
    yaml = TWO_NODES.replace("file: trace.csv", "file: trace.csv\n  window: {start: '2023-11-14T22:13:20Z', "
                             "end: '2023-11-15T22:13:20Z'}")
    sc = load_scenario(scenario(tmp_path, ["j2,1700000600,3600,8", "j1,1700000000,3600,8", "j0,1699999999,60,1"],
                                yaml=yaml))
    assert [(j.id, j.submit_time) for j in sc.jobs] == [("j1", 0.0), ("j2", 600.0)]  # j0 is before it
    assert sc.duration_s == 3 * H  # simulation.duration given


def test_a_window_past_2100_is_refused_naming_the_key(tmp_path, capsys):
    yaml = TWO_NODES.replace("file: trace.csv", "file: trace.csv\n  window: {start: 0, end: 5000000000}")
    scenario(tmp_path, ["j1,0,60,1"], yaml=yaml)
    refused(capsys, cli(tmp_path), "workload.window.end: 5000000000 is out of range")
    assert not (tmp_path / "out").exists()


PHILLY_TWO_TEAMS = """
gpu_types: [{name: v100}]
nodes: [{name: v1, gpu_type: v100, gpus: 2}]
org: {name: r, children: [{name: a, share: 1}, {name: b, share: 1}]}
policy: {lookback: 1d, min_runtime_cap: 8h, epoch: 5m}
workload:
  source: philly
  file: pv
  mapping: {unallocated_share: 0, resumable_fraction: 1}
simulation: {duration: 3h, seed: 1}
"""


@pytest.mark.parametrize("policy, starts, owed, delivered, hourly, overall", [
    # greedy (models/greedy.md 1): a sort by (usage ratio, name); both ratios 0 -> a before b:
    # a-0 and a-1 take both GPUs at 0, b-0 waits until 3600. Owed = min(entitled 1 GPU-h/h,
    # demanded): a 1 (hour 0); b 1 + 1. b gets 0 of 1 in hour 0 -> 0.5; overall (1 + 1) / 3.
    ("greedy", {"a-0": 0.0, "a-1": 0.0, "b-0": 3600.0}, {"a": 1.0, "b": 2.0}, {"a": 2.0, "b": 1.0},
     {"a": 1.0, "b": 0.5}, 2 / 3),
    # ilp (DESIGN 8.2): tied siblings split in proportion to shares: one GPU each at 0, a-1
    # (after a-0 by id) at 3600. Owed a 1 + 1, b 1; everything owed is delivered.
    ("ilp", {"a-0": 0.0, "a-1": 3600.0, "b-0": 0.0}, {"a": 2.0, "b": 1.0}, {"a": 2.0, "b": 1.0},
     {"a": 1.0, "b": 1.0}, 1.0),
])
def test_two_philly_teams_on_two_gpus_give_the_hand_worked_starts_and_owed_delivered(
        tmp_path, policy, starts, owed, delivered, hourly, overall):
    # three 1-GPU jobs of 36000 steps at 10 steps/s on v100 = 1 h each, all submitted at 0
    folder = philly(tmp_path, {"a": prow(36000, 0, 1) + b"\n" + prow(36000, 0, 1) + b"\n",
                               "b": prow(36000, 0, 1) + b"\n"})
    (tmp_path / "sc.yaml").write_text(textwrap.dedent(PHILLY_TWO_TEAMS))
    assert folder == tmp_path / "pv"
    sc, res, jobs, gpu_h, m = run(tmp_path / "sc.yaml", policy)
    assert [(j.id, j.project, j.duration_s) for j in sc.jobs] == [("a-0", "a", H), ("a-1", "a", H), ("b-0", "b", H)]
    assert {k: v[0] for k, v in jobs.items()} == starts
    assert {k: v[1] for k, v in jobs.items()} == {k: s + H for k, s in starts.items()}
    assert {p: v["owed_gpu_h"] for p, v in m["projects"].items()} == pytest.approx(owed)
    assert {p: v["delivered_gpu_h"] for p, v in m["projects"].items()} == pytest.approx(delivered)
    assert {p: v["hourly"] for p, v in m["projects"].items()} == pytest.approx(hourly)
    assert m["owed_delivered"]["hourly"] == pytest.approx(overall)


@pytest.mark.parametrize("policy", ["greedy", "ilp"])
def test_an_unallocated_trace_job_yields_to_a_debug_job_with_hand_worked_loss_and_metrics(tmp_path, policy):
    # unallocated_share 1: u1 (2 h, 16 GPUs) is unallocated; d2 (10 min) is debug, allocated
    # (min_runtime 15 min). Rule 4: u1 yields at once, with notice: preempted at 600, keeps its
    # GPUs for the 60 s grace, d2 runs 660..1260 (wait 60). u1 lost 16 x 660 GPU-s (no checkpoint
    # in 1 h) = 2.933 GPU-h and restarts from 0 at the next epoch tick after 1260 (1500; a
    # completion is not a decision point): 1500..8700, completed. Delivered 2.933 + 2.667 + 32 =
    # 37.6 GPU-h -> 1000 / 37.6 preemptions per 1000 GPU-h; unallocated 34.933 / 37.6.
    # Owed (allocated only): d2 asks 16 GPUs over [600, 1260) = 2.933 GPU-h, gets 2.667 -> 10/11.
    yaml = TWO_NODES.replace("unallocated_share: 0", "unallocated_share: 1").replace(
        "epoch: 5m}", "epoch: 5m, checkpoint_interval: 1h}")
    _, res, jobs, gpu_h, m = run(scenario(tmp_path, ["d2,600,600,16", "u1,0,7200,16"], yaml=yaml), policy)
    assert jobs == {"u1": (0.0, 8700.0, True), "d2": (660.0, 1260.0, True)}
    assert sorted((iv.job_id, iv.start, iv.end, iv.allocated) for iv in res.intervals) == [
        ("d2", 660.0, 1260.0, True), ("u1", 0.0, 660.0, False), ("u1", 1500.0, 8700.0, False)]
    assert m["preemptions"] == pytest.approx({"count": 1, "per_1000_gpu_h": 1000 / 37.6, "lost_gpu_h": 16 * 660 / H})
    assert m["gpu_hours"]["delivered"] == pytest.approx(37.6)
    assert m["unallocated_share"] == pytest.approx((37.6 - 8 / 3) / 37.6)
    assert m["waits"]["debug"]["p50_s"] == pytest.approx(60.0)
    assert m["owed_delivered"]["hourly"] == pytest.approx(10 / 11)


def test_a_relative_trace_file_found_nowhere_is_reported_where_the_scenario_says_it_is(
        tmp_path, capsys, monkeypatch):
    # `file:` is relative to the scenario file (scenario/__init__ doc), with the traces folder as a
    # fallback; found in neither, the message must name the scenario's own place, not only
    # $OPTALLOC_TRACES/mine.csv (which the user never meant)
    traces = tmp_path / "traces"
    (traces / "itp").mkdir(parents=True)
    monkeypatch.setenv("OPTALLOC_TRACES", str(traces))
    scenario(tmp_path, ["j,0,60,1"], yaml=TWO_NODES.replace("file: trace.csv", "file: mine.csv"))
    refused(capsys, cli(tmp_path), f"workload.file: {tmp_path / 'mine.csv'}: file not found",
            "OPTALLOC_TRACES")
    assert not (tmp_path / "out").exists()


def test_a_relative_trace_file_only_in_the_traces_folder_is_read_from_there(tmp_path, monkeypatch):
    # itp/c9.csv is not next to the scenario but is under $OPTALLOC_TRACES: one 4-GPU job at 60 s
    traces = tmp_path / "traces"
    (traces / "itp").mkdir(parents=True)
    (traces / "itp" / "c9.csv").write_text(HEADER + "\nonly,60,600,4\n")
    monkeypatch.setenv("OPTALLOC_TRACES", str(traces))
    sc = load_scenario(scenario(tmp_path, [], yaml=TWO_NODES.replace("file: trace.csv", "file: itp/c9.csv")))
    assert [(j.id, j.submit_time, j.duration_s, j.gpus) for j in sc.jobs] == [("only", 60.0, 600.0, 4)]


def test_an_empty_philly_team_file_is_a_team_without_jobs(tmp_path):
    # Philly files have no header, so a 0-byte team file is a team that sent nothing (the ITP
    # header-only file reads as no rows too): team b adds no job, team a's one job is read
    folder = philly(tmp_path, {"a": prow(3600, 5, 1) + b"\n", "b": b""})
    r = read_philly(folder)
    assert r.job_id.tolist() == ["a-0"]
    assert r.duration_s.tolist() == [360.0]


def test_a_philly_folder_whose_team_files_are_all_empty_is_refused_as_having_no_jobs(tmp_path, capsys):
    philly(tmp_path, {"a": b"", "b": b""})
    (tmp_path / "sc.yaml").write_text(textwrap.dedent(PHILLY_TWO_TEAMS))
    refused(capsys, cli(tmp_path), f"workload.file: {tmp_path / 'pv'}: the trace has no jobs")
    assert not (tmp_path / "out").exists()


def test_the_terminal_counts_the_jobs_the_run_sees_as_the_summary_does(tmp_path, capsys):
    # a 3 h run over a trace of 4 jobs, 2 of them submitted after 3 h: the terminal said
    # "4 jobs" where summary.json counts the 2 submitted within the run; it names both now
    scenario(tmp_path, ["a,0,600,1", "b,60,600,1", "c,20000,600,1", "d,30000,600,1"])
    assert main(cli(tmp_path)) == 0
    err = capsys.readouterr().err
    assert "scenario " in err and ": 2 jobs (and 2 submitted after the 0.125 days, not " \
           "simulated)," in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["metrics"]["greedy"]["jobs"]["submitted"] == 2
