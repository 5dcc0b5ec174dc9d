"""Allocated work packs beside allocated work: of the nodes with room, a new job takes the one
whose GPUs allocated work holds most (the least room counting unallocated work as room), then
the tightest on free GPUs. Unallocated work yields to allocated work at once (DESIGN.md rule
4), so a node it alone holds is a whole node for a gang; best fit on free GPUs alone had put
allocated 1-GPU jobs on such nodes, one per node, and the project's own 16-GPU gang waited
for hours (a helper's case at stop 42: one project with a share, three without, 4 x 8 GPUs,
2 days: the ilp delivered 58% of what the project was owed against greedy's 83%; 84% now).
Each case asserts the whole plan."""

from __future__ import annotations

from optalloc.epoch import run_epoch
from optalloc.types import Job

from test_epoch_toy import H, flat_org, nodes_of, pending_codes, preempted, running, snapshot


def _where(plan) -> dict[str, tuple]:
    return {p.job_id: tuple((a.node, a.gpus) for a in p.nodes) for p in plan.placements}


def _cluster(extra: list) -> list:
    # n00: A's protected 2-GPU job (6 free); n01: B's unallocated 4-GPU job (4 free, and
    # 4 more that allocated work may take)
    return [running("a0", "A", "h100", [("n00", [0, 1])], start=9.9 * H),
            running("b0", "B", "h100", [("n01", [0, 1, 2, 3])], start=9.0 * H,
                    min_runtime_s=0.0)] + extra


def test_a_new_allocated_job_goes_beside_allocated_work_not_onto_a_node_of_unallocated_work():
    jobs = _cluster([Job("a1", "A", 1, min_runtime_s=H, submit_time=1.0)])
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 0}), jobs)
    plan = run_epoch(snap)
    assert _where(plan) == {"a0": (("n00", (0, 1)),), "b0": (("n01", (0, 1, 2, 3)),),
                            "a1": (("n00", (2,)),)}
    assert preempted(plan) == {} and pending_codes(plan) == {}


def test_so_the_node_of_unallocated_work_is_whole_for_the_projects_gang_next_epoch():
    first = run_epoch(snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 0}),
                               _cluster([Job("a1", "A", 1, min_runtime_s=H,
                                             submit_time=1.0)])))
    n, g = _where(first)["a1"][0]
    jobs = _cluster([running("a1", "A", "h100", [(n, list(g))], start=10 * H),
                     Job("a2", "A", 8, min_runtime_s=H, submit_time=2.0)])
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 0}), jobs, now=10.1 * H)
    plan = run_epoch(snap)
    assert _where(plan) == {"a0": (("n00", (0, 1)),), "a1": (("n00", (2,)),),
                            "a2": (("n01", tuple(range(8))),)}
    assert preempted(plan) == {"b0": ("PreemptedUnallocated", ("a2",))}
    assert pending_codes(plan) == {}


def test_unallocated_work_takes_the_tightest_hole_so_every_job_fits():
    # a helper's case at stop 43: packing the drained 1-GPU unallocated job r3 beside
    # allocated work too split n03's 2-GPU hole, and B's 2-GPU job waited beside 3 idle GPUs;
    # unallocated work evicts nothing, so for it the tightest node is the fit
    from optalloc.types import Node, NodeState

    nodes = [Node("n00", "h100", 4, NodeState.UP), Node("n01", "h100", 4, NodeState.DRAIN),
             Node("n02", "h100", 4, NodeState.UP), Node("n03", "h100", 4, NodeState.UP)]
    jobs = [running("r0", "B", "h100", [("n01", (0, 1, 2))], start=5 * H, min_runtime_s=0.0),
            running("r1", "B", "h100", [("n02", (0,))], start=9.5 * H),
            running("r2", "A", "h100", [("n00", (0,))], start=5 * H, min_runtime_s=2 * H),
            running("r3", "B", "h100", [("n01", (3,))], start=9.5 * H, min_runtime_s=0.0),
            running("r4", "B", "h100", [("n03", (0,))], start=5 * H, min_runtime_s=2 * H),
            running("r5", "B", "h100", [("n03", (1,))], start=9.9 * H),
            Job("q6", "A", 4, gpus_per_node=2, min_runtime_s=0.0, submit_time=6.0),
            Job("q7", "B", 2, min_runtime_s=0.0, submit_time=7.0)]
    snap = snapshot(nodes, flat_org({"A": 1, "B": 2}), jobs, usage={"A": 2.0, "B": 2.0})
    plan = run_epoch(snap)
    where = _where(plan)
    assert where["r3"] == (("n00", (3,)),)
    assert {n for n, _ in where["q6"]} == {"n00", "n02"}
    assert where["q7"] == (("n03", (2, 3)),)
    assert {j: where[j] for j in ("r1", "r2", "r4", "r5")} == {
        "r1": (("n02", (0,)),), "r2": (("n00", (0,)),), "r4": (("n03", (0,)),),
        "r5": (("n03", (1,)),)}
    assert preempted(plan) == {"r0": ("PreemptedNodeDrain", ()), "r3": ("Moved", ())}
    assert pending_codes(plan) == {}


def test_making_room_evicts_the_unallocated_job_its_team_ranks_last():
    # fresh draws at stop 43: of three 1-GPU unallocated jobs of one project on a node, the
    # eviction for an allocated job took the lowest index, its team's first (a b200-only job)
    from optalloc.plan.nodepool import NodePool
    from optalloc.plan.place import evictable_jobs

    jobs = [Job(f"u{i}", "A", 1, min_runtime_s=0.0, submit_time=float(i)) for i in range(3)]
    jobs.append(Job("a", "B", 2, min_runtime_s=H, submit_time=0.0))
    snap = snapshot(nodes_of(1, 4), flat_org({"A": 0, "B": 1}), jobs)
    pool = NodePool(snap, evictable_jobs(snap))
    for i in range(3):
        pool.hold(0, [i], snap.job_index[f"u{i}"])
    assert [snap.jobs[j].id for j in pool.make_room(0, 2)] == ["u2"]
    assert [snap.jobs[j].id for j in pool.make_room(0, 4)] == ["u1", "u0"]
