"""Moves: a running job past its protection may restart on another gpu_type in the same epoch
in place of being preempted to the queue (optalloc.model.requirements). Each case asserts the
whole outcome: GPUs per (project, type), what is preempted or moved and with which code, what
waits. 8 h100 + 8 b200, equal shares, 1 h protections, unless said."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from optalloc.epoch import run_epoch
from optalloc.model.pooled import route
from optalloc.runners.base import moved_ids
from optalloc.sim.invariants import check_plan
from optalloc.snapshot import build_snapshot
from optalloc.types import Config, GpuType, Policy
from tests.test_epoch_gpu_types import TYPES, by_project_type, cluster, only
from tests.test_epoch_toy import H, flat_org, pending_codes, preempted, queued, running, snapshot


def a_job_on_h100(start=8 * H, **kw):
    """A's 8-GPU job running on the h100 node since `start` (1 h protection: past it at 10 h)."""
    return running("A0", "A", "h100", [("n00", list(range(8)))], start=start, min_runtime_s=H,
                   **kw)


def test_a_job_past_its_protection_moves_to_the_idle_type_so_a_project_confined_to_its_type_gets_its_floor():
    """Equal usage: before, A kept the h100 node, B (h100 only) waited below its floor and the
    8 b200 GPUs idled. Now A's job restarts on b200 and B takes h100."""
    snap = snapshot(cluster(), flat_org({"A": 1, "B": 1}), [a_job_on_h100()] + only("B", 8, 1, "h100"),
                    types=TYPES)
    plan = run_epoch(snap)
    assert by_project_type(snap, plan) == {("A", "b200"): 8, ("B", "h100"): 8}
    assert preempted(plan) == {"A0": ("Moved", tuple(f"B{i:02d}" for i in range(8)))}
    msg = plan.preemptions[0].message
    assert msg.startswith("restarts on b200 (b00) in place of waiting: past its protection")
    assert "its GPUs go to B" in msg
    assert not plan.pending and not plan.floor_violations
    assert moved_ids(plan) == {"A0"}
    check_plan(snap, plan)
    from optalloc.cli.epoch_cmd import format_summary
    assert ("0 kept running, 8 started, 1 preempted (1 of them moved: restarted elsewhere), "
            "0 pending") in format_summary(plan, snap)


def test_the_same_move_happens_when_the_confined_project_has_the_lower_usage_ratio():
    """Before, A was preempted to the queue (its floor then unmet this epoch, b200 idle)."""
    snap = snapshot(cluster(), flat_org({"A": 1, "B": 1}), [a_job_on_h100()] + only("B", 8, 1, "h100"),
                    types=TYPES, usage={"A": 1.0, "B": 0.5})
    plan = run_epoch(snap)
    assert by_project_type(snap, plan) == {("A", "b200"): 8, ("B", "h100"): 8}
    assert preempted(plan)["A0"][0] == "Moved"
    assert not plan.floor_violations


def test_a_protected_job_is_never_moved():
    snap = snapshot(cluster(), flat_org({"A": 1, "B": 1}),
                    [a_job_on_h100(start=9.5 * H)] + only("B", 8, 1, "h100"), types=TYPES)
    plan = run_epoch(snap)
    assert by_project_type(snap, plan) == {("A", "h100"): 8}
    assert not plan.preemptions
    assert set(pending_codes(plan)) == {f"B{i:02d}" for i in range(8)}
    check_plan(snap, plan)


def test_a_job_is_not_moved_to_run_faster_on_an_idle_type():
    """Its project's budget is routed where it runs; a move would only lose the work since its
    checkpoint (a move is worth no more than the keep)."""
    job = a_job_on_h100(speedup={"b200": 2.0})
    snap = snapshot(cluster(), flat_org({"A": 1, "B": 1}), [job], types=TYPES)
    plan = run_epoch(snap)
    assert by_project_type(snap, plan) == {("A", "h100"): 8}
    assert not plan.preemptions and not plan.pending


def test_a_running_job_stays_when_the_other_project_can_use_either_type():
    snap = snapshot(cluster(), flat_org({"A": 1, "B": 1}), [a_job_on_h100()] + queued("B", 8, 1),
                    types=TYPES)
    plan = run_epoch(snap)
    assert by_project_type(snap, plan) == {("A", "h100"): 8, ("B", "b200"): 8}
    assert not plan.preemptions and not plan.pending


def test_a_job_confined_to_its_type_or_not_resumable_is_preempted_not_moved():
    """Not resumable: a stop ends it (no restart), so it cannot move."""
    for job in (replace(a_job_on_h100(), gpu_types=("h100",)),
                replace(a_job_on_h100(), resumable=False)):
        snap = snapshot(cluster(), flat_org({"A": 1, "B": 1}), [job] + only("B", 8, 1, "h100"),
                        types=TYPES, usage={"A": 1.0, "B": 0.5})
        plan = run_epoch(snap)
        assert by_project_type(snap, plan) == {("B", "h100"): 8}
        assert preempted(plan)["A0"][0] == "PreemptedForFairShare"
        assert pending_codes(plan) == {}  # A0 was running: it is preempted, not pending


