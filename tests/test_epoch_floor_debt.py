"""The floors' debt tilt (impact.debt_tilt): a floor GPU of a project that was owed GPU-hours
over the window and not delivered (Ledger.owed_shortfall, the snapshot's `shortfall`) weighs
one more per epoch of its whole entitlement owed, beyond the least of its siblings with work.
So the rank tilt's limit (a floor more than twice a better-ranked one's is met first) lasts
only until the smaller one is owed enough; a project owed nothing is decided as before.

One 8-GPU node. A (share 0.75, usage ratio 2.0) wants it for an 8-GPU job: 6
floor GPUs; B (0.25, ratio 0.1, ranked first) for a 2-GPU job: 2 floor GPUs. They do not fit
together. B's floor GPU weighs 2 (1 + d_B), A's 1 + d_A (ties aside; d the debt beyond the
other's), so B's job runs when 2 x 2 (1 + d_B) > 6: d_B > 1/2, B owed more than half an hour
of its 2-GPU share (1 GPU-hour) beyond what A is owed in hours of its own 6-GPU share.
"""

from __future__ import annotations

import pytest

from optalloc.epoch import run_epoch
from optalloc.model.objective.impact import debt_tilt
from optalloc.sim.invariants import check_plan
from optalloc.snapshot import build_snapshot
from optalloc.types import Config, GpuType, Policy
from tests.test_epoch_toy import flat_org, nodes_of, queued

H = 3600.0


def _b_waits(a_owed: str = "") -> tuple:
    return ("WaitingForCapacity",
            "project B is below its floor (0 of 2 h100 GPUs; its target 2), but 2 GPUs of h100 "
            "are not free, and the plan preempts none for it: 0 h100 GPUs are protected, the "
            f"rest are held by A (8 of target 6{a_owed}): past a target with whole jobs, which "
            "cannot shrink to it (0 free)")


B_WAITS = _b_waits()


def _a_waits(owed_b: float) -> tuple:
    return ("WaitingForCapacity",
            "A is below its h100 floor (0 of 6 GPUs) and this job needs 8 more: 0 h100 GPUs are "
            "protected, 6 free; the rest hold their own floors and targets: B (2 of target 2, "
            f"{owed_b:.1f} GPU-hours owed and not delivered over the window)")


def _snap(shortfall: dict, shares=None):
    shares = shares or {"A": 0.75, "B": 0.25}
    jobs = queued("A", 1, 8) + queued("B", 1, 2)
    cfg = Config((GpuType("h100"),), tuple(nodes_of(1, 8)), flat_org(shares), Policy(),
                 tuple(jobs))
    return build_snapshot(cfg, now=10 * H, usage_ratio={"A": 2.0, "B": 0.1, "C": 0.0},
                          shortfall=shortfall)


CASES = [
    ("with-nobody-owed-anything-the-floor-more-than-twice-as-large-is-met", {},
     ["A00"], {"B00": B_WAITS}),
    ("b-owed-less-than-half-an-hour-of-its-share-still-waits-for-the-larger-floor",
     {"B": 0.8}, ["A00"], {"B00": B_WAITS}),
    ("b-owed-more-than-half-an-hour-of-its-share-gets-its-floor-first", {"B": 1.2},
     ["B00"], {"A00": _a_waits(1.2)}),
    ("b-owed-three-hours-of-its-share-gets-its-floor-first", {"B": 6.0},
     ["B00"], {"A00": _a_waits(6.0)}),
    ("the-same-gpu-hours-owed-weigh-more-for-the-smaller-share", {"A": 6.0, "B": 6.0},
     ["B00"], {"A00": _a_waits(6.0)}),
    ("a-owed-more-hours-of-its-share-than-b-keeps-its-larger-floor",
     {"A": 30.0, "B": 6.0}, ["A00"],
     {"B00": _b_waits(", 30.0 GPU-hours owed and not delivered over the window")}),
]


@pytest.mark.parametrize("name, shortfall, placed, pending", CASES, ids=[c[0] for c in CASES])
def test_the_floor_debt_decides_between_exclusive_floors(name, shortfall, placed, pending):
    snap = _snap(shortfall)
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert sorted(p.job_id for p in plan.placements) == placed
    assert {p.job_id: (p.code.value, p.message) for p in plan.pending} == pending


def test_the_debt_is_in_hours_of_the_share_beyond_the_least_sibling_with_work():
    # entitled GPUs A 4.8, B 1.6, C 1.6: A 6 / 4.8 = 1.25 hours of its share, B 6 / 1.6 = 3.75
    # -> beyond the least: A 0, B 2.5; C (no work) 0 whatever it is owed
    snap = _snap({"A": 6.0, "B": 6.0, "C": 9.0}, shares={"A": 0.6, "B": 0.2, "C": 0.2})
    got = dict(zip(snap.org.names, debt_tilt(snap, 8.0)))
    assert got == {"root": 0.0, "A": 0.0, "B": pytest.approx(2.5), "C": 0.0}


def test_the_debt_is_capped_at_twice_the_largest_node():
    snap = _snap({"B": 1000.0})
    assert dict(zip(snap.org.names, debt_tilt(snap, 8.0)))["B"] == 16.0


def test_without_ledger_history_there_is_no_debt():
    snap = _snap({})
    assert not snap.owed_shortfall.any() and not debt_tilt(snap, 8.0).any()


def test_a_callable_shortfall_is_asked_for_once_and_only_when_read():
    asked = []
    snap = _snap(lambda: asked.append(1) or {"B": 6.0})
    assert asked == []
    assert dict(zip(snap.org.names, snap.owed_shortfall))["B"] == 6.0
    snap.owed_shortfall
    assert asked == [1]
