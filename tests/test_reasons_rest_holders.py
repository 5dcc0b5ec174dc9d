"""A waiting job's reason names who holds the GPUs that are neither protected nor free: its
own project's jobs, other projects' allocated work or unallocated work, and not the GPUs of
waiting reserved gangs as if those projects ran them (DESIGN.md section 8, rule 7). A
helper's hand-written cases at stop 44; each asserts the whole reason."""

from __future__ import annotations

from optalloc.epoch import run_epoch
from optalloc.types import Job, Node, Policy, ReasonCode

from test_epoch_toy import H, flat_org, running, snapshot

NOW = 10 * H


def _why(plan) -> dict:
    return {r.job_id: (r.code, r.message) for r in plan.pending}


def test_the_rest_run_the_projects_own_job_not_other_projects_floors():
    """One h100 node of 8 (C's protected 4-GPU job on it) and one b200 node of 4 (A's
    priority-0 job past its protection). B queues a b200-only 4-GPU job, A a priority-1
    1-GPU h100-only job. A's job moves onto the h100 node for B's; the h100 GPUs it takes are
    A's own, not other projects' floors and targets."""
    jobs = [running("c", "C", "h100", [("h0", range(4))], 9.5 * H, 2 * H),
            running("lo", "A", "b200", [("b0", range(4))], 5 * H, H, priority=0),
            Job("hi", "A", 1, gpu_types=("h100",), min_runtime_s=H, priority=1,
                submit_time=1.0),
            Job("b", "B", 4, gpu_types=("b200",), min_runtime_s=H, submit_time=2.0)]
    snap = snapshot([Node("h0", "h100", 8), Node("b0", "b200", 4)],
                    flat_org({"A": 2, "B": 1, "C": 1}), jobs,
                    usage={"A": 0.5, "B": 0.0, "C": 0.5}, types=("h100", "b200"))
    plan = run_epoch(snap)
    assert _why(plan) == {"hi": (ReasonCode.WAITING_FOR_CAPACITY, (
        "project A is below its floor (4 of 5 GPUs over all types; its target 5), but 1 GPUs "
        "of h100 are not free, and the plan preempts none for it: 4 h100 GPUs are protected "
        "(the first protection ends at t=41400), the rest: 4 run A's own jobs (0 free)"))}


def test_the_rest_run_unallocated_work_not_other_projects_floors():
    """h100 nodes of 4 and 8; C's protected 3-GPU job on the 8-GPU node. A's 8-GPU job fits
    no node; A's unallocated 2-GPU job runs on idle GPUs."""
    jobs = [running("c", "C", "h100", [("h1", range(3))], 9.5 * H, 8 * H),
            Job("big", "A", 8, min_runtime_s=8 * H, submit_time=1.0),
            Job("u", "A", 2, min_runtime_s=0.0, submit_time=2.0)]
    snap = snapshot([Node("h0", "h100", 4), Node("h1", "h100", 8)], flat_org({"A": 3, "C": 1}),
                    jobs)
    plan = run_epoch(snap)
    assert _why(plan) == {"big": (ReasonCode.WAITING_FOR_CAPACITY, (
        "project A is below its floor (0 of 8 h100 GPUs; its target 8), but 8 GPUs of h100 are "
        "not free, and the plan preempts none for it: 3 h100 GPUs are protected (the first "
        "protection ends at t=63000), the rest: 2 run unallocated work (7 free)"))}


def test_reserved_nodes_are_not_said_to_be_held_by_projects_that_run_nothing():
    """4 x 8 h100 with the lookahead: C's protected jobs on three nodes; A and B each queue a
    16-GPU gang (both reserved); C a 30-minute 8-GPU job (backfills a reserved node) and an
    8-GPU job of no stated length, which waits. It was told the rest were held by A and B
    '(16 of target 4): past a target with whole jobs'; they run nothing."""
    jobs = [running(f"c{i}", "C", "h100", [(f"n{i}", range(8))], NOW - 8 * H + (i + 1) * H,
                     8 * H) for i in range(3)]
    jobs += [Job("GA", "A", 16, min_runtime_s=8 * H, submit_time=0.0),
             Job("GB", "B", 16, min_runtime_s=8 * H, submit_time=1.0),
             Job("short", "C", 8, min_runtime_s=8 * H, duration_s=1800, submit_time=2.0),
             Job("long", "C", 8, min_runtime_s=8 * H, submit_time=3.0)]
    snap = snapshot([Node(f"n{i}", "h100", 8) for i in range(4)],
                    flat_org({"A": 1, "B": 1, "C": 1}), jobs, usage={"C": 2.0},
                    policy=Policy(max_reservations=2))
    plan = run_epoch(snap)
    why = _why(plan)
    assert {j: c for j, (c, _) in why.items()} == {
        "GA": ReasonCode.RESERVED, "GB": ReasonCode.RESERVED,
        "long": ReasonCode.WAITING_FOR_CAPACITY}
    assert why["long"][1] == (
        "C holds every allocated h100 GPU (32) and this job needs 8 more: 24 h100 GPUs are "
        "protected (the first protection ends at t=39600), 0 free; the rest: 8 run C's own "
        "jobs; A, B hold nodes reserved for waiting gangs")


# A job waiting beside several lower-priority starts of its team: tests/test_epoch_several_places.py
