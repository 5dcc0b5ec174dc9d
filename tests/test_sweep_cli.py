"""`optalloc sweep` end to end on a short synthetic scenario the test writes: the same table in
one process, in local worker processes and on a Dask cluster (two workers, started here on
127.0.0.1); a sweep stopped halfway resumes where it stopped; a failing run is recorded and
the others finish; every bad input is reported before anything runs, and nothing is written."""

from __future__ import annotations

import json
import textwrap

import pandas as pd
import pytest

import optalloc.sim.engine as engine
from optalloc.cli import main
from optalloc.cli.sim_cmd import load
from optalloc.errors import OptallocError
from optalloc.sim.metrics import compute_metrics
from optalloc.sim.policies import make_policy
from optalloc.sim.sweep import TIMING_COLUMNS, DaskExecutor
from optalloc.sim.sweep.table import flatten
from optalloc.sim.whatif import apply_overrides, with_config

SCENARIO = textwrap.dedent(
    """
    gpu_types: [{name: h100}]
    nodes: [{name: "h100-[01-02]", gpu_type: h100, gpus: 8}]
    org:
      name: lab
      children:
        - {name: A, share: 60, children: [{name: A1, share: 50}, {name: A2, share: 50}]}
        - {name: B, share: 40, children: [{name: B1}]}
    policy: {lookback: 12h, min_runtime_cap: 2h, epoch: 5m, grace: 60s}
    workload:
      source: synthetic
      synthetic:
        offered_load: 1.3
        debug_fraction: 0.3
        sizes: {1: 0.5, 2: 0.2, 4: 0.2, 8: 0.1}
        duration_median: 1h
        max_duration: 8h
        teams: [B1, A1, A2]
      mapping: {debug_below: 15m, min_runtime: 2h, unallocated_share: 0.1}
    simulation: {duration: 6h, seed: 3}
    """
)
GRID = ["--grid", "org.B.share=+0%,+100%", "--policies", "greedy,priority", "--seeds", "0-1"]
N_RUNS = 8  # 2 cells x 2 policies x 2 seeds


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    p = tmp_path_factory.mktemp("scenario") / "short.yaml"
    p.write_text(SCENARIO)
    return p


@pytest.fixture(scope="module")
def serial_out(scenario, tmp_path_factory):
    """The sweep run once in this process, one run after the other (the reference)."""
    out = tmp_path_factory.mktemp("serial") / "out"
    assert sweep(scenario, out, "--jobs", "1") == 0
    return out


def sweep(scenario, out, *extra):
    return main(["sweep", "--scenario", str(scenario), *GRID, "--out", str(out), "--no-progress", *extra])


def comparable(out) -> pd.DataFrame:
    """The results table without the columns that measure the machine (wall and solver time)."""
    table = pd.read_parquet(out / "results.parquet")
    return table.drop(columns=[c for c in TIMING_COLUMNS if c in table.columns])


@pytest.fixture(scope="module")
def dask_cluster():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
        dashboard_address=None,
    )
    yield cluster.scheduler_address
    cluster.close()


class CountingSimulate:
    """Wraps the engine's simulate (the sequential executor runs it in this process): counts
    calls, and raises `error` for scenarios where `fail(scenario)` says so, or on call `stop_at`."""

    def __init__(self, monkeypatch, fail=lambda sc: False, error=RuntimeError("solver exploded"), stop_at=None):
        self.real = engine.simulate
        self.calls = 0
        self.fail, self.error, self.stop_at = fail, error, stop_at
        monkeypatch.setattr(engine, "simulate", self)

    def __call__(self, sc, policy, **kw):
        self.calls += 1
        if self.stop_at is not None and self.calls == self.stop_at:
            raise KeyboardInterrupt
        if self.fail(sc):
            raise self.error
        return self.real(sc, policy, **kw)


def b_share(sc) -> float:
    return next(c.share for c in sc.config.org.children if c.name == "B")


# --------------------------------------------------------------------------- engines


def test_the_reference_sweep_has_one_row_per_cell_policy_and_seed_each_the_plain_simulation(scenario, serial_out):
    serial = comparable(serial_out)
    assert len(serial) == N_RUNS and set(serial["status"]) == {"ok"}
    assert list(serial[["cell", "org.B.share", "policy", "seed"]].itertuples(index=False, name=None)) == [
        (c, v, p, s) for c, v in ((0, "+0%"), (1, "+100%")) for p in ("greedy", "priority") for s in (0, 1)
    ]
    # a row is the plain simulation of its cell and seed: the sweep adds nothing of its own
    sc = load(str(scenario), seed=1)
    direct = engine.simulate(with_config(sc, apply_overrides(sc.config, ["org.B.share=+100%"])), make_policy("greedy"))
    expected = {k: v for k, v in flatten(compute_metrics(direct)).items()
                if k not in TIMING_COLUMNS and k not in ("policy", "seed")}
    row = serial[(serial["cell"] == 1) & (serial["policy"] == "greedy") & (serial["seed"] == 1)].iloc[0]
    assert {k: (None if pd.isna(row[k]) else row[k]) for k in expected} == pytest.approx(expected)


