"""Interchangeable empty nodes are filled in node order whatever vertex the solver returned
(optalloc.plan.symmetry): the placement of a solution and of its mirror image are the same."""

from __future__ import annotations

import numpy as np

from optalloc.model.build import build_model
from optalloc.plan.place import place
from optalloc.plan.symmetry import canonical_empty_nodes
from optalloc.types import Job

from test_epoch_toy import H, flat_org, nodes_of, running, snapshot


def _solution(em, on: dict[int, dict[int, int]], start: list[str]) -> np.ndarray:
    """A model point: the named jobs start, node -> {size: count} single-node slots."""
    x = np.zeros(em.lm.n_vars)
    for c, j in enumerate(em.req.cand_job):
        if em.snap.jobs[j].id in start:
            x[em.x[c]] = 1.0
    for col, n, s in zip(em.u, em.u_node, em.u_size):
        x[col] = on.get(int(n), {}).get(int(s), 0)
    x[em.k] = 1.0
    return x


def _nodes(placed, snap) -> dict[str, list[str]]:
    return {snap.jobs[j].id: [a.node for a in p.nodes] for j, p in placed.placements.items()}


def test_a_job_the_solver_put_on_the_second_of_two_empty_nodes_goes_on_the_first():
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1}), [Job("j", "A", 8, min_runtime_s=H)])
    em = build_model(snap)
    x = _solution(em, {1: {8: 1}}, ["j"])
    assert em.lm.violation(x) <= 1e-9
    assert _nodes(place(em, x), snap) == {"j": ["n00"]}
    assert _nodes(place(em, _solution(em, {0: {8: 1}}, ["j"])), snap) == {"j": ["n00"]}


def test_the_heaviest_load_takes_the_first_node_and_loads_move_whole():
    # three empty nodes; the solver put a 2-GPU job on n00 and two 4-GPU jobs on n02
    jobs = [Job("a", "A", 2, min_runtime_s=H), Job("b", "A", 4, min_runtime_s=H),
            Job("c", "A", 4, min_runtime_s=H, submit_time=1.0)]
    snap = snapshot(nodes_of(3, 8), flat_org({"A": 1}), jobs)
    em = build_model(snap)
    x = _solution(em, {0: {2: 1}, 2: {4: 2}}, ["a", "b", "c"])
    y = canonical_empty_nodes(em, x)
    assert em.lm.violation(y) <= 1e-9 and em.lm.objective(y) == em.lm.objective(x)
    got = _nodes(place(em, x, backfill=False), snap)
    assert got == {"a": ["n01"], "b": ["n00"], "c": ["n00"]}


def test_nodes_something_runs_on_keep_the_solvers_choice():
    # n00 holds a running job: n00 and n01 are not interchangeable, and nothing moves
    snap = snapshot(nodes_of(3, 8), flat_org({"A": 1}),
                    [running("r", "A", "h100", [("n00", range(4))], start=9 * H),
                     Job("j", "A", 4, min_runtime_s=H)])
    em = build_model(snap)
    x = _solution(em, {0: {4: 1}}, ["j"])
    assert np.array_equal(canonical_empty_nodes(em, x), x)
    x2 = _solution(em, {2: {4: 1}}, ["j"])  # n01 and n02 are interchangeable
    assert canonical_empty_nodes(em, x2)[em.u][(em.u_node == 1) & (em.u_size == 4)].sum() == 1
    # and the placement packs: the job takes n00's 4 free GPUs (best fit), both empty nodes
    # stay whole (optalloc.plan.fit.slot_or_best_fit)
    assert _nodes(place(em, x2, backfill=False), snap) == {"j": ["n00"]}
