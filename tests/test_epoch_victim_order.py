"""When a project must give up GPUs it loses its lowest-ranked jobs there first (DESIGN.md rule
3, the team's own order: declared priority first). The model has no row for it (`keep_order`
rows hold a teammate's start, not its keep) and its work tier values running work by its speed
on the type, so a solution stopped a priority-2 job that ran at a third of its best speed and
kept its project's priority-0 job of the same size beside it; its priority-1 teammate, held
behind the stopped job, then waited beside an idle GPU (a helper's random snapshot). The epoch
now places each solution also with such keeps exchanged (optalloc.plan.victims.ranked_keeps)
and keeps the better by the scheme's order. Each case asserts the whole plan."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

import optalloc.epoch as epoch
from optalloc.model.build import build_model
from optalloc.plan.victims import ranked_keeps
from optalloc.snapshot import build_snapshot
from optalloc.types import Config, GpuType, Job, Node, NodeState, Policy

from test_epoch_toy import H, flat_org, pending_codes, preempted, running

ALL = tuple(range(8))


def _snap(*, hi_priority=2, hi_speedup=None, lo_start=17 * H, lo_min_runtime=H, c0_gpus=8,
          b200_weight=1.0, a0=True, mid=False, a0_submit=0.0):
    """d00 (h100, draining): A's 2-GPU job a1, past its protection, must leave; n00 (8 h100):
    C's protected job c0; n01 (4 h100): B's b_lo (priority 0, h100 only) and b_hi (2 GPUs
    each, past their protection; b_hi may run on b200, 3x faster there); b00 (8 b200): C's
    protected job c1. A (usage ratio 1.3) is under its share, B (2.9) over it, so B gives up
    2 GPUs of n01 for a1. A's queued 1-GPU job a0; B's queued priority-1 1-GPU job b_mid."""
    nodes = (Node("d00", "h100", 8, NodeState.DRAIN), Node("n00", "h100", 8),
             Node("n01", "h100", 4), Node("b00", "b200", 8))
    hs = {"b200": 3.0} if hi_speedup is None else hi_speedup
    jobs = [running("a1", "A", "h100", [("d00", (0, 1))], start=10 * H, gpu_types=("h100",),
                    submit_time=1.0),
            running("b_lo", "B", "h100", [("n01", (0, 1))], start=lo_start,
                    min_runtime_s=lo_min_runtime, gpu_types=("h100",), submit_time=2.0),
            running("b_hi", "B", "h100", [("n01", (2, 3))], start=10 * H,
                    priority=hi_priority, speedup=hs, submit_time=3.0),
            running("c0", "C", "h100", [("n00", range(c0_gpus))], start=19 * H,
                    min_runtime_s=4 * H, gpu_types=("h100",), submit_time=4.0),
            running("c1", "C", "b200", [("b00", ALL)], start=19 * H, min_runtime_s=4 * H,
                    submit_time=5.0)]
    if a0:
        jobs.append(Job("a0", "A", 1, min_runtime_s=2 * H, submit_time=a0_submit))
    if mid:
        jobs.append(Job("b_mid", "B", 1, min_runtime_s=H, priority=1, gpu_types=("h100",),
                        submit_time=6.0))
    types = (GpuType("h100"), GpuType("b200", billing_weight=b200_weight))
    cfg = Config(types, nodes, flat_org({"A": 2, "B": 2, "C": 2}), Policy(), tuple(jobs))
    return build_snapshot(cfg, now=20 * H, usage_ratio={"A": 1.3, "B": 2.9, "C": 0.5})


def _where(plan) -> dict:
    return {p.job_id: tuple((a.node, a.gpus) for a in p.nodes) for p in plan.placements}


C_KEPT = {"c0": (("n00", ALL),), "c1": (("b00", ALL),)}
# one budget over both types: A (floor 3 over all types, min(3, 6.7)) holds 2, its target 2 cut
# below the floor by C's protected 16 (floor 6): A's a0, where it waits (submitted after a1),
# waits for capacity, not over its share
# (it read OverShare, "target 2 (floor 2, ...)", the floor shown cut; an outside judge, stop 52;
# per type, below, A is over its b200 target of 0)
POOLED_CUT = "WaitingForCapacity"
# A_FIRST. A's order is a0 (submitted at 0) then a1 (at 1): a1 must leave the drain node d00
# (past its protection), so it is requeued and ranks as a queued job by submit time
# (optalloc.model.order.project_order, rule 5), and a0 (any type) fits a1's place on n01 (h100).
# So the 2 GPUs B gives up go to a0 and a1 leaves; the GPU beside a0 stays idle (a1 needs 2,
# no one else waits). Greedy's plan is the same (though greedy restarts no job leaving a drain
# node in the same pass, so it runs a0 whatever the submit order: the last two cases). Until
# stop 56's same-priority type-order links (optalloc.model.type_order) a1 moved onto the pair
# and a0 waited (WaitingForCapacity, or OverShare with a budget per type): a later teammate in
# an earlier one's place (rule 3)
A1_LEAVES = {"a1": ("PreemptedNodeDrain", ())}


@dataclass
class Case:
    name: str
    snap: object
    where: dict
    preempted: dict
    pending: dict = field(default_factory=dict)


CASES = [
    # A_FIRST (the next six but the idle-GPU case): B's freed pair goes to a0, not a1
    Case("a project over its share loses its priority-0 job, not its priority-2 job that runs "
         "at a third of its best speed there",
         _snap(),
         {**C_KEPT, "a0": (("n01", (0,)),), "b_hi": (("n01", (2, 3)),)},
         {**A1_LEAVES, "b_lo": ("PreemptedForFairShare", ("a0",))}),
    Case("so it does with a budget per gpu_type (billing weights differ)",
         _snap(b200_weight=1.6),
         {**C_KEPT, "a0": (("n01", (0,)),), "b_hi": (("n01", (2, 3)),)},
         {**A1_LEAVES, "b_lo": ("PreemptedForFairShare", ("a0",))}),
    # c0's idle GPU takes a0, so a1 moves onto B's freed pair: A's order holds either way
    Case("so it does where an idle GPU lets the other project's queued job start too",
         _snap(c0_gpus=7),
         {"c0": (("n00", tuple(range(7))),), "c1": (("b00", ALL),), "a0": (("n00", (7,)),),
          "a1": (("n01", (0, 1)),), "b_hi": (("n01", (2, 3)),)},
         {"a1": ("Moved", ()), "b_lo": ("PreemptedForFairShare", ("a1",))}),
    Case("so it does when the priority-2 job runs at its best speed",
         _snap(hi_speedup={}),
         {**C_KEPT, "a0": (("n01", (0,)),), "b_hi": (("n01", (2, 3)),)},
         {**A1_LEAVES, "b_lo": ("PreemptedForFairShare", ("a0",))}),
    Case("of one priority the job at a third of its best speed still goes (the model's choice)",
         _snap(hi_priority=0),
         {**C_KEPT, "a0": (("n01", (2,)),), "b_lo": (("n01", (0, 1)),)},
         {**A1_LEAVES, "b_hi": ("PreemptedForFairShare", ("a0",))}),
    Case("a lower-priority job still protected keeps its GPUs and the priority-2 job goes",
         _snap(lo_start=20 * H - 600),
         {**C_KEPT, "a0": (("n01", (2,)),), "b_lo": (("n01", (0, 1)),)},
         {**A1_LEAVES, "b_hi": ("PreemptedForFairShare", ("a0",))}),
    # a0 submitted after a1: a1 is ahead, moves onto the pair and a0 waits (greedy restarts
    # no job leaving a drain node in the same pass, so there a0 runs: the optimizer's freedom,
    # A's order kept either way). a0's reason is the stop-52 judge's (POOLED_CUT, above)
    Case("a teammate submitted after the job leaving the drain node waits while that job "
         "takes the GPUs its project is given",
         _snap(a0_submit=1.5),
         {**C_KEPT, "a1": (("n01", (0, 1)),), "b_hi": (("n01", (2, 3)),)},
         {"a1": ("Moved", ()), "b_lo": ("PreemptedForFairShare", ("a1",))},
         {"a0": POOLED_CUT}),
    Case("so it waits over its share with a budget per gpu_type",
         _snap(a0_submit=1.5, b200_weight=1.6),
         {**C_KEPT, "a1": (("n01", (0, 1)),), "b_hi": (("n01", (2, 3)),)},
         {"a1": ("Moved", ()), "b_lo": ("PreemptedForFairShare", ("a1",))},
         {"a0": "OverShare"}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_victim_is_the_lowest_ranked_job_that_frees_the_room(case: Case):
    plan = epoch.run_epoch(case.snap)
    assert _where(plan) == case.where
    assert preempted(plan) == case.preempted
    assert pending_codes(plan) == case.pending
    assert plan.report.status in ("optimal", "feasible")


def _solution(em, starts: dict, keeps: set) -> np.ndarray:
    """The model's point that starts job -> type and keeps the running jobs `keeps`."""
    snap, req = em.snap, em.req
    x = np.zeros(em.lm.n_vars)
    for c, (j, t) in enumerate(zip(req.cand_job, req.cand_type)):
        if starts.get(snap.jobs[j].id) == snap.type_names[t]:
            x[em.x[c]] = 1.0
    for i, j in enumerate(req.run_job):
        x[em.k[i]] = 1.0 if snap.jobs[j].id in keeps else 0.0
    return x


