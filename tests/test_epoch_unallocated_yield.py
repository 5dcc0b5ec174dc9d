"""Unallocated work yields to allocated demand at once (DESIGN.md section 8, rule 4), also
where the model's rows are stricter than the scheme and another candidate plan starts the
allocated job. Two fresh draws of the plan property (`allocated jN waits behind unallocated
jobs`) at stop 45, trimmed by hand; each asserts the whole plan.

* The scheme's order scored a project's lowest priority 0 in the teams' order, so its
  allocated start tied with the unallocated job it evicted and the work lost kept the
  unallocated job (optalloc.plan.score: allocated GPUs now come before fill shares and GPUs
  busy). p1's running priority-1 4-GPU job gave way to its team's priority-2 jobs and p0's
  floor; its `keep_order` row holds p1's priority-0 1-GPU job in the model's plans, but a
  plan that breaks it only there keeps the scheme (optalloc.model.keep_displaced): the
  greedy baseline's plan starts it in place of p0's unallocated job and is the plan.
* The `order_types` links (optalloc.model.type_order) kept a job behind a teammate ahead of
  it that may not use a node reserved for a gang (it would hold its GPUs past the gang's
  start) where the job behind it may, as the `order` rows no longer do
  (optalloc.model.reservations, optalloc.model.build._type_links): short work backfills the
  reserved nodes while long work waits.
"""

from __future__ import annotations

import pytest

from optalloc.epoch import run_epoch
from optalloc.types import Job, Node, Policy, ReasonCode

from test_epoch_properties import _check_plan
from test_epoch_toy import H, flat_org, running, snapshot

NOW = 20 * H
R = ReasonCode


def _run(i: str, project: str, node: str, idx: tuple, started: float, mr: float, prio: int,
         gpu_type: str = "h100", **kw) -> Job:
    return running(i, project, gpu_type, [(node, idx)], started, mr, priority=prio,
                   submit_time=float(i[1:]), **kw)


def _queued(i: str, project: str, gpus: int, mr: float, prio: int, **kw) -> Job:
    return Job(id=i, project=project, gpus=gpus, min_runtime_s=mr, priority=prio,
               submit_time=float(i[1:]), **kw)


def _gave_way():
    """8 + 4 + 4 GPUs. p0 (share 5, usage ratio ~0) runs a protected 2-GPU job and an
    unallocated 1-GPU one, and queues 1-GPU jobs of priorities 1 and 0 and an 8-GPU job no
    node can hold beside the protected one; p1 (share 2, ratio 2.88) runs 12 GPUs past their
    protection (priority-1 jobs of 4 and 1 GPUs and a priority-2 1-GPU job on h100-0, a
    priority-0 4-GPU job on h100-1, a priority-2 2-GPU job on h100-2) and queues priority-2
    jobs of 2 and 4 GPUs, a priority-1 1-GPU job and a priority-0 1-GPU job (j2). p1's
    priority-2 jobs take the places of its priority-1 4-GPU job (j4) and its priority-0 one;
    j4 fits nowhere beside them and p0's floor, and j2 takes the GPU p0's unallocated job
    held."""
    nodes = [Node("h100-0", "h100", 8), Node("h100-1", "h100", 4), Node("h100-2", "h100", 4)]
    old, mr = 36000.0, 2 * H
    jobs = [_queued("j0", "p0", 1, mr, 1), _queued("j2", "p1", 1, mr, 0),
            _queued("j3", "p0", 8, mr, 1),
            _run("j4", "p1", "h100-0", (0, 1, 2, 3), old, mr, 1),
            _queued("j6", "p1", 2, mr, 2),
            _run("j7", "p1", "h100-0", (4,), old, mr, 1),
            _run("j8", "p1", "h100-0", (5,), old, mr, 2),
            _run("j10", "p0", "h100-0", (6, 7), 61200.0, 8 * H, 1),
            _run("j11", "p1", "h100-1", (0, 1, 2, 3), old, mr, 0),
            _run("j14", "p0", "h100-2", (0,), 71400.0, 0.0, 1),
            _queued("j16", "p1", 4, mr, 2), _queued("j17", "p0", 1, mr, 0),
            _run("j18", "p1", "h100-2", (1, 2), old, mr, 2),
            _queued("j20", "p1", 1, mr, 1)]
    return snapshot(nodes, flat_org({"p0": 5.0, "p1": 2.0}), jobs, now=NOW,
                    usage={"p0": 1e-7, "p1": 2.879456632029797})


