"""Debug jobs (protection <= 15 min) are a cheap grant: beyond their project's target, and ahead
of its longer jobs of the same priority, never ahead of a higher priority; a job whose only nodes are down waits for them
(NodeDraining), it is not impossible. Whole expected outcomes."""

from __future__ import annotations

from dataclasses import replace

from optalloc.epoch import run_epoch
from optalloc.types import Job, NodeState
from tests.test_epoch_toy import (
    H,
    flat_org,
    gpus_by_project,
    nodes_of,
    pending_codes,
    queued,
    running,
    snapshot,
)

M = 60.0
NOW = 10 * H


def _started(plan) -> set[str]:
    return {p.job_id for p in plan.placements}


def test_a_debug_job_may_pass_its_projects_longer_jobs_of_the_same_priority():
    # it holds its GPUs for minutes: A runs six of its 1-GPU jobs and the 2-GPU debug job
    jobs = queued("A", 10, 1) + queued("B", 10, 1) + [
        Job("Adbg", "A", 2, min_runtime_s=10 * M, submit_time=100)]
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), jobs)
    plan = run_epoch(snap)
    assert gpus_by_project(snap, plan) == {"A": 8, "B": 8}
    assert {j for j in _started(plan) if j.startswith("A")} == {
        f"A{i:02d}" for i in range(6)} | {"Adbg"}


def test_a_low_priority_debug_job_waits_behind_its_projects_higher_priority_jobs():
    jobs = [replace(j, priority=5) for j in queued("A", 10, 1)] + queued("B", 10, 1) + [
        Job("Adbg", "A", 2, min_runtime_s=10 * M, submit_time=100)]
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), jobs)
    plan = run_epoch(snap)
    assert {j for j in _started(plan) if j.startswith("A")} == {f"A{i:02d}" for i in range(8)}
    assert "Adbg" in pending_codes(plan)


def test_a_larger_debug_job_does_not_pass_a_higher_priority_job_of_its_project():
    """One 8-GPU node: Hi (priority 1, 4 GPUs, 2 h) and a debug job (priority 0, 8 GPUs, 10
    min). Holding 8 GPUs meets more of A's floor than 4, and the precedence link from Hi to
    the debug job was dropped for every debug job, so the debug job started and Hi waited;
    the link is dropped only for a longer job of the debug job's own priority."""
    for debug_min in (10, 15):
        jobs = [Job("Hi", "A", 4, min_runtime_s=2 * H, priority=1, submit_time=0.0),
                Job("Dbg", "A", 8, min_runtime_s=debug_min * M, submit_time=1.0)]
        snap = snapshot(nodes_of(1, 8), flat_org({"A": 1}), jobs)
        plan = run_epoch(snap)
        assert _started(plan) == {"Hi"}
        assert pending_codes(plan) == {"Dbg": "LowerPriorityInProject"}


def test_a_debug_job_between_two_jobs_never_lets_a_lower_priority_job_pass_the_first():
    """A alone on 2 x 4 GPUs; its queue: Hi (1 GPU, priority 2), D (1 GPU, priority 2, a
    10-minute debug job), Hi3 (3 GPUs, priority 2), Lo (4 GPUs, priority 0). Hi, D and Hi3
    run; Lo waits. Before, Lo's order link went to D (the latest 1-GPU job ahead of it), D's
    to Hi was dropped (a debug job may pass a longer job of its priority), and Lo ran while
    Hi waited (found by a helper's random search at stop 35, seeds 560 and 822)."""
    jobs = [Job("Hi", "A", 1, min_runtime_s=8 * H, priority=2, submit_time=360.0),
            Job("Lo", "A", 4, min_runtime_s=H, priority=0, submit_time=1380.0),
            Job("Hi3", "A", 3, min_runtime_s=H, priority=2, submit_time=1740.0),
            Job("D", "A", 1, min_runtime_s=10 * M, priority=2, submit_time=900.0)]
    plan = run_epoch(snapshot(nodes_of(2, 4), flat_org({"A": 1}), jobs, now=NOW))
    assert _started(plan) == {"Hi", "D", "Hi3"}
    assert pending_codes(plan) == {"Lo": "LowerPriorityInProject"}


def test_a_debug_job_still_uses_free_gpus_beyond_its_projects_target():
    # A holds 6 of its 8 and its next job needs 4: 2 GPUs are free, the debug job takes them
    jobs = [running("Br", "B", "h100", [("n01", range(8))], start=NOW - 10 * M),
            running("Ar", "A", "h100", [("n00", range(6))], start=NOW - 10 * M),
            Job("Ahi", "A", 4, min_runtime_s=H, priority=5, submit_time=5),
            Job("Adbg", "A", 2, min_runtime_s=10 * M, submit_time=100)]
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), jobs, now=NOW)
    plan = run_epoch(snap)
    assert _started(plan) == {"Br", "Ar", "Adbg"}
    assert pending_codes(plan) == {"Ahi": "OverShare"}


def test_a_job_whose_only_nodes_are_down_waits_for_them():
    nodes = nodes_of(1, 8) + nodes_of(1, 8, gpu_type="b200", prefix="b", state=NodeState.DOWN)
    snap = snapshot(nodes, flat_org({"A": 1}), [
        Job("Jb", "A", 4, min_runtime_s=H, gpu_types=("b200",))], types=("h100", "b200"))
    plan = run_epoch(snap)
    assert pending_codes(plan) == {"Jb": "NodeDraining"}
    assert "draining or down" in plan.pending[0].message
