"""A running job the plan stops for another project's floor restarts in the places of its
team's starts ranked below it, its own priority's queued jobs too (DESIGN.md section 8,
rule 3: a running job comes before its team's queued jobs of its priority; rule 8: a job its
GPUs are taken from restarts at once on its type; optalloc.plan.several_places._stopped,
step 4c: optalloc.epoch_status.repack_team_order).

A helper's random snapshot (tests/test_epoch_properties.py instances(), seed 808), written
out small: h100 nodes h0 (8 GPUs) and h1 (4); b200 nodes b1 (8) and b2 (4), billing weight
1.6 (each type its own budget). p0 (share 1, usage ratio 0.0, ranked first) queues AG, 8
h100 GPUs (its h100 floor of 4), and A1, 1 h100 GPU. p1 (share 2, ratio 2.9) runs R,
priority 2, 2 h100 GPUs on h0 past its protection, and B8, 8 b200 GPUs; it queues Q1 and Q2,
priority 2, 1 GPU each (Q1 h100 only), and L, priority 0, 1 h100 GPU. AG takes h0 whole, so
R is stopped. The model counts a restart in no share row, so its solution gave h1 to Q1, Q2
and A1 and left a GPU idle beside them, and R's `keep_order` row held L there: R fits on
h1 beside the other project's work, so it did not give way ("L fits idle GPUs but waits").
The team's order starts R first: it now restarts on h1 in Q2's place and the free GPU, Q2
starts on b200 (or waits, confined to h100), and L waits behind it with no GPU free; p1
holds 3 h100 GPUs of its floor of 4 where it held 2. The model's objective does not count
the restart, so the plan is `feasible`. Each row asserts the whole plan."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from optalloc.epoch import run_epoch
from optalloc.snapshot import build_snapshot
from optalloc.types import Config, GpuType, Job, Node, Policy

from test_epoch_properties import rules_hold
from test_epoch_toy import H, flat_org, pending_codes, placed_on, preempted, running


def _queued(jid: str, project: str, gpus: int, prio: int, submit: float, types=(),
            mr: float = 2 * H) -> Job:
    return Job(jid, project, gpus, gpu_types=types, min_runtime_s=mr, priority=prio,
               submit_time=submit)


@dataclass
class Case:
    name: str
    r_priority: int  # R's priority (Q1 and Q2 have 2)
    q2_types: tuple  # the types Q2 may use ((): any)
    placed: dict  # job -> ((node, GPUs), ...): every job running after the epoch
    preempted: dict  # job -> (code, needed by)
    pending: dict  # job -> code
    status: str


OTHERS = {"B8": (("b1", 8),), "Q1": (("h1", 1),), "A1": (("h1", 1),), "AG": (("h0", 8),)}

CASES = [
    Case("a running job stopped for another project's floor restarts in the place of its "
         "team's queued job of its own priority, which starts on the other type, and its "
         "lower-priority teammate waits behind it",
         2, (),
         {**OTHERS, "R": (("h1", 2),), "Q2": (("b2", 1),)},
         {"R": ("Moved", ("AG",))}, {"L": "LowerPriorityInProject"}, "feasible"),
    Case("a running job stopped for another project's floor restarts in the place of its "
         "team's queued job of its own priority confined to the type, which waits",
         2, ("h100",),
         {**OTHERS, "R": (("h1", 2),)},
         {"R": ("Moved", ("AG",))},
         {"L": "LowerPriorityInProject", "Q2": "WaitingForCapacity"}, "feasible"),
    Case("a running job ranked below its team's queued jobs gave way, and its "
         "lower-priority teammate fills the free GPU beside them",
         1, (),
         {**OTHERS, "Q2": (("h1", 1),), "L": (("h1", 1),)},
         {"R": ("PreemptedForFairShare", ("AG",))}, {}, "feasible"),
]


def _snap(case: Case):
    jobs = [_queued("Q1", "p1", 1, 2, 1.0, ("h100",)), _queued("L", "p1", 1, 0, 4.0, ("h100",)),
            running("R", "p1", "h100", [("h0", range(2))], 17 * H, 2 * H,
                    priority=case.r_priority, submit_time=5.0, gpu_types=("h100",)),
            _queued("Q2", "p1", 1, 2, 6.0, case.q2_types),
            _queued("A1", "p0", 1, 1, 8.0, ("h100",)),
            _queued("AG", "p0", 8, 0, 10.0, ("h100",), mr=8 * H),
            running("B8", "p1", "b200", [("b1", range(8))], 10 * H, 8 * H, priority=0,
                    submit_time=11.0, gpu_types=("b200",))]
    nodes = [Node("h0", "h100", 8), Node("h1", "h100", 4), Node("b1", "b200", 8),
             Node("b2", "b200", 4)]
    cfg = Config((GpuType("h100"), GpuType("b200", billing_weight=1.6)), tuple(nodes),
                 flat_org({"p0": 1.0, "p1": 2.0}), Policy(), tuple(jobs))
    return build_snapshot(cfg, now=20 * H, usage_ratio={"p0": 0.0, "p1": 2.9})


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_running_job_stopped_for_another_project_restarts_before_its_team(case: Case):
    snap = _snap(case)
    plan = run_epoch(snap)
    assert plan.degraded is None
    assert placed_on(plan) == case.placed
    assert preempted(plan) == case.preempted
    assert pending_codes(plan) == case.pending
    assert plan.report.status == case.status
    if "R" in case.placed:
        assert "1 job (R) restarted in the places of starts its team ranks below it" \
            in plan.report.message
    rules_hold(snap, plan)  # no allocated job that fits waits, no team or proxy break, ...
