"""A running job that gives way to a gang the backfill starts: its team's allocated job below
it takes the place of its team's unallocated work (DESIGN.md section 8, rules 3, 4 and 6;
optalloc.plan.backfill.restore_and_backfill, `loosened`).

A helper's random snapshot at stop 47 (tests/test_epoch_properties.py instances(), seed 101),
written out small: four h100 nodes of 4, 8, 8 and 8 GPUs; A (share 1, usage ratio 2.0, ranked
last) runs R, priority 2, 8 GPUs past its protection, on n1, and queues U (4 GPUs,
min_runtime 0: unallocated work, submitted first) and Q (2 GPUs, allocated); B (share 5, ratio
1.0) queues a 16-GPU gang BG and two 1-GPU jobs; C (share 2, ratio 0.0, ranked first) queues a
4-GPU job, a 1-GPU job and a 16-GPU gang; D (share 1) is idle. The LP's point leaves BG
fractional and stops R; its `keep_order` row lets Q start only while R runs. The backfill
judged the rows that R's giving way loosens once, before its own starts, when R still fit on
its free node; it then started BG on R's node, and U, unallocated, filled the node beside C's
job while Q, allocated and within A's target, waited behind R ("allocated Q waits behind
unallocated jobs"). Now a row held back is judged again once the backfill's starts have taken
R's room, and Q evicts U (unallocated work yields to allocated work at once): A holds its
target of 2 GPUs. The model forbids the start, so the plan is `feasible`, its bound counting
no such plan. Each row asserts the whole plan."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from optalloc.epoch import run_epoch
from optalloc.types import Job, Node

from test_epoch_properties import rules_hold
from test_epoch_toy import H, flat_org, pending_codes, placed_on, preempted, running, snapshot

NOW = 20 * H


def _queued(jid: str, project: str, gpus: int, prio: int, submit: float,
            mr: float = 2 * H) -> Job:
    return Job(jid, project, gpus, min_runtime_s=mr, priority=prio, submit_time=submit)


OTHERS = [_queued("B1", "B", 1, 0, 1.0), _queued("BG", "B", 16, 0, 2.0),
          _queued("B2", "B", 1, 0, 6.0), _queued("C4", "C", 4, 0, 7.0),
          _queued("C1", "C", 1, 2, 9.0), _queued("CG", "C", 16, 2, 18.0)]
R = running("R", "A", "h100", [("n1", range(8))], 10 * H, 2 * H, priority=2, submit_time=12.0)
B_AND_C = {"B1": (("n0", 1),), "BG": (("n3", 8), ("n1", 8)), "B2": (("n0", 1),),
           "C4": (("n2", 4),), "C1": (("n0", 1),)}


@dataclass
class Case:
    name: str
    q_gpus: int  # A's queued job Q behind R: its GPUs
    q_min_runtime: float  # ... and its min_runtime (0: unallocated work)
    placed: dict  # job -> ((node, GPUs), ...): every job running after the epoch
    pending: dict  # job -> code
    status: str
    preempted: dict = field(default_factory=lambda: {"R": ("PreemptedForFairShare", ("BG",))})


CASES = [
    Case("an allocated job below the running job takes the place of its team's unallocated "
         "work once the backfill's gang has taken the running job's node",
         2, 2 * H,
         {**B_AND_C, "Q": (("n2", 2),)},
         {"U": "UnallocatedYields", "CG": "WaitingForCapacity"}, "feasible"),
    Case("an allocated job below the running job that fits the unallocated job's place "
         "exactly takes it",
         4, 2 * H,
         {**B_AND_C, "Q": (("n2", 4),)},
         {"U": "UnallocatedYields", "CG": "WaitingForCapacity"}, "feasible"),
    Case("unallocated work below the running job keeps its team's order among itself: the "
         "job submitted first fills the node and the later one waits",
         2, 0.0,
         {**B_AND_C, "U": (("n2", 4),)},
         {"Q": "UnallocatedYields", "CG": "WaitingForCapacity"}, "optimal"),
]


def _snap(case: Case):
    jobs = [*OTHERS, _queued("U", "A", 4, 0, 10.0, mr=0.0), R,
            _queued("Q", "A", case.q_gpus, 0, 15.0, mr=case.q_min_runtime)]
    nodes = [Node(f"n{k}", "h100", g) for k, g in enumerate((4, 8, 8, 8))]
    return snapshot(nodes, flat_org({"A": 1.0, "B": 5.0, "D": 1.0, "C": 2.0}), jobs, now=NOW,
                    usage={"A": 2.0, "B": 1.0, "C": 0.0, "D": 0.0})


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_team_job_held_behind_a_running_job_that_gave_way_to_the_backfill(case: Case):
    snap = _snap(case)
    plan = run_epoch(snap)
    assert plan.degraded is None
    assert placed_on(plan) == case.placed
    assert preempted(plan) == case.preempted
    assert pending_codes(plan) == case.pending
    assert plan.report.status == case.status
    if case.status == "feasible":  # the model forbids the start: its bound counts no such plan
        assert "gave way to work ranked above it" in plan.report.message
    rules_hold(snap, plan)  # no allocated job that fits waits, no team or proxy break, ...
