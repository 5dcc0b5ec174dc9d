"""The team's order by proxy (optalloc.plan.proxy_order) keeps a running job in place where the
other project's starts on its GPUs fit on the free GPUs only if its per-node gangs go first
(DESIGN.md section 8, rule 3: a job is not stopped while a teammate ranked below it starts on
GPUs it could use).

The repair moves those starts one by one, best fit; largest first put a 2-GPU single-node
start on the last 2 free GPUs of the one node that two 2-GPU per-node gangs also needed, so it
gave up, and the job stayed stopped by proxy (the bench's 1,024-GPU seed 122: j00161, P1-1's
first job, stopped while its teammate j00453 took a whole b200 node) or, here, was restarted
in its teammate's place, its work lost (step 4c). Which of the two checks saw the proxy
depended on the tie order of equal sizes (a set of job ids). Now the repair and both checks
try a second order too, the most distinct nodes first (optalloc.shape.fit_orders).

The cluster: five b200 nodes. P's running K (8 GPUs, any type, twice as fast on h100, whose
node holds too few GPUs for it) fills b0; P's queued M (8, b200 only) ranks below it. Q,
under its share, asks 13 GPUs: a 4-GPU and two 2-GPU per-node gangs (1 GPU a node), a 2-GPU
job and three 1-GPU jobs, which fit on b1 and the 5 GPUs R's protected jobs leave on b2-b4 only
with the gangs placed first. R's D must leave the draining hd and may move to h1, which the
greedy baseline (it restarts no job leaving a drain node in the same pass) leaves idle, so the
optimizer's plan is the epoch's. The model (GPU counts per type) may stop K and start M
instead (M runs at its best speed on b200, K at half of its): with the type-order links of
stop 55 it does. Each case asserts the whole plan."""

from __future__ import annotations

import pytest

from optalloc.epoch import run_epoch
from optalloc.shape import fit_orders
from optalloc.sim.invariants import proxy_order_breaks, team_order_breaks
from optalloc.types import (
    Job, Node, NodeAlloc, NodeState, Placement, Plan, Preemption, ReasonCode,
)

from test_epoch_toy import H, flat_org, pending_codes, placed_on, preempted, running, snapshot
from test_epoch_victim_order import Case  # the same whole-plan case: snap, where, preempted, pending

B = "b200"


def _snap(*, resumable=True):
    nodes = [Node(f"b{i}", B, 8) for i in range(5)] + [
        Node("h0", "h100", 8), Node("h1", "h100", 4), Node("hd", "h100", 4, NodeState.DRAIN)]
    prot = dict(start=9.5 * H, min_runtime_s=4 * H)
    jobs = [
        running("K", "P", B, [("b0", range(8))], start=5 * H, speedup={"h100": 2.0},
                submit_time=1.0, resumable=resumable),
        running("f2", "R", B, [("b2", range(5))], gpu_types=(B,), **prot),
        running("f3", "R", B, [("b3", range(7))], gpu_types=(B,), **prot),
        running("f4", "R", B, [("b4", range(7))], gpu_types=(B,), **prot),
        running("fh", "R", "h100", [("h0", range(8))], gpu_types=("h100",), **prot),
        running("D", "R", "h100", [("hd", range(4))], start=5 * H, gpu_types=("h100",)),
        Job("M", "P", 8, min_runtime_s=H, gpu_types=(B,), submit_time=2.0),
        # the single-node 2-GPU job first: equal sizes keep this order, largest first
        Job("q20", "Q", 2, min_runtime_s=H, gpu_types=(B,), submit_time=4.0),
        Job("q4", "Q", 4, gpus_per_node=1, min_runtime_s=H, gpu_types=(B,), submit_time=1.0),
        Job("q2a", "Q", 2, gpus_per_node=1, min_runtime_s=H, gpu_types=(B,), submit_time=2.0),
        Job("q2b", "Q", 2, gpus_per_node=1, min_runtime_s=H, gpu_types=(B,), submit_time=3.0),
    ] + [Job(f"q1{c}", "Q", 1, min_runtime_s=H, gpu_types=(B,), submit_time=5.0 + i)
         for i, c in enumerate("abc")]
    return snapshot(nodes, flat_org({"P": 1, "Q": 1, "R": 1}), jobs, now=10 * H,
                    usage={"P": 1.5, "Q": 0.2, "R": 1.0}, types=(B, "h100"))


