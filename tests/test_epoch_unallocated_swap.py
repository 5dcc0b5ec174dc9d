"""Unallocated work never displaces unallocated work to consolidate it (DESIGN.md section 8,
rule 4): three running 1-GPU unallocated jobs stay beside five idle GPUs while an 8-GPU
unallocated job waits, and the model agrees with the placement, so the plan is certified
(before stop 19 the model swapped them, no plan could place that, and the epoch reported a
gap to a bound nothing could reach)."""

from __future__ import annotations

from optalloc.epoch import run_epoch
from optalloc.types import Job

from test_epoch_toy import H, flat_org, nodes_of, pending_codes, running, snapshot


def _jobs():
    small = [running(f"u{i}", "A", "h100", [("n00", [i])], start=9 * H, min_runtime_s=0.0)
             for i in range(3)]
    return small + [Job("big", "B", 8, min_runtime_s=0.0, submit_time=1.0)]


def test_three_small_unallocated_jobs_are_not_preempted_for_one_big_one():
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1, "B": 1}), _jobs())
    plan = run_epoch(snap)
    assert sorted(p.job_id for p in plan.placements) == ["u0", "u1", "u2"]
    assert plan.preemptions == ()
    assert pending_codes(plan) == {"big": "UnallocatedYields"}
    rep = plan.report
    assert rep.status == "optimal" and rep.gap <= 1e-9


def test_the_big_one_takes_an_idle_node_beside_them():
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), _jobs())
    plan = run_epoch(snap)
    on = {p.job_id: [a.node for a in p.nodes] for p in plan.placements}
    assert on == {"u0": ["n00"], "u1": ["n00"], "u2": ["n00"], "big": ["n01"]}
    assert plan.preemptions == () and plan.report.status == "optimal"
