"""One budget over every gpu_type (equal shares on each type, one billing weight: the pooled
mode, optalloc.model.pooled): the share rows count a project's tier-1 GPUs on all types
against its pooled floor and target, so its whole jobs meet them on whichever type they run.
Before, the pooled floors were split over types in proportion to the routed targets (A's floor
of 5 as 2 h100 + 3 b200), and an 8-GPU job on h100 met 2 of it: the plans traded floors the
pooled budget and the usage ratios would not. Each case asserts the whole outcome.
8 h100 + 8 b200 (one node each), 1 h protections, unless said."""

from __future__ import annotations

from dataclasses import replace

from optalloc.epoch import run_epoch
from optalloc.sim.invariants import check_plan
from optalloc.snapshot import build_snapshot
from optalloc.types import Config, GpuType, Job, OrgNode, Policy
from tests.test_epoch_gpu_types import by_project_type, cluster, only
from tests.test_epoch_toy import H, flat_org, nodes_of, pending_codes, preempted, queued, running


def pooled(nodes, org, jobs, usage=None, types=("h100", "b200")):
    cfg = Config(tuple(GpuType(t) for t in types), tuple(nodes), org, Policy(), tuple(jobs))
    snap = build_snapshot(cfg, now=10 * H, usage_ratio=usage or {})
    plan = run_epoch(snap)
    check_plan(snap, plan)
    return snap, plan


def a_job_on_h100():
    return running("A0", "A", "h100", [("n00", list(range(8)))], start=8 * H, min_runtime_s=H)


def test_a_running_job_that_meets_its_projects_pooled_floor_is_not_preempted_for_an_equal_one():
    """C (b200 only) wants all of b200, so A's job cannot move; A (lowest usage ratio) and B
    (h100 only) cannot both run. A's job meets A's pooled floor (5) as B's jobs would meet
    B's: floors tie, A's lower ratio keeps it. Before: preempted for B ("meets more floors")."""
    jobs = [a_job_on_h100()] + only("B", 8, 1, "h100") + only("C", 8, 1, "b200")
    snap, plan = pooled(cluster(), flat_org({"A": 1, "B": 1, "C": 1}), jobs,
                        {"A": 0.5, "B": 1.0, "C": 1.0})
    assert by_project_type(snap, plan) == {("A", "h100"): 8, ("C", "b200"): 8}
    assert not plan.preemptions
    assert set(pending_codes(plan)) == {f"B{i:02d}" for i in range(8)}


def test_a_running_gang_is_not_preempted_for_another_projects_floor_it_ties():
    """A's 16-GPU gang on h100 past its protection cannot fit b200 (C's protected GPU there);
    B is confined to h100. Equal ratios: the running gang stays. Before: preempted, A's
    floor unmet and 15 b200 GPUs idle."""
    nodes = nodes_of(2, 8) + nodes_of(2, 8, "b200", "b")
    gang = running("AG", "A", "h100", [("n00", list(range(8))), ("n01", list(range(8)))],
                   start=8 * H, min_runtime_s=H)
    c0 = running("C0", "C", "b200", [("b01", [0])], start=9.9 * H, min_runtime_s=8 * H)
    jobs = [gang, c0] + only("B", 16, 1, "h100")
    snap, plan = pooled(nodes, flat_org({"A": 1, "B": 1, "C": 1}), jobs)
    assert by_project_type(snap, plan) == {("A", "h100"): 16, ("C", "b200"): 1}
    assert not plan.preemptions


def test_a_job_that_may_use_either_type_goes_where_it_meets_the_most_floors():
    """A (lowest ratio, one 8-GPU job for either type), B (h100 only), C (b200 only, 4 GPUs):
    A on b200 and B on h100 meet 10 floor GPUs (5 + 5); A on h100 and C meet 9. Before, A
    waited below its floor (the routing split it as 3 b200) and 4 b200 GPUs idled."""
    jobs = [Job("A8", "A", 8, min_runtime_s=H)] + only("B", 8, 1, "h100") + only("C", 4, 1, "b200")
    snap, plan = pooled(cluster(), flat_org({"A": 1, "B": 1, "C": 1}), jobs,
                        {"A": 0.1, "B": 2.0, "C": 2.0})
    assert by_project_type(snap, plan) == {("A", "b200"): 8, ("B", "h100"): 8}
    assert set(pending_codes(plan)) == {f"C{i:02d}" for i in range(4)}


