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
