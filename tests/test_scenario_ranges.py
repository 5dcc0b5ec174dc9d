"""Every number of a scenario's `workload:` and `simulation:` sections has a sane range, checked
when the scenario loads: a value outside it is a located problem (file, key path, the range),
exit status 2 from the commands, never a generator traceback, an out-of-memory kill or a
simulation that never ends. The shipped scenarios stay inside every range."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from optalloc.cli import main
from optalloc.errors import ConfigError
from optalloc.sim.scenario import load_scenario

BASE = {
    "gpu_types": [{"name": "h100"}],
    "nodes": [{"name": "n[1-2]", "gpu_type": "h100", "gpus": 4}],
    "org": {"name": "lab", "children": [{"name": "A1", "share": 1}, {"name": "B1", "share": 1}]},
    "workload": {"source": "synthetic", "synthetic": {}},
    "simulation": {"duration": "4h"},
}


def scenario(tmp_path: Path, synthetic=None, workload=None, simulation=None) -> Path:
    doc = copy.deepcopy(BASE)
    doc["workload"]["synthetic"].update(synthetic or {})
    doc["workload"].update(workload or {})
    doc["simulation"].update(simulation or {})
    p = tmp_path / "sc.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def problems_of(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load_scenario(path)
    return err.value.problems


def simulate_refuses(tmp_path, capsys, path: Path, *needles) -> None:
    before = set(tmp_path.iterdir())
    assert main(["simulate", "--scenario", str(path), "--policies", "greedy", "--no-progress",
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, err
    assert set(tmp_path.iterdir()) == before  # no --out folder


# --------------------------------------------------------------------------- sizes


def test_a_synthetic_size_above_the_job_gpu_bound_is_refused_at_its_key(tmp_path, capsys):
    p = scenario(tmp_path, {"sizes": {99999999999: 1}})
    assert problems_of(p) == [
        f"{p}: workload.synthetic.sizes.99999999999: GPU count 99999999999 is more than 1000000 "
        "(the most a job may ask for); give sizes up to the cluster's 8 GPUs"]
    simulate_refuses(tmp_path, capsys, p, "workload.synthetic.sizes.99999999999")


def test_huge_synthetic_size_probabilities_are_refused_so_their_sum_stays_finite(
        tmp_path, capsys):
    p = scenario(tmp_path, {"sizes": {1: 1.0e308, 2: 1.0e308}})
    assert problems_of(p) == [
        f"{p}: workload.synthetic.sizes.{k}: must be <= 1e+09, got 1e+308; use a value of at "
        "most 1e+09" for k in (1, 2)]
    simulate_refuses(tmp_path, capsys, p, "workload.synthetic.sizes.1")


@pytest.mark.parametrize("key", ["sizes", "debug_sizes"])
def test_synthetic_sizes_that_all_exceed_the_cluster_are_refused_naming_its_size(
        tmp_path, capsys, key):
    p = scenario(tmp_path, {key: {16: 0.5, 64: 0.5}})
    assert problems_of(p) == [
        f"{p}: workload.synthetic.{key}: no size of at most the cluster's 8 GPUs has a positive "
        "probability (larger sizes are dropped); give a size of at most 8 GPUs a probability > 0"]
    simulate_refuses(tmp_path, capsys, p, f"workload.synthetic.{key}")


def test_synthetic_sizes_beyond_the_cluster_are_fine_while_some_size_fits(tmp_path):
    s = load_scenario(scenario(tmp_path, {"sizes": {1: 0.5, 64: 0.5}}))
    assert s.jobs and max(j.gpus for j in s.jobs) <= 8


# --------------------------------------------------------------------------- workload numbers


@pytest.mark.parametrize("key, value, expected", [
    ("offered_load", 1.0e7, "1e+07 is out of range (GPU time asked for over the cluster's: 1 "
                            "fills it, 10 asks ten times what it can run); give 0 < "
                            "offered_load <= 10"),
    ("offered_load", 0, "0 is out of range"),
    ("team_skew", 1.0e300, "1e+300 is out of range (the Zipf exponent of jobs per team: 10 "
                           "gives the first team nearly all of them); give 0 <= team_skew <= 10"),
    ("duration_sigma", 1.0e300, "1e+300 is out of range (the log-normal spread of training "
                                "durations); give 0 <= duration_sigma <= 10"),
    ("duration_sigma", -1, "give 0 <= duration_sigma <= 10"),
])
def test_synthetic_numbers_outside_their_range_are_refused_naming_key_and_range(
        tmp_path, capsys, key, value, expected):
    p = scenario(tmp_path, {key: value})
    [problem] = problems_of(p)
    assert problem.startswith(f"{p}: workload.synthetic.{key}: ") and expected in problem
    simulate_refuses(tmp_path, capsys, p, f"workload.synthetic.{key}", expected)


@pytest.mark.parametrize("workload, expected", [
    ({"load_scale": 1.0e6}, "workload.load_scale: 1e+06 is out of range (trace submit times are "
                            "divided by it); give 0.01 <= load_scale <= 100"),
    ({"load_scale": 0.001}, "give 0.01 <= load_scale <= 100"),
    ({"max_jobs": 10**12}, "workload.max_jobs: must be <= 10000000"),
])
def test_trace_workload_numbers_outside_their_range_are_refused(tmp_path, capsys, workload,
                                                               expected):
    p = scenario(tmp_path, workload=workload)
    assert any(expected in q for q in problems_of(p)), problems_of(p)
    simulate_refuses(tmp_path, capsys, p, expected)


def test_synthetic_numbers_at_the_edges_of_their_ranges_load(tmp_path):
    s = load_scenario(scenario(tmp_path, {"offered_load": 10, "team_skew": 10,
                                          "duration_sigma": 10}, simulation={"duration": "1h"}))
    assert s.jobs


def test_every_shipped_scenario_keeps_its_numbers_inside_the_ranges():
    from optalloc.config.load import load_document
    from optalloc.config.problems import Loc, Problems
    from optalloc.sim.scenario.parse import parse_simulation, parse_workload

    for path in sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.yaml")):
        config, extras = load_document(path)
        problems = Problems()
        parse_simulation(extras.get("simulation"), Loc(str(path)).key("simulation"), config,
                         problems)
        parse_workload(extras.get("workload"), Loc(str(path)).key("workload"), config, problems)
        assert problems.items == [], path


# --------------------------------------------------------------------------- epochs

JOBS = [{"id": "a", "project": "A1", "gpus": 1, "min_runtime": "1h", "submit_time": 0,
         "duration": "1h"}]


def jobs_scenario(tmp_path: Path, simulation=None, policy=None) -> Path:
    doc = copy.deepcopy(BASE)
    doc["jobs"] = JOBS
    doc["workload"] = {"source": "jobs"}
    doc["simulation"].update(simulation or {})
    if policy:
        doc["policy"] = policy
    p = tmp_path / "sc.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


EPOCH_TOO_SHORT = ("an epoch of 1e-06s is shorter than 1s (how often the scheduler decides; a "
                   "shorter one only makes a simulation endless); give at least 1s, e.g. 5m")


def test_a_simulation_epoch_under_a_second_is_refused_instead_of_hanging(tmp_path, capsys):
    p = jobs_scenario(tmp_path, simulation={"epoch": 0.000001})
    assert problems_of(p) == [f"{p}: simulation.epoch: {EPOCH_TOO_SHORT}"]
    simulate_refuses(tmp_path, capsys, p, "simulation.epoch", EPOCH_TOO_SHORT)


def test_a_policy_epoch_under_a_second_is_refused_by_validate(tmp_path, capsys):
    p = jobs_scenario(tmp_path, policy={"epoch": 0.000001})
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err
    assert f"{p}: policy.epoch: {EPOCH_TOO_SHORT}" in err and "Traceback" not in err


def test_whatif_refuses_a_set_policy_epoch_under_a_second_and_writes_nothing(tmp_path, capsys):
    p = jobs_scenario(tmp_path)
    before = set(tmp_path.iterdir())
    assert main(["whatif", "--scenario", str(p), "--policy", "greedy", "--no-progress",
                 "--set", "policy.epoch=0.000001", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"--set policy.epoch=0.000001: policy.epoch: {EPOCH_TOO_SHORT}" in err
    assert "Traceback" not in err and set(tmp_path.iterdir()) == before


def test_an_epoch_of_one_second_is_accepted(tmp_path):
    s = load_scenario(jobs_scenario(tmp_path, simulation={"epoch": 1}, policy={"epoch": "1s"}))
    assert s.epoch_s == 1.0 and s.config.policy.epoch_s == 1.0
