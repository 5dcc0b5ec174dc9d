"""Scenario files: located errors (table-driven), every source, and every shipped scenario."""

from __future__ import annotations

import copy
import datetime
from pathlib import Path

import pytest
import yaml

from optalloc.errors import ConfigError, OptallocError
from optalloc.sim.scenario import NodeEvent, load_scenario, scale_cluster_to_demand_ratio
from optalloc.sim.traces import TRACES_ENV, traces_available
from optalloc.sim.workload import offered_load
from optalloc.types import NodeState

H = 3600.0
REPO = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((REPO / "scenarios").glob("*.yaml"))

BASE = {
    "gpu_types": [{"name": "g1"}],
    "nodes": [{"name": "n-[1-4]", "gpu_type": "g1", "gpus": 8}],
    "org": {"name": "root", "children": [{"name": "A", "share": 3}, {"name": "B", "share": 1}]},
    "workload": {"source": "itp", "file": "trace.csv", "mapping": {"unallocated_share": 0.0}},
    "simulation": {"duration": "1d", "epoch": "10m", "seed": 3},
}
TRACE = "job_id,submission_time,duration,num_gpu\nj1,100,3600,8\nj2,50,600,1\nj3,90000,60,1\n"


def write(tmp_path: Path, doc: dict, name: str = "s.yaml") -> Path:
    (tmp_path / "trace.csv").write_text(TRACE)
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def test_an_itp_scenario_loads_jobs_times_and_settings(tmp_path):
    s = load_scenario(write(tmp_path, BASE))
    assert s.name == "s"
    assert [(j.id, j.submit_time, j.gpus, j.duration_s) for j in s.jobs] == [
        ("j2", 50.0, 1, 600.0), ("j1", 100.0, 8, 3600.0), ("j3", 90000.0, 1, 60.0)]
    assert (s.duration_s, s.epoch_s, s.seed, s.early_solve) == (86400.0, 600.0, 3, True)
    assert s.config.policy.epoch_s == 600.0  # the policy follows the simulation's epoch
    assert s.checkpoint_interval_s == s.config.policy.checkpoint_interval_s == 3600.0
    assert s.capacity_gpus == 32 and s.node_events == ()
    assert {j.project for j in s.jobs} <= {"A", "B"}


def test_window_load_scale_sample_and_max_jobs_select_and_shift_jobs(tmp_path):
    doc = copy.deepcopy(BASE)
    doc["workload"]["window"] = {"start": 60, "end": "1d"}
    doc["workload"]["load_scale"] = 2.0
    s = load_scenario(write(tmp_path, doc))
    assert [(j.id, j.submit_time) for j in s.jobs] == [("j1", 20.0)]  # (100 - 60) / 2
    doc = copy.deepcopy(BASE)
    doc["workload"]["max_jobs"] = 2
    assert [j.id for j in load_scenario(write(tmp_path, doc)).jobs] == ["j2", "j1"]


def test_node_events_expand_ranges_and_accept_durations_and_iso_times(tmp_path):
    doc = copy.deepcopy(BASE)
    doc["simulation"]["start"] = "2026-01-01T00:00:00Z"
    doc["simulation"]["node_events"] = [
        {"at": "2026-01-01T06:00:00Z", "node": "n-1", "state": "up"},
        {"at": "2h", "nodes": ["n-[2-3]"], "state": "drain"},
    ]
    s = load_scenario(write(tmp_path, doc))
    assert s.node_events == (
        NodeEvent(2 * H, ("n-2", "n-3"), NodeState.DRAIN),
        NodeEvent(6 * H, ("n-1",), NodeState.UP),
    )


def test_a_synthetic_scenario_draws_jobs_for_its_projects_at_the_offered_load(tmp_path):
    doc = copy.deepcopy(BASE)
    doc["workload"] = {"source": "synthetic", "synthetic": {"offered_load": 0.9, "team_skew": 0.5}}
    doc["simulation"]["duration"] = "3d"
    s = load_scenario(write(tmp_path, doc))
    assert {j.project for j in s.jobs} == {"A", "B"}
    assert offered_load(s.jobs, 32, 3 * 86400) == pytest.approx(0.9, rel=0.1)
    again = load_scenario(write(tmp_path, doc, "t.yaml"))
    assert again.jobs == s.jobs


