"""A running job that gave way on its type to work ranked above it (another project's floor)
holds nothing for its team's lower-priority jobs: they fill what is left before unallocated
work does, as greedy does (DESIGN.md section 8, rules 3 and 6; optalloc.model.keep_displaced,
optalloc.plan.backfill.gave_way_rows). Both cases are fresh draws of the plan property at stop
43, written out; each asserts the whole plan."""

from __future__ import annotations

from optalloc.epoch import run_epoch
from optalloc.types import Job, Node, ReasonCode

from test_epoch_toy import H, flat_org, running, snapshot

NOW = 20 * H


def _running(i: str, gpus: int, mr: float, prio: int, node: str, idx: tuple, started: float,
             project: str = "p0") -> Job:
    return running(i, project, "h100", [(node, idx)], started, mr, priority=prio,
                   submit_time=float(i[1:]))


def _queued(i: str, gpus: int, mr: float, prio: int, project: str = "p0") -> Job:
    return Job(id=i, project=project, gpus=gpus, min_runtime_s=mr, priority=prio,
               submit_time=float(i[1:]))


def _snap(node_gpus: tuple, jobs: list):
    nodes = [Node(f"h100-{k}", "h100", g) for k, g in enumerate(node_gpus)]
    return snapshot(nodes, flat_org({"p0": 1.0, "p2": 1.0}), jobs, now=NOW,
                    usage={"p0": 0.0, "p2": 0.0})


def _outcome(plan):
    placed = {p.job_id: tuple(a.node for a in p.nodes) for p in plan.placements}
    pre = {x.job_id: (x.code, tuple(sorted(x.needed_by))) for x in plan.preemptions}
    pending = {r.job_id: r.code for r in plan.pending}
    return placed, pre, pending


def test_an_allocated_teammate_below_a_job_that_gave_way_starts_before_unallocated_work():
    """4 + 8 GPUs. p0 runs a priority-1 8-GPU job past its protection and a protected 1-GPU
    one; p2, below its floor (6 of 12), queues an 8-GPU job: p0's 8-GPU job gives way. p0
    queues eleven unallocated 1-GPU jobs and, last, an allocated 1-GPU job. Before, the
    `keep_order` row of the job that gave way held the allocated one while three unallocated
    teammates filled the 4-GPU node; now it takes one of their GPUs (p0's floor: 2 of 6)."""
    jobs = [_running("j0", 8, 900.0, 1, "h100-1", tuple(range(8)), 61200.0),
            _running("j6", 1, 900.0, 0, "h100-0", (0,), 71400.0),
            _queued("j11", 8, 900.0, 0, "p2"), _queued("j14", 1, 900.0, 0)]
    jobs += [_queued(f"j{k}", 1, 0.0, 0) for k in (1, 2, 3, 4, 5, 7, 8, 9, 10, 12, 13)]
    snap = _snap((4, 8), jobs)
    plan = run_epoch(snap)
    placed, pre, pending = _outcome(plan)
    assert placed == {"j6": ("h100-0",), "j1": ("h100-0",), "j2": ("h100-0",),
                      "j14": ("h100-0",), "j11": ("h100-1",)}
    assert pre == {"j0": (ReasonCode.PREEMPTED_FAIR_SHARE, ("j11",))}
    assert pending == {f"j{k}": ReasonCode.UNALLOCATED_YIELDS
                       for k in (3, 4, 5, 7, 8, 9, 10, 12, 13)}
    # the model forbids the start (its bound counts no such plan): never called optimal
    assert plan.report.status == "feasible"
    assert "above the bound" in plan.report.message
    assert "gave way to work ranked above it" in plan.report.message


def test_a_protected_teammate_below_does_not_make_room_for_the_job_that_gave_way():
    """2 x 8 GPUs. p0's priority-1 8-GPU job gives way to p2's 8-GPU floor job. The other
    node holds p0's protected priority-0 1-GPU job, so the 8-GPU job fits nowhere; before,
    the count took the protected job for one that could make way, the job 'fit', and p0's
    allocated priority-0 1-GPU jobs waited beside a free GPU. Now p0's allocated work fills
    that node (its floor, 8), its priority-1 jobs first, and the unallocated work there
    yields to it."""
    jobs = [_running("j0", 1, 0.0, 0, "h100-0", (0,), 71400.0), _queued("j1", 1, 900.0, 1),
            _queued("j2", 4, 0.0, 0),
            _running("j3", 8, 900.0, 1, "h100-1", tuple(range(8)), 61200.0),
            _queued("j4", 4, 0.0, 0), _queued("j5", 1, 900.0, 0),
            _running("j6", 4, 0.0, 0, "h100-0", (1, 2, 3, 4), 71400.0),
            _queued("j7", 1, 900.0, 0), _queued("j8", 1, 900.0, 0),
            _running("j9", 1, 900.0, 0, "h100-0", (5,), 71400.0), _queued("j10", 1, 900.0, 0),
            _running("j11", 1, 0.0, 0, "h100-0", (6,), 71400.0), _queued("j12", 1, 0.0, 0),
            _queued("j13", 1, 900.0, 1), _queued("j14", 8, 900.0, 0, "p2"),
            _queued("j15", 1, 900.0, 0), _queued("j16", 1, 900.0, 0),
            _queued("j17", 1, 0.0, 0), _queued("j18", 1, 0.0, 0), _queued("j19", 1, 900.0, 1)]
    snap = _snap((8, 8), jobs)
    plan = run_epoch(snap)
    placed, pre, pending = _outcome(plan)
    assert placed == {j: ("h100-0",) for j in ("j9", "j1", "j13", "j19", "j5", "j7", "j8",
                                               "j10")} | {"j14": ("h100-1",)}
    assert {j: c for j, (c, _) in pre.items()} == {
        "j0": ReasonCode.PREEMPTED_UNALLOCATED, "j3": ReasonCode.PREEMPTED_FAIR_SHARE,
        "j6": ReasonCode.PREEMPTED_UNALLOCATED, "j11": ReasonCode.PREEMPTED_UNALLOCATED}
    assert pre["j3"][1] == ("j14",)
    # p0 holds its floor (8) in allocated work; its later allocated jobs wait for its order
    assert pending == {"j2": ReasonCode.UNALLOCATED_YIELDS, "j4": ReasonCode.UNALLOCATED_YIELDS,
                       "j12": ReasonCode.UNALLOCATED_YIELDS,
                       "j17": ReasonCode.UNALLOCATED_YIELDS,
                       "j18": ReasonCode.UNALLOCATED_YIELDS,
                       "j15": ReasonCode.LOWER_PRIORITY_IN_PROJECT,
                       "j16": ReasonCode.LOWER_PRIORITY_IN_PROJECT}
    assert plan.report.status == "feasible"
    free = 16 - sum(len(a.gpus) for p in plan.placements for a in p.nodes)
    assert free == 0