def test_the_higher_priority_job_of_a_project_runs_where_only_it_fits():
    """A's priority-10 job may run only on h100, its priority-0 job on b200 (or anywhere); B
    may run anywhere. A's share is one job: its higher-priority one runs, B takes b200.
    Before: the routing gave A its target on b200, Alo ran and Ahi waited `OverShare`."""
    ahi = Job("Ahi", "A", 8, min_runtime_s=H, priority=10, gpu_types=("h100",), submit_time=5)
    for alo_types in (("b200",), ()):
        alo = Job("Alo", "A", 8, min_runtime_s=H, priority=0, gpu_types=alo_types, submit_time=0)
        snap, plan = pooled(cluster(), flat_org({"A": 1, "B": 1}), [ahi, alo] + queued("B", 16, 1))
        assert by_project_type(snap, plan) == {("A", "h100"): 8, ("B", "b200"): 8}
        assert {p.job_id for p in plan.placements if p.job_id.startswith("A")} == {"Ahi"}


def test_unallocated_work_stays_where_it_runs_when_the_other_type_is_idle():
    """A's unallocated job runs on b200 (min_runtime 0); B's 8-GPU job fits the idle h100.
    Before: U was evicted and B started on b200 (the types' order decided), h100 idle."""
    u = running("U", "A", "b200", [("b00", list(range(8)))], start=9.9 * H, min_runtime_s=0)
    for types in (("h100", "b200"), ("b200", "h100")):
        for bjobs in ([Job("B8", "B", 8, min_runtime_s=H)], queued("B", 4, 1)):
            snap, plan = pooled(cluster(), flat_org({"A": 1, "B": 1}), [u] + bjobs, types=types)
            assert by_project_type(snap, plan) == {("A", "b200"): 8,
                                                   ("B", "h100"): sum(j.gpus for j in bjobs)}
            assert not plan.preemptions


def test_a_project_below_its_pooled_floor_gets_gpus_held_past_its_target_on_another_type():
    """A holds all 16 GPUs: a protected job on h100 (its whole floor) and one past its
    protection on b200. B (lower ratio) wants 2: A's b200 job is preempted for it, as on one
    type. Before: kept (A's split floor counted 3 of it on b200) and B waited below its floor."""
    ab = running("Ab", "A", "b200", [("b00", list(range(8)))], start=8 * H, min_runtime_s=H)
    a2 = running("A2", "A", "h100", [("n00", list(range(8)))], start=9.9 * H, min_runtime_s=H)
    snap, plan = pooled(cluster(), flat_org({"A": 1, "B": 1}),
                        [ab, a2, Job("Bd", "B", 2, min_runtime_s=H)], {"A": 1.0, "B": 0.0})
    assert by_project_type(snap, plan) == {("A", "h100"): 8, ("B", "b200"): 2}
    assert preempted(plan) == {"Ab": ("PreemptedForFairShare", ("Bd",))}
    assert not plan.floor_violations


def test_a_project_that_may_run_anywhere_leaves_the_contested_type_to_those_confined_to_it():
    """A and B may run only on h100, C anywhere: A and B share h100 4 + 4, C takes b200.
    Before: the capped targets rounded B down to 3 and the GPU went to C (9)."""
    jobs = only("A", 16, 1, "h100") + only("B", 16, 1, "h100") + queued("C", 16, 1)
    for usage in ({"A": 2.0, "B": 0.0, "C": 1.0}, {}):
        snap, plan = pooled(cluster(), flat_org({"A": 1, "B": 1, "C": 1}), jobs, usage)
        assert by_project_type(snap, plan) == {("A", "h100"): 4, ("B", "h100"): 4,
                                               ("C", "b200"): 8}


