"""Messages that state only what is true (DESIGN.md rule 7), from hand-written cases of stop
34: a project's unallocated job is no holder of its share, an unallocated taker is no
allocated demand, and a project's small share of the idle GPUs is blamed on projects ahead
of it only where there are some."""

from __future__ import annotations

from optalloc.epoch import run_epoch
from optalloc.types import Job
from tests.test_epoch_toy import H, flat_org, nodes_of, running, snapshot


def test_an_unallocated_job_is_not_named_as_holding_its_projects_share():
    """B's protected job holds half the only node; A's unallocated priority-2 job U runs on
    the other half; A's 8-GPU priority-0 job Q cannot fit. Before: LowerPriorityInProject,
    "it holds 0, 4 of them in 1 of its jobs with a higher priority than 0 (U)"."""
    jobs = [running("RB", "B", "h100", [("n00", range(4))], start=9.9 * H),
            Job("U", "A", 4, min_runtime_s=0, priority=2),
            Job("Q", "A", 8, min_runtime_s=H, priority=0, submit_time=1.0)]
    plan = run_epoch(snapshot(nodes_of(1, 8), flat_org({"A": 1, "B": 1}), jobs))
    assert sorted(p.job_id for p in plan.placements) == ["RB", "U"]
    (q,) = plan.pending
    assert q.code.value == "WaitingForCapacity"
    assert "4 h100 GPUs are protected" in q.message
    assert "4 run unallocated work" in q.message
    assert "(U)" not in q.message


def test_an_unallocated_job_that_starts_is_not_named_as_allocated_demand():
    jobs = [running("U", "B", "h100", [("n00", range(8))], start=9.9 * H, min_runtime_s=0),
            Job("QA", "A", 2, min_runtime_s=H), Job("QB", "B", 2, min_runtime_s=0)]
    plan = run_epoch(snapshot(nodes_of(1, 8), flat_org({"A": 1, "B": 1}), jobs))
    (u,) = plan.preemptions
    assert u.code.value == "PreemptedUnallocated"
    assert u.message == "unallocated work yields to allocated demand (QA)"
    assert tuple(u.needed_by) == ("QA",)


def test_a_zero_share_of_idle_gpus_names_running_unallocated_work_not_projects_ahead():
    """C (ratio 0) ranks first; B's running unallocated job holds the only node. Before:
    "C's share is 0 GPUs (projects ahead of it in that order want them all)"."""
    jobs = [running("U1", "B", "h100", [("n00", range(4))], start=9.9 * H, min_runtime_s=0),
            Job("X", "C", 4, min_runtime_s=0)]
    plan = run_epoch(snapshot(nodes_of(1, 4), flat_org({"A": 1, "B": 1, "C": 1}), jobs,
                              usage={"B": 5.0, "C": 0.0}))
    (x,) = plan.pending
    assert x.code.value == "UnallocatedYields"
    assert "projects ahead" not in x.message
    assert "running unallocated work of others holds them" in x.message