def test_a_stopped_priority_2_job_is_kept_in_place_of_its_teammate_and_the_one_behind_it_runs():
    """The helper's snapshot in small: the solution moves a1 onto n01 and stops b_hi, keeping
    b_lo; b_mid (priority 1) starts only while b_hi runs (a `keep_order` row), so it waited
    beside n00's idle GPU. With the keeps exchanged b_lo goes, b_hi stays and b_mid starts."""
    em = build_model(_snap(c0_gpus=7, a0=False, mid=True))
    x = _solution(em, {"a1": "h100"}, {"b_lo", "c0", "c1"})
    ids = [em.snap.jobs[j].id for j in em.req.run_job]
    kept = np.array([i in {"b_lo", "c0", "c1"} for i in ids])
    y = ranked_keeps(em, x, kept)
    assert y is not None
    assert {i: y[em.k[k]] for k, i in enumerate(ids) if i.startswith("b")} == \
        {"b_lo": 0.0, "b_hi": 1.0}
    assert ranked_keeps(em, y, np.array([i in {"b_hi", "c0", "c1"} for i in ids])) is None
    out = epoch.placed_outcome(em, x, "test", backend="highs", status="feasible", message="")
    started = {em.snap.jobs[j].id for j in em.req.cand_job[out.placed.started]}
    kept_ids = {i for i, k in zip(ids, out.placed.kept) if k}
    assert (started, kept_ids) == ({"a1", "b_mid"}, {"b_hi", "c0", "c1"})
    assert "victims ranked below in their team's order" in out.message
    assert out.model_point


