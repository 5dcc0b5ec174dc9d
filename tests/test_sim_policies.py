"""The baseline policies, rule by rule: one named case per rule of greedy (models/greedy.md)
and of priority, each asserting the whole outcome (who runs where, who is preempted with which
code, why the others wait)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from optalloc.sim.invariants import check_plan
from optalloc.sim.policies import make_policy
from optalloc.sim.policies.greedy import greedy_order, project_rank
from optalloc.plan.freemap import gang_shape
from optalloc.snapshot import build_snapshot
from optalloc.types import (
    Config,
    GpuType,
    Job,
    JobState,
    Node,
    NodeAlloc,
    NodeState,
    OrgNode,
    Placement,
    Policy,
    ReasonCode,
)

HOUR = 3600.0


def config(n_nodes=2, gpus=8, states=(), org=None):
    nodes = tuple(
        Node(f"n{i + 1}", "h100", gpus, states[i] if i < len(states) else NodeState.UP)
        for i in range(n_nodes)
    )
    org = org or OrgNode("root", children=(OrgNode("A"), OrgNode("B"), OrgNode("C")))
    return Config(gpu_types=(GpuType("h100"),), nodes=nodes, org=org, policy=Policy(grace_s=30))


def job(jid, project="A", gpus=8, mr=HOUR, submit=0.0, prio=0, **kw):
    return Job(jid, project, gpus, min_runtime_s=mr, submit_time=submit, priority=prio, **kw)


def running(j: Job, start: float, *allocs: tuple[str, tuple[int, ...]]) -> Job:
    pl = Placement(j.id, "h100", tuple(NodeAlloc(n, g) for n, g in allocs), allocated=j.allocated)
    return dataclasses.replace(j, state=JobState.RUNNING, start_time=start, placement=pl)


ALL8 = tuple(range(8))
LO4, HI4 = (0, 1, 2, 3), (4, 5, 6, 7)


def decide(policy, cfg, jobs, ratios=None, now=10 * HOUR):
    snap = build_snapshot(cfg, now, jobs, ratios or {})
    plan = make_policy(policy).decide(snap)
    check_plan(snap, plan)  # every plan is a valid schedule
    return plan


def outcome(plan):
    """The whole plan in a comparable form: placements {job: ((node, gpus), ...)},
    preemptions {job: (code, needed_by)}, pending {job: code}."""
    return (
        {p.job_id: tuple((a.node, a.gpus) for a in p.nodes) for p in plan.placements},
        {p.job_id: (p.code, p.needed_by) for p in plan.preemptions},
        {p.job_id: p.code for p in plan.pending},
    )


# --------------------------------------------------------------------------- gang shapes


@pytest.mark.parametrize(
    "gpus, per_node, size, shape",
    [
        (4, None, 8, [4]),
        (8, None, 8, [8]),
        (16, None, 8, [8, 8]),
        (12, None, 8, [8, 4]),
        (12, 4, 8, [4, 4, 4]),
        (12, 5, 8, None),  # not divisible
        (16, 16, 8, None),  # chunk bigger than a node
        (0, None, 8, None),
    ],
)
def test_gang_shape_splits_jobs_into_whole_nodes_and_a_remainder(gpus, per_node, size, shape):
    assert gang_shape(gpus, per_node, size) == shape


# --------------------------------------------------------------------------- greedy rules

TREE = OrgNode(
    "root",
    children=(
        OrgNode("P", children=(OrgNode("p1"), OrgNode("p2"))),
        OrgNode("Q", children=(OrgNode("q1"),)),
    ),
)


def test_greedy_ranks_projects_by_sibling_ratio_at_every_level_not_by_leaf_ratio_alone():
    # P (0.5) ranks above Q (0.6), so both of P's projects come before q1 even though q1's own
    # ratio (0.6) is below p2's (0.9): Fair-Tree compares siblings level by level.
    cfg = config(n_nodes=2, org=TREE)
    ratios = {"P": 0.5, "p1": 0.1, "p2": 0.9, "Q": 0.6, "q1": 0.6}
    snap = build_snapshot(cfg, 0.0, [job("x", "q1"), job("y", "p2"), job("z", "p1")], ratios)
    rank = project_rank(snap)
    by_name = {snap.org.names[i]: int(r) for i, r in enumerate(rank) if r >= 0}
    assert by_name == {"p1": 0, "p2": 1, "q1": 2}
    assert [snap.jobs[i].id for i in greedy_order(snap)] == ["z", "y", "x"]
    plan = decide("greedy", cfg, [job("x", "q1"), job("y", "p2"), job("z", "p1")], ratios)
    assert outcome(plan) == (
        {"z": (("n1", ALL8),), "y": (("n2", ALL8),)},
        {},
        {"x": ReasonCode.WAITING_FOR_CAPACITY},
    )


def test_greedy_orders_jobs_within_a_project_by_declared_priority_then_submit_time():
    cfg = config(n_nodes=2)
    jobs = [
        job("old", submit=0),
        job("urgent", submit=50, prio=5),
        job("new", submit=100),
        job("newer", submit=200),
    ]
    plan = decide("greedy", cfg, jobs)
    assert outcome(plan) == (
        {"urgent": (("n1", ALL8),), "old": (("n2", ALL8),)},
        {},
        {"new": ReasonCode.WAITING_FOR_CAPACITY, "newer": ReasonCode.LOWER_PRIORITY_IN_PROJECT},
    )


def test_greedy_never_preempts_a_job_inside_its_min_runtime():
    cfg = config(n_nodes=1)
    hog = running(job("hog", "A", mr=8 * HOUR), 9 * HOUR, ("n1", ALL8))  # protected until 17h
    plan = decide("greedy", cfg, [hog, job("starved", "B")], {"A": 5.0, "B": 0.0})
    assert outcome(plan) == (
        {"hog": (("n1", ALL8),)},
        {},
        {"starved": ReasonCode.WAITING_FOR_CAPACITY},
    )


def test_greedy_preempts_a_job_past_its_min_runtime_when_a_higher_ranked_job_needs_the_gpus():
    cfg = config(n_nodes=1)
    hog = running(job("hog", "A", mr=HOUR), 0.0, ("n1", ALL8))
    plan = decide("greedy", cfg, [hog, job("starved", "B")], {"A": 2.0, "B": 0.1})
    assert outcome(plan) == (
        {"starved": (("n1", ALL8),)},
        {"hog": (ReasonCode.PREEMPTED_FAIR_SHARE, ("starved",))},
        {},
    )
    assert plan.preemptions[0].grace_s == 30


def test_greedy_keeps_a_job_past_its_min_runtime_when_its_project_still_ranks_higher():
    cfg = config(n_nodes=1)
    hog = running(job("hog", "A", mr=HOUR), 0.0, ("n1", ALL8))
    plan = decide("greedy", cfg, [hog, job("other", "B")], {"A": 0.2, "B": 0.9})
    assert outcome(plan) == ({"hog": (("n1", ALL8),)}, {}, {"other": ReasonCode.WAITING_FOR_CAPACITY})


def test_greedy_preempts_the_lowest_ranked_victim_first():
    cfg = config(n_nodes=2)
    a = running(job("a", "A", mr=HOUR), 0.0, ("n1", ALL8))
    b = running(job("b", "B", mr=HOUR), 0.0, ("n2", ALL8))
    plan = decide("greedy", cfg, [a, b, job("c", "C")], {"A": 0.5, "B": 0.9, "C": 0.1})
    assert outcome(plan) == (
        {"c": (("n2", ALL8),), "a": (("n1", ALL8),)},
        {"b": (ReasonCode.PREEMPTED_FAIR_SHARE, ("c",))},
        {},
    )


def test_greedy_preempts_nothing_when_the_victims_cannot_free_enough_gpus():
    cfg = config(n_nodes=2)
    a = running(job("a", "A", mr=HOUR), 0.0, ("n1", ALL8))  # preemptible
    b = running(job("b", "A", mr=8 * HOUR), 9.5 * HOUR, ("n2", ALL8))  # protected
    plan = decide("greedy", cfg, [a, b, job("big", "C", gpus=16)], {"A": 0.9, "C": 0.0})
    assert outcome(plan) == (
        {"a": (("n1", ALL8),), "b": (("n2", ALL8),)},
        {},
        {"big": ReasonCode.WAITING_FOR_CAPACITY},
    )


def test_greedy_preempts_unallocated_jobs_before_allocated_ones():
    cfg = config(n_nodes=2)
    alloc = running(job("alloc", "A", mr=HOUR), 0.0, ("n1", ALL8))
    free_rider = running(job("free_rider", "C", mr=0.0), 0.0, ("n2", ALL8))
    plan = decide("greedy", cfg, [alloc, free_rider, job("c", "B")], {"A": 3.0, "B": 0.0, "C": 0.0})
    assert outcome(plan) == (
        {"alloc": (("n1", ALL8),), "c": (("n2", ALL8),)},
        {"free_rider": (ReasonCode.PREEMPTED_UNALLOCATED, ("c",))},
        {},
    )


def test_greedy_lets_unallocated_jobs_fill_idle_gpus_but_never_preempt():
    cfg = config(n_nodes=2)
    past = running(job("past", "A", mr=HOUR), 0.0, ("n1", ALL8))  # preemptible, A over share
    jobs = [past, job("filler", "B", gpus=8, mr=0.0), job("late_filler", "B", gpus=8, mr=0.0, submit=5)]
    plan = decide("greedy", cfg, jobs, {"A": 3.0, "B": 0.0})
    assert outcome(plan) == (
        {"past": (("n1", ALL8),), "filler": (("n2", ALL8),)},
        {},
        {"late_filler": ReasonCode.UNALLOCATED_YIELDS},
    )


def test_greedy_backfills_a_smaller_lower_ranked_job_past_one_that_does_not_fit():
    cfg = config(n_nodes=2)
    busy = running(job("busy", "A", mr=8 * HOUR), 9.5 * HOUR, ("n1", ALL8))
    jobs = [busy, job("big", "B", gpus=16), job("small", "C", gpus=4)]
    plan = decide("greedy", cfg, jobs, {"A": 1.0, "B": 0.1, "C": 0.5})
    assert outcome(plan) == (
        {"busy": (("n1", ALL8),), "small": (("n2", LO4),)},
        {},
        {"big": ReasonCode.WAITING_FOR_CAPACITY},
    )


def test_greedy_places_best_fit_on_partly_used_nodes_so_whole_nodes_stay_free_for_gangs():
    cfg = config(n_nodes=3)
    half = running(job("half", "A", gpus=4, mr=8 * HOUR), 9.5 * HOUR, ("n2", LO4))
    jobs = [half, job("small", "B", gpus=4), job("gang", "C", gpus=16, submit=1)]
    plan = decide("greedy", cfg, jobs, {"A": 0.0, "B": 0.0, "C": 0.0})
    assert outcome(plan) == (
        {"half": (("n2", LO4),), "small": (("n2", HI4),), "gang": (("n1", ALL8), ("n3", ALL8))},
        {},
        {},
    )


def test_greedy_takes_back_victims_whose_gpus_did_not_help_the_gang():
    # 'a' (lowest ranked) sits beside a protected job on n1: freeing it cannot give a whole node,
    # freeing 'b' (n2) does; 'a' keeps running.
    cfg = config(n_nodes=2)
    a = running(job("a", "C", gpus=4, mr=HOUR), 0.0, ("n1", LO4))
    guard = running(job("guard", "A", gpus=4, mr=8 * HOUR), 9.5 * HOUR, ("n1", HI4))
    b = running(job("b", "B", gpus=8, mr=HOUR), 0.0, ("n2", ALL8))
    jobs = [a, guard, b, job("gang", "A", gpus=8, submit=1)]
    plan = decide("greedy", cfg, jobs, {"A": 0.0, "B": 2.0, "C": 3.0})
    assert outcome(plan) == (
        {"guard": (("n1", HI4),), "gang": (("n2", ALL8),), "a": (("n1", LO4),)},
        {"b": (ReasonCode.PREEMPTED_FAIR_SHARE, ("gang",))},
        {},
    )


def test_greedy_empties_a_drained_node_of_unprotected_jobs_and_places_nothing_new_there():
    cfg = config(n_nodes=2, states=(NodeState.DRAIN, NodeState.UP))
    old = running(job("old", "A", gpus=4, mr=HOUR), 0.0, ("n1", LO4))
    young = running(job("young", "A", gpus=4, mr=8 * HOUR), 9.5 * HOUR, ("n1", HI4))
    jobs = [old, young, job("new", "B", gpus=8), job("next", "B", gpus=4, submit=1)]
    plan = decide("greedy", cfg, jobs, {"A": 0.0, "B": 0.0})
    assert outcome(plan) == (
        {"young": (("n1", HI4),), "new": (("n2", ALL8),)},
        {"old": (ReasonCode.PREEMPTED_NODE_DRAIN, ())},
        {"next": ReasonCode.WAITING_FOR_CAPACITY},
    )


def test_greedy_says_over_share_when_the_waiting_project_used_more_than_its_entitlement():
    cfg = config(n_nodes=1)
    busy = running(job("busy", "A", mr=8 * HOUR), 9.5 * HOUR, ("n1", ALL8))
    plan = decide("greedy", cfg, [busy, job("w", "B")], {"A": 0.1, "B": 1.5})
    assert outcome(plan)[2] == {"w": ReasonCode.OVER_SHARE}


@pytest.mark.parametrize("policy", ["greedy", "priority"])
@pytest.mark.parametrize(
    "states, asked, code",
    [
        ((NodeState.UP, NodeState.UP), dict(gpus=24), ReasonCode.NO_MATCHING_GPU_TYPE),
        ((NodeState.UP, NodeState.UP), dict(gpus=8, gpu_types=("b200",)), ReasonCode.NO_MATCHING_GPU_TYPE),
        ((NodeState.UP, NodeState.DRAIN), dict(gpus=16), ReasonCode.NODE_DRAINING),
        ((NodeState.UP, NodeState.UP), dict(gpus=8), ReasonCode.GANG_DOES_NOT_FIT),
        ((NodeState.UP, NodeState.UP), dict(gpus=8, mr=0.0), ReasonCode.UNALLOCATED_YIELDS),
    ],
    ids=["bigger-than-cluster", "type-not-in-cluster", "only-drained-nodes-fit", "gpus-split-across-nodes", "unallocated"],
)
def test_every_waiting_job_gets_the_reason_that_explains_it(policy, states, asked, code):
    cfg = config(n_nodes=2, states=states)
    cfg = dataclasses.replace(cfg, gpu_types=cfg.gpu_types + (GpuType("b200"),))
    l1 = running(job("l1", "A", gpus=4, mr=8 * HOUR), 9.5 * HOUR, ("n1", LO4))
    l2 = running(job("l2", "A", gpus=4, mr=8 * HOUR), 9.5 * HOUR, ("n2", LO4))
    plan = decide(policy, cfg, [l1, l2, job("w", "B", **asked)], {"A": 9.0})
    assert outcome(plan)[2] == {"w": code}


# --------------------------------------------------------------------------- priority


def test_priority_runs_higher_labels_first_and_fifo_within_a_label_whatever_the_usage():
    cfg = config(n_nodes=2)
    jobs = [job("low", "A", prio=0, submit=0), job("hi_late", "B", prio=2, submit=20), job("hi_early", "A", prio=2, submit=10)]
    plan = decide("priority", cfg, jobs, {"A": 9.0, "B": 0.0})
    assert outcome(plan) == (
        {"hi_early": (("n1", ALL8),), "hi_late": (("n2", ALL8),)},
        {},
        {"low": ReasonCode.WAITING_FOR_CAPACITY},
    )


def test_priority_never_preempts_a_running_allocated_job_even_on_a_drained_node():
    cfg = config(n_nodes=2, states=(NodeState.DRAIN, NodeState.UP))
    squatter = running(job("squatter", "A", mr=HOUR, prio=0), 0.0, ("n1", ALL8))
    other = running(job("other", "A", mr=HOUR, prio=0), 0.0, ("n2", ALL8))
    plan = decide("priority", cfg, [squatter, other, job("vip", "B", prio=9)], {"A": 9.0})
    assert outcome(plan) == (
        {"squatter": (("n1", ALL8),), "other": (("n2", ALL8),)},
        {},
        {"vip": ReasonCode.WAITING_FOR_CAPACITY},
    )


def test_priority_preempts_preemptible_unallocated_jobs_for_a_higher_label():
    cfg = config(n_nodes=1)
    filler = running(job("filler", "A", mr=0.0, prio=0), 0.0, ("n1", ALL8))
    plan = decide("priority", cfg, [filler, job("vip", "B", prio=1)])
    assert outcome(plan) == (
        {"vip": (("n1", ALL8),)},
        {"filler": (ReasonCode.PREEMPTED_UNALLOCATED, ("vip",))},
        {},
    )


def test_priority_backfills_small_jobs_behind_one_that_does_not_fit():
    cfg = config(n_nodes=2)
    busy = running(job("busy", "A", mr=HOUR), 0.0, ("n1", ALL8))
    plan = decide("priority", cfg, [busy, job("big", "B", gpus=16, prio=5), job("small", "C", gpus=2)])
    assert outcome(plan) == (
        {"busy": (("n1", ALL8),), "small": (("n2", (0, 1)),)},
        {},
        {"big": ReasonCode.WAITING_FOR_CAPACITY},
    )


def test_policies_place_on_the_fastest_allowed_gpu_type():
    cfg = Config(
        gpu_types=(GpuType("h100"), GpuType("b200")),
        nodes=(Node("h", "h100", 8), Node("b", "b200", 8)),
        org=OrgNode("root", children=(OrgNode("A"),)),
    )
    fast = job("fast", "A", gpus=8, speedup={"b200": 1.8})
    for policy in ("greedy", "priority"):
        plan = decide(policy, cfg, [fast])
        assert [(p.job_id, p.gpu_type) for p in plan.placements] == [("fast", "b200")]


def test_unknown_policy_names_the_choices():
    from optalloc.errors import OptallocError

    with pytest.raises(OptallocError, match="priority, greedy, ilp"):
        make_policy("fifo")


def test_greedy_order_is_a_permutation_even_with_infinite_ratios():
    cfg = config(n_nodes=1)
    snap = build_snapshot(cfg, 0.0, [job("a", "A"), job("b", "B"), job("c", "C", mr=0.0)], {"A": np.inf, "B": 0.0})
    assert [snap.jobs[i].id for i in greedy_order(snap)] == ["b", "a", "c"]