def test_local_processes_give_the_same_table_as_one_process(scenario, serial_out, tmp_path, capsys):
    out = tmp_path / "processes"
    assert sweep(scenario, out, "--jobs", "2") == 0
    assert "8 to run (local processes, 2 workers)" in capsys.readouterr().err
    pd.testing.assert_frame_equal(comparable(out), comparable(serial_out), check_exact=True)


def test_a_dask_cluster_gives_the_same_table_as_one_process(scenario, serial_out, tmp_path, dask_cluster, capsys):
    out = tmp_path / "dask"
    assert sweep(scenario, out, "--engine", "dask", "--address", dask_cluster) == 0
    assert "8 to run (dask, 2 workers)" in capsys.readouterr().err
    pd.testing.assert_frame_equal(comparable(out), comparable(serial_out), check_exact=True)
    pd.testing.assert_frame_equal(
        pd.read_csv(out / "results.csv").drop(columns=list(TIMING_COLUMNS)),
        pd.read_csv(serial_out / "results.csv").drop(columns=list(TIMING_COLUMNS)),
    )


def test_the_summary_is_the_mean_and_spread_of_each_metric_over_seeds(serial_out):
    out = serial_out
    table, summary = pd.read_parquet(out / "results.parquet"), pd.read_parquet(out / "summary.parquet")
    metric = "owed_delivered.hourly"
    got = summary[summary["metric"] == metric].set_index(["cell", "policy"])[["n", "mean", "std", "min", "max"]]
    per_seed = table.groupby(["cell", "policy"])[metric]
    want = pd.DataFrame({"n": per_seed.count(), "mean": per_seed.mean(), "std": per_seed.std(),
                         "min": per_seed.min(), "max": per_seed.max()})
    pd.testing.assert_frame_equal(got.sort_index(), want.sort_index(), check_dtype=False)
    assert {p.name for p in (out / "plots").iterdir()} == {"org.B.share.html", "plotly.min.js"}
    html = (out / "plots" / "org.B.share.html").read_text()
    assert "owed delivered (hourly)" in html and "projects.B1.delivered_gpu_h" in html
    md = (out / "summary.md").read_text()
    assert "| org.B.share=+100% | greedy |" in md and "(plots/org.B.share.html)" in md


# --------------------------------------------------------------------------- restart and failures


def test_a_sweep_stopped_halfway_resumes_with_the_runs_it_had_not_finished(scenario, tmp_path, monkeypatch, capsys):
    out = tmp_path / "resumed"
    counting = CountingSimulate(monkeypatch, stop_at=4)  # Ctrl-C during the fourth run
    assert sweep(scenario, out, "--jobs", "1") == 130
    assert len(list((out / "runs").glob("*.json"))) == 3
    assert not (out / "results.parquet").exists()

    counting.calls, counting.stop_at = 0, None
    assert sweep(scenario, out, "--jobs", "1") == 0
    assert counting.calls == N_RUNS - 3
    assert "3 finished earlier" in capsys.readouterr().err
    assert sweep(scenario, out, "--jobs", "1") == 0
    assert counting.calls == N_RUNS - 3  # nothing left to run

    fresh = tmp_path / "fresh"
    assert sweep(scenario, fresh, "--jobs", "1") == 0
    pd.testing.assert_frame_equal(comparable(out), comparable(fresh))
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(p.name for p in (fresh / "runs").iterdir())


def test_a_failing_run_is_recorded_with_its_error_and_the_others_finish(scenario, tmp_path, monkeypatch, capsys):
    out = tmp_path / "failing"
    counting = CountingSimulate(monkeypatch, fail=lambda sc: b_share(sc) == 80.0)  # the +100% cell
    assert sweep(scenario, out, "--jobs", "1") == 1
    err = capsys.readouterr().err
    assert "run failed: cell 1 [org.B.share=+100%], greedy, seed 0: RuntimeError: solver exploded" in err
    assert "4 run(s) failed" in err
    table = pd.read_parquet(out / "results.parquet")
    failed, ok = table[table["status"] == "failed"], table[table["status"] == "ok"]
    assert list(failed[["cell", "policy", "seed"]].itertuples(index=False, name=None)) == [
        (1, p, s) for p in ("greedy", "priority") for s in (0, 1)
    ]
    assert set(failed["error"]) == {"RuntimeError: solver exploded"}
    assert failed["owed_delivered.hourly"].isna().all()
    assert list(ok["cell"].unique()) == [0] and ok["owed_delivered.hourly"].notna().all()
    record = json.loads(next(p for p in (out / "runs").iterdir()
                             if json.loads(p.read_text())["status"] == "failed").read_text())
    assert "RuntimeError: solver exploded" in record["traceback"]
    summary = pd.read_parquet(out / "summary.parquet")
    assert set(summary["cell"]) == {0}
    assert "## Failed runs" in (out / "summary.md").read_text()

    counting.fail, counting.calls = (lambda sc: False), 0
    assert sweep(scenario, out, "--jobs", "1") == 0  # a rerun retries the failed runs only
    assert counting.calls == 4
    assert set(pd.read_parquet(out / "results.parquet")["status"]) == {"ok"}