def test_no_exchange_where_the_lower_priority_teammate_is_of_another_size():
    """Same type and size only: a teammate of another size frees other room (the placement
    decides), so the solution is left as it is."""
    em = build_model(_snap(a0=False))
    x = _solution(em, {"a1": "h100"}, {"b_lo", "c0", "c1"})
    ids = [em.snap.jobs[j].id for j in em.req.run_job]
    kept = np.array([i in {"b_lo", "c0", "c1"} for i in ids])
    assert ranked_keeps(em, x, kept) is not None
    em1 = build_model(_snap_sizes())
    ids1 = [em1.snap.jobs[j].id for j in em1.req.run_job]
    x1 = _solution(em1, {"a1": "h100"}, {"b_lo", "c0", "c1"})
    assert ranked_keeps(em1, x1, np.array([i in {"b_lo", "c0", "c1"} for i in ids1])) is None


def _snap_sizes():
    """_snap with b_lo a 1-GPU job (n01 GPU 0) and GPU 1 idle."""
    snap = _snap(a0=False)
    jobs = [j if j.id != "b_lo" else running("b_lo", "B", "h100", [("n01", (0,))],
                                             start=17 * H, gpu_types=("h100",), submit_time=2.0)
            for j in snap.jobs]
    cfg = Config(snap.gpu_types, snap.nodes, flat_org({"A": 2, "B": 2, "C": 2}), Policy(),
                 tuple(jobs))
    return build_snapshot(cfg, now=20 * H, usage_ratio={"A": 1.3, "B": 2.9, "C": 0.5})