def test_a_job_moves_so_its_program_keeps_its_floor_in_a_nested_tree():
    """P1 {A, B}, P2 {C}; C (lower ratio) wants h100 only. A's job past its protection
    restarts on b200: P1 keeps its floor (8), nothing idles, no work is lost for nothing.
    Before: preempted to the queue, B took 4 b200 GPUs and 4 idled."""
    org = OrgNode("root", children=(OrgNode("P1", 1, children=(OrgNode("A", 1), OrgNode("B", 1))),
                                    OrgNode("P2", 1, children=(OrgNode("C", 1),))))
    jobs = [a_job_on_h100()] + only("C", 8, 1, "h100") + queued("B", 4, 1)
    snap, plan = pooled(cluster(), org, jobs,
                        {"P1": 1.0, "A": 1.0, "B": 1.0, "P2": 0.2, "C": 0.2})
    assert by_project_type(snap, plan) == {("A", "b200"): 8, ("C", "h100"): 8}
    assert preempted(plan)["A0"][0] == "Moved"
    assert [(v.org_node, v.floor_gpus) for v in plan.floor_violations] == [("B", 4.0)]


def test_pooled_messages_count_a_projects_gpus_over_all_types():
    jobs = [Job("A8", "A", 8, min_runtime_s=H)] + only("B", 8, 1, "h100") + only("C", 4, 1, "b200")
    snap, plan = pooled(cluster(), flat_org({"A": 1, "B": 1, "C": 1}), jobs,
                        {"A": 0.1, "B": 2.0, "C": 2.0})
    msg = {r.job_id: r.message for r in plan.pending}["C00"]
    assert "over all types" in msg


def test_pooled_reasons_name_what_the_others_hold_over_all_types():
    """A and B, sixteen 1-GPU jobs each for either type: 8 + 8. A waiting job is told the
    others hold 8 of a target of 8 over all types (it said "holds 4 of target 0": one type's
    share of the routing)."""
    snap, plan = pooled(cluster(), flat_org({"A": 1, "B": 1}), queued("A", 16, 1) + queued("B", 16, 1))
    assert {p: sum(v for (q, _), v in by_project_type(snap, plan).items() if q == p)
            for p in "AB"} == {"A": 8, "B": 8}
    for r in plan.pending:
        assert r.code.value == "OverShare"
        other = "B" if r.job_id.startswith("A") else "A"
        assert f"{other} (usage ratio 0.00, holds 8 of target 8 over all types)" in r.message


def test_a_better_ranked_programs_confined_project_is_routed_before_a_worse_ranked_programs():
    """Programs P1 {a1, a2} and P2 {b1}, one budget over 8 h100 + 8 b200; a1 and b1 may run
    only on h100, a2 anywhere. P2 ranks first (or the ratios tie): b1 gets all of h100 and a2
    b200, each program its floor of 8. Before, the routing's max-min went project by project:
    a1 (half of P1's target) and b1 (all of P2's) split h100 2 : 6, b1 was capped at 6 and P1
    got 10 (b1's pending reason said OverShare); greedy gives 8 and 8. Now the routing holds
    each program's share first (pooled.route's levels), then its projects'."""
    org = OrgNode("root", children=(
        OrgNode("P1", children=(OrgNode("a1"), OrgNode("a2"))),
        OrgNode("P2", children=(OrgNode("b1"),))))
    jobs = (queued("a1", 8, 2, gpu_types=("h100",)) + queued("b1", 8, 2, gpu_types=("h100",))
            + queued("a2", 8, 2))
    for r1, r2 in ((0.8, 0.2), (0.5, 0.5)):
        usage = {"P1": r1, "a1": r1, "a2": r1, "P2": r2, "b1": r2}
        snap, plan = pooled(cluster(), org, jobs, usage)
        assert by_project_type(snap, plan) == {("a2", "b200"): 8, ("b1", "h100"): 8}