def per_type_snapshot(usage):
    jobs = [a_job_on_h100()] + only("B", 8, 1, "h100")
    cfg = Config((GpuType("h100", 1.0), GpuType("b200", 1.6)), tuple(cluster()),
                 flat_org({"A": 1, "B": 1}), Policy(), tuple(jobs))
    return build_snapshot(cfg, now=10 * H, usage_ratio=usage)


def test_with_per_type_budgets_a_displaced_job_restarts_where_its_project_has_room():
    """Different billing weights: each type is its own budget. A holds all 8 h100 (entitled to
    4 there), B (lower usage ratio) takes its h100 floor; A's job restarts on b200, where A is
    entitled and nobody waits, instead of going back to the queue."""
    snap = per_type_snapshot({"A": 1.0, "B": 0.5})
    plan = run_epoch(snap)
    assert by_project_type(snap, plan) == {("A", "b200"): 8, ("B", "h100"): 8}
    assert preempted(plan)["A0"][0] == "Moved"
    assert not plan.pending
    check_plan(snap, plan)


def test_with_per_type_budgets_and_equal_ratios_the_floor_held_by_work_that_can_move_yields():
    """Equal usage ratios (a fresh cluster): A's floor on h100 and B's cannot both be met
    there, and the ratios tie; A's job could restart on the idle b200, so A's floor yields
    (fairshare.floor_yield) and both run. Before, the holding rule kept A and B waited below
    its floor beside 8 idle b200 GPUs. With B's ratio higher the same holds: moving meets both."""
    for usage in ({}, {"A": 0.5, "B": 1.0}):
        snap = per_type_snapshot(usage)
        plan = run_epoch(snap)
        assert by_project_type(snap, plan) == {("A", "b200"): 8, ("B", "h100"): 8}
        assert preempted(plan)["A0"][0] == "Moved"
        assert not plan.pending and not plan.floor_violations


def test_a_floor_held_by_work_that_could_move_does_not_yield_when_the_other_type_is_full():
    """b200 is full (C's protected job): A's job cannot restart there, so the usage ratios
    decide as before: A's lower ratio keeps its floor on h100."""
    c = running("C0", "C", "b200", [("b00", list(range(8)))], start=9.5 * H, min_runtime_s=H)
    jobs = [a_job_on_h100(), c] + only("B", 8, 1, "h100")
    cfg = Config((GpuType("h100", 1.0), GpuType("b200", 1.6)), tuple(cluster()),
                 flat_org({"A": 1, "B": 1, "C": 1}), Policy(), tuple(jobs))
    snap = build_snapshot(cfg, now=10 * H, usage_ratio={"A": 0.5, "B": 1.0})
    plan = run_epoch(snap)
    assert by_project_type(snap, plan) == {("A", "h100"): 8, ("C", "b200"): 8}
    assert not plan.preemptions


def test_routing_moves_running_work_only_where_that_raises_the_max_min():
    """A's 8 running GPUs on type 0 (past protection) may move to type 1. B wants 8 of type 0
    only: A moves (z 0.5 -> 1). With B able to use type 1 too, A stays."""
    stay = np.array([[8.0, 0.0], [0.0, 0.0]])
    X = route(np.array([8.0, 8.0]), np.array([[8.0, 8.0], [8.0, 0.0]]), np.zeros((2, 2)),
              np.array([8.0, 8.0]), stay=stay)
    np.testing.assert_allclose(X, [[0, 8], [8, 0]], atol=1e-6)
    X = route(np.array([8.0, 8.0]), np.array([[8.0, 8.0], [8.0, 8.0]]), np.zeros((2, 2)),
              np.array([8.0, 8.0]), stay=stay)
    np.testing.assert_allclose(X, [[8, 0], [0, 8]], atol=1e-6)


def test_a_protected_job_beside_it_does_not_count_as_the_running_work_that_stays():
    """One project, two 1-GPU jobs on h100 (one protected, one past it), both 1.5x faster on
    b200, nothing waiting: both stay. (The routing's stay step first counted the protected
    GPU as the one that stays and routed the other to b200, where its floor moved it.)"""
    jobs = [running("P1", "A", "h100", [("n00", [0])], start=9.9 * H, min_runtime_s=H,
                    speedup={"b200": 1.5}),
            running("P2", "A", "h100", [("n00", [1])], start=8 * H, min_runtime_s=H,
                    speedup={"b200": 1.5})]
    snap = snapshot(cluster(), flat_org({"A": 1}), jobs, types=TYPES)
    plan = run_epoch(snap)
    assert by_project_type(snap, plan) == {("A", "h100"): 2}
    assert not plan.preemptions
    X = route(np.array([2.0]), np.array([[2.0, 1.0]]), np.array([[1.0, 0.0]]),
              np.array([8.0, 8.0]), speed=np.array([[2 / 3, 1.0]]),
              stay=np.array([[1.0, 0.0]]))
    np.testing.assert_allclose(X, [[2, 0]], atol=1e-6)


