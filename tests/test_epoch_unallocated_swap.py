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


def big_gang_for_unallocated_work():
    """B's 4-GPU unallocated job on n02 beside two empty nodes; A's 24-GPU unallocated gang
    waits (found by hypothesis: tests/test_epoch_reservation_properties.py)."""
    jobs = [running("u", "B", "h100", [("n02", range(4))], start=9.7 * H, min_runtime_s=0.0),
            Job("big", "A", 24, min_runtime_s=0.0, submit_time=1.0)]
    return snapshot(nodes_of(3, 8), flat_org({"A": 1, "B": 1}), jobs)


def test_a_24_gpu_unallocated_gang_takes_the_cluster_from_the_4_gpu_job_the_model_trades():
    """Not for nothing (DESIGN.md section 8, rule 4): 4 GPUs of unallocated work for a gang
    that fills all 24, 20 of them idle. The model trades them and the placement follows (it
    kept the 4-GPU job and left the gang waiting beside 20 idle GPUs: ITP cluster04, 30 days,
    163 such unallocated starts); the preempted job is told why, truly."""
    plan = run_epoch(big_gang_for_unallocated_work())
    on = {p.job_id: [(a.node, len(a.gpus)) for a in p.nodes] for p in plan.placements}
    assert on == {"big": [("n00", 8), ("n01", 8), ("n02", 8)]}
    assert [(p.job_id, p.code.value, p.needed_by, p.message) for p in plan.preemptions] == [
        ("u", "PreemptedUnallocated", ("big",), "unallocated work yields to unallocated work "
         "that keeps more GPUs busy (24 GPUs where it ran 4) (big)")]
    assert pending_codes(plan) == {}
    assert plan.report.status == "optimal" and plan.report.gap <= 1e-9
