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


def test_unallocated_work_leaving_a_drain_node_never_displaces_running_unallocated_work():
    """n0 (4 GPUs, idle), n2 (8 GPUs, C's running 8-GPU unallocated job U_c), and two drain
    nodes d1 and d3 with A's 2-GPU and B's 8-GPU unallocated jobs; equal shares. Both drain
    jobs leave (rule 5); U_a restarts on n0, U_b waits, U_c stays. Before (found by a
    helper's random search at stop 35), U_b's restart was valued as the running work it was,
    above U_c by B's Fair-Tree rank, and took U_c's node: 8 GPUs of unallocated work for 8,
    C's work lost, and U_c was told it yields to work that "keeps more GPUs busy (8 GPUs
    where it ran 8)". Greedy keeps U_c."""
    from optalloc.types import Node, NodeState

    drain = NodeState.DRAIN
    nodes = [Node("n0", "h100", 4), Node("d1", "h100", 8, drain), Node("n2", "h100", 8),
             Node("d3", "h100", 8, drain)]
    jobs = [running("U_a", "A", "h100", [("d1", (0, 1))], start=9.8 * H, min_runtime_s=0.0),
            running("U_b", "B", "h100", [("d3", range(8))], start=9 * H, min_runtime_s=0.0),
            running("U_c", "C", "h100", [("n2", range(8))], start=9 * H, min_runtime_s=0.0)]
    plan = run_epoch(snapshot(nodes, flat_org({"A": 1, "B": 1, "C": 1}), jobs))
    assert {p.job_id: [a.node for a in p.nodes] for p in plan.placements} == {
        "U_c": ["n2"], "U_a": ["n0"]}
    assert {p.job_id: (p.code.value, p.message) for p in plan.preemptions} == {
        "U_a": ("Moved", "restarts on h100 (n0) in place of waiting: node d1 is draining and "
                         "unallocated work leaves at once"),
        "U_b": ("PreemptedNodeDrain", "node d3 is draining and unallocated work leaves at "
                                      "once")}


def test_a_job_unallocated_on_a_type_never_evicts_running_unallocated_work_there():
    """Per-type budgets (the billing weights differ): A has the h100 share, B only b200's, C
    none. C's 8-GPU unallocated job runs on n0 (h100); B's protected job fills b0 (b200); B
    queues a 1-GPU job, allocated work on b200 but unallocated work on h100. C's job stays
    and B's waits for b200. Before (a helper's case at stop 35), the backfill let B's job
    evict C's on h100 as allocated work would (7 GPUs idle after), and C's job was told it
    yielded to work that "keeps more GPUs busy (1 GPUs where it ran 8)"."""
    from optalloc.snapshot import build_snapshot
    from optalloc.types import Config, GpuType, Node, OrgNode, Policy

    org = OrgNode("root", children=(
        OrgNode("A", share=1.0, share_by_type={"b200": 0.0}),
        OrgNode("B", share=0.0, share_by_type={"b200": 1.0}),
        OrgNode("C", share=0.0)))
    nodes = (Node("n0", "h100", 8), Node("b0", "b200", 8))
    jobs = (running("C_u", "C", "h100", [("n0", range(8))], start=7 * H, min_runtime_s=0.0),
            running("B_prot", "B", "b200", [("b0", range(8))], start=9.5 * H,
                    min_runtime_s=2 * H),
            Job("B_small", "B", 1, min_runtime_s=H, submit_time=1.0))
    cfg = Config((GpuType("h100", 1.0), GpuType("b200", 1.6)), nodes, org, Policy(), jobs)
    plan = run_epoch(build_snapshot(cfg, now=10 * H, usage_ratio={}))
    assert sorted(p.job_id for p in plan.placements) == ["B_prot", "C_u"]
    assert plan.preemptions == ()
    assert list(pending_codes(plan)) == ["B_small"]
