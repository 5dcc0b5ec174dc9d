"""Trace readers on small files written by the tests, and the trace folder lookup."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from optalloc.errors import ConfigError, OptallocError
from optalloc.sim.traces import (
    TRACES_ENV,
    read_itp,
    read_philly,
    read_throughputs,
    traces_dir,
)


def write_itp(path: Path, rows: list[str], header: str = "job_id,submission_time,duration,num_gpu") -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_itp_rows_come_back_sorted_by_submit_with_work_and_gpus(tmp_path):
    p = write_itp(tmp_path / "c.csv", ["j2,100,50,8", "j1,10,3600,1", "j3,100,7,2"])
    r = read_itp(p)
    assert r.job_id.tolist() == ["j1", "j2", "j3"]  # ties keep file order
    assert r.submit_time.tolist() == [10.0, 100.0, 100.0]
    assert r.duration_s.tolist() == [3600.0, 50.0, 7.0]
    assert r.gpus.tolist() == [1, 8, 2]
    assert r.team is None and dict(r.speedup) == {}
    assert r.gpu_seconds == 3600 + 400 + 14


@pytest.mark.parametrize(
    "rows, header, message",
    [
        (["j1,0,10,1"], "job_id,submit,duration,num_gpu",
         "c.csv: missing column(s) submission_time (found job_id, submit, duration, num_gpu); an ITP trace has the header job_id,submission_time,duration,num_gpu"),
        (["j1,0,10,1", "j2,x,10,1"], None,
         "c.csv: column submission_time: 1 row(s) are not numbers (data rows 2); fix or remove those rows"),
        (["j1,0,0,1"], None,
         "c.csv: column duration: 1 row(s) not > 0 (data rows 1, e.g. 0); fix or remove those rows"),
        (["j1,0,10,1.5", "j2,0,10,0"], None,
         "c.csv: column num_gpu: 2 row(s) not a whole number >= 1 (data rows 1, 2, e.g. 1.5); fix or remove those rows"),
    ],
    ids=["a renamed column is named", "a non-number is located by row", "zero work is rejected",
         "fractional and zero GPUs are rejected"],
)
def test_bad_itp_files_are_reported_with_file_column_row_and_fix(tmp_path, rows, header, message):
    p = write_itp(tmp_path / "c.csv", rows, header or "job_id,submission_time,duration,num_gpu")
    with pytest.raises(ConfigError) as err:
        read_itp(p)
    assert [m.replace(str(tmp_path) + "/", "") for m in err.value.problems] == [message]


def test_a_missing_itp_file_names_the_variable_to_check(tmp_path):
    with pytest.raises(ConfigError, match=f"file not found; check the workload's file/cluster/team and {TRACES_ENV}"):
        read_itp(tmp_path / "nope.csv")


THROUGHPUTS = {
    t: {
        "('ResNet', 1)": {"null": thr[0]},
        "('ResNet', 4)": {"null": thr[1]},
        "('A3C', 1)": {"null": thr[2]},
    }
    for t, thr in {"k80": (1.0, 0.0, 0.5), "p100": (2.0, 6.0, 1.0), "v100": (4.0, 12.0, 2.0)}.items()
}


def write_philly(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "simulation_throughputs.json").write_text(json.dumps(THROUGHPUTS))
    (folder / "teamA.trace").write_text(
        "ResNet\tpython a.py\t-s\t1\t400\t0.0\t1\n"  # 400 steps at 4/s on v100 = 100 s
        "ResNet\tpython a.py\t-s\t1\t1200\t20.0\t4\n"  # 4 GPUs: 12/s on v100, k80 cannot (0)
    )
    (folder / "teamB.trace").write_text(
        "A3C\tpython b.py\t-n\t0\t100\t10.0\t2\n"  # 2 GPUs unmeasured: 2 x single-GPU rate
        "ResNet\tpython a.py\t-s\t1\t4000\t5.0\t8\n"  # 8 GPUs from the 4-GPU rate x 2
    )
    return folder


def test_philly_work_is_steps_over_base_throughput_and_speedups_are_relative(tmp_path):
    r = read_philly(write_philly(tmp_path / "vc"))
    assert r.job_id.tolist() == ["teamA-0", "teamB-1", "teamB-0", "teamA-1"]  # by arrival
    assert r.team.tolist() == ["teamA", "teamB", "teamB", "teamA"]
    assert r.submit_time.tolist() == [0.0, 5.0, 10.0, 20.0]
    assert r.gpus.tolist() == [1, 8, 2, 4]
    # durations on v100: 400/4, 4000/(12*2), 100/(2*2), 1200/12
    np.testing.assert_allclose(r.duration_s, [100.0, 4000 / 24, 25.0, 100.0])
    np.testing.assert_allclose(r.speedup["v100"], [1, 1, 1, 1])
    np.testing.assert_allclose(r.speedup["p100"], [0.5, 0.5, 0.5, 0.5])
    np.testing.assert_allclose(r.speedup["k80"], [0.25, 0.0, 0.25, 0.0])  # 0: cannot run


def test_philly_reads_only_the_named_teams_and_rejects_unknown_ones(tmp_path):
    folder = write_philly(tmp_path / "vc")
    assert read_philly(folder, ["teamB"]).job_id.tolist() == ["teamB-1", "teamB-0"]
    with pytest.raises(ConfigError, match=r"no trace for team\(s\) teamC; teams here: teamA, teamB"):
        read_philly(folder, ["teamC"])


def test_philly_base_type_changes_the_unit_of_work(tmp_path):
    r = read_philly(write_philly(tmp_path / "vc"), ["teamA"], base_type="p100")
    np.testing.assert_allclose(r.duration_s, [200.0, 200.0])
    np.testing.assert_allclose(r.speedup["v100"], [2.0, 2.0])


def test_throughput_table_rejects_a_file_without_the_type(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"v100": THROUGHPUTS["v100"]}))
    with pytest.raises(ConfigError, match=r"no throughputs for gpu_type 'k80' \(has v100\)"):
        read_throughputs(p)


def test_traces_dir_prefers_the_variable_and_names_it_when_wrong(tmp_path):
    assert traces_dir({TRACES_ENV: str(tmp_path)}) == tmp_path
    with pytest.raises(OptallocError, match=f"{TRACES_ENV}=.*is not a directory; point {TRACES_ENV} at"):
        traces_dir({TRACES_ENV: str(tmp_path / "missing")})
