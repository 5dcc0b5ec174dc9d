"""The model as arrays: shapes per job and type, named constraint families, the weights."""

from __future__ import annotations

import numpy as np
import pytest

from optalloc.model.build import build_model
from optalloc.model.objective.impact import compute_impact
from optalloc.model.order import fair_tree_rank, project_order
from optalloc.model.requirements import PIECES, SMALL, WHOLE, compute_requirements
from optalloc.types import Job, NodeState, OrgNode
from test_epoch_toy import H, flat_org, nodes_of, running, snapshot

SHAPES = [
    # (name, job kwargs, expected (shape, size, pieces, rem, fits) on an 8-GPU-node type)
    ("a job that fits one node is single-node", dict(gpus=6), (SMALL, 6, 1, 0, True)),
    ("a multi-node job takes whole nodes", dict(gpus=16), (WHOLE, 8, 2, 0, True)),
    ("an uneven multi-node job takes whole nodes and a remainder node",
     dict(gpus=12), (WHOLE, 8, 1, 4, True)),
    ("gpus_per_node below the node size packs pieces", dict(gpus=8, gpus_per_node=4),
     (PIECES, 4, 2, 0, True)),
    ("gpus_per_node equal to the job is single-node", dict(gpus=4, gpus_per_node=4),
     (SMALL, 4, 1, 0, True)),
    ("a gang larger than the up nodes does not fit", dict(gpus=40), (WHOLE, 8, 5, 0, False)),
    ("a remainder needs one more node than the whole ones", dict(gpus=28),
     (WHOLE, 8, 3, 4, True)),
    ("gpus_per_node above the node size does not fit", dict(gpus=16, gpus_per_node=16),
     (SMALL, 16, 1, 0, False)),
    ("gpus_per_node that does not divide the job does not fit", dict(gpus=6, gpus_per_node=4),
     (PIECES, 4, 1, 0, False)),
]


@pytest.mark.parametrize("name,kw,expect", SHAPES, ids=[s[0] for s in SHAPES])
def test_job_shapes(name, kw, expect):
    snap = snapshot(nodes_of(4, 8), flat_org({"A": 1}), [Job("j", "A", min_runtime_s=H, **kw)])
    req = compute_requirements(snap)
    got = (int(req.shape[0, 0]), int(req.size[0, 0]), int(req.pieces[0, 0]),
           int(req.rem[0, 0]), bool(req.fits[0, 0]))
    assert got == expect


def test_jobs_on_down_nodes_are_displaced_and_may_start_elsewhere():
    nodes = nodes_of(1, 8) + nodes_of(1, 8, prefix="x", state=NodeState.DOWN)
    jobs = [running("gone", "A", "h100", [("x00", range(2))], start=0.0),
            running("stay", "A", "h100", [("n00", range(2))], start=0.0)]
    req = compute_requirements(snapshot(nodes, flat_org({"A": 1}), jobs))
    assert req.displaced.tolist() == [True, False]
    assert req.run_job.tolist() == [1]
    # "gone" starts again as a queued job would; "stay" (past its protection) may restart
    assert req.cand_job[~req.cand_restart].tolist() == [0]
    assert req.cand_job[req.cand_restart].tolist() == [1]


def test_constraint_families_are_named_by_domain():
    jobs = [Job("g", "A", 16, min_runtime_s=H), Job("s", "B", 2, min_runtime_s=H),
            Job("t", "B", 4, min_runtime_s=H), Job("p", "B", 8, gpus_per_node=4, min_runtime_s=H),
            running("r", "A", "h100", [("n00", range(4))], start=9.9 * H)]
    em = build_model(snapshot(nodes_of(3, 8), flat_org({"A": 1, "B": 1}), jobs))
    labels = [lab for lab, _, _ in em.lm.row_blocks]
    assert labels == ["gang[h100]", "pack[h100,2]", "pack[h100,4]", "pieces[h100,4,2]",
                      "spread[h100,4,2]", "capacity[h100]", "share[A,h100]", "share[B,h100]",
                      "order"]
    sizes = {k: b - a for k, (a, b) in em.lm.var_blocks.items()}
    # one per-node gang class (h100, 4 GPUs per node, 2 pieces): its count n, and its pieces
    # per node y on each of the 3 nodes
    assert sizes == {"x": 4, "k": 1, "z": 3, "u": 6, "n": 1, "y": 3, "m": 2}
    assert em.lm.integer.all()
    # the protected running job must stay
    assert em.lm.lb[em.k].tolist() == [1.0]
    # B's order: the 2-GPU job ahead of the 4-GPU one of the same shape must start first
    assert list(zip(em.prec_a.tolist(), em.prec_b.tolist())) == [(1, 2)]


def test_fair_tree_rank_compares_siblings_level_by_level():
    org = OrgNode("root", children=(
        OrgNode("P", children=(OrgNode("A"), OrgNode("B"))), OrgNode("C")))
    snap = snapshot(nodes_of(1, 8), org, [], usage={"P": 1.0, "A": 2.0, "B": 0.0, "C": 20.0})
    rank = fair_tree_rank(snap)
    idx = snap.org.index
    # P (1.0) before C (20.0); inside P, B (0.0) before A (2.0)
    assert [rank[idx[n]] for n in ("B", "A", "C")] == [0, 1, 2]


def test_a_projects_order_is_priority_then_running_then_submit():
    jobs = [Job("a", "A", 1, priority=0, submit_time=5.0), Job("b", "A", 1, priority=2),
            Job("c", "A", 1, priority=0, submit_time=1.0), Job("d", "A", 1, priority=0,
                                                                 submit_time=1.0),
            Job("e", "B", 1),
            running("r", "A", "h100", [("n00", [0])], start=0.0)]
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1, "B": 1}), jobs)
    assert project_order(snap).tolist() == [4, 0, 2, 3, 0, 1]


def test_unallocated_value_never_outweighs_one_allocated_gpu_per_node():
    jobs = [Job("alloc", "A", 1, min_runtime_s=H), Job("unal", "A", 8, min_runtime_s=0.0,
                                                         speedup={})]
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1}), jobs, usage={"A": 50.0})
    imp = compute_impact(snap)
    assert imp.value[0, 0] > 4 * imp.value[1, 0]
    assert np.all(imp.churn == 0)