#: K stays on b0 and M waits behind it; Q's gangs take b2-b4's last GPUs and b1's, its
#: single-node jobs the rest of b1; D moves to h1 (each placement's nodes sorted)
KEPT = {"K": (("b0", 8),), "f2": (("b2", 5),), "f3": (("b3", 7),), "f4": (("b4", 7),),
        "fh": (("h0", 8),), "D": (("h1", 4),), "q20": (("b1", 2),),
        "q4": (("b1", 1), ("b2", 1), ("b3", 1), ("b4", 1)),
        "q2a": (("b1", 1), ("b2", 1)), "q2b": (("b1", 1), ("b2", 1)),
        "q1a": (("b1", 1),), "q1b": (("b1", 1),), "q1c": (("b1", 1),)}


CASES = [
    # before: the repair gave up, then step 4c restarted K in M's place on b1 (Moved, its
    # work lost) and Q's starts took b0, the plan 16.5% from the bound
    Case("a running job stopped for another project's per-node gangs keeps its node where "
         "they fit on the free GPUs placed first",
         _snap(), KEPT, {"D": ("Moved", ())}, {"M": "LowerPriorityInProject"}),
    # the plan is the same where K cannot resume: the model keeps it itself (no repair)
    Case("so the plan is when the running job cannot resume and the model keeps it itself",
         _snap(resumable=False), KEPT, {"D": ("Moved", ())}, {"M": "LowerPriorityInProject"}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_running_job_keeps_its_place_over_its_teammate(case: Case):
    plan = run_epoch(case.snap)
    assert {j: tuple(sorted(on)) for j, on in placed_on(plan).items()} == case.where
    assert preempted(plan) == case.preempted
    assert pending_codes(plan) == case.pending
    assert proxy_order_breaks(case.snap, plan) == []
    assert team_order_breaks(case.snap, plan) == []
    assert plan.report.status in ("optimal", "feasible")


def _proxy_plan(snap) -> Plan:
    """K stopped, M on b1, Q's starts on K's node and the free GPUs of b2-b4 (the model's
    choice before the repair)."""
    def at(jid, t, *allocs):
        return Placement(jid, t, tuple(NodeAlloc(n, tuple(g)) for n, g in allocs))
    kept = [j.placement for j in snap.jobs if j.running and j.id not in ("K", "D")]
    starts = [at("D", "h100", ("h1", range(4))), at("M", B, ("b1", range(8))),
              at("q4", B, ("b0", (0,)), ("b2", (5,)), ("b3", (7,)), ("b4", (7,))),
              at("q2a", B, ("b0", (1,)), ("b2", (6,))), at("q2b", B, ("b0", (2,)), ("b2", (7,))),
              at("q20", B, ("b0", (3, 4))), at("q1a", B, ("b0", (5,))),
              at("q1b", B, ("b0", (6,))), at("q1c", B, ("b0", (7,)))]
    pre = (Preemption("K", ReasonCode.PREEMPTED_FAIR_SHARE, "test", 0.0),
           Preemption("D", ReasonCode.MOVED, "test", 0.0))
    return Plan(now=snap.now, placements=tuple(kept + starts), preemptions=pre)


def test_the_check_sees_the_proxy_whatever_the_order_of_equal_sizes():
    """Largest first (q20 before the 2-GPU gangs) leaves the gangs no second node; the second
    order fits them all, so K is stopped by proxy for M, as the check tells every run."""
    snap = _snap()
    assert proxy_order_breaks(snap, _proxy_plan(snap)) == [
        ("K", ("q1a", "q1b", "q1c", "q20", "q2a", "q2b", "q4"))]


@pytest.mark.parametrize("gpus,nodes,orders", [
    ((2, 4, 2, 1), (1, 4, 2, 1), [[1, 0, 2, 3], [1, 2, 0, 3]]),
    ((8, 4, 1), (1, 1, 1), [[0, 1, 2]]),
], ids=["a per-node gang of the same size goes before a single-node job in the second order",
        "where both orders are the same there is one"])
def test_fit_orders_are_largest_first_then_the_most_nodes_first(gpus, nodes, orders):
    assert fit_orders(gpus, nodes) == orders
