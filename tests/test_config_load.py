"""Loading configs: files, directories, compact node ranges, scenario extras, job files, the
shipped data and demo, and the `optalloc validate` command."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from optalloc.cli import main as cli_main
from optalloc.config import (
    ConfigError,
    expand_node_names,
    load_config,
    load_document,
    load_jobs,
    parse_config,
    parse_jobs,
)
from optalloc.types import (
    GpuType,
    Job,
    JobState,
    Node,
    NodeAlloc,
    NodeState,
    OrgNode,
    Placement,
    Policy,
    SolverSettings,
    UsageMode,
)
from optalloc.units import parse_time

REPO = Path(__file__).resolve().parents[1]


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


# --------------------------------------------------------------------------- compact ranges


@pytest.mark.parametrize(
    "pattern, names",
    [
        pytest.param("h100-[001-003]", ["h100-001", "h100-002", "h100-003"], id="zero padding is kept"),
        pytest.param("a[1-3,7]", ["a1", "a2", "a3", "a7"], id="ranges and single numbers mix"),
        pytest.param("n[8-10]", ["n8", "n9", "n10"], id="no padding grows naturally"),
        pytest.param("n[08-10]", ["n08", "n09", "n10"], id="padding comes from the lower bound"),
        pytest.param("r[1-2]g[1-2]", ["r1g1", "r1g2", "r2g1", "r2g2"], id="several groups expand as a product"),
        pytest.param("gpu[3]-x", ["gpu3-x"], id="a suffix after the group is kept"),
        pytest.param("plain-node", ["plain-node"], id="a name without brackets is itself"),
    ],
)
def test_compact_node_names_expand(pattern, names):
    assert expand_node_names(pattern) == names


@pytest.mark.parametrize(
    "pattern, message",
    [
        pytest.param("n[3-1]", "range 3-1 in 'n[3-1]' runs backwards; write it low to high", id="backwards"),
        pytest.param("n[a-b]", "bad range 'a-b' in 'n[a-b]'; write ranges like [001-128] or [1-3,7]", id="letters"),
        pytest.param("n[1-]", "bad range '1-' in 'n[1-]'; write ranges like [001-128] or [1-3,7]", id="open range"),
        pytest.param("n[1-2", "unbalanced brackets in 'n[1-2'; write ranges like name-[001-128]", id="unclosed"),
        pytest.param("n[]", "bad range '' in 'n[]'; write ranges like [001-128] or [1-3,7]", id="empty group"),
    ],
)
def test_malformed_compact_names_raise_value_error(pattern, message):
    with pytest.raises(ValueError) as err:
        expand_node_names(pattern)
    assert str(err.value) == message


def test_a_compact_range_becomes_one_node_per_name(tmp_path):
    f = write(
        tmp_path / "c.yaml",
        """
        gpu_types: [{name: h100}]
        nodes:
          - {name: "h100-[001-128]", gpu_type: h100, gpus: 8}
          - {name: "spare-[1-2]", gpu_type: h100, gpus: 4, state: drain}
        org: {name: root}
        """,
    )
    config = load_config(f)
    assert len(config.nodes) == 130
    assert config.nodes[0] == Node("h100-001", "h100", 8, NodeState.UP)
    assert config.nodes[127] == Node("h100-128", "h100", 8, NodeState.UP)
    assert config.nodes[128:] == (
        Node("spare-1", "h100", 4, NodeState.DRAIN),
        Node("spare-2", "h100", 4, NodeState.DRAIN),
    )


# --------------------------------------------------------------------------- a full file


FULL = """
gpu_types:
  - {name: h100}
  - {name: b200, billing_weight: 1.6}
nodes:
  - {name: "h-[1-2]", gpu_type: h100, gpus: 8}
  - {name: b-1, gpu_type: b200, gpus: 8, state: down}
org:
  name: root
  children:
    - name: A
      share: 50
      share_by_type: {b200: 0}
      children: [{name: A1, share: 35}, {name: A2}]
    - {name: B, share: 50}
policy:
  lookback: 3d
  usage_mode: decay
  half_life: 1d
  min_runtime_cap: 4h
  epoch: 2m
  grace: 30s
  restart_overhead: 10m
  checkpoint_interval: 2h
  solver: {backend: cpsat, time_limit: 5s, mip_gap: 0.01, threads: 2}
jobs:
  - id: j1
    project: A1
    gpus: 16
    nodes: 2
    gpu_types: [h100]
    speedup: {b200: 1.8}
    min_runtime: 1h30m
    resumable: false
    priority: 3
    submit_time: 2026-11-29T08:00:00Z
    duration: 10h
    checkpoint_interval: 30m
    command: [python, train.py, --lr, 3e-4]
    state: running
    start_time: 2026-11-29T10:00:00Z
    placement:
      gpu_type: h100
      nodes: [{node: h-1, gpus: [0,1,2,3,4,5,6,7]}, {node: h-2, gpus: [7,6,5,4,3,2,1,0]}]
  - {id: 2, project: B, gpus: 1}
