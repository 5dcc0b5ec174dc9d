"""A start on GPUs that a preempted job still holds during its grace period: the local runner
says it waits for them (not an error), and starts it once they are free; `explain` says the
same. (Found following the README walkthrough: the plan and `explain` said a2 started while the
runner had refused it with "GPU 2 is in use".)"""

from __future__ import annotations

from optalloc.plan.explain import explain
from optalloc.snapshot import build_snapshot
from optalloc.types import Config, GpuType, JobState, OrgNode, Policy
from tests.conftest import wait_until
from tests.test_runner_local import (  # noqa: F401  (fixtures)
    NODE,
    T0,
    ended,
    job,
    make_runner,
    marks,
    place,
    plan,
    scripts,
)


def test_a_start_on_gpus_a_preempted_job_still_holds_waits_and_is_not_refused(
        make_runner, scripts, marks):
    r = make_runner()
    b1 = job("b1", scripts["stubborn"], marks)
    a2 = job("a2", scripts["polite"], marks)
    r.apply(plan(T0, place("b1", 2, 3)), {"b1": b1}, T0)
    wait_until(lambda: (marks / "b1.starts").exists())
    res = r.apply(plan(T0 + 30, place("a2", 2, 3), preempt=["b1"], grace=10),
                  {"a2": a2}, T0 + 30)
    assert res.preempting == ("b1",) and res.started == () and res.errors == {}
    assert res.waiting["a2"].startswith("a2 starts once b1 (notice sent; killed at ")
    assert "box:2, box:3" in res.waiting["a2"]
    # the next epoch, still inside the grace: it still waits (the notice went out before)
    res = r.apply(plan(T0 + 35, place("a2", 2, 3)), {"a2": a2}, T0 + 35)
    assert set(res.waiting) == {"a2"} and res.errors == {}
    # after the grace b1 is killed; then a2 starts on those GPUs
    ended(r, T0 + 40, "b1")
    res = r.apply(plan(T0 + 45, place("a2", 2, 3)), {"a2": a2}, T0 + 45)
    assert res.started == ("a2",) and not res.waiting


def test_a_start_on_gpus_a_job_that_stays_holds_is_still_an_error(make_runner, scripts, marks):
    r = make_runner()
    r.apply(plan(T0, place("b1", 2)), {"b1": job("b1", scripts["stubborn"], marks)}, T0)
    res = r.apply(plan(T0 + 5, place("b1", 2), place("a2", 2)),
                  {"a2": job("a2", scripts["polite"], marks)}, T0 + 5)
    assert res.waiting == {}
    assert res.errors == {"a2": "a2: GPU 2 of box is in use by another running job"}


def test_explain_says_a_start_waits_for_the_preempted_jobs_to_leave():
    from tests.test_epoch_toy import running
    from optalloc.types import Job

    org = OrgNode("lab", children=(OrgNode("alice", share=9), OrgNode("bob", share=1)))
    jobs = (running("a1", "alice", "h100", [("box", [0, 1])], start=T0 - 60, min_runtime_s=20),
            running("b1", "bob", "h100", [("box", [2, 3])], start=T0 - 60, min_runtime_s=20),
            Job("a2", "alice", 2, min_runtime_s=20, submit_time=T0 - 100))
    snap = build_snapshot(Config((GpuType("h100"),), (NODE,), org, Policy(grace_s=10), jobs),
                          now=T0)
    from optalloc.epoch import run_epoch
    p = run_epoch(snap)
    assert [x.job_id for x in p.preemptions] == ["b1"]
    d = explain(snap, p, "a2")
    assert d["outcome"] == "started"
    assert d["message"] == ("starts once b1 (PreemptedForFairShare, grace 10 s) has left these "
                            "GPUs: the first epoch after that starts it")
    assert snap.jobs[snap.job_index["a2"]].state is JobState.QUEUED


def test_a_moved_job_is_stopped_first_and_its_new_placement_waits_for_a_later_epoch(
        make_runner, scripts, marks):
    """A plan that moves a running job (code Moved, placed again elsewhere): the runner sends
    the notice and reports the new placement as waiting, never a second run of the job
    beside the first, and never an error."""
    from dataclasses import replace as _replace

    from optalloc.types import Preemption, ReasonCode
    r = make_runner()
    b1 = job("b1", scripts["stubborn"], marks)
    r.apply(plan(T0, place("b1", 2, 3)), {"b1": b1}, T0)
    wait_until(lambda: (marks / "b1.starts").exists())
    move = _replace(plan(T0 + 30, place("b1", 0, 1)), preemptions=(
        Preemption("b1", ReasonCode.MOVED, "restarts on h100 (box) in place of waiting", 10.0),))
    res = r.apply(move, {"b1": b1}, T0 + 30)
    assert res.preempting == ("b1",) and res.started == () and res.errors == {}
    assert res.waiting["b1"].startswith("b1 moves: it is stopping after its preemption notice")
    assert (marks / "b1.starts").read_text().count("\n") <= 1  # one run, no second start
    ended(r, T0 + 40, "b1")