def _reserved():
    """8 + 8 h100 GPUs and one 4-GPU b200 node, one project. It runs an unallocated 8-GPU
    job on h100-1, a 1-GPU job on h100-2 protected for 1.83 h more and a protected 4-GPU job
    on b200; it queues a priority-2 16-GPU gang (reserved on both h100 nodes, to start when
    that protection ends), a priority-1 4-GPU job of any type protected for 8 h and a
    priority-0 8-GPU debug job (only an h100 node holds it, so its types differ from the
    4-GPU job's). Before, the debug job waited behind the 4-GPU job, held off the reserved
    nodes, while the unallocated job held h100-1."""
    nodes = [Node("h100-1", "h100", 8), Node("h100-2", "h100", 8), Node("b200-0", "b200", 4)]
    jobs = [_run("j3", "p0", "h100-1", tuple(range(8)), 71400.0, 0.0, 1,
                 speedup={"b200": 1.5}),
            _queued("j7", "p0", 8, 900.0, 0),
            _run("j10", "p0", "h100-2", (2,), 71400.0, 2 * H, 0, speedup={"b200": 3.0}),
            _run("j11", "p0", "b200-0", (0, 1, 2, 3), 61200.0, 8 * H, 0, gpu_type="b200",
                 gpu_types=("b200",), speedup={"b200": 3.0}),
            _queued("j14", "p0", 4, 8 * H, 1),
            _queued("j22", "p0", 16, 900.0, 2, speedup={"b200": 1.5})]
    return snapshot(nodes, flat_org({"p0": 2.0}), jobs, now=NOW, usage={"p0": 1.459353122069292},
                    types=("h100", "b200"), policy=Policy(max_reservations=2))


CASES = [
    pytest.param(
        _gave_way,
        {"j0": ("h100-2",), "j2": ("h100-1",), "j6": ("h100-1",), "j7": ("h100-0",),
         "j8": ("h100-0",), "j10": ("h100-0",), "j16": ("h100-0",), "j17": ("h100-2",),
         "j18": ("h100-2",), "j20": ("h100-1",)},
        {"j4": (R.PREEMPTED_FAIR_SHARE, ("j16",)),
         "j11": (R.PREEMPTED_FAIR_SHARE, ("j2", "j20", "j6")),
         "j14": (R.PREEMPTED_UNALLOCATED, ("j17",))},
        {"j3": R.WAITING_FOR_CAPACITY},
        "feasible",
        id="a_lowest_priority_start_where_its_teammate_gave_way_evicts_unallocated_work"),
    pytest.param(
        _reserved,
        {"j7": ("h100-1",), "j10": ("h100-2",), "j11": ("b200-0",)},
        {"j3": (R.PREEMPTED_UNALLOCATED, ("j7",))},
        {"j14": R.HELD_FOR_RESERVATION, "j22": R.RESERVED},
        "optimal",
        id="a_debug_job_backfills_a_reserved_node_behind_a_long_teammate_of_other_types"),
]


@pytest.mark.parametrize("make, placed, preempted, pending, status", CASES)
def test_allocated_work_takes_the_gpus_unallocated_work_holds(make, placed, preempted,
                                                               pending, status):
    snap = make()
    plan = run_epoch(snap)
    _check_plan(snap, plan)
    assert {p.job_id: tuple(a.node for a in p.nodes) for p in plan.placements} == placed
    assert {x.job_id: (x.code, tuple(sorted(x.needed_by)))
            for x in plan.preemptions} == preempted
    assert {r.job_id: r.code for r in plan.pending} == pending
    assert plan.report.status == status


def test_the_gang_keeps_its_reservation_while_the_debug_job_backfills_it():
    plan = run_epoch(_reserved())
    assert [(r.job_id, r.nodes) for r in plan.reservations] == [("j22", ("h100-1", "h100-2"))]