JOBS_SCENARIO = textwrap.dedent(
    """
    gpu_types: [{name: h100}]
    nodes: [{name: n1, gpu_type: h100, gpus: 8}]
    org: {name: lab, children: [{name: A, children: [{name: A1}]}, {name: B, children: [{name: B1}]}]}
    policy: {epoch: 5m, grace: 0}
    jobs:
      - {id: a1, project: A1, gpus: 8, min_runtime: 1h, submit_time: 0, duration: 2h}
      - {id: b1, project: B1, gpus: 4, min_runtime: 1h, submit_time: 60, duration: 1h}
    workload: {source: jobs}
    simulation: {duration: 4h}
    """
)


def test_seeds_of_a_jobs_workload_say_they_change_nothing_and_change_nothing(tmp_path, capsys):
    path = tmp_path / "jobs.yaml"
    path.write_text(JOBS_SCENARIO)
    out = tmp_path / "out"
    assert main(["sweep", "--scenario", str(path), "--policies", "greedy", "--seeds", "0-1", "--out", str(out),
                 "--jobs", "1", "--no-progress"]) == 0
    assert "a seed changes nothing in it" in capsys.readouterr().err
    table = comparable(out).drop(columns=["seed"])
    pd.testing.assert_frame_equal(table.iloc[[0]].reset_index(drop=True), table.iloc[[1]].reset_index(drop=True))


# --------------------------------------------------------------------------- bad input


def test_every_bad_override_and_flag_is_reported_before_anything_runs(scenario, tmp_path, monkeypatch, capsys):
    counting = CountingSimulate(monkeypatch)
    out = tmp_path / "never"
    rc = main(["sweep", "--scenario", str(scenario), "--out", str(out), "--no-progress",
               "--grid", "org.B.share=+x,+10%", "--grid", "org.C.share=1", "--grid", "policy.lookbak=1d",
               "--grid", "policy.lookback=1d,1d", "--grid", "nonsense", "--set", "policy.epoch=0",
               "--seeds", "3-1", "--policies", "greedy,magic"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.splitlines() == [
        "optalloc sweep: 8 problems found in the configuration:",
        "  - --seeds: 3-1: range 3-1 runs backwards; write 1-3",
        "  - --grid: policy.lookback=1d,1d: value(s) 1d given twice; list each value once",
        "  - --grid: nonsense: expected KEY=V1,V2,...; write e.g. --grid org.B.share=+10%,+20% or --grid policy.lookback=3d,7d",
        "  - --policies: greedy,magic: unknown policy 'magic'; choose from priority, greedy, ilp",
        "  - --set policy.epoch=0: policy.epoch: must be > 0, got 0; give a positive duration like '5m'",
        "  - --grid: org.B.share=+x: '+x' is not a share; use a number >= 0, or +10% / -10% / *1.5 / +5",
        "  - --grid: org.C.share=1: org node 'C' is not a child of the root; children of the root: A, B",
        "  - --grid: policy.lookbak=1d: unknown policy key 'lookbak'; did you mean policy.lookback?",
    ]
    assert counting.calls == 0 and not out.exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--grid", "org.A.share=0,1", "--grid", "org.B.share=0,1"],
         "--grid cell [org.A.share=0, org.B.share=0]: org.B.share=0: every child of 'lab' would have share 0 on h100"),
        (["--address", "tcp://127.0.0.1:8786"], "--address needs --engine dask"),
        (["--jobs", "0"], "--jobs must be >= 1, got 0"),
        (["--duration", "soon"], "--duration: expected a duration"),
        (["--set", "policy.lookback=3d", "--grid", "org.B.share=1,2", "--set", "policy.lookback=7d"],
         "--set policy.lookback is given more than once; give each key one --set"),
    ],
)
def test_bad_arguments_are_one_clear_message_and_nothing_is_written(scenario, tmp_path, capsys, argv, message):
    out = tmp_path / "never"
    rc = main(["sweep", "--scenario", str(scenario), "--out", str(out), "--no-progress", *argv])
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_an_unreachable_scheduler_is_a_clear_error_before_anything_is_written():
    pytest.importorskip("distributed")
    with pytest.raises(OptallocError, match=r"cannot reach the Dask scheduler at tcp://127\.0\.0\.1:9 .*--address tcp://HOST:8786"):
        with DaskExecutor("tcp://127.0.0.1:9", connect_timeout_s=0.5):
            pass
