"""The team's order by proxy beside a reservation (optalloc.sim.invariants.proxy_order_breaks,
the simulator's check on the Plan, and optalloc.plan.proxy_check.proxy_breaks, the epoch's on
a Placed): a running job R stopped for another project's start S while R's teammate M starts
on a node reserved for a waiting gang is stopped by proxy only where S would fit on the GPUs
left free had R stayed and M not started, counting only nodes S may use: a node reserved
until the gang's start takes no start that would hold its GPUs past it (its protection, or
its expected end if sooner: optalloc.plan.nodepool.NodePool.allowed, the placement's rule).

Found on the bench's 1,024-GPU epoch, seed 15 with two reservations: j00009 (P1-0, 1 GPU past
its protection) stopped, its GPU b300-000:2 to j01269 (P1-4, 8 h protection), while its
teammate j00743 (15 min) started on b300-011, reserved for j00393's gang due in 69 min; that
GPU was the only b300 GPU left free had j00009 stayed and j00743 waited, and j01269 may not use
it. Both checks counted it as room and called the plan a proxy (the repair, which places by
the reservations, could not move j01269 and left it).

The cluster below, 3 x 2 h100 GPUs: n00 runs R (A, past its 2-hour protection: restarted, it
would hold its GPU past the gang's start, so it may not restart on a reserved node; with 1 h
it restarts there in M's place, the last test) and Y (D, protected);
n01 and n02 run D's jobs protected for 1 h more (n02:0 free), reserved for C's 4-GPU gang G;
A queues M (15 min), B queues S (1 GPU). The epoch stops R for S on n00:0 and starts M on
n02:0; had R stayed and M waited, the one free GPU is n02:0."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from optalloc.epoch import run_epoch
from optalloc.model.build import build_model
from optalloc.plan.holdings import Placed
from optalloc.plan.proxy_check import proxy_breaks
from optalloc.sim.invariants import check_plan, proxy_order_breaks, team_order_breaks
from optalloc.types import Job, Policy

from test_epoch_toy import H, flat_org, nodes_of, running, snapshot

NOW = 10 * H


def _snap(s_min: float = 8 * H, s_dur: float | None = None, reservations: int = 1,
          r_min: float = 2 * H):
    jobs = [running("R", "A", "h100", [("n00", [0])], start=NOW - 4 * H, min_runtime_s=r_min,
                    submit_time=0.0),
            running("Y", "D", "h100", [("n00", [1])], start=NOW - H / 2, min_runtime_s=8 * H),
            running("P1", "D", "h100", [("n01", [0, 1])], start=NOW - 7 * H,
                    min_runtime_s=8 * H),
            running("P2", "D", "h100", [("n02", [1])], start=NOW - 7 * H, min_runtime_s=8 * H),
            Job("G", "C", 4, gpus_per_node=2, min_runtime_s=8 * H, submit_time=1.0),
            Job("M", "A", 1, min_runtime_s=H / 4, submit_time=2.0),
            Job("S", "B", 1, min_runtime_s=s_min, duration_s=s_dur, submit_time=3.0)]
    return snapshot(nodes_of(3, 2), flat_org({"A": 1, "B": 1, "C": 1, "D": 1}), jobs, now=NOW,
                    usage={"A": 0.5, "B": 0.1, "C": 0.1, "D": 0.2},
                    policy=Policy(max_reservations=reservations))


def _plan():
    """The epoch's plan of the base cluster (S holds its GPU 8 h)."""
    snap = _snap()
    plan = run_epoch(snap)
    check_plan(snap, plan)
    return snap, plan


