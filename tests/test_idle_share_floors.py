"""An idle top-level sibling's share (DESIGN.md rule 2) in the floors and in the debt.

`targets.lifted_floors`: the floor of a top-level node that is owed (a debt) is lifted to its
part of an idle sibling's share (shared in proportion to the entitlements, capped at demand)
as far as its target, the Fair-Tree order, gives it this epoch; a node not owed keeps
min(demand, entitled). `OrgTree.fair_shares`: the share the debt counts as owed
hour by hour, the same sharing down the whole tree. `org.share_capped`: the water-filling both
use. Tables name the whole outcome; the properties hold on random trees and demands."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optalloc.model.targets import lifted_floors, nested_floors
from optalloc.org import OrgTree, share_capped
from optalloc.types import OrgNode


def flat_tree(**shares) -> OrgTree:
    return OrgTree.build(OrgNode("root", children=tuple(
        OrgNode(n, share=s) for n, s in shares.items())), ["h100"])


def col(org: OrgTree, values: dict) -> np.ndarray:
    return np.array([[float(values.get(n, 0.0))] for n in org.names])


def as_dict(org: OrgTree, a: np.ndarray) -> dict:
    return {n: float(a[i, 0]) for i, n in enumerate(org.names) if i}


@pytest.mark.parametrize("demand, target, expected", [
    # C idle: its 8 flow to A and B (12 each) as far as each one's target goes
    ({"A": 24, "B": 24}, {"A": 8, "B": 16}, {"A": 8, "B": 12, "C": 0}),
    ({"A": 24, "B": 24}, {"A": 12, "B": 12}, {"A": 12, "B": 12, "C": 0}),
    ({"A": 24, "B": 24}, {"A": 16, "B": 8}, {"A": 12, "B": 8, "C": 0}),
    # nobody idle: the floors stay min(demand, entitled)
    ({"A": 24, "B": 24, "C": 24}, {"A": 8, "B": 8, "C": 8}, {"A": 8, "B": 8, "C": 8}),
    # C wants 2 of its 8: its 6 others are shared 3 / 3, within the targets
    ({"A": 24, "B": 24, "C": 2}, {"A": 13, "B": 9, "C": 2}, {"A": 11, "B": 9, "C": 2}),
    # a node never gets a floor above what it wants
    ({"A": 9, "B": 24}, {"A": 9, "B": 15}, {"A": 9, "B": 15, "C": 0}),
], ids=["the-better-ranked-one-gets-its-part-of-the-idle-share",
        "tied-siblings-split-it-by-shares",
        "the-other-way-round",
        "without-an-idle-sibling-nothing-moves",
        "a-partly-idle-siblings-rest-is-shared-within-the-targets",
        "capped-at-demand"])
def test_owed_top_level_floors_take_an_idle_siblings_share_as_far_as_the_target_gives_it(
        demand, target, expected):
    org = flat_tree(A=1, B=1, C=1)  # 24 GPUs: 8 entitled each
    D, T = col(org, demand), col(org, target)
    E = col(org, {"A": 8, "B": 8, "C": 8})
    F = nested_floors(org, D, E)
    everyone = np.ones(org.n, bool)
    assert as_dict(org, lifted_floors(org, F, T, D, E, everyone)) == expected
    # a node not owed keeps its floor, min(demand, entitled)
    nobody = np.zeros(org.n, bool)
    assert (lifted_floors(org, F, T, D, E, nobody) == F).all()
    only_b = np.array([n == "B" for n in org.names])
    got = as_dict(org, lifted_floors(org, F, T, D, E, only_b))
    assert got == {**as_dict(org, F), "B": expected["B"]}


def test_a_programs_lifted_floor_is_shared_among_its_projects():
    # P {x, y} and Q {q} and an idle R, 8 each of 24: P's 8 + its part of R's (4) = 12,
    # x and y 6 each; Q ranked after P gets no more than its target
    org = OrgTree.build(OrgNode("root", children=(
        OrgNode("P", children=(OrgNode("x"), OrgNode("y"))),
        OrgNode("Q", children=(OrgNode("q"),)), OrgNode("R"))), ["h100"])
    D = col(org, {"P": 40, "x": 20, "y": 20, "Q": 20, "q": 20})
    E = col(org, {"P": 8, "x": 4, "y": 4, "Q": 8, "q": 8, "R": 8})
    T = col(org, {"P": 16, "x": 8, "y": 8, "Q": 8, "q": 8})
    F = lifted_floors(org, nested_floors(org, D, E), T, D, E, np.ones(org.n, bool))
    assert as_dict(org, F) == {"P": 12, "x": 6, "y": 6, "Q": 8, "q": 8, "R": 0}


def test_fair_shares_give_an_idle_share_to_siblings_first_then_by_shares():
    # root -> P {x (1), y (1)}, Q (2): 8 GPU-h an hour, P 4 (x 2, y 2), Q 4
    org = OrgTree.build(OrgNode("root", children=(
        OrgNode("P", children=(OrgNode("x"), OrgNode("y"))), OrgNode("Q"))), ["h100"])
    E = col(org, {"P": 4, "x": 2, "y": 2, "Q": 4})
    hours = [  # demands per hour -> fair shares
        ({"x": 6, "y": 0, "Q": 6}, {"P": 4, "x": 4, "y": 0, "Q": 4}),  # y's 2 go to x first
        ({"x": 8, "y": 0, "Q": 1}, {"P": 7, "x": 7, "y": 0, "Q": 1}),  # Q's 3 go to P
        ({"x": 1, "y": 1, "Q": 1}, {"P": 2, "x": 1, "y": 1, "Q": 1}),  # nobody above demand
        ({"x": 9, "y": 9, "Q": 9}, {"P": 4, "x": 2, "y": 2, "Q": 4}),  # the shares
    ]
    D = np.hstack([col(org, {**d, "P": d["x"] + d["y"]}) for d, _ in hours])
    got = org.fair_shares(D, np.repeat(E, len(hours), axis=1))
    for h, (_, want) in enumerate(hours):
        assert {n: float(got[i, h]) for i, n in enumerate(org.names) if i} == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0])),
                min_size=1, max_size=6),
       st.integers(0, 80))
def test_share_capped_is_a_water_fill(members, total):
    cap = np.array([float(c) for c, _ in members])
    w = np.array([x for _, x in members])
    out = share_capped(float(total), cap, w)
    assert (out >= -1e-9).all() and (out <= cap + 1e-9).all()  # never above what one wants
    if total >= cap.sum():
        assert out == pytest.approx(cap)
        return
    assert out.sum() <= total + 1e-6
    live = w > 0
    assert (out[~live] == 0).all()  # nothing to a member of no weight below the caps
    if live.any() and out.sum() < min(total, cap[live].sum()) - 1e-6:
        pytest.fail("some of the total was left while a member wanted more")
    # every member below its cap holds the same amount per weight, at least anyone's
    below = live & (out < cap - 1e-9)
    if below.any():
        lam = out[below] / w[below]
        assert lam == pytest.approx(np.full(below.sum(), lam[0]))
        assert (out[live] / w[live] <= lam[0] + 1e-6).all()
    # the column form is each column on its own
    two = share_capped(np.array([float(total), float(total) / 2]), np.stack([cap, cap], axis=1),
                       np.stack([w, w], axis=1))
    assert two[:, 0] == pytest.approx(out)
    assert two[:, 1] == pytest.approx(share_capped(float(total) / 2, cap, w))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=3, max_size=3),
       st.lists(st.integers(1, 3), min_size=3, max_size=3),
       st.lists(st.integers(0, 24), min_size=3, max_size=3))
def test_lifted_floors_lie_between_the_floors_and_the_targets(demand, shares, target):
    org = flat_tree(A=shares[0], B=shares[1], C=shares[2])
    ent = org.entitlement[:, 0] * 24
    D = np.array([[0.0]] + [[float(d)] for d in demand])
    E = ent[:, None]
    F = nested_floors(org, D, E)
    T = np.maximum(np.array([[0.0]] + [[float(t)] for t in target]), F)  # targets >= floors
    L = lifted_floors(org, F, T, D, E, np.ones(org.n, bool))
    assert (L >= F).all() and (L <= np.maximum(F, T)).all() and (L <= D + 1e-9).all()
    assert L[1:].sum() <= 24 + 1e-9 and L[0, 0] == 0
    assert (L == np.floor(L)).all()


def _idle_third(fair: dict, usage: dict, owed: dict | None = None):
    """3 nodes of 8, A = B = C (8 each), C idle: A wants a 16-GPU gang, B 24 1-GPU jobs;
    `fair`: GPU-hours owed against the fair share (C's flowing), `owed`: the published."""
    from optalloc.snapshot import build_snapshot
    from optalloc.types import Config, GpuType, Policy
    from tests.test_epoch_toy import flat_org, nodes_of, queued

    jobs = queued("A", 1, 16) + queued("B", 24, 1)
    cfg = Config((GpuType("h100"),), tuple(nodes_of(3, 8)),
                 flat_org({"A": 1, "B": 1, "C": 1}), Policy(), tuple(jobs))
    return build_snapshot(cfg, now=36000.0, usage_ratio=usage, shortfall=owed,
                          fair_shortfall=fair)


B_FIRST, A_FIRST = {"A": 0.6, "B": 0.3}, {"A": 0.3, "B": 0.6}


def gpus_by_project(snap, plan) -> dict:
    """GPUs the plan places per project."""
    got: dict = {}
    for p in plan.placements:
        proj = snap.jobs[snap.job_index[p.job_id]].project
        got[proj] = got.get(proj, 0) + p.gpus
    return got


@pytest.mark.parametrize("fair, usage, floors, gpus", [
    ({}, B_FIRST, (8, 8), {"A": 16, "B": 8}),
    ({"B": 1.0}, B_FIRST, (8, 12), {"B": 24}),
    ({"B": 4.0}, A_FIRST, (8, 8), {"A": 16, "B": 8}),
    ({"A": 4.0}, B_FIRST, (8, 8), {"A": 16, "B": 8}),
    ({"A": 4.0}, A_FIRST, (12, 8), {"A": 16, "B": 8}),
], ids=["nobody-owed-the-gang-meets-both-raw-floors-and-runs",
        "b-owed-and-ranked-first-takes-the-idle-share-into-its-floor-and-the-gang-waits",
        "b-owed-but-ranked-second-gets-no-more-floor-than-its-share",
        "a-owed-but-ranked-second-likewise",
        "a-owed-and-ranked-first-runs-its-gang"])
def test_an_owed_project_ranked_first_takes_an_idle_siblings_share_into_its_floor(
        fair, usage, floors, gpus):
    from optalloc.epoch import run_epoch
    from optalloc.model.build import build_model
    from optalloc.sim.invariants import check_plan

    snap = _idle_third(fair, usage)
    em = build_model(snap)
    assert tuple(em.floor[1:3, 0]) == floors and em.floor[3, 0] == 0
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert gpus_by_project(snap, plan) == gpus
    assert plan.report.status == "optimal"
    codes = {r.code.value for r in plan.pending}
    assert codes == ({"WaitingForCapacity"} if "A" not in gpus else
                     {"WaitingForCapacity" if usage is B_FIRST else "OverShare"})


def test_the_gang_waiting_behind_the_owed_project_is_told_the_gpus_past_its_target_would_not_do():
    from optalloc.epoch import run_epoch

    plan = run_epoch(_idle_third({"B": 1.0}, B_FIRST))
    assert {r.job_id: (r.code.value, r.message) for r in plan.pending} == {"A00": (
        "WaitingForCapacity",
        "A is below its h100 floor (0 of 8 GPUs) and this job needs 16 more: 0 h100 GPUs are "
        "protected, 0 free; the rest are held by B (24 of target 16, 1.0 GPU-hours of its fair "
        "share (an idle sibling's part in it) owed over the window): past a target by 8 GPUs, "
        "which with the 0 free are fewer than this job needs (16)")}


def test_a_project_owed_by_both_measures_says_both_where_it_holds_the_gpus():
    from optalloc.epoch import run_epoch

    plan = run_epoch(_idle_third({"B": 6.0}, B_FIRST, owed={"B": 2.0}))
    assert {r.job_id: r.message for r in plan.pending}["A00"].endswith(
        "held by B (24 of target 16, 2.0 GPU-hours owed and not delivered over the window, "
        "6.0 GPU-hours of its fair share (an idle sibling's part in it) owed over the window): "
        "past a target by 8 GPUs, which with the 0 free are fewer than this job needs (16)")


def test_without_a_fair_shortfall_nothing_is_lifted_whatever_is_owed_by_the_published_measure():
    from optalloc.model.build import build_model

    em = build_model(_idle_third({}, B_FIRST, owed={"B": 6.0}))
    assert tuple(em.floor[1:4, 0]) == (8, 8, 0)