workload: {kind: synthetic, jobs: 10}
simulation: {start: 2026-11-29T12:00:00Z}
"""


def test_a_full_file_becomes_typed_immutable_objects(tmp_path):
    f = write(tmp_path / "full.yaml", FULL)
    config, extras = load_document(f)
    assert config.gpu_types == (GpuType("h100", 1.0), GpuType("b200", 1.6))
    assert config.nodes == (
        Node("h-1", "h100", 8),
        Node("h-2", "h100", 8),
        Node("b-1", "b200", 8, NodeState.DOWN),
    )
    assert config.org == OrgNode(
        "root",
        children=(
            OrgNode(
                "A",
                50.0,
                {"b200": 0.0},
                (OrgNode("A1", 35.0), OrgNode("A2", 1.0)),
            ),
            OrgNode("B", 50.0),
        ),
    )
    assert config.policy == Policy(
        lookback_s=3 * 86400,
        usage_mode=UsageMode.DECAY,
        half_life_s=86400,
        min_runtime_cap_s=4 * 3600,
        epoch_s=120,
        grace_s=30,
        restart_overhead_s=600,
        checkpoint_interval_s=7200,
        solver=SolverSettings(backend="cpsat", time_limit_s=5, mip_gap=0.01, threads=2),
    )
    assert config.jobs == (
        Job(
            id="j1",
            project="A1",
            gpus=16,
            gpus_per_node=8,
            gpu_types=("h100",),
            speedup={"b200": 1.8},
            min_runtime_s=5400,
            resumable=False,
            priority=3,
            submit_time=parse_time("2026-11-29T08:00:00Z"),
            duration_s=36000,
            checkpoint_interval_s=1800,
            command=("python", "train.py", "--lr", "3e-4"),
            state=JobState.RUNNING,
            start_time=parse_time("2026-11-29T10:00:00Z"),
            placement=Placement(
                "j1",
                "h100",
                (NodeAlloc("h-1", tuple(range(8))), NodeAlloc("h-2", tuple(range(8)))),
                allocated=True,
            ),
        ),
        Job(id="2", project="B", gpus=1),
    )
    assert config.sources == (str(f),)
    assert extras == {
        "workload": {"kind": "synthetic", "jobs": 10},
        "simulation": {"start": yaml.safe_load("2026-11-29T12:00:00Z")},
    }


def test_parse_config_accepts_an_in_memory_dict():
    config, extras = parse_config(yaml.safe_load(FULL), "mem")
    assert [n.name for n in config.nodes] == ["h-1", "h-2", "b-1"]
    assert config.sources == ("mem",)
    assert set(extras) == {"workload", "simulation"}


def test_omitted_policy_gets_the_published_defaults(tmp_path):
    f = write(tmp_path / "c.yaml", "gpu_types: [{name: h100}]\nnodes: [{name: n, gpu_type: h100, gpus: 8}]\norg: {name: r}\n")
    config = load_config(f)
    assert config.policy == Policy()
    assert (config.policy.lookback_s, config.policy.min_runtime_cap_s, config.policy.epoch_s) == (
        7 * 86400,
        8 * 3600,
        300,
    )


# --------------------------------------------------------------------------- directories


def test_a_directory_concatenates_lists_in_name_order(tmp_path):
    write(tmp_path / "10-cluster.yaml", """
        gpu_types: [{name: h100}]
        nodes: [{name: "h-[1-2]", gpu_type: h100, gpus: 8}]
        """)  # fmt: skip
    write(tmp_path / "20-more.yml", """
        gpu_types: [{name: b200}]
        nodes: [{name: b-1, gpu_type: b200, gpus: 8}]
        org: {name: r, children: [{name: A}, {name: B}]}
        jobs: [{id: j2, project: B, gpus: 8, gpu_types: [b200]}]
        """)  # fmt: skip
    write(tmp_path / "30-jobs.yaml", "jobs: [{id: j1, project: A, gpus: 1}]\n")
    (tmp_path / "notes.txt").write_text("not yaml: ignored")
    config = load_config(tmp_path)
    assert [g.name for g in config.gpu_types] == ["h100", "b200"]
    assert [n.name for n in config.nodes] == ["h-1", "h-2", "b-1"]
    assert [j.id for j in config.jobs] == ["j2", "j1"]
    assert config.sources == tuple(
        str(tmp_path / n) for n in ("10-cluster.yaml", "20-more.yml", "30-jobs.yaml")
    )


def test_a_directory_reports_problems_in_the_file_that_has_them(tmp_path):
    write(tmp_path / "a.yaml", "gpu_types: [{name: h100}]\nnodes: [{name: n1, gpu_type: h100, gpus: 8}]\norg: {name: r}\n"
          "policy: {epoch: 5m}\n")  # fmt: skip
    write(tmp_path / "b.yaml", "policy: {epoch: 10m}\nnodes: [{name: n1, gpu_type: h100, gpus: 8}]\n"
          "jobs: [{id: j1, project: r, gpus: 1}, {id: j1, project: r, gpus: 1}]\n")  # fmt: skip
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    assert err.value.problems == [
        f"{b}: policy: section 'policy' is already defined in {a}; define `policy:` in only one file of the directory",
        f"{b}: nodes[0].name: duplicate node name n1 (also defined at {a}: nodes[0]); each node name must appear once after range expansion",
        f"{b}: jobs[1].id: duplicate job id 'j1' (also at {b}: jobs[0]); give each job a unique id",
    ]


def test_an_empty_directory_is_reported(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert err.value.problems == [f"{tmp_path}: the directory has no .yaml or .yml files; put the config files there"]


def test_a_directory_without_required_sections_names_the_directory(tmp_path):
    write(tmp_path / "a.yaml", "gpu_types: [{name: h100}]\n")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert err.value.problems == [
        f"{tmp_path}: nodes: missing required section; add a `nodes:` section",
        f"{tmp_path}: org: missing required section; add a `org:` section",
    ]


# --------------------------------------------------------------------------- job files


@pytest.fixture
def small_config():
    config, _ = parse_config(
        {
            "gpu_types": [{"name": "h100"}],
            "nodes": [{"name": "n[1-2]", "gpu_type": "h100", "gpus": 8}],
            "org": {"name": "r", "children": [{"name": "A"}, {"name": "B"}]},
            "jobs": [
                {"id": "run", "project": "A", "gpus": 2, "state": "running", "start_time": 0,
                 "placement": {"nodes": [{"node": "n1", "gpus": [0, 1]}]}},
            ],
        },
        "cfg.yaml",
    )  # fmt: skip
    return config


def test_a_job_file_with_a_jobs_list_is_validated_against_the_config(small_config):
    jobs = parse_jobs({"jobs": [{"id": "a", "project": "A", "gpus": 8}, {"id": "b", "project": "B", "gpus": 1}]},
                      small_config, "jobs.yaml")  # fmt: skip
    assert jobs == (Job("a", "A", 8), Job("b", "B", 1))


def test_a_job_file_may_hold_one_job_mapping(small_config):
    assert parse_jobs({"id": "a", "project": "B", "gpus": 4, "min_runtime": "15m"}, small_config, "one.yaml") == (
        Job("a", "B", 4, min_runtime_s=900.0),
    )


def test_a_single_job_reports_paths_from_its_top_level(small_config):
    with pytest.raises(ConfigError) as err:
        parse_jobs({"id": "run", "project": "r", "gpus": 4, "min_runtime": "9h"}, small_config, "one.yaml")
    assert err.value.problems == [
        "one.yaml: project: 'r' is an inner node of the org tree, not a project; jobs belong to a leaf; use one of its leaves: A, B",
        "one.yaml: min_runtime: min_runtime 9h is above policy.min_runtime_cap 8h; use at most 8h (or raise policy.min_runtime_cap)",
        "one.yaml: id: duplicate job id 'run' (also at the configuration); give each job a unique id",
    ]


def test_a_running_job_in_a_job_file_may_not_overlap_the_configs_running_jobs(small_config):
    new = {"id": "x", "project": "B", "gpus": 1, "state": "running", "start_time": 10,
           "placement": {"nodes": [{"node": "n1", "gpus": [1]}]}}  # fmt: skip
    with pytest.raises(ConfigError) as err:
        parse_jobs({"jobs": [new]}, small_config, "jobs.yaml")
    assert err.value.problems == [
        "jobs.yaml: jobs[0].placement: running jobs 'x' and 'run' (in the configuration) overlap on GPUs n1:1; give each running job its own GPUs"
    ]


def test_a_job_file_with_other_sections_is_rejected(small_config):
    with pytest.raises(ConfigError) as err:
        parse_jobs({"jobs": [], "nodes": []}, small_config, "jobs.yaml")
    assert err.value.problems == ["jobs.yaml: nodes: unknown key 'nodes'; valid keys here: jobs"]


def test_load_jobs_reads_the_shipped_sample_against_the_demo():
    config = load_config(REPO / "scenarios" / "demo.yaml")
    jobs = load_jobs(REPO / "data" / "sample_jobs.yaml", config)
    assert [(j.id, j.project, j.gpus, j.min_runtime_s) for j in jobs] == [
        ("sample-debug-1", "evals", 1, 900.0),
        ("sample-finetune-1", "posttrain", 8, 7200.0),
        ("sample-gang-1", "vlm", 32, 28800.0),
        ("sample-sweep-1", "climate", 2, 0.0),
    ]


# --------------------------------------------------------------------------- shipped data


def test_the_shipped_gpu_types_are_a_valid_gpu_types_section():
    data = yaml.safe_load((REPO / "data" / "gpu_types.yaml").read_text())
    config, _ = parse_config(
        {**data, "nodes": [{"name": "n", "gpu_type": "h100", "gpus": 8}], "org": {"name": "r"}},
        "data/gpu_types.yaml",
    )
    assert {g.name: g.billing_weight for g in config.gpu_types} == {
        "h100": 1.0, "b200": 1.6, "b300": 2.0, "v100": 0.25, "p100": 0.15, "k80": 0.05,
    }  # fmt: skip


def test_the_demo_scenario_has_the_published_shape():
    config, extras = load_document(REPO / "scenarios" / "demo.yaml")
    up = {t: sum(n.gpus for n in config.nodes if n.gpu_type == t and n.state is NodeState.UP) for t in ("h100", "b200")}
    total = {t: sum(n.gpus for n in config.nodes if n.gpu_type == t) for t in ("h100", "b200")}
    assert total == {"h100": 1024, "b200": 88}
    assert up["h100"] < 1024  # a couple drained
    from optalloc.org import OrgTree

    tree = OrgTree.build(config.org, ["h100", "b200"])
    leaves = tree.leaves
    assert len(leaves) == 15 and tree.depth.max() == 2
    assert any(0.33 <= tree.leaf_entitlement(p, "h100") <= 0.37 for p in leaves)
    assert config.policy == Policy()  # the published defaults, written out
    jobs = config.jobs
    assert 110 <= len(jobs) <= 130
    demand = sum(j.gpus for j in jobs) / sum(up.values())
    assert 2.0 <= demand <= 3.0
    assert 0.15 <= sum(not j.allocated for j in jobs) / len(jobs) <= 0.25
    assert any(j.gpus >= 64 and j.gpus_per_node == 8 for j in jobs)
    assert all(j.min_runtime_s <= 900 for j in jobs if j.gpus <= 8 and 0 < j.min_runtime_s < 3600)
    now = parse_time(extras["simulation"]["start"])
    running = [j for j in jobs if j.running]
    assert running and all(now - 8 * 3600 <= j.start_time < now for j in running)


def test_the_committed_demo_matches_its_generator():
    out = subprocess.run(
        [sys.executable, str(REPO / "scenarios" / "tools" / "make_demo.py"), "--check"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


# --------------------------------------------------------------------------- the CLI


def test_validate_prints_a_summary_and_exits_0(capsys):
    assert cli_main(["validate", str(REPO / "scenarios" / "demo.yaml")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"OK: {REPO / 'scenarios' / 'demo.yaml'}"
    assert "  h100: 128 nodes, 1024 GPUs (up 126 nodes/1008 GPUs, drain 2 nodes/16 GPUs)" in out
    assert "  b200: 11 nodes, 88 GPUs (up 11 nodes/88 GPUs)" in out
    science = next(line for line in out if line.strip().startswith("science/"))
    assert science.split()[1:] == ["15", "/", "15.0%", "0", "/", "0.0%"]
    assert any(line.startswith("policy: lookback 7d window, min_runtime cap 8h, epoch 5m") for line in out)


def test_validate_json_gives_entitlements_per_type(capsys):
    assert cli_main(["validate", "--json", str(REPO / "scenarios" / "demo.yaml")]) == 0
    s = json.loads(capsys.readouterr().out)
    org = {o["name"]: o for o in s["org"]}
    assert org["science"]["entitlement"] == {"h100": pytest.approx(0.15), "b200": 0.0}
    assert sum(o["entitlement"]["b200"] for o in s["org"] if o["leaf"]) == pytest.approx(1.0)
    assert s["jobs"]["queued"]["jobs"] + s["jobs"]["running"]["jobs"] == 120


def test_validate_prints_all_problems_and_exits_2_without_a_traceback(tmp_path):
    f = write(tmp_path / "bad.yaml", """
        gpu_types: [{name: h100}]
        nodes: [{name: n1, gpu_type: h100, gpus: 0}]
        org: {name: r, children: [{name: A, share: -2}]}
        """)  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-m", "optalloc", "validate", str(f)], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.splitlines() == [
        "optalloc validate: 2 problems found in the configuration:",
        f"  - {f}: nodes[0].gpus: a node must have at least 1 GPU, got 0; give its GPU count, or remove the node (use state: down for a dead one)",
        f"  - {f}: org.children[0].share: negative share -2; shares are relative weights >= 0; use 0 for none",
    ]
