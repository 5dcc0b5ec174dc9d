"""Several gpu_types: a project's budget is GPU time on the whole cluster, placed on the types
its jobs can use (optalloc.model.pooled). Each case asserts the whole outcome: GPUs per
(project, type), and what waits. 8 h100 + 8 b200, equal shares, 1 h protections, unless said."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from optalloc.epoch import run_epoch
from optalloc.model.pooled import pooled_applies, route
from optalloc.types import Job, OrgNode
from tests.test_epoch_toy import H, flat_org, nodes_of, pending_codes, queued, running, snapshot

TYPES = ("h100", "b200")


def cluster():
    return nodes_of(1, 8) + nodes_of(1, 8, gpu_type="b200", prefix="b")


def only(project, n, gpus, gpu_type, prefix=None, **kw):
    return [replace(j, gpu_types=(gpu_type,)) for j in queued(project, n, gpus, prefix=prefix, **kw)]


def by_project_type(snap, plan) -> dict:
    c: Counter = Counter()
    for p in plan.placements:
        c[(snap.jobs[snap.job_index[p.job_id]].project, p.gpu_type)] += p.gpus
    return dict(c)


def test_a_project_that_may_use_any_type_leaves_the_contested_type_to_one_confined_to_it():
    jobs = queued("A", 16, 1) + only("B", 16, 1, "h100")
    snap = snapshot(cluster(), flat_org({"A": 1, "B": 1}), jobs, types=TYPES)
    plan = run_epoch(snap)
    assert by_project_type(snap, plan) == {("A", "b200"): 8, ("B", "h100"): 8}
    assert not plan.floor_violations
    assert plan.report.status == "optimal"


def test_the_lower_usage_ratio_still_ranks_first_when_it_is_confined_to_one_type():
    jobs = queued("A", 16, 1) + only("B", 16, 1, "h100")
    snap = snapshot(cluster(), flat_org({"A": 1, "B": 1}), jobs, types=TYPES,
                    usage={"A": 3.0, "B": 0.0})
    assert by_project_type(snap, run_epoch(snap)) == {("A", "b200"): 8, ("B", "h100"): 8}


def test_no_gpu_idles_while_a_flexible_project_could_move_to_the_type_nobody_else_wants():
    jobs = only("A", 16, 1, "b200") + queued("B", 8, 1)
    snap = snapshot(cluster(), flat_org({"A": 1, "B": 1}), jobs, types=TYPES)
    plan = run_epoch(snap)
    assert by_project_type(snap, plan) == {("A", "b200"): 8, ("B", "h100"): 8}
    assert set(pending_codes(plan)) == {f"A{i:02d}" for i in range(8, 16)}


def test_a_project_that_holds_its_whole_budget_on_one_type_does_not_take_the_others_floor():
    jobs = [Job("Ahi", "A", 8, min_runtime_s=H, priority=10, gpu_types=("b200",), submit_time=5),
            Job("Alo", "A", 8, min_runtime_s=H, submit_time=0),
            Job("Bh", "B", 8, min_runtime_s=H, gpu_types=("h100",))]
    for a, b in (("A", "B"), ("Z", "B"), ("A", "C")):  # not a tie broken by name
        ren = [replace(j, project={"A": a, "B": b}[j.project]) for j in jobs]
        snap = snapshot(cluster(), flat_org({a: 1, b: 1}), ren, types=TYPES)
        plan = run_epoch(snap)
        assert by_project_type(snap, plan) == {(a, "b200"): 8, (b, "h100"): 8}
        assert pending_codes(plan) == {"Alo": "OverShare"}
        msg = next(r.message for r in plan.pending)
        assert "entitled 8.0 GPUs over all gpu types" in msg


def test_a_type_full_of_protected_work_sends_the_rest_of_the_budget_to_the_siblings():
    # B is confined to h100, where A's protected jobs hold 6 GPUs: B gets the 2 left there,
    # and A's share beyond what B can use is A's, on b200
    run = [running(f"R{i}", "A", "h100", [("n00", [i])], start=9.5 * H, min_runtime_s=8 * H)
           for i in range(6)]
    jobs = run + queued("A", 16, 1) + only("B", 16, 1, "h100")
    snap = snapshot(cluster(), flat_org({"A": 1, "B": 1}), jobs, types=TYPES)
    plan = run_epoch(snap)
    assert by_project_type(snap, plan) == {("A", "h100"): 6, ("A", "b200"): 8, ("B", "h100"): 2}
    assert not plan.preemptions


def test_per_type_shares_keep_per_type_budgets():
    # share_by_type says the user wants per-type budgets: A may hold half of each type
    org = OrgNode("root", children=(OrgNode("A", share=1, share_by_type={"b200": 1}),
                                    OrgNode("B", share=1, share_by_type={"b200": 3})))
    jobs = queued("A", 16, 1) + only("B", 16, 1, "h100")
    snap = snapshot(cluster(), org, jobs, types=TYPES)
    assert not pooled_applies(snap)
    got = by_project_type(snap, run_epoch(snap))
    assert got[("A", "h100")] == 4 and got[("B", "h100")] == 4 and got[("A", "b200")] == 8


def test_one_type_is_filled_as_before():
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), queued("A", 16, 1) +
                    queued("B", 16, 1))
    assert not pooled_applies(snap)
    assert by_project_type(snap, run_epoch(snap)) == {("A", "h100"): 8, ("B", "h100"): 8}


@pytest.mark.parametrize("want, full, cap, expect", [
    # both fit: each on the type it can use
    ([8, 8], [[8, 8], [8, 0]], [8, 8], [[0, 8], [8, 0]]),
    # one type, asked 2x: max-min gives each half of what it wants
    ([8, 8], [[8, 0], [8, 0]], [8, 8], [[4, 0], [4, 0]]),
    # 12 wanted where 8 fit for one: the other still gets all it wants on the other type
    ([4, 12], [[0, 8], [8, 0]], [8, 8], [[0, 4], [8, 0]]),
])
def test_routing_is_max_min_within_types_and_jobs(want, full, cap, expect):
    X = route(np.array(want, float), np.array(full, float), np.zeros((2, 2)), np.array(cap, float))
    assert X.sum(axis=0).max() <= max(cap) + 1e-9
    np.testing.assert_allclose(X, expect, atol=1e-6)


def test_types_with_different_billing_weights_keep_per_type_budgets():
    from optalloc.snapshot import build_snapshot
    from optalloc.types import Config as Cfg, GpuType, Policy

    jobs = queued("A", 16, 1) + only("B", 16, 1, "h100")
    cfg = Cfg((GpuType("h100", 1.0), GpuType("b200", 1.6)), tuple(cluster()),
              flat_org({"A": 1, "B": 1}), Policy(), tuple(jobs))
    snap = build_snapshot(cfg, now=10 * H, usage_ratio={})
    assert not pooled_applies(snap)


@pytest.mark.parametrize("b_speed_on_b200", [3.0, 1.5])
def test_a_project_whose_jobs_run_faster_on_one_type_is_routed_there_when_the_other_is_indifferent(
        b_speed_on_b200):
    """Equal shares route as well onto either type: A's jobs run alike on both, B's faster on
    b200, so B's target goes to b200 and A's to h100 (before, the routing took either, and the
    targets' floors held B on h100, where its jobs run at a third or two thirds of their
    speed)."""
    jobs = queued("A", 2, 8) + [replace(j, speedup={"b200": b_speed_on_b200})
                                for j in queued("B", 2, 8)]
    snap = snapshot(cluster(), flat_org({"A": 1, "B": 1}), jobs, types=TYPES)
    assert pooled_applies(snap)
    plan = run_epoch(snap)
    assert by_project_type(snap, plan) == {("A", "h100"): 8, ("B", "b200"): 8}
    assert pending_codes(plan) == {"A01": "OverShare", "B01": "OverShare"}
    # one budget over both types: each is at it, whichever type holds it
    msg = {r.job_id: r.message for r in plan.pending}
    assert msg["A01"].startswith("A holds 8 GPUs over all types (8 h100), its fair-share "
                                 "target this epoch is 8 over all types")
    assert msg["B01"].startswith("B holds 8 GPUs over all types (8 b200), its fair-share "
                                 "target this epoch is 8 over all types")
    assert not plan.floor_violations
    assert plan.report.gap is not None and plan.report.gap <= 1e-4


def test_routing_by_speed_never_costs_a_gpu_or_the_max_min():
    """The speed step only chooses among the routings with the most GPUs at the max-min z:
    B runs 3x faster on type 1 but A can only use type 1, so A keeps its half there."""
    X = route(np.array([8.0, 8.0]), np.array([[0.0, 8.0], [8.0, 8.0]]), np.zeros((2, 2)),
              np.array([8.0, 8.0]), speed=np.array([[1.0, 1.0], [1 / 3, 1.0]]))
    np.testing.assert_allclose(X, [[0, 8], [8, 0]], atol=1e-6)
    X = route(np.array([8.0, 8.0]), np.array([[8.0, 8.0], [8.0, 8.0]]), np.zeros((2, 2)),
              np.array([8.0, 8.0]), speed=np.array([[1.0, 1.0], [1 / 3, 1.0]]))
    np.testing.assert_allclose(X, [[8, 0], [0, 8]], atol=1e-6)
