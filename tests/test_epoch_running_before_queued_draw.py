"""A running job stopped by proxy, where the starts on its GPUs are other projects' jobs
leaving a down node: it keeps its GPUs, they move, and its team's queued job of its priority
waits (DESIGN.md section 8, rules 3, 4 and 8; optalloc.plan.proxy_order).

A helper's random snapshot at stop 47 (tests/test_epoch_properties.py instances(), seed 505),
shrunk and written out: h100 nodes n0 (4 GPUs, down), n1 and n2 (8) and n3 (4), and one b200
node of 8. A (share 1, usage ratio 2.88) runs R, priority 2, 4 GPUs past its protection, on
n1 beside B's protected B0 and D's protected D0, and queues Q (8 GPUs, priority 2, submitted
after R started) and A1 (2 GPUs, priority 1, allocated). n0 is down: C's C1 (2 GPUs, past its
protection), C0 (1 GPU, protected) and B's unallocated BU (1 GPU) leave it and restart at
once. C and D queue more. The model counts GPUs per type, not nodes: its plan stopped R "for
fair share", C0, BU and C's queued C3 restarted and started on R's GPUs, and Q, ranked below
R in A's order (a running job before its team's queued jobs of its priority), took n2 whole.
The team's order by proxy (R kept, the other starts moved to what Q frees) gave up because C0
and BU are running jobs: their moves off n0 counted as starts that do not move. R's
`keep_order` row then held A1 behind R (R had not given way: only Q, a teammate below it,
held its room), and A1, allocated, waited while BU, unallocated, ran on a GPU of n1 ("allocated
A1 waits behind unallocated jobs"). Now a running job's move or restart is a start of this
epoch like any other: R stays where it ran, C0, C3 and BU go to n2, Q waits (A is past its
target) and A1 starts beside them, as greedy keeps R. The model's plan stopped R, so the plan
is `feasible`, its gap measured from the same bound. Each row asserts the whole plan."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from optalloc.epoch import run_epoch
from optalloc.sim.policies.greedy import GreedyScheduler
from optalloc.snapshot import build_snapshot
from optalloc.types import Config, GpuType, Job, Node, NodeState, Policy

from test_epoch_properties import rules_hold
from test_epoch_toy import H, flat_org, pending_codes, placed_on, preempted, running

NOW = 20 * H


def _queued(jid: str, project: str, gpus: int, prio: int, submit: float,
            mr: float = 2 * H, **kw) -> Job:
    return Job(jid, project, gpus, min_runtime_s=mr, priority=prio, submit_time=submit, **kw)


@dataclass
class Case:
    name: str
    q_min_runtime: float  # A's queued job Q of R's priority: its min_runtime (900 s: debug)


CASES = [
    Case("a running job whose GPUs went to other projects' jobs leaving a down node keeps "
         "them while its team's queued job of its priority waits", 2 * H),
    Case("a running job keeps its GPUs over its team's queued debug job of its priority, and "
         "its team's allocated job below it starts instead of waiting beside unallocated work",
         900.0),
]

#: every job running after the epoch: job -> ((node, GPUs), ...)
PLACED = {"B0": (("n1", 2),), "R": (("n1", 4),), "D0": (("n1", 2),), "C1": (("n3", 2),),
          "A1": (("n2", 2),), "C0": (("n2", 1),), "D8": (("b0", 8),), "D2": (("n3", 2),),
          "C3": (("n2", 1),), "BU": (("n2", 1),)}
PREEMPTED = {"C1": ("Moved", ()), "C0": ("Moved", ()), "BU": ("Moved", ())}
PENDING = {"C2": "WaitingForCapacity", "Q": "OverShare", "CG": "WaitingForCapacity"}


def _snap(case: Case):
    jobs = [
        _queued("C2", "C", 2, 2, 2.0, mr=900.0, gpu_types=("b200",)),
        running("C1", "C", "h100", [("n0", [0, 1])], 10 * H, 8 * H, priority=1, submit_time=4.0),
        _queued("A1", "A", 2, 1, 5.0, mr=900.0),
        running("B0", "B", "h100", [("n1", [0, 1])], NOW - 600, 900.0, submit_time=6.0),
        running("R", "A", "h100", [("n1", [2, 3, 4, 5])], 10 * H, 2 * H, priority=2,
                submit_time=8.0),
        running("C0", "C", "h100", [("n0", [2])], NOW - 600, 900.0, submit_time=9.0),
        running("D0", "D", "h100", [("n1", [6, 7])], 17 * H, 900.0, submit_time=10.0),
        _queued("D8", "D", 8, 1, 11.0, mr=8 * H),
        _queued("D2", "D", 2, 2, 12.0, mr=8 * H, gpu_types=("h100",)),
        _queued("C3", "C", 1, 0, 18.0, mr=8 * H),
        _queued("Q", "A", 8, 2, 19.0, mr=case.q_min_runtime),
        _queued("CG", "C", 8, 0, 20.0),
        running("BU", "B", "h100", [("n0", [3])], 10 * H, 0.0, submit_time=23.0),  # unallocated
    ]
    nodes = (Node("n0", "h100", 4, NodeState.DOWN), Node("n1", "h100", 8),
             Node("n2", "h100", 8), Node("n3", "h100", 4), Node("b0", "b200", 8))
    cfg = Config((GpuType("h100", 1.0), GpuType("b200", 1.6)), nodes,
                 flat_org({"A": 1.0, "B": 5.0, "C": 2.0, "D": 2.0}), Policy(), tuple(jobs))
    return build_snapshot(cfg, now=NOW,
                          usage_ratio={"A": 2.88, "B": 3.34, "C": 1.36, "D": 0.14})


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_running_job_stopped_by_proxy_for_jobs_leaving_a_down_node_keeps_its_gpus(case: Case):
    snap = _snap(case)
    plan = run_epoch(snap)
    assert plan.degraded is None
    assert placed_on(plan) == PLACED
    assert preempted(plan) == PREEMPTED
    assert pending_codes(plan) == PENDING
    assert plan.report.status == "feasible"  # the model's plan stopped R; the same bound
    assert "then 1 running job kept that it stopped only for starts of its team" in (
        plan.report.message)
    rules_hold(snap, plan)  # no allocated job that fits waits, no team or proxy break, ...
    greedy = GreedyScheduler().decide(snap)  # the published system's pass keeps R too
    assert "R" in {p.job_id for p in greedy.placements}