def _placed(em, plan) -> Placed:
    """`plan` in the model's coordinates (the epoch's check reads a Placed)."""
    snap, req = em.snap, em.req
    by_id = {p.job_id: p for p in plan.placements}
    new = {snap.job_index[j]: p for j, p in by_id.items()
           if not snap.job_running[snap.job_index[j]]}
    started = np.array([int(j) in new and new[int(j)].gpu_type == snap.type_names[int(t)]
                        for j, t in zip(req.cand_job, req.cand_type)], bool)
    kept = np.array([snap.jobs[int(j)].id in by_id for j in req.run_job], bool)
    free = np.array([n.gpus for n in snap.nodes], np.int64)
    for p in plan.placements:
        for a in p.nodes:
            free[snap.node_index[a.node]] -= len(a.gpus)
    return Placed(started, kept, new, free=free)


def test_the_epoch_stops_r_for_s_and_starts_m_on_the_reserved_node():
    snap, plan = _plan()
    where = {p.job_id: [(a.node, a.gpus) for a in p.nodes] for p in plan.placements}
    assert where["S"] == [("n00", (0,))] and where["M"] == [("n02", (0,))]
    assert [(p.job_id, p.code.value, p.needed_by) for p in plan.preemptions] == [
        ("R", "PreemptedForFairShare", ("S",))]
    # clear at NOW + 1 h (P1, P2's protection end), then their 60 s notice (the policy's)
    assert [(r.job_id, r.nodes, r.expected_start) for r in plan.reservations] == [
        ("G", ("n01", "n02"), NOW + H + 60.0)]
    assert team_order_breaks(snap, plan) == []
    assert proxy_order_breaks(snap, plan) == []  # before: [("R", ("S",))]


#: (what it checks, the snapshot S's plan is read against, the plan's reservations kept,
#:  the proxy breaks of both checks)
CASES = [
    ("S holds its GPU 8 h, past G's start in 1 h: the reserved GPU is no room for it "
     "(before: a break)", dict(), True, []),
    ("S would end in 30 min (its duration), before G's start: it may use the reserved GPU",
     dict(s_dur=H / 2), True, [("R", ("S",))]),
    ("S's protection ends in 30 min, before G's start: it may use the reserved GPU",
     dict(s_min=H / 2), True, [("R", ("S",))]),
    ("S's duration is past G's start too: no room", dict(s_dur=2 * H), True, []),
    ("no reservation (the lookahead off): n02:0 is room for S", dict(reservations=0), False,
     [("R", ("S",))]),
]


@pytest.mark.parametrize("name,variant,reserved,breaks", CASES, ids=[c[0][:40] for c in CASES])
def test_a_start_counts_only_the_free_gpus_the_reservations_let_it_use(name, variant, reserved,
                                                                       breaks):
    _, plan = _plan()
    snap = _snap(**variant)  # the same jobs, S's hold (and the lookahead) as the case says
    if not reserved:
        plan = replace(plan, reservations=())
    assert proxy_order_breaks(snap, plan) == breaks
    em = build_model(snap)
    assert list(np.isfinite(em.res.deadline)) == [False, reserved, reserved]
    assert {snap.jobs[k].id for k in proxy_breaks(em, _placed(em, plan))} == {
        j for j, _ in breaks}


def test_a_stopped_job_that_may_restart_on_the_reserved_node_does_so_before_its_teammate_starts():
    # R protected 1 h: restarted now it holds n02:0 to t=39600, before G's start (t=39660),
    # so the reservation lets it. The team's order (rule 3: R running and submitted before
    # M) has R restart there and M wait; since stop 59 the score counts a restarted job as
    # running work that goes on, as a kept one (it counted neither, and M's start won)
    snap = _snap(r_min=H)
    plan = run_epoch(snap)
    check_plan(snap, plan)
    where = {p.job_id: [(a.node, a.gpus) for a in p.nodes] for p in plan.placements}
    assert where["S"] == [("n00", (0,))] and where["R"] == [("n02", (0,))]
    assert "M" not in where
    assert {p.job_id: p.code.value for p in plan.preemptions} == {"R": "Moved"}
    assert {p.job_id: p.code.value for p in plan.pending} == {"G": "Reserved",
                                                              "M": "WaitingForCapacity"}
