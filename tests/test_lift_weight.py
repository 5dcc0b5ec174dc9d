"""A lifted floor weighs its node's fair debt (stop 51).

`targets.lifted_floors` lifts the floor of a top-level node owed its fair share (an idle
sibling's part in it). Lifted, the floor only tied a plan that meets another node's larger
floor with whole jobs (3 x 8 GPUs, C idle, A's 16-GPU gang against B's 1-GPU jobs, tied
ranks: A 8 + B 8 against B's 12), and B, given its raw 8 every hour, has no published debt:
the gang won every epoch. A lifted share row (`fairshare.lifted_rows`) now weighs its floor
GPUs by (1 + rank tilt) x (1 + the larger of the node's published and fair debts)
(`impact.tier_weights`), so B's floor wins once it is owed more than the tie."""

from __future__ import annotations

import pytest

from optalloc.model.constraints.fairshare import lifted_rows
from tests.test_idle_share_floors import _idle_third, gpus_by_project

TIED = {"A": 0.5, "B": 0.5}
B_FIRST, A_FIRST = {"A": 0.6, "B": 0.3}, {"A": 0.3, "B": 0.6}


@pytest.mark.parametrize("fair, usage, floors, gpus", [
    # tied ranks (x2 each), targets 12 / 12, B lifted 8 -> 12: the gang's plan meets A 8 and
    # B 8 (2 x 8 + 2 (1 + d) x 8), B's 24 meet B's 12 (2 (1 + d) x 12), d B's fair debt in
    # hours of its 8-GPU share: B's plan wins where 4 (1 + d) > 8, d > 1
    ({"B": 4.0}, TIED, (8, 12), {"A": 16, "B": 8}),
    ({"B": 12.0}, TIED, (8, 12), {"B": 24}),
    # B first (x2 against A's x1), target 16: 2 (1 + d) x 12 against 8 + 2 (1 + d) x 8
    ({"B": 4.0}, B_FIRST, (8, 12), {"B": 24}),
    # B second, its target 8: no lift, whatever it is owed
    ({"B": 40.0}, A_FIRST, (8, 8), {"A": 16, "B": 8}),
], ids=["owed-half-an-hour-of-its-share-the-lifted-floor-does-not-outweigh-the-gangs",
        "owed-an-hour-and-a-half-the-lifted-floor-outweighs-it-and-the-gang-waits",
        "ranked-first-any-fair-debt-breaks-the-tie-for-the-lifted-floor",
        "ranked-second-nothing-is-lifted-and-the-fair-debt-weighs-nothing"])
def test_a_lifted_floor_weighs_the_fair_debt(fair, usage, floors, gpus):
    from optalloc.epoch import run_epoch
    from optalloc.model.build import build_model
    from optalloc.sim.invariants import check_plan

    snap = _idle_third(fair, usage)
    em = build_model(snap)
    assert tuple(em.floor[1:3, 0]) == floors
    up = lifted_rows(em.tg)
    lifted = {n for i, n in enumerate(snap.org.names) if up is not None and up[i].any()}
    assert lifted == ({"B"} if floors[1] > 8 else set())
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert gpus_by_project(snap, plan) == gpus
    assert plan.report.status == "optimal" and plan.report.gap == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("fair, owed", [({"B": 12.0}, {}), ({"B": 12.0}, {"B": 20.0}),
                                        ({}, {"B": 6.0})],
                         ids=["fair-debt-only", "the-published-debt-larger", "published-only"])
def test_a_lifted_floor_weighs_the_larger_of_the_published_and_the_fair_debt(fair, owed):
    from optalloc.model.objective.impact import compute_impact

    snap = _idle_third(fair, TIED, owed=owed)
    imp = compute_impact(snap)
    w, lw = imp.floor_weight[:, 0], imp.lifted_weight[:, 0]
    a, b = snap.org.names.index("A"), snap.org.names.index("B")
    assert lw[a] == pytest.approx(w[a])  # A owed nothing either way
    fair_h, owed_h = fair.get("B", 0.0) / 8, owed.get("B", 0.0) / 8
    # (1 + rank) (1 + debt), tied ranks both first, plus the tie-break (< 1%)
    assert lw[b] / w[b] == pytest.approx((1.0 + max(fair_h, owed_h)) / (1.0 + owed_h), rel=1e-2)
    assert (imp.lifted_unit >= imp.floor_unit - 1e-9).all()
