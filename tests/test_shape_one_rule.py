"""One gang-shape rule (optalloc/shape.py, models/formulation.md "Shapes") gives one answer
everywhere: the config's validation, the epoch model's requirements, the baselines' chunking
and the placements every policy makes. A 20-GPU job on 8-GPU nodes is 8 + 8 + 4."""

from __future__ import annotations

import numpy as np
import pytest

from optalloc.config import ConfigError, parse_config
from optalloc.model.requirements import compute_requirements
from optalloc.plan.freemap import gang_shape
from optalloc.shape import chunks, fits_nodes, shapes
from optalloc.sim.policies import make_policy
from optalloc.snapshot import build_snapshot
from optalloc.types import Config, GpuType, Job, Node, OrgNode, Policy, SolverSettings

# gpus, gpus_per_node, GPUs of each node (one type) -> chunks (None: no valid shape there),
# and whether these nodes can hold it at once
CASES = [
    (20, None, (8, 8, 8), [8, 8, 4], True),
    (20, None, (8, 8), [8, 8, 4], False),  # a remainder node is a distinct node
    (20, None, (8, 8, 4), [8, 8, 4], True),  # the remainder fits the smaller node
    (16, None, (8, 8), [8, 8], True),
    (6, None, (8,), [6], True),
    (20, 8, (8, 8, 8), None, False),  # gpus_per_node must divide the job
    (20, 4, (8,) * 5, [4] * 5, True),  # per-node pieces on distinct nodes
    (12, 4, (8, 8), [4, 4, 4], False),  # ... so two 8-GPU nodes cannot hold three of them
    (4, 8, (8,), [4], True),  # gpus_per_node at or above the job: one node
    (16, 16, (8, 8), None, False),  # one node of 16 asked, none that big
]
IDS = [f"{g} GPUs, per node {p}, nodes {n}" for g, p, n, _, _ in CASES]


@pytest.mark.parametrize("gpus, gpn, nodes, want, fits", CASES, ids=IDS)
def test_the_shape_rule_and_its_fit(gpus, gpn, nodes, want, fits):
    assert chunks(gpus, gpn, max(nodes)) == want
    shape, size, pieces, rem, valid = shapes([gpus], [gpn or 0], [max(nodes)])
    got = bool(valid[0, 0] and fits_nodes(size[0, 0], pieces[0, 0], rem[0, 0], nodes))
    assert got == fits


def _config_doc(gpus, gpn, nodes) -> dict:
    job = {"id": "j", "project": "A", "gpus": gpus}
    if gpn:
        job["gpus_per_node"] = gpn
    return {
        "gpu_types": [{"name": "h100"}],
        "nodes": [{"name": f"n{i}", "gpu_type": "h100", "gpus": g} for i, g in enumerate(nodes)],
        "org": {"name": "root", "children": [{"name": "A"}]},
        "jobs": [job],
    }


@pytest.mark.parametrize("gpus, gpn, nodes, want, fits", CASES, ids=IDS)
def test_the_config_accepts_exactly_the_jobs_whose_shape_fits(gpus, gpn, nodes, want, fits):
    doc = _config_doc(gpus, gpn, nodes)
    if fits:
        config, _ = parse_config(doc, "t.yaml")
        assert config.jobs[0].gpus == gpus
    else:
        with pytest.raises(ConfigError) as err:
            parse_config(doc, "t.yaml")
        assert [p.split(":")[1].strip() for p in err.value.problems] in (
            ["jobs[0].gpus"], ["jobs[0].gpus_per_node"])


def cluster(nodes, jobs=()) -> Config:
    return Config(
        gpu_types=(GpuType("h100"),),
        nodes=tuple(Node(f"n{i}", "h100", g) for i, g in enumerate(nodes)),
        org=OrgNode("root", children=(OrgNode("A"),)),
        policy=Policy(solver=SolverSettings(backend="highs", time_limit_s=10)),
        jobs=tuple(jobs),
    )


@pytest.mark.parametrize("gpus, gpn, nodes, want, fits", CASES, ids=IDS)
def test_the_model_and_the_baselines_see_the_same_shape(gpus, gpn, nodes, want, fits):
    snap = build_snapshot(cluster(nodes, [Job("j", "A", gpus, gpus_per_node=gpn,
                                              min_runtime_s=600.0)]), 0.0)
    req = compute_requirements(snap)
    model = None
    if want is not None:
        model = [int(req.size[0, 0])] * int(req.pieces[0, 0]) + (
            [int(req.rem[0, 0])] if req.rem[0, 0] else [])
    assert model == want == gang_shape(gpus, gpn, max(nodes))


@pytest.mark.parametrize("policy", ["priority", "greedy", "ilp"])
def test_every_policy_places_a_20_gpu_job_on_8_gpu_nodes_as_8_8_4(policy):
    snap = build_snapshot(cluster((8, 8, 8), [Job("j", "A", 20, min_runtime_s=600.0)]), 0.0)
    plan = make_policy(policy).decide(snap)
    (pl,) = plan.placements
    assert sorted((len(a.gpus) for a in pl.nodes), reverse=True) == [8, 8, 4]
    assert len(set(pl.node_names)) == 3 and np.all([len(set(a.gpus)) == len(a.gpus) for a in pl.nodes])


@pytest.mark.parametrize("gpus, gpn, nodes, want, fits", CASES, ids=IDS)
def test_the_model_the_optimizer_and_the_greedy_baseline_fit_exactly_what_the_rule_fits(
        gpus, gpn, nodes, want, fits):
    snap = build_snapshot(cluster(nodes, [Job("j", "A", gpus, gpus_per_node=gpn,
                                              min_runtime_s=600.0)]), 0.0)
    greedy = bool(make_policy("greedy").decide(snap).placements)
    ilp = bool(make_policy("ilp").decide(snap).placements)
    assert (greedy, ilp, bool(compute_requirements(snap).fits[0, 0])) == (fits, fits, fits)