def test_a_jobs_scenario_shifts_the_config_jobs_to_its_start(tmp_path):
    doc = copy.deepcopy(BASE)
    doc["workload"] = {"source": "jobs"}
    doc["simulation"] = {"start": "2026-01-01T00:00:00Z", "duration": "1h"}
    doc["jobs"] = [{"id": "x", "project": "A", "gpus": 1, "submit_time": "2025-12-31T23:00:00Z"}]
    s = load_scenario(write(tmp_path, doc))
    assert [(j.id, j.submit_time) for j in s.jobs] == [("x", -H)]
    assert s.start_time == 1767225600.0


def mutate(path: str, value):
    def apply(doc):
        keys = path.split(".")
        cur = doc
        for k in keys[:-1]:
            cur = cur.setdefault(k, {})
        if value is DELETE:
            del cur[keys[-1]]
        else:
            cur[keys[-1]] = value
        return doc
    return apply


DELETE = object()

ERROR_CASES = [
    ("a missing workload section", mutate("workload", DELETE),
     ["S: workload: missing section; add `workload: {source: itp|philly|synthetic|jobs, ...}`"]),
    ("an unknown source", mutate("workload.source", "itpp"),
     ["S: workload.source: unknown workload source 'itpp'; did you mean 'itp'? (one of: itp, philly, synthetic, jobs)"]),
    ("an itp workload with neither cluster nor file", mutate("workload.file", DELETE),
     ["S: workload: an itp workload needs exactly one of `cluster:` (e.g. cluster04) or `file:`; add `cluster: cluster04` (read from $OPTALLOC_TRACES/itp/) or `file: path/to.csv`"]),
    ("a key of another source", mutate("workload.teams", ["t1"]),
     ["S: workload.teams: does not apply to source 'itp'; remove it (it is for source philly)"]),
    ("a window that ends before it starts", mutate("workload.window", {"start": "2d", "end": "1d"}),
     ["S: workload.window.end: must be after start (172800s), got 86400s; make end later than start"]),
    ("a sample above one", mutate("workload.sample", 2),
     ["S: workload.sample: must be <= 1, got 2; use a value of at most 1"]),
    ("a bad mapping value", mutate("workload.mapping.resumable_fraction", -0.5),
     ["S: workload.mapping.resumable_fraction: must be >= 0, got -0.5; use a value of at least 0"]),
    ("a misspelt simulation key", mutate("simulation.epoc", "5m"),
     ["S: simulation.epoc: unknown key 'epoc'; did you mean 'epoch'?"]),
    ("a zero epoch", mutate("simulation.epoch", 0),
     ["S: simulation.epoch: must be > 0, got 0; give a positive duration like '5m'"]),
    ("early_solve that is not a boolean", mutate("simulation.early_solve", "yes please"),
     ["S: simulation.early_solve: expected true or false, got a string ('yes please'); write true or false"]),
    ("a node event for an unknown node", mutate("simulation.node_events", [{"at": "1h", "node": "n-9", "state": "down"}]),
     ["S: simulation.node_events[0].node: no such node(s): n-9; nodes in the config: n-1, n-2, n-3, n-4"]),
    ("a node event with a bad state and no time", mutate("simulation.node_events", [{"node": "n-1", "state": "broken"}]),
     ["S: simulation.node_events[0].at: missing required key; add `at:`",
      "S: simulation.node_events[0].state: unknown node state 'broken'; use one of: up, drain, down"]),
    ("a node event after the end", mutate("simulation.node_events", [{"at": "2d", "node": "n-1", "state": "down"}]),
     ["S: simulation.node_events[0].at: at 172800s is after the end of the simulation (86400s); move it inside simulation.duration or remove it"]),
    ("a node event before the start, written as a YAML timestamp",  # was datetime's repr
     lambda d: mutate("simulation.node_events", [
         {"at": datetime.datetime(2025, 12, 31, 23, 0, tzinfo=datetime.timezone.utc),
          "node": "n-1", "state": "down"}])(
         mutate("simulation.start", "2026-01-01T00:00:00Z")(d)),
     ["S: simulation.node_events[0].at: 2025-12-31T23:00:00+00:00 is before simulation.start "
      "(3600 s before); give a time inside the simulation"]),
    ("a synthetic workload without a horizon",
     lambda d: {**mutate("workload", {"source": "synthetic"})(d), "simulation": {}},
     ["S: simulation.duration: a synthetic workload needs the simulated horizon; add `simulation: {duration: 7d}`"]),
    ("a synthetic team that is no project", mutate("workload", {"source": "synthetic", "synthetic": {"teams": ["A", "Q"]}}),
     ["S: workload.synthetic.teams[1]: 'Q' is not a project (a leaf of the org tree); projects: A, B"]),
    ("a jobs source without jobs", mutate("workload", {"source": "jobs"}),
     ["S: workload.source: source 'jobs' but the config has no `jobs:`; add jobs or pick another source"]),
]


