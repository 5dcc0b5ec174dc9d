"""The simulator benchmark harness reports a row per policy, or says why it cannot run."""

import pytest

from optalloc.bench import sim_bench
from optalloc.errors import OptallocError
from optalloc.sim.traces import traces_dir


def test_without_traces_the_suite_returns_one_row_naming_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("OPTALLOC_TRACES", str(tmp_path / "missing"))
    rows = sim_bench.run(quick=True)
    assert len(rows) == 1 and "OPTALLOC_TRACES" in rows[0]["skipped"]


def test_a_quick_run_times_each_policy_on_the_first_days_of_cluster04():
    try:
        traces_dir()
    except OptallocError as err:
        pytest.skip(str(err))
    (row,) = sim_bench.run(quick=True, policies=("greedy",))
    assert (row["scenario"], row["days"], row["gpus"], row["policy"]) == ("itp-cluster04", 3, 480, "greedy")
    assert row["jobs"] > 0 and row["decisions"] > 0 and row["wall_s"] > 0
