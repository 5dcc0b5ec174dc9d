"""Greedy's rule 4 on a type where a job's project has no share (models/greedy.md sections 1
and 4): the job is allocated work only on the types its project has a share of; on the others
it is unallocated work, which fills only GPUs nobody ranked above it wants and never
preempts, and a running one there yields to allocated work at once. Each case states the
whole plan."""

from __future__ import annotations

import dataclasses

from optalloc.plan.greedy_order import greedy_order, greedy_walk
from optalloc.sim.invariants import check_plan
from optalloc.sim.policies import make_policy
from optalloc.snapshot import build_snapshot
from optalloc.types import (
    Config, GpuType, Job, JobState, Node, NodeAlloc, OrgNode, Placement, Policy, ReasonCode,
)

H = 3600.0
# Q ranks first (ratio 0) but has no b200 share; P has shares of both types
ORG = OrgNode("root", children=(OrgNode("P"), OrgNode("Q", share_by_type={"b200": 0.0})))
RATIOS = {"P": 0.9, "Q": 0.1}


def cfg(b200_nodes=1):
    nodes = (Node("h1", "h100", 8),) + tuple(Node(f"b{i + 1}", "b200", 8)
                                              for i in range(b200_nodes))
    return Config(gpu_types=(GpuType("h100"), GpuType("b200")), nodes=nodes, org=ORG,
                  policy=Policy(grace_s=30))


def job(jid, project, gpus=8, submit=0.0, types=None):
    return Job(jid, project, gpus, min_runtime_s=H, submit_time=submit,
               gpu_types=types or ("h100", "b200"))


def running(j, node, gpu_type, start):
    pl = Placement(j.id, gpu_type, (NodeAlloc(node, tuple(range(j.gpus))),), allocated=True)
    return dataclasses.replace(j, state=JobState.RUNNING, start_time=start, placement=pl)


def plan_of(config, jobs, now=10 * H):
    snap = build_snapshot(config, now, jobs, RATIOS)
    plan = make_policy("greedy").decide(snap)
    check_plan(snap, plan)
    return snap, (
        {p.job_id: (p.gpu_type, tuple(a.node for a in p.nodes)) for p in plan.placements},
        {p.job_id: (p.code, p.needed_by) for p in plan.preemptions},
        {p.job_id: p.code for p in plan.pending},
    )


def test_a_job_ranked_first_waits_rather_than_take_a_type_its_project_has_no_share_of():
    # h100 is full with P's protected job; Q's q1 ranks first but may take b200 only as
    # unallocated work, after P's p2 (allocated on b200) is served: p2 gets the b200 node,
    # q1 waits. Before: q1 took b200 at Q's rank and p2 waited.
    busy = running(job("p0", "P", types=("h100",)), "h1", "h100", start=9.5 * H)
    _, out = plan_of(cfg(), [busy, job("q1", "Q"), job("p2", "P", submit=5.0)])
    assert out == ({"p0": ("h100", ("h1",)), "p2": ("b200", ("b1",))}, {},
                   {"q1": ReasonCode.WAITING_FOR_CAPACITY})


def test_it_fills_the_type_without_share_once_the_allocated_jobs_there_are_served():
    # two b200 nodes: p2 takes one, q1 the other as unallocated work
    busy = running(job("p0", "P", types=("h100",)), "h1", "h100", start=9.5 * H)
    _, out = plan_of(cfg(2), [busy, job("q1", "Q"), job("p2", "P", submit=5.0)])
    placed, pre, pend = out
    assert (placed, pre, pend) == ({"p0": ("h100", ("h1",)), "p2": ("b200", ("b1",)),
                                    "q1": ("b200", ("b2",))}, {}, {})


def test_a_job_of_the_project_is_allocated_first_on_its_own_share():
    # h100 free: q1 takes it at Q's rank (allocated there); p2 takes b200
    _, out = plan_of(cfg(), [job("q1", "Q"), job("p2", "P", submit=5.0)])
    assert out == ({"q1": ("h100", ("h1",)), "p2": ("b200", ("b1",))}, {}, {})


def test_a_running_job_on_a_type_without_share_yields_to_allocated_work_at_once():
    # q1 runs on b200 (unallocated there: never protected, though it started 10 minutes ago);
    # P's p2 wants b200 and h100 is full: q1 is preempted as unallocated work for p2
    busy = running(job("p0", "P", types=("h100",)), "h1", "h100", start=9.5 * H)
    q1 = dataclasses.replace(running(job("q1", "Q"), "b1", "b200", start=10 * H - 600),
                             placement=Placement("q1", "b200", (NodeAlloc("b1", tuple(range(8))),),
                                                 allocated=False))
    _, out = plan_of(cfg(), [busy, q1, job("p2", "P", submit=5.0)])
    assert out == ({"p0": ("h100", ("h1",)), "p2": ("b200", ("b1",))},
                   {"q1": (ReasonCode.PREEMPTED_UNALLOCATED, ("p2",))}, {})


def test_the_walk_lists_such_a_job_twice_and_greedy_order_once():
    # q1 (Q, allowed both types, share of h100 only): first among the allocated work (Q ranks
    # first), again after every allocated job (unallocated work, Q first there too); u is
    # unallocated work of P (min_runtime 0), listed once, after q1's second entry
    jobs = [job("q1", "Q"), job("p2", "P", submit=5.0),
            dataclasses.replace(job("u", "P", submit=1.0), min_runtime_s=0.0)]
    snap = build_snapshot(cfg(), 10 * H, jobs, RATIOS)
    walk, shared = greedy_walk(snap)
    ids = [snap.jobs[j].id for j in walk]
    assert list(zip(ids, shared.tolist())) == [("q1", True), ("p2", True), ("q1", False),
                                                ("u", False)]
    assert [snap.jobs[j].id for j in greedy_order(snap)] == ["q1", "p2", "u"]