@pytest.mark.parametrize("case, change, expected", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_scenario_errors_name_file_key_path_and_fix(tmp_path, case, change, expected):
    p = write(tmp_path, change(copy.deepcopy(BASE)))
    with pytest.raises(ConfigError) as err:
        load_scenario(p)
    assert [m.replace(str(p), "S") for m in err.value.problems] == expected


def test_a_missing_trace_folder_names_the_variable(tmp_path):
    doc = copy.deepcopy(BASE)
    doc["workload"] = {"source": "itp", "cluster": "cluster04"}
    with pytest.raises(OptallocError, match=f"{TRACES_ENV}=.* is not a directory"):
        load_scenario(write(tmp_path, doc), env={TRACES_ENV: str(tmp_path / "none")})


@pytest.mark.parametrize(
    "measured, expected_nodes",
    [
        ({8: 6.0, 16: 3.5, 32: 1.5, 24: 2.4}, 24),  # doubles, overshoots, bisects
        ({8: 2.5}, 8),  # the first guess is in the band
        ({8: 0.5, 4: 1.2, 2: 2.2}, 2),  # halves while too big
    ],
    ids=["bracket then bisect", "first guess fits", "halve a too-big cluster"],
)
def test_cluster_search_finds_a_size_in_the_demand_ratio_band(measured, expected_nodes):
    size = scale_cluster_to_demand_ratio(lambda n: measured[n], start_nodes=8, gpus_per_node=8)
    assert (size.nodes, size.gpus) == (expected_nodes, expected_nodes * 8)
    assert 2.0 <= size.demand_ratio <= 3.0
    assert [n for n, _ in size.tried] == list(measured)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_shipped_scenario_loads(path):
    text = path.read_text()
    needs_traces = "source: itp" in text or "source: philly" in text
    if needs_traces and not traces_available():
        pytest.skip(f"{path.name} replays a public trace; set {TRACES_ENV} to the traces folder to load it")
    s = load_scenario(path)
    assert s.jobs and s.duration_s > 0 and s.epoch_s > 0
    assert all(a.submit_time <= b.submit_time for a, b in zip(s.jobs, s.jobs[1:]))
    leaves = set(_leaves(s.config.org))
    assert {j.project for j in s.jobs} <= leaves
    assert not (s.workload and s.workload.dropped), f"{path.name} drops jobs: {s.workload.dropped}"
    assert text.lstrip().startswith("#")  # a comment header says what it is and how it was sized


def _leaves(node):
    if node.is_leaf:
        yield node.name
    for c in node.children:
        yield from _leaves(c)


def _trace_file_problems(tmp_path, name: str) -> tuple[list[str], object]:
    """(the problems load_scenario reports for a scenario whose workload file is `name`, the
    scenario's path)."""
    doc = copy.deepcopy(BASE)
    doc["workload"]["file"] = name
    p = write(tmp_path, doc)
    with pytest.raises(ConfigError) as err:
        load_scenario(p, env={TRACES_ENV: str(tmp_path / "none")})
    return err.value.problems, p


def test_a_missing_trace_file_is_reported_at_the_workload_file_key(tmp_path):
    problems, p = _trace_file_problems(tmp_path, "missing.csv")
    assert problems == [
        f"{p}: workload.file: {tmp_path / 'missing.csv'}: file not found; check the workload's file/cluster/team "
        f"and {TRACES_ENV}"
    ]


def test_a_directory_as_the_trace_file_is_reported_at_the_workload_file_key(tmp_path):
    (tmp_path / "tracedir").mkdir()
    problems, p = _trace_file_problems(tmp_path, "tracedir")
    assert problems == [
        f"{p}: workload.file: {tmp_path / 'tracedir'}: is a directory, not a trace file; point "
        "the workload's file at the trace's CSV file"
    ]


def test_simulate_with_a_directory_as_the_trace_file_exits_2_without_a_traceback(
        tmp_path, capsys):
    from optalloc.cli import main

    (tmp_path / "tracedir").mkdir()
    doc = copy.deepcopy(BASE)
    doc["workload"]["file"] = "tracedir"
    p = write(tmp_path, doc)
    before = set(tmp_path.iterdir())
    assert main(["simulate", "--scenario", str(p), "--policies", "greedy", "--no-progress",
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "workload.file" in err and "is a directory" in err
    assert set(tmp_path.iterdir()) == before