def test_a_floor_does_not_yield_when_the_idle_gpus_of_the_other_type_cannot_hold_the_job():
    """b200 has 8 idle GPUs, but as 4 on each of two nodes (C's protected 4-GPU jobs hold the
    rest): A's 8-GPU job cannot restart there. Counting idle GPUs per type, A's floor yielded
    and A was preempted to the queue for B, one floor swapped for the other and A's work
    lost; counting where the job's shape fits, the ratios tie and the running job stays."""
    nodes = cluster()[:1] + [replace(n, name=f"b{i:02d}") for i, n in
                             enumerate(cluster()[1:] * 2)]
    cs = [running(f"C{i}", "C", "b200", [(f"b{i:02d}", [0, 1, 2, 3])], start=9.5 * H,
                  min_runtime_s=H) for i in range(2)]
    jobs = [a_job_on_h100()] + cs + only("B", 8, 1, "h100")
    cfg = Config((GpuType("h100", 1.0), GpuType("b200", 1.6)), tuple(nodes),
                 flat_org({"A": 1, "B": 1, "C": 1}), Policy(), tuple(jobs))
    snap = build_snapshot(cfg, now=10 * H, usage_ratio={})
    from optalloc.model.constraints.fairshare import floor_yield
    from optalloc.model.pooled import fair_targets
    from optalloc.model.requirements import compute_requirements
    req = compute_requirements(snap)
    assert not floor_yield(snap, req, fair_targets(snap, req).demand).any()
    plan = run_epoch(snap)
    assert by_project_type(snap, plan) == {("A", "h100"): 8, ("C", "b200"): 8}
    assert not plan.preemptions
    assert set(pending_codes(plan)) == {f"B{i:02d}" for i in range(8)}
    check_plan(snap, plan)


def test_a_floor_does_not_yield_when_waiting_work_asks_for_the_other_types_idle_gpus():
    """Per-type budgets, equal ratios: b200 is idle but C's jobs, confined to b200, wait for
    it (8 or 2 of them). A's job could not restart there beside C's work (C's floor, or no
    room for 8), so A's floor does not yield: it keeps h100 by the holding rule. Before, it
    yielded, A was preempted to the queue for B and its work lost, a floor traded for one."""
    for nc in (8, 2):
        jobs = [a_job_on_h100()] + only("B", 8, 1, "h100") + only("C", nc, 1, "b200")
        cfg = Config((GpuType("h100", 1.0), GpuType("b200", 1.6)), tuple(cluster()),
                     flat_org({"A": 1, "B": 1, "C": 1}), Policy(), tuple(jobs))
        snap = build_snapshot(cfg, now=10 * H, usage_ratio={})
        plan = run_epoch(snap)
        assert by_project_type(snap, plan) == {("A", "h100"): 8, ("C", "b200"): nc}
        assert not plan.preemptions
        check_plan(snap, plan)


def test_a_floor_that_a_waiting_job_confined_to_its_type_needs_does_not_yield_with_the_job_that_could_move():
    """A helper's case (stop 37): per-type budgets, h100 floors A 4 and B 4, A ranked first.
    A's running 4-GPU job could restart on idle a100, but A's queued 4-GPU job may use only
    h100. The floor yield took all of A's h100 floor with the movable job: A's job moved, B's
    8-GPU job took all of h100 and A's h100-only job waited below A's floor (none reported).
    The yield is now the share of what A wants on h100 (8), so A's jobs keep h100, as under
    greedy, and B's floor is the one reported."""
    from optalloc.sim.policies.greedy import GreedyScheduler
    from optalloc.types import Job, Node

    nodes = (Node("n00", "h100", 8), Node("a00", "a100", 8))
    jobs = (running("A_mv", "A", "h100", [("n00", range(4))], start=2 * H, min_runtime_s=H),
            Job("A_q", "A", 4, gpu_types=("h100",), min_runtime_s=H, submit_time=1.0),
            Job("B_q", "B", 8, gpu_types=("h100",), min_runtime_s=H, submit_time=2.0))
    cfg = Config((GpuType("h100", 1.0), GpuType("a100", 1.5)), nodes,
                 flat_org({"A": 1, "B": 1}), Policy(), jobs)
    snap = build_snapshot(cfg, now=10 * H, usage_ratio={"A": 0.1, "B": 0.5})
    plan = run_epoch(snap)
    check_plan(snap, plan)
    placed = sorted((p.job_id, p.gpu_type) for p in plan.placements)
    assert placed == [("A_mv", "h100"), ("A_q", "h100")]
    assert placed == sorted((p.job_id, p.gpu_type) for p in GreedyScheduler().decide(snap).placements)
    assert pending_codes(plan) == {"B_q": "WaitingForCapacity"}
    assert [(v.org_node, v.gpu_type, v.got_gpus) for v in plan.floor_violations] == [
        ("B", "h100", 0.0)]
