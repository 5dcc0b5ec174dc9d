"""Greedy's plan with its reservation-breaking starts undone offers the GPUs they held to
the backfill, which starts there only work that ends or may be preempted before the gang's
start (optalloc.plan.reservations._refill). A helper's sweep at stop 44, written out: the
whole plan asserted."""

from __future__ import annotations

from optalloc.epoch import run_epoch
from optalloc.types import Job, Node, Policy, ReasonCode

from test_epoch_properties import _check_plan
from test_epoch_toy import H, flat_org, running, snapshot

# (id, GPUs, gpu_types, b200 speedup, min_runtime_s, priority, start, type, node, GPUs there)
JOBS = [
    ("j0", 4, ("b200",), 1.5, 8 * H, 2, None, None, None, None),
    ("j1", 1, ("h100",), 1.5, 900.0, 1, None, None, None, None),
    ("j2", 8, ("b200",), 1.5, 2 * H, 2, 71400.0, "b200", "b200-0", tuple(range(8))),
    ("j3", 8, ("b200",), 1.5, 2 * H, 0, 61200.0, "b200", "b200-1", tuple(range(8))),
    ("j4", 2, (), 1.5, 8 * H, 1, None, None, None, None),
    ("j5", 1, (), 3.0, 900.0, 0, None, None, None, None),
    ("j6", 8, ("h100",), 3.0, 900.0, 0, None, None, None, None),
    ("j7", 1, (), 3.0, 0.0, 0, None, None, None, None),
    ("j8", 2, (), 1.0, 2 * H, 0, None, None, None, None),
    ("j9", 1, ("b200",), 3.0, 8 * H, 0, None, None, None, None),
    ("j10", 4, (), 1.5, 2 * H, 2, None, None, None, None),
    ("j11", 2, ("h100",), 1.5, 900.0, 1, 61200.0, "h100", "h100-0", (0, 1)),
    ("j12", 1, (), 3.0, 2 * H, 2, None, None, None, None),
    ("j13", 1, ("h100",), 3.0, 2 * H, 0, None, None, None, None),
    ("j14", 8, ("h100",), 1.0, 900.0, 2, None, None, None, None),
    ("j15", 8, ("h100",), 1.0, 0.0, 1, None, None, None, None),
    ("j16", 16, ("h100",), 3.0, 900.0, 2, None, None, None, None),
    ("j17", 1, ("h100",), 1.0, 900.0, 2, 61200.0, "h100", "h100-0", (2,)),
    ("j18", 16, ("b200",), 1.5, 8 * H, 0, None, None, None, None),
    ("j19", 1, ("h100",), 1.5, 8 * H, 1, None, None, None, None),
    ("j20", 4, (), 1.0, 900.0, 2, 71400.0, "h100", "h100-1", (0, 1, 2, 3)),
    ("j21", 1, ("h100",), 1.0, 900.0, 1, None, None, None, None),
    ("j22", 1, ("b200",), 1.5, 8 * H, 1, 71400.0, "b200", "b200-2", (0,)),
    ("j23", 1, ("b200",), 1.5, 900.0, 0, None, None, None, None),
]


def _snap():
    jobs = []
    for jid, g, types, sp, mr, prio, start, t, node, gpus in JOBS:
        kw = dict(gpu_types=types, speedup={"b200": sp}, priority=prio,
                  submit_time=float(jid[1:]))
        jobs.append(Job(jid, "p0", g, min_runtime_s=mr, **kw) if start is None else
                    running(jid, "p0", t, [(node, gpus)], start, mr, **kw))
    nodes = [Node("h100-0", "h100", 4), Node("h100-1", "h100", 4),
             *(Node(f"b200-{i}", "b200", 8) for i in range(3))]
    return snapshot(nodes, flat_org({"p0": 5.0}), jobs, now=20 * H, usage={"p0": 0.0},
                    types=("h100", "b200"), policy=Policy(max_reservations=2))


def test_an_unallocated_job_uses_a_gpu_held_for_a_gang_until_the_gang_starts():
    """2 x 4 h100, 3 x 8 b200, one project. j14's gang (8 h100 GPUs) is reserved to start
    in 5 minutes; the one free h100 GPU waits for it. Greedy's plan, reservations kept, is
    the epoch's; it had left that GPU idle while j7, unallocated (preemptible at once), waited
    and was told the largest free node had 1 GPU. Now j7 runs there until the gang starts."""
    snap = _snap()
    plan = run_epoch(snap)
    _check_plan(snap, plan)
    placed = {p.job_id: tuple((a.node, a.gpus) for a in p.nodes) for p in plan.placements}
    assert placed == {
        "j0": (("b200-2", (1, 2, 3, 4)),), "j2": (("b200-0", tuple(range(8))),),
        "j4": (("b200-2", (6, 7)),), "j5": (("b200-1", (4,)),), "j7": (("h100-0", (3,)),),
        "j8": (("b200-1", (5, 6)),), "j9": (("b200-1", (7,)),),
        "j10": (("b200-1", (0, 1, 2, 3)),), "j11": (("h100-0", (0, 1)),),
        "j12": (("b200-2", (5,)),), "j17": (("h100-0", (2,)),),
        "j20": (("h100-1", (0, 1, 2, 3)),), "j22": (("b200-2", (0,)),)}
    assert {x.job_id: x.code for x in plan.preemptions} == {
        "j3": ReasonCode.PREEMPTED_FAIR_SHARE}
    why = {r.job_id: r.code for r in plan.pending}
    assert why["j14"] is ReasonCode.RESERVED
    assert {j for j, c in why.items() if c is ReasonCode.HELD_FOR_RESERVATION} == {
        "j1", "j13", "j19", "j21"}
    assert "j7" not in why
