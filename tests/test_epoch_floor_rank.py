"""Floors in the Fair-Tree order (DESIGN.md rule 1; impact.RANK_TILT): where whole jobs make
two floors exclusive, the one the scheme ranks first is met unless the other is more than
twice its size. Until stop 37 the number of floor GPUs met came first, with the rank as a
tie-break only: a helper's random search (stop 36) found A's 8-GPU job (usage ratio 2.0, 4
floor GPUs met) running while B, ranked first (ratio 0.1), got none of its floor of 3; greedy
(the published sort) started B's job. Each case asserts the whole outcome beside greedy's."""

from __future__ import annotations

import pytest

from optalloc.epoch import run_epoch
from optalloc.model.build import build_model
from optalloc.sim.invariants import check_plan
from optalloc.sim.policies.greedy import GreedyScheduler
from optalloc.types import OrgNode
from tests.test_epoch_toy import flat_org, nodes_of, pending_codes, queued, snapshot


def _one_node(shares: dict, a_gpus: int, b_gpus: int):
    """One 8-GPU node; A (usage ratio 2.0) wants it for one job, B (0.1, ranked first) for
    another; the two do not fit together."""
    jobs = queued("A", 1, a_gpus) + queued("B", 1, b_gpus)
    return snapshot(nodes_of(1, 8), flat_org(shares), jobs, usage={"A": 2.0, "B": 0.1})


def _decide(snap):
    plan = run_epoch(snap)
    check_plan(snap, plan)
    return plan, sorted(p.job_id for p in GreedyScheduler().decide(snap).placements)


def _floors(snap) -> dict:
    em = build_model(snap)
    return {n: float(em.floor[i, 0]) for i, n in enumerate(snap.org.names) if i}


@pytest.mark.parametrize("b_gpus", [3, 4])
def test_the_better_ranked_floor_is_met_where_the_other_is_larger_but_not_twice(b_gpus):
    snap = _one_node({"A": 0.5, "B": 0.5}, 8, b_gpus)
    assert _floors(snap) == {"A": 4.0, "B": float(b_gpus)}
    plan, greedy = _decide(snap)
    assert sorted(p.job_id for p in plan.placements) == ["B00"] == greedy
    assert plan.preemptions == ()
    assert pending_codes(plan) == {"A00": "WaitingForCapacity"}
    assert plan.report.status == "optimal"
    msg = {p.job_id: p.message for p in plan.pending}["A00"]
    assert "below its h100 floor (0 of 4 GPUs)" in msg and "B (" in msg
    # A's floor is the one not met, and it is reported
    assert [(v.org_node, v.floor_gpus, v.got_gpus)
            for v in plan.floor_violations] == [("A", 4.0, 0.0)]


def test_a_floor_more_than_twice_the_size_of_a_better_ranked_one_is_met_first():
    """The tilt's limit, where greedy differs: A's 8-GPU job meets 6 floor GPUs, more than
    twice B's 2, so it runs and B, ranked first, waits below its floor (reported). No finite
    weight ranks floors of any sizes; comparing plans lexicographically by the floors in rank
    order was measured and not kept (README)."""
    snap = _one_node({"A": 0.75, "B": 0.25}, 8, 2)
    assert _floors(snap) == {"A": 6.0, "B": 2.0}
    plan, greedy = _decide(snap)
    assert sorted(p.job_id for p in plan.placements) == ["A00"]
    assert greedy == ["B00"]
    assert {p.job_id: (p.code.value, p.message) for p in plan.pending} == {"B00": (
        "WaitingForCapacity",
        "project B is below its floor (0 of 2 h100 GPUs; its target 2), but 2 GPUs of h100 are "
        "not free, and the plan preempts none for it: 0 h100 GPUs are protected, the rest are "
        "held by A (8 of target 6): past a target with whole jobs, which cannot shrink to it "
        "(0 free)")}
    assert [(v.org_node, v.floor_gpus, v.got_gpus)
            for v in plan.floor_violations] == [("B", 2.0, 0.0)]


def test_with_equal_ratios_the_larger_floor_is_met():
    """No rank between them: the number of floor GPUs met decides (4 against 3)."""
    jobs = queued("A", 1, 8) + queued("B", 1, 3)
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 0.5, "B": 0.5}), jobs,
                    usage={"A": 0.5, "B": 0.5})
    plan, _ = _decide(snap)
    assert sorted(p.job_id for p in plan.placements) == ["A00"]
    assert pending_codes(plan) == {"B00": "WaitingForCapacity"}


# A helper's random search (stop 37) found the factor diluted: tree_position spreads [0, 1]
# over every org node, so idle projects, and a program's own floor, took places between two
# that compete (1.2x and 1.57x where 2x was meant). The tilt now spreads over the projects with
# work, an inner node at its best such project's place (impact.tilt_position).
ONE_PROJECT_PROGRAMS = OrgNode("root", children=(
    OrgNode("P1", share=3, children=(OrgNode("a1"),)),
    OrgNode("P2", share=5, children=(OrgNode("b1"),))))
SHALLOW = OrgNode("root", children=(
    OrgNode("X", share=3), OrgNode("P2", share=5, children=(OrgNode("b1"),))))


@pytest.mark.parametrize("org,first,other,usage", [
    (flat_org({"A": 3, "B": 4, "C": 0.5, "D": 0.5}), "A", "B",
     {"A": 0.1, "B": 0.5, "C": 1.0, "D": 2.0}),  # C and D idle, ranked last
    (ONE_PROJECT_PROGRAMS, "a1", "b1", {"P1": 0.1, "a1": 0.1, "P2": 0.5, "b1": 0.5}),
    (SHALLOW, "X", "b1", {"X": 0.1, "P2": 0.5, "b1": 0.5}),
], ids=["idle-projects", "one-project-programs", "shallow-project"])
def test_the_better_ranked_floor_wins_whatever_else_the_tree_holds(org, first, other, usage):
    """One 8-GPU node: `first` (ranked first) wants 3 GPUs, its floor 3; `other` an 8-GPU
    job meeting 4 or 5 of its floor (under twice 3)."""
    jobs = queued(first, 1, 3) + queued(other, 1, 8)
    snap = snapshot(nodes_of(1, 8), org, jobs, usage=usage)
    plan, greedy = _decide(snap)
    assert sorted(p.job_id for p in plan.placements) == [f"{first}00"] == greedy
    assert pending_codes(plan) == {f"{other}00": "WaitingForCapacity"}
