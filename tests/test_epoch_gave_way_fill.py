"""A running job that gave way to another project's work is judged node by node: where its
shape fits on no node of its type beside the work the plan runs there but its team's jobs
below it, its team's lower-priority jobs fill what is left (DESIGN.md section 8, rules 3 and 6;
optalloc.model.keep_displaced._no_room_on_nodes, optalloc.plan.backfill.gave_way_rows).

Before, the test counted GPUs over the whole type: A's 8-GPU single-node job R, stopped for
B's floor, "fit" in 11 free GPUs spread over nodes of 7 and 4, so its `keep_order` rows held
A's priority-1 and priority-0 jobs while those GPUs stayed idle (a helper's random snapshot at
stop 45, written out small; greedy starts them). Where R does fit by nodes the rows still hold:
R restarts, or is kept, and the plan is what it was.

Every case: three h100 nodes of 8, 8 and 4 GPUs; A (share 1, usage ratio 1.0) runs R,
priority 2, 8 GPUs past its protection, on n0; B (share 3, ratio 0.0, ranked first) queues F,
priority 1, 8 GPUs, for its floor; A queues Q1 (priority 1, 4 GPUs) and Q0 (priority 0, 1
GPU). Each row asserts the whole plan."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from optalloc.epoch import run_epoch
from optalloc.types import Job, Node

from test_epoch_properties import _check_plan
from test_epoch_toy import H, flat_org, pending_codes, placed_on, preempted, running, snapshot

NOW = 20 * H


def _run(jid: str, project: str, prio: int, allocs: list, start: float, mr: float = 2 * H,
         gpn: int | None = None) -> Job:
    return running(jid, project, "h100", allocs, start, mr, priority=prio, gpus_per_node=gpn)


def _queued(jid: str, project: str, gpus: int, prio: int, submit: float) -> Job:
    return Job(jid, project, gpus, min_runtime_s=2 * H, priority=prio, submit_time=submit)


R_ON_N0 = _run("R", "A", 2, [("n0", range(8))], 0.0)
QUEUE = [_queued("F", "B", 8, 1, 1.0), _queued("Q1", "A", 4, 1, 2.0),
         _queued("Q0", "A", 1, 0, 3.0)]
PROTECTED = NOW - 600.0  # started 10 minutes ago, protected for 2 hours


@dataclass
class Case:
    name: str
    beside: list  # the jobs running beside R (R_ON_N0 unless `r` says otherwise)
    placed: dict  # job -> ((node, GPUs), ...)
    preempted: dict  # job -> (code, needed_by)
    pending: dict = field(default_factory=dict)  # job -> code
    status: str = "feasible"
    r: Job = R_ON_N0


CASES = [
    Case("its teammates below fill the free GPUs when a protected teammate of its own "
         "priority holds the only other node it fits",
         [_run("P", "A", 2, [("n1", (0,))], PROTECTED)],
         {"P": (("n1", 1),), "F": (("n0", 8),), "Q1": (("n2", 4),), "Q0": (("n1", 1),)},
         {"R": ("PreemptedForFairShare", ("F",))}),
    Case("its teammates below fill the free GPUs when another project's protected job "
         "holds the only other node it fits",
         [_run("P", "B", 0, [("n1", (0,))], PROTECTED)],
         {"P": (("n1", 1),), "F": (("n0", 8),), "Q1": (("n2", 4),), "Q0": (("n1", 1),)},
         {"R": ("PreemptedForFairShare", ("F",))}),
    Case("it stays and its teammates wait their turn when another node is free for the "
         "floor job",
         [],
         {"R": (("n0", 8),), "F": (("n1", 8),), "Q1": (("n2", 4),)},
         {}, {"Q0": "LowerPriorityInProject"}, status="optimal"),
    Case("it stays when only unallocated work holds the other node, which yields",
         [_run("U", "B", 0, [("n1", (0,))], PROTECTED, mr=0.0)],
         {"R": (("n0", 8),), "F": (("n1", 8),), "Q1": (("n2", 4),)},
         {"U": ("PreemptedUnallocated", ("F",))}, {"Q0": "LowerPriorityInProject"},
         status="optimal"),
    Case("it moves when it is a 4 + 4 gang that fits in the pieces left, and a teammate "
         "below it fills what it leaves",
         [_run("P", "A", 2, [("n1", (4,))], PROTECTED)],
         {"P": (("n1", 1),), "R": (("n2", 4), ("n1", 4)), "F": (("n0", 8),),
          "Q0": (("n1", 1),)},
         {"R": ("Moved", ("F",))}, {"Q1": "LowerPriorityInProject"}, status="optimal",
         r=_run("R", "A", 2, [("n0", range(4)), ("n1", range(4))], 0.0, gpn=4)),
]


def _snap(case: Case):
    nodes = [Node(f"n{k}", "h100", g) for k, g in enumerate((8, 8, 4))]
    return snapshot(nodes, flat_org({"A": 1.0, "B": 3.0}), [case.r, *case.beside, *QUEUE],
                    now=NOW, usage={"A": 1.0, "B": 0.0})


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_running_job_that_gave_way_to_another_project(case: Case):
    snap = _snap(case)
    plan = run_epoch(snap)
    assert placed_on(plan) == case.placed
    assert preempted(plan) == case.preempted
    assert pending_codes(plan) == case.pending
    assert plan.report.status == case.status
    if case.status == "feasible":  # the model forbids the fill: its bound counts no such plan
        assert "gave way to work ranked above it" in plan.report.message
    _check_plan(snap, plan)  # no idle GPU while an allocated job that fits waits, ...
