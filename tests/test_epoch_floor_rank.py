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
