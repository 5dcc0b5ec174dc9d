"""Every kind of bad config gives exactly the located messages a person needs to fix it.

Each row edits a small valid config and lists the whole expected problem list
(`FILE: key.path: what is wrong; how to fix`), so a new or lost message fails the row.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from optalloc.config import ConfigError, load_config, parse_config

SRC = "t.yaml"
DELETE = object()


def base() -> dict[str, Any]:
    return {
        "gpu_types": [{"name": "h100"}, {"name": "b200", "billing_weight": 1.6}],
        "nodes": [
            {"name": "h-[1-2]", "gpu_type": "h100", "gpus": 8},
            {"name": "b-1", "gpu_type": "b200", "gpus": 4},
        ],
        "org": {
            "name": "root",
            "children": [
                {"name": "A", "share": 3, "children": [{"name": "A1"}, {"name": "A2", "share": 2}]},
                {"name": "B", "share": 1},
            ],
        },
        "policy": {"min_runtime_cap": "8h", "solver": {"backend": "highs"}},
        "jobs": [
            {"id": "q1", "project": "A1", "gpus": 8},
            {
                "id": "r1",
                "project": "A2",
                "gpus": 4,
                "min_runtime": "1h",
                "state": "running",
                "start_time": "2026-11-29T10:00:00Z",
                "placement": {"gpu_type": "h100", "nodes": [{"node": "h-1", "gpus": [0, 1, 2, 3]}]},
            },
        ],
    }


_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def edited(*edits: tuple[str, Any]) -> dict[str, Any]:
    """base() with `path = value` edits; value DELETE removes the key."""
    data = base()
    for path, value in edits:
        steps = [m.group(1) if m.group(1) is not None else int(m.group(2)) for m in _STEP.finditer(path)]
        target = data
        for s in steps[:-1]:
            target = target[s]
        if value is DELETE:
            del target[steps[-1]]
        elif isinstance(target, list) and steps[-1] == len(target):
            target.append(copy.deepcopy(value))
        else:
            target[steps[-1]] = copy.deepcopy(value)
    return data


RUNNING_R2 = {
    "id": "r2",
    "project": "B",
    "gpus": 2,
    "state": "running",
    "start_time": "2026-11-29T11:00:00Z",
    "placement": {"nodes": [{"node": "h-1", "gpus": [3, 4]}]},
}

CASES = [
    (
        "an unknown top-level section suggests the closest one",
        [("polcy", {})],
        ["t.yaml: polcy: unknown key 'polcy'; did you mean 'policy'?"],
    ),
    (
        "an unknown job key suggests the closest valid key",
        [("jobs[0].min_runtim", "1h")],
        ["t.yaml: jobs[0].min_runtim: unknown key 'min_runtim'; did you mean 'min_runtime'?"],
    ),
    (
        "an unknown key with no near match lists the valid keys",
        [("gpu_types[0].colour", "green")],
        ["t.yaml: gpu_types[0].colour: unknown key 'colour'; valid keys here: name, billing_weight"],
    ),
    (
        "a boolean is not an integer GPU count",
        [("jobs[0].gpus", True)],
        ["t.yaml: jobs[0].gpus: expected an integer, got a boolean (true); write a whole number like 8"],
    ),
    (
        "a whole float GPU count is told to drop the decimal point",
        [("nodes[0].gpus", 8.0)],
        ["t.yaml: nodes[0].gpus: expected an integer, got a number (8); write 8 without a decimal point"],
    ),
    (
        "a negative share is rejected",
        [("org.children[1].share", -1)],
        ["t.yaml: org.children[1].share: negative share -1; shares are relative weights >= 0; use 0 for none"],
    ),
    (
        "a boolean share is rejected",
        [("org.children[1].share", False)],
        ["t.yaml: org.children[1].share: expected a number, got a boolean (false); write a number like 1.5"],
    ),
    (
        "all-zero sibling shares would lose the parent's entitlement",
        [("org.children[0].children[0].share", 0), ("org.children[0].children[1].share", 0)],
        [
            "t.yaml: org.children[0].children: all 2 children of 'A' have share 0, so 'A''s "
            "entitlement would be lost; give at least one child a positive share"
        ],
    ),
    (
        "all-zero sibling shares on one gpu_type are caught per type",
        [
            ("org.children[0].children[0].share_by_type", {"b200": 0}),
            ("org.children[0].children[1].share_by_type", {"b200": 0}),
        ],
        [
            "t.yaml: org.children[0].children: on gpu_type 'b200' all 2 children of 'A' have share 0, "
            "so 'A''s b200 entitlement would be lost; give one child a positive share for b200, or "
            "set share_by_type: {b200: 0} on 'A' itself"
        ],
    ),
    (
        "zero shares below a node that has no share of that type are fine",
        [
            ("org.children[0].share_by_type", {"b200": 0}),
            ("org.children[0].children[0].share_by_type", {"b200": 0}),
            ("org.children[0].children[1].share_by_type", {"b200": 0}),
        ],
        [],
    ),
    (
        "a share_by_type naming an unknown gpu_type suggests the closest",
        [("org.children[1].share_by_type", {"b20": 1})],
        ["t.yaml: org.children[1].share_by_type.b20: unknown gpu_type 'b20'; did you mean 'b200'? use one of the gpu_types: h100, b200"],
    ),
    (
        "a gpu_type defined twice is a duplicate",
        [("gpu_types[2]", {"name": "h100"})],
        ["t.yaml: gpu_types[2].name: duplicate gpu_type 'h100' (first defined at t.yaml: gpu_types[0]); give each gpu_type a unique name"],
    ),
    (
        "a billing weight must be positive",
        [("gpu_types[1].billing_weight", 0)],
        ["t.yaml: gpu_types[1].billing_weight: must be > 0, got 0; use a positive number"],
    ),
    (
        "a node name repeated by a compact range is a duplicate",
        [("nodes[2]", {"name": "h-2", "gpu_type": "h100", "gpus": 8})],
        ["t.yaml: nodes[2].name: duplicate node name h-2 (also defined at t.yaml: nodes[0]); each node name must appear once after range expansion"],
    ),
    (
        "a backwards node range is rejected",
        [("nodes[0].name", "h-[2-1]")],
        ["t.yaml: nodes[0].name: range 2-1 in 'h-[2-1]' runs backwards; write it low to high"],
    ),
    (
        "a node of an unknown gpu_type suggests the closest",
        [("nodes[1].gpu_type", "b20")],
        ["t.yaml: nodes[1].gpu_type: unknown gpu_type 'b20'; did you mean 'b200'? use one of the gpu_types: h100, b200, or add it to gpu_types"],
    ),
    (
        "a node with 0 GPUs is rejected",
        [("nodes[1].gpus", 0)],
        ["t.yaml: nodes[1].gpus: a node must have at least 1 GPU, got 0; give its GPU count, or remove the node (use state: down for a dead one)"],
    ),
    (
        "a bad node state suggests the closest",
        [("nodes[1].state", "drained")],
        ["t.yaml: nodes[1].state: unknown node state 'drained'; did you mean 'drain'? (one of: up, drain, down)"],
    ),
    (
        "an org node name repeated in another subtree is a duplicate",
        [("org.children[1].name", "A1")],
        ["t.yaml: org.children[1].name: duplicate org node name 'A1' (also at org.children[0].children[0]); names must be unique across the whole org tree; rename one"],
    ),
    (
        "a job naming an unknown project lists the leaves",
        [("jobs[0].project", "A9")],
        ["t.yaml: jobs[0].project: unknown project 'A9'; use one of the org tree's leaves: A1, A2, B"],
    ),
    (
        "a job naming an inner org node lists that node's leaves",
        [("jobs[0].project", "A")],
        ["t.yaml: jobs[0].project: 'A' is an inner node of the org tree, not a project; jobs belong to a leaf; use one of its leaves: A1, A2"],
    ),
    (
        "a job allowing an unknown gpu_type suggests the closest",
        [("jobs[0].gpu_types", ["h10"])],
        ["t.yaml: jobs[0].gpu_types[0]: unknown gpu_type 'h10'; did you mean 'h100'? use one of: h100, b200"],
    ),
    (
        "a speedup for an unknown gpu_type is rejected",
        [("jobs[0].speedup", {"a100": 1.5})],
        ["t.yaml: jobs[0].speedup.a100: unknown gpu_type 'a100'; did you mean 'h100'? use one of: h100, b200"],
    ),
    (
        "a job needs at least one GPU",
        [("jobs[0].gpus", 0)],
        ["t.yaml: jobs[0].gpus: a job needs at least 1 GPU, got 0; set gpus: 1 or more"],
    ),
    (
        "a gang must divide evenly by gpus_per_node",
        [("jobs[0].gpus", 12), ("jobs[0].gpus_per_node", 8)],
        ["t.yaml: jobs[0].gpus_per_node: 12 GPUs are not a multiple of gpus_per_node 8; ask for a multiple of 8 GPUs, or change gpus_per_node"],
    ),
    (
        "a gang must divide evenly over its nodes",
        [("jobs[0].gpus", 12), ("jobs[0].nodes", 5)],
        ["t.yaml: jobs[0].nodes: 12 GPUs do not divide evenly over 5 nodes; ask for a multiple of 5 GPUs, or change nodes"],
    ),
    (
        "a job larger than every node takes whole nodes and a remainder node (8 + 4)",
        [("jobs[0].gpus", 12)],
        [],
    ),
    (
        "a whole-node gang needs as many nodes of the largest size as it has whole pieces",
        [("nodes[0].name", "h-1"), ("nodes[2]", {"name": "h-[3-5]", "gpu_type": "h100", "gpus": 4}),
         ("jobs[0].gpus", 16)],
        ["t.yaml: jobs[0].gpus: 16 GPUs take 2 whole nodes of 8 GPUs, more than any allowed gpu_type has (h100 has 1 of 8 GPUs, 3 of 4 GPUs); ask for fewer GPUs, or set gpus_per_node to spread the gang over smaller pieces"],
    ),
    (
        "a per-node gang needs distinct nodes, one per piece",
        [("jobs[0].gpus", 12), ("jobs[0].gpus_per_node", 4)],
        ["t.yaml: jobs[0].gpus_per_node: 3 nodes with 4 GPUs each do not fit on any allowed gpu_type (a per-node gang takes distinct nodes; h100 has 2 of 8 GPUs); use a larger gpus_per_node or fewer GPUs"],
    ),
    (
        "gpus_per_node at or above the job's GPUs is a single-node job",
        [("jobs[0].gpus", 4), ("jobs[0].gpus_per_node", 8)],
        [],
    ),
    (
        "a job larger than its gpu_types' capacity can never run",
        [("jobs[0].gpus", 8), ("jobs[0].gpu_types", ["b200"])],
        ["t.yaml: jobs[0].gpus: needs 8 GPUs but no allowed gpu_type has that many (b200: 4); a job runs on one gpu_type; ask for fewer GPUs or allow a larger type"],
    ),
    (
        "min_runtime above the policy cap names both values",
        [("jobs[0].min_runtime", "9h")],
        ["t.yaml: jobs[0].min_runtime: min_runtime 9h is above policy.min_runtime_cap 8h; use at most 8h (or raise policy.min_runtime_cap)"],
    ),
    (
        "a negative duration is rejected",
        [("jobs[0].duration", -5)],
        ["t.yaml: jobs[0].duration: a duration must be >= 0, got -5; use 0 or a positive duration"],
    ),
    (
        "an unparseable duration shows the accepted forms",
        [("policy.lookback", "7 days")],
        ["t.yaml: policy.lookback: expected a duration, got a string ('7 days'); write seconds (3600) or a duration like '90s', '15m', '8h', '7d', '1h30m'"],
    ),
    (
        "a running job without start_time or placement is told to add both",
        [("jobs[1].start_time", DELETE), ("jobs[1].placement", DELETE)],
        [
            "t.yaml: jobs[1]: running job has no start_time; add `start_time:` (when its current run began)",
            "t.yaml: jobs[1]: running job has no placement; add `placement:` with its gpu_type and node GPUs",
        ],
    ),
    (
        "a queued job cannot hold a placement",
        [("jobs[1].state", "queued")],
        [
            "t.yaml: jobs[1].placement: a queued job has no placement; remove `placement:`, or set state: running",
            "t.yaml: jobs[1].start_time: a queued job has no start_time; remove `start_time:`, or set state: running",
        ],
    ),
    (
        "a placement must hold exactly the job's GPUs",
        [("jobs[1].placement.nodes[0].gpus", [0, 1])],
        ["t.yaml: jobs[1].placement.nodes: placement holds 2 GPUs but the job asks for 4; make the placement hold exactly the job's GPUs"],
    ),
    (
        "a placement on an unknown node suggests the closest",
        [("jobs[1].placement.nodes[0].node", "h-3")],
        ["t.yaml: jobs[1].placement.nodes[0].node: unknown node 'h-3'; did you mean 'h-2'? use a node from the nodes section"],
    ),
    (
        "a placement on a node of another gpu_type is rejected",
        [("jobs[1].placement.nodes[0].node", "b-1")],
        ["t.yaml: jobs[1].placement.nodes[0].node: node 'b-1' is a b200 node but the placement's gpu_type is h100; place the job on h100 nodes only"],
    ),
    (
        "a GPU index past the node's GPUs is out of range",
        [("jobs[1].placement.nodes[0].gpus", [0, 1, 2, 8])],
        ["t.yaml: jobs[1].placement.nodes[0].gpus[3]: GPU index 8 is out of range for node 'h-1' with 8 GPUs; use indices 0..7"],
    ),
    (
        "a placement of an unknown gpu_type is rejected",
        [("jobs[1].placement.gpu_type", "a100")],
        ["t.yaml: jobs[1].placement.gpu_type: unknown gpu_type 'a100'; did you mean 'h100'? use one of: h100, b200"],
    ),
    (
        "two running jobs on the same GPU name both jobs",
        [("jobs[2]", RUNNING_R2)],
        ["t.yaml: jobs[2].placement: running jobs 'r2' and 'r1' (jobs[1]) overlap on GPUs h-1:3; give each running job its own GPUs"],
    ),
    (
        "a start before the submit time is rejected",
        [("jobs[1].submit_time", "2026-11-29T11:00:00Z")],
        ["t.yaml: jobs[1].start_time: start_time is before submit_time; a job cannot start before it was submitted; fix one of the two"],
    ),
    (
        "a job id used twice is a duplicate",
        [("jobs[1].id", "q1")],
        ["t.yaml: jobs[1].id: duplicate job id 'q1' (also at t.yaml: jobs[0]); give each job a unique id"],
    ),
    (
        "a command given as a shell string must be an argv list",
        [("jobs[0].command", "python train.py")],
        ["t.yaml: jobs[0].command: a command is an argv list, not a shell string; write it as a list, e.g. [python, train.py, --lr, '3e-4']"],
    ),
    (
        "gpus_per_node larger than any node can never be placed",
        [("jobs[0].gpus", 16), ("jobs[0].gpus_per_node", 16)],
        ["t.yaml: jobs[0].gpus_per_node: gpus_per_node 16 is more than any allowed node has (8); use gpus_per_node <= 8"],
    ),
    (
        "nodes and gpus_per_node that disagree with gpus are rejected",
        [("jobs[0].gpus", 16), ("jobs[0].nodes", 2), ("jobs[0].gpus_per_node", 4)],
        ["t.yaml: jobs[0].nodes: nodes (2) x gpus_per_node (4) != gpus (16); give only one of nodes / gpus_per_node"],
    ),
    (
        "a placement on a gpu_type the job does not allow is rejected",
        [("jobs[1].gpu_types", ["b200"])],
        ["t.yaml: jobs[1].placement.gpu_type: placed on h100 but the job allows only b200; place it on an allowed gpu_type or widen its gpu_types"],
    ),
    (
        "a GPU listed twice in one placement is rejected",
        [("jobs[1].placement.nodes[0].gpus", [0, 1, 1, 2])],
        ["t.yaml: jobs[1].placement.nodes[0].gpus[2]: GPU index 1 listed twice; list each GPU once"],
    ),
    (
        "a node listed twice in one placement is rejected",
        [("jobs[1].placement.nodes[0].gpus", [0, 1]), ("jobs[1].placement.nodes[1]", {"node": "h-1", "gpus": [2, 3]})],
        ["t.yaml: jobs[1].placement.nodes[1].node: node 'h-1' appears twice in the placement; list each node once"],
    ),
    (
        "a placement must give each node gpus_per_node GPUs",
        [("jobs[1].gpus_per_node", 2), ("jobs[1].placement.nodes[0].gpus", [0, 1, 2]),
         ("jobs[1].placement.nodes[1]", {"node": "h-2", "gpus": [0]})],
        [
            "t.yaml: jobs[1].placement.nodes[0].gpus: 3 GPUs on node 'h-1' but the job has gpus_per_node 2; give it exactly 2 GPUs on each node",
            "t.yaml: jobs[1].placement.nodes[1].gpus: 1 GPU on node 'h-2' but the job has gpus_per_node 2; give it exactly 2 GPUs on each node",
        ],
    ),
    (
        "a negative per-type share is rejected",
        [("org.children[1].share_by_type", {"h100": -3})],
        ["t.yaml: org.children[1].share_by_type.h100: negative share -3; shares are relative weights >= 0; use 0 for none"],
    ),
    (
        "a GPU count written as a string is a wrong type",
        [("jobs[0].gpus", "8")],
        ["t.yaml: jobs[0].gpus: expected an integer, got a string ('8'); write a whole number like 8"],
    ),
    (
        "a jobs section that is not a list is rejected",
        [("jobs", {"id": "q1"})],
        ["t.yaml: jobs: expected a list of jobs, got a mapping; write it as a `- item` list"],
    ),
    (
        "a mip_gap above 1 is rejected",
        [("policy.solver.mip_gap", 5)],
        ["t.yaml: policy.solver.mip_gap: must be <= 1, got 5; use a value of at most 1"],
    ),
    (
        "an infinite min_runtime is rejected",
        [("jobs[0].min_runtime", float("inf"))],
        ["t.yaml: jobs[0].min_runtime: expected a duration, got a number (inf); write seconds (3600) or a duration like '90s', '15m', '8h', '7d', '1h30m'"],
    ),
    (
        "an org node without a name is told to add one",
        [("org.children[1].name", DELETE)],
        ["t.yaml: org.children[1].name: missing required key; add `name:`"],
    ),
    (
        "a node without a GPU count is told to add one",
        [("nodes[1].gpus", DELETE)],
        ["t.yaml: nodes[1].gpus: missing required key; add `gpus:`"],
    ),
    (
        "an unknown usage_mode suggests the closest",
        [("policy.usage_mode", "windowed")],
        ["t.yaml: policy.usage_mode: unknown usage_mode 'windowed'; did you mean 'window'? (one of: window, decay)"],
    ),
    (
        "an unknown solver backend lists the known ones",
        [("policy.solver.backend", "gurobi")],
        ["t.yaml: policy.solver.backend: unknown solver backend 'gurobi'; use one of: highs, scip, cpsat, cbc, lp, glop-lp"],
    ),
    (
        "solver threads must be at least one",
        [("policy.solver.threads", 0)],
        ["t.yaml: policy.solver.threads: must be >= 1, got 0; use a value of at least 1"],
    ),
    (
        "missing required sections are each named",
        [("gpu_types", DELETE), ("nodes", DELETE), ("org", DELETE), ("jobs", DELETE)],
        [
            "t.yaml: gpu_types: missing required section; add a `gpu_types:` section",
            "t.yaml: nodes: missing required section; add a `nodes:` section",
            "t.yaml: org: missing required section; add a `org:` section",
        ],
    ),
    (
        "a priority beyond 32 bits is out of range (it would overflow every later epoch)",
        [("jobs[0].priority", 99999999999999999999999)],
        ["t.yaml: jobs[0].priority: must be <= 2147483647, got 99999999999999999999999; use a value of at most 2147483647"],
    ),
    (
        "a node with 10^20 GPUs is out of range",
        [("nodes[1].gpus", 10**20)],
        ["t.yaml: nodes[1].gpus: must be <= 1024, got 100000000000000000000; use a value of at most 1024"],
    ),
    (
        "a share of 1e300 is out of range (sums of siblings would overflow)",
        [("org.children[1].share", 1e300)],
        ["t.yaml: org.children[1].share: must be <= 1e+09, got 1e+300; use a value of at most 1e+09"],
    ),
    (
        "a speedup of a million is out of range",
        [("jobs[0].speedup", {"h100": 1e6})],
        ["t.yaml: jobs[0].speedup.h100: must be <= 1000, got 1e+06; use a value of at most 1000"],
    ),
    (
        "a submit time in the year 3 billion is out of range",
        [("jobs[0].submit_time", 1e20)],
        ["t.yaml: jobs[0].submit_time: time 1e+20 is out of range; use seconds from 0 to 4102444800 or an ISO-8601 time from 1970 to 2100"],
    ),
    (
        "a lookback of a thousand years is out of range",
        [("policy.lookback", "365000d")],
        ["t.yaml: policy.lookback: duration '365000d' is out of range; use at most 315576000 seconds (ten years)"],
    ),
    (
        "a job id with a control character is refused",
        [("jobs[0].id", "q1\x07")],
        ["t.yaml: jobs[0].id: the value contains the control character '\\x07'; use printable UTF-8 text without control or invisible format characters, at most 200 characters"],
    ),
    (
        "a job id of 300 characters is refused",
        [("jobs[0].id", "q" * 300)],
        ["t.yaml: jobs[0].id: the value is 300 characters long, more than 200; use printable UTF-8 text without control or invisible format characters, at most 200 characters"],
    ),
    (
        "a command of 5000 arguments is refused",
        [("jobs[0].command", ["x"] * 5000)],
        ["t.yaml: jobs[0].command: the command has 5000 arguments, more than 4096; put long inputs in a file and pass its path"],
    ),
    (
        "solver threads beyond 1024 are refused",
        [("policy.solver.threads", 4096)],
        ["t.yaml: policy.solver.threads: must be <= 1024, got 4096; use a value of at most 1024"],
    ),
    (
        "a negative max_reservations is refused",
        [("policy.max_reservations", -1)],
        ["t.yaml: policy.max_reservations: must be >= 0, got -1; use a value of at least 0"],
    ),
    (
        "max_reservations must be a whole number",
        [("policy.max_reservations", 2.5)],
        ["t.yaml: policy.max_reservations: expected an integer, got a number (2.5); write a whole number like 8"],
    ),
    (
        "max_reservations beyond 64 is refused",
        [("policy.max_reservations", 100)],
        ["t.yaml: policy.max_reservations: must be <= 64, got 100; use a value of at most 64"],
    ),
    (
        "max_reservations 0 (lookahead off) is valid",
        [("policy.max_reservations", 0)],
        [],
    ),
    (
        "several problems are all reported, in file order",
        [("jobs[0].gpus", -1), ("jobs[0].project", "Z"), ("nodes[1].state", "sideways")],
        [
            "t.yaml: nodes[1].state: unknown node state 'sideways'; use one of: up, drain, down",
            "t.yaml: jobs[0].project: unknown project 'Z'; use one of the org tree's leaves: A1, A2, B",
            "t.yaml: jobs[0].gpus: a job needs at least 1 GPU, got -1; set gpus: 1 or more",
        ],
    ),
]


def test_the_base_config_is_valid():
    config, extras = parse_config(base(), SRC)
    assert [j.id for j in config.jobs] == ["q1", "r1"]
    assert extras == {}


@pytest.mark.parametrize("edits, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_config_gives_located_messages(edits, expected):
    data = edited(*edits)
    if not expected:
        parse_config(data, SRC)
        return
    with pytest.raises(ConfigError) as err:
        parse_config(data, SRC)
    assert err.value.problems == expected


def test_a_long_list_of_choices_shows_the_first_few_and_a_count():
    data = base()
    data["org"]["children"][1]["children"] = [{"name": f"B{i:02d}"} for i in range(10)]
    data["jobs"][0]["project"] = "nowhere"
    with pytest.raises(ConfigError) as err:
        parse_config(data, SRC)
    assert err.value.problems == [
        "t.yaml: jobs[0].project: unknown project 'nowhere'; use one of the org tree's leaves: "
        "A1, A2, B00, B01, B02, B03, ... (12 in all)"
    ]


def test_the_error_message_lists_every_problem_under_one_heading():
    with pytest.raises(ConfigError) as err:
        parse_config(edited(("jobs[0].gpus", 0), ("nodes[1].gpus", 0)), SRC)
    assert str(err.value).splitlines() == [
        "2 problems found in the configuration:",
        "  - t.yaml: nodes[1].gpus: a node must have at least 1 GPU, got 0; give its GPU count, "
        "or remove the node (use state: down for a dead one)",
        "  - t.yaml: jobs[0].gpus: a job needs at least 1 GPU, got 0; set gpus: 1 or more",
    ]


# --------------------------------------------------------------------------- YAML text files

YAML_CASES = [
    (
        "a YAML syntax error gives line and column",
        "gpu_types:\n  - {name: h100\nnodes: []\n",
        # the parser's own words differ between libyaml and pure-Python PyYAML: <ANY>
        ["{f}: line 3, column 6: YAML syntax error: while parsing a flow mapping, <ANY>"
         "; fix the YAML syntax there (indentation, quotes, colons)"],
    ),
    (
        "an empty file says so",
        "# nothing here yet\n",
        ["{f}: the file is empty; add the config sections (gpu_types, nodes, org, ...)"],
    ),
    (
        "a key repeated in one mapping is caught before YAML drops one",
        "gpu_types: [{name: h100}]\nnodes: [{name: n1, gpu_type: h100, gpus: 8}]\n"
        "org: {name: r}\norg: {name: s}\n",
        ["{f}: line 4: duplicate key 'org' (first at line 3); YAML would keep only the last one; "
         "remove or merge one of them"],
    ),
    (
        "an exponent number YAML 1.1 reads as text says how to write it",
        "gpu_types: [{name: h100}]\nnodes: [{name: n1, gpu_type: h100, gpus: 8}]\n"
        "org: {name: r, children: [{name: a, share: 2e3}]}\n",
        ["{f}: org.children[0].share: '2e3' is text to YAML 1.1 (an exponent needs a decimal "
         "point and a sign); write it as 2.0e+3"],
    ),
    (
        "a name that ends with a space is not a second name that prints like the first",
        "gpu_types: [{name: h100}]\nnodes: [{name: n1, gpu_type: h100, gpus: 8}]\n"
        "org: {name: r, children: [{name: a, share: 1}, {name: 'a ', share: 1}]}\n",
        ["{f}: org.children[1].name: 'a ' starts or ends with white space; names are compared "
         "exactly: write 'a'"],
    ),
    (
        "a node name with a space in it is refused",
        "gpu_types: [{name: h100}]\nnodes: [{name: 'n 1', gpu_type: h100, gpus: 8}]\n"
        "org: {name: r, children: [{name: a, share: 1}]}\n",
        ["{f}: nodes[0].name: 'n 1' contains white space; node names are host names: no spaces "
         "(a list of names is a range like h100-[001-128] or separate entries)"],
    ),
    (
        "a top level that is not a mapping is rejected",
        "- gpu_types\n- nodes\n",
        ["{f}: expected a mapping of sections (gpu_types, nodes, org, ...), got a list; write it as `key: value` lines"],
    ),
]


@pytest.mark.parametrize("text, expected", [c[1:] for c in YAML_CASES], ids=[c[0] for c in YAML_CASES])
def test_bad_yaml_file_gives_located_messages(tmp_path, text, expected):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(f)
    patterns = [re.escape(e.replace("{f}", str(f))).replace(re.escape("<ANY>"), ".+") for e in expected]
    assert len(err.value.problems) == len(patterns), err.value.problems
    for problem, pattern in zip(err.value.problems, patterns):
        assert re.fullmatch(pattern, problem), problem


def test_a_missing_path_is_reported(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "nope.yaml")
    assert err.value.problems == [f"{tmp_path / 'nope.yaml'}: no such file or directory; check the path"]
