"""A debug job that its project's debug allowance has room for may run beyond the fair-share
targets on its path (optalloc.model.constraints.fairshare.define_debug_allowance), so where it
waits, what holds it is the GPUs, not its share: WaitingForCapacity with the allowance named,
never OverShare's "starting this job would exceed [the target]". Before (stop 58) a 1-GPU
debug job of a project at its target got its longer teammate's OverShare line word for word
(the gangs scenario: 27 of 39 debug jobs that waited over 0.2 h were told OverShare while
the whole cluster was protected). Where the allowance is full, or a teammate of a higher
priority waits (the allowance is not earned), OverShare stays. Whole expected outcomes: two
nodes of 8 GPUs, A and B equal shares (targets 8 each), allowance 0.25 x 8 = 2 GPUs."""

from __future__ import annotations

from dataclasses import replace

from optalloc.epoch import run_epoch
from optalloc.sim.invariants import check_plan
from optalloc.types import Job
from tests.test_epoch_toy import H, flat_org, nodes_of, running, snapshot

NOW = 10 * H
WFC, OVER = "WaitingForCapacity", "OverShare"


def _decide(jobs):
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), jobs, now=NOW)
    plan = run_epoch(snap)
    check_plan(snap, plan)
    return ({"runs": sorted(p.job_id for p in plan.placements),
             "preempted": sorted(p.job_id for p in plan.preemptions),
             "pending": {r.job_id: r.code.value for r in plan.pending}},
            {r.job_id: r.message for r in plan.pending})


def _a_runs(start=NOW - 600):
    return running("Ar", "A", "h100", [("n00", range(8))], start=start, min_runtime_s=4 * H)


def _b_runs(start=NOW - 600):
    return running("Br", "B", "h100", [("n01", range(8))], start=start, min_runtime_s=4 * H)


def _debug(jid="Adbg", gpus=1, **kw):
    return Job(jid, "A", gpus, min_runtime_s=600, submit_time=NOW - 60, **kw)


def _long(jid="Along", **kw):
    return Job(jid, "A", 1, min_runtime_s=4 * H, submit_time=NOW - 60, **kw)


def test_a_debug_job_with_room_in_its_allowance_waits_for_capacity_where_all_is_protected():
    out, msg = _decide([_a_runs(), _b_runs(), _debug(), _long()])
    assert out == {"runs": ["Ar", "Br"], "preempted": [],
                   "pending": {"Adbg": WFC, "Along": OVER}}
    assert msg["Adbg"] == (
        "project A may run this debug job beyond its fair-share target: its debug allowance "
        "is 2 h100 GPUs beyond it, 0 of them held (it holds 8 of its target 8), but 1 GPUs "
        "of h100 are not free, and the plan preempts none for it: 16 h100 GPUs are protected "
        "(the first protection ends at t=49800), none is free")
    # its longer teammate is held by A's target, as before
    assert "starting this 1-GPU job would exceed it" in msg["Along"]


def test_a_debug_job_does_not_take_gpus_another_project_holds_within_its_target():
    # B's 8 GPUs are past their protection but within B's target: the allowance is worth
    # less than another project's target GPU, so B keeps them and the debug job waits
    out, msg = _decide([_a_runs(), _b_runs(start=NOW - 5 * H), _debug(), _long()])
    assert out == {"runs": ["Ar", "Br"], "preempted": [],
                   "pending": {"Adbg": WFC, "Along": OVER}}
    assert msg["Adbg"].endswith(
        "8 h100 GPUs are protected (the first protection ends at t=49800), the rest: 8 hold "
        "other projects' floors and targets (0 free)")


def test_a_debug_job_starts_on_a_free_gpu_beyond_its_projects_target():
    # the same A and B, one GPU of B's node free: the debug job takes it, the long one waits
    b = running("Br", "B", "h100", [("n01", range(7))], start=NOW - 600, min_runtime_s=4 * H)
    out, _ = _decide([_a_runs(), b, _debug(), _long()])
    assert out == {"runs": ["Adbg", "Ar", "Br"], "preempted": [], "pending": {"Along": OVER}}


def test_a_debug_job_whose_allowance_is_full_is_over_its_share():
    # A's 2 running debug GPUs fill its allowance of 2: a third waits as over A's share
    a = running("Ar", "A", "h100", [("n00", range(6))], start=NOW - 600, min_runtime_s=4 * H)
    d = running("Ad0", "A", "h100", [("n00", (6, 7))], start=NOW - 60, min_runtime_s=600)
    out, msg = _decide([a, d, _b_runs(), _debug()])
    assert out == {"runs": ["Ad0", "Ar", "Br"], "preempted": [], "pending": {"Adbg": OVER}}
    assert msg["Adbg"].startswith("A holds 8 h100 GPUs, its fair-share target this epoch is 8")


def test_a_debug_job_behind_a_higher_priority_teammate_earns_no_allowance():
    # a priority-1 job of A waits: the debug job (priority 0) earns no allowance, so A's
    # target holds it like any job of its priority
    hi = replace(_long("Ahi"), priority=1)
    out, msg = _decide([_a_runs(), _b_runs(), _debug(), hi])
    assert out["pending"] == {"Adbg": OVER, "Ahi": OVER}
    assert "debug allowance" not in msg["Adbg"]


def test_two_debug_jobs_alike_share_one_reason_and_a_long_one_of_their_size_does_not():
    jobs = [_a_runs(), _b_runs(), _debug("Adbg0"), _debug("Adbg1"), _long("Along0"),
            _long("Along1")]
    out, msg = _decide(jobs)
    assert out["pending"] == {"Adbg0": WFC, "Adbg1": WFC, "Along0": OVER, "Along1": OVER}
    assert msg["Adbg0"] == msg["Adbg1"] and msg["Along0"] == msg["Along1"]
