"""The team's order where a job's shape differs by gpu_type, where a gang's remainder node is
room, and among unallocated work (optalloc.model.job_groups; DESIGN.md rule 3). Three cases a
helper's review found at stop 42, each asserting the whole outcome beside greedy's (the
published sort), which already ran the higher-priority job in every one."""

from __future__ import annotations

from optalloc.epoch import run_epoch
from optalloc.sim.invariants import check_plan
from optalloc.sim.policies.greedy import GreedyScheduler
from optalloc.types import Job, Node
from tests.test_epoch_toy import H, flat_org, nodes_of, running, snapshot


def _decide(snap):
    plan = run_epoch(snap)
    check_plan(snap, plan)
    greedy = GreedyScheduler().decide(snap)
    return plan, sorted(p.job_id for p in greedy.placements)


def _starts(plan) -> list[tuple[str, str]]:
    return sorted((p.job_id, p.gpu_type) for p in plan.placements)


def test_a_job_whose_shape_differs_by_type_waits_behind_its_higher_priority_teammate():
    """lo (priority 0, 6 GPUs) is a whole-node gang 4 + 2 on the h100 nodes of 4 and 2 and
    one node on b200; hi (priority 1, 4 GPUs) is one node on either. h00 holds a protected
    job, so only b200 can take either: hi runs there. Before, lo's shape class differed by
    type, so it was linked to no job ahead of it and took b200 while hi waited; its message
    said other projects' floors held h100 GPUs where there is no other project."""
    nodes = [Node("h00", "h100", 4), Node("h01", "h100", 2), Node("b00", "b200", 8)]
    jobs = [running("r", "A", "h100", [("h00", range(4))], start=9.5 * H, min_runtime_s=2 * H),
            Job("lo", "A", 6, min_runtime_s=2 * H, priority=0, submit_time=0.0),
            Job("hi", "A", 4, min_runtime_s=2 * H, priority=1, submit_time=5.0)]
    snap = snapshot(nodes, flat_org({"A": 1}), jobs, types=("h100", "b200"))
    plan, greedy = _decide(snap)
    assert _starts(plan) == [("hi", "b200"), ("r", "h100")]
    assert greedy == ["hi", "r"]
    assert plan.preemptions == ()
    (lo,) = plan.pending
    assert (lo.job_id, lo.code.value) == ("lo", "LowerPriorityInProject")
    assert lo.message == (
        "hi of project A with a higher priority than 0, starts on b200 this epoch with 4 "
        "GPUs; the team's order starts it first, and this 6-GPU job does not fit beside it "
        "(4 b200 GPUs are free)")
    assert lo.details["held_by"] == ["hi"]


def test_a_per_node_gang_fits_in_a_whole_node_gangs_remainder_node_and_goes_first():
    """hi (priority 1) is 2 + 2 on two nodes; lo (priority 0, 12 GPUs) is 8 + 4 on the two
    8-GPU nodes, one of which holds a protected 2-GPU job. hi fits lo's two nodes (the
    remainder node has >= 2 GPUs), so it goes first, as under greedy. Before, only lo's whole
    nodes were counted as room (one), no link was made, and lo ran."""
    jobs = [running("r", "A", "h100", [("n01", range(2))], start=9.5 * H, min_runtime_s=2 * H),
            Job("lo", "A", 12, min_runtime_s=2 * H, priority=0, submit_time=0.0),
            Job("hi", "A", 4, gpus_per_node=2, min_runtime_s=2 * H, priority=1,
                submit_time=1.0)]
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1}), jobs)
    plan, greedy = _decide(snap)
    assert [p.job_id for p in sorted(plan.placements, key=lambda p: p.job_id)] == ["hi", "r"]
    assert greedy == ["hi", "r"]
    assert plan.preemptions == ()
    assert {r.job_id: r.code.value for r in plan.pending} == {"lo": "LowerPriorityInProject"}


def test_unallocated_work_keeps_its_teams_order_among_itself():
    """Two unallocated jobs of U on one 8-GPU node: hi (priority 5, 2 GPUs) and lo (priority
    0, 8 GPUs). hi runs and lo waits for GPUs, as under greedy. Before, the `order` rows
    linked allocated work only, and lo took the node (8 GPUs busy) while hi waited."""
    jobs = [Job("hi", "U", 2, min_runtime_s=0.0, priority=5, submit_time=0.0),
            Job("lo", "U", 8, min_runtime_s=0.0, priority=0, submit_time=1.0)]
    snap = snapshot(nodes_of(1, 8), flat_org({"U": 1}), jobs)
    plan, greedy = _decide(snap)
    assert _starts(plan) == [("hi", "h100")]
    assert greedy == ["hi"]
    (lo,) = plan.pending
    assert (lo.job_id, lo.code.value) == ("lo", "UnallocatedYields")
    assert "8 GPUs needed, h100: 6 free" in lo.message


def test_allocated_work_does_not_wait_for_its_teams_unallocated_work():
    """Unallocated work keeps its order only among itself: A's priority-0 allocated 8-GPU job
    starts although A's priority-5 unallocated 2-GPU job ahead of it in priority waits (it
    yields to allocated work, rule 4)."""
    jobs = [Job("u", "A", 2, min_runtime_s=0.0, priority=5, submit_time=0.0),
            Job("a", "A", 8, min_runtime_s=H, priority=0, submit_time=1.0)]
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1}), jobs)
    plan, greedy = _decide(snap)
    assert _starts(plan) == [("a", "h100")]
    assert greedy == ["a"]
    assert {r.job_id: r.code.value for r in plan.pending} == {"u": "UnallocatedYields"}
