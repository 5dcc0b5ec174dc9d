"""Owed and delivered GPU-hours: owed = min(entitled, demanded) hour by hour; both metric forms;
the report rows."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optalloc.ledger import Ledger, build_report, format_table, rows_to_json
from optalloc.org import OrgTree
from optalloc.types import GpuType, Interval, OrgNode, Policy

H = 3600.0
GPU_TYPES = (GpuType("h100", 1.0),)
ROOT = OrgNode("root", children=(OrgNode("A", children=(OrgNode("A1"), OrgNode("A2"))),
                                 OrgNode("B1")))


def ledger(lookback_h: float = 4) -> Ledger:
    """8 h100 GPUs from t=0. A1 and A2 are entitled to 2 each, B1 to 4."""
    led = Ledger(GPU_TYPES, OrgTree.build(ROOT, ["h100"]), Policy(lookback_s=lookback_h * H))
    led.record_capacity(0, {"h100": 8})
    return led


@pytest.mark.parametrize(
    "case, demand, expected_owed",
    [
        ("demand below entitlement caps owed at demand", 1, [1.0, 1.0]),
        ("demand above entitlement caps owed at entitlement", 5, [4.0, 4.0]),
        ("no demand means nothing is owed", 0, [0.0, 0.0]),
    ],
)
def test_owed_is_entitlement_capped_by_demand_hour_by_hour(case, demand, expected_owed):
    led = ledger()
    led.record_demand(0, {"B1": demand})
    od = led.owed_delivered(0, 2 * H)
    assert od.projects == ("A1", "A2", "B1")
    assert od.owed_h.tolist() == [[0.0, 0.0], [0.0, 0.0], expected_owed]
    assert od.entitled_h.tolist() == [[2.0, 2.0], [2.0, 2.0], [4.0, 4.0]]


def test_demand_changing_mid_hour_is_integrated_within_the_hour():
    led = ledger()
    led.record_demand(0.25 * H, {"A1": 4})  # nothing before the first demand sample
    led.record_demand(0.75 * H, {"A1": 0})
    od = led.owed_delivered(0, H)
    assert od.demanded_h[0].tolist() == [2.0]
    assert od.owed_h[0].tolist() == [2.0]


def test_hourly_form_does_not_repay_a_shortfall_but_the_period_form_does():
    led = ledger()
    led.record_demand(0, {"B1": 8})
    # hour 0: nothing delivered; hour 1: 8 GPUs delivered (4 owed)
    led.record_interval(Interval("j", "B1", "h100", 8, H, 2 * H))
    od = led.owed_delivered(0, 2 * H)
    assert od.delivered_h[2].tolist() == [0.0, 8.0]
    assert od.hourly()[2] == pytest.approx(0.5)
    assert od.period()[2] == pytest.approx(1.0)
    assert math.isnan(od.hourly()[0]) and math.isnan(od.period()[0])  # A1 owed nothing
    assert od.hourly_overall() == pytest.approx(0.5)
    assert od.period_overall() == pytest.approx(1.0)
    assert od.worst("hourly") == ("B1", pytest.approx(0.5))
    assert od.by_project()["B1"] == {"owed_gpu_h": 8.0, "delivered_gpu_h": 8.0,
                                     "hourly": 0.5, "period": 1.0}


def test_unallocated_time_is_not_delivered_and_the_last_bin_may_be_short():
    led = ledger()
    led.record_demand(0, {"A2": 2})
    led.record_interval(Interval("u", "A2", "h100", 2, 0, 1.5 * H, allocated=False))
    led.record_interval(Interval("a", "A2", "h100", 1, 0, 1.5 * H))
    od = led.owed_delivered(0, 1.5 * H)
    assert od.edges.tolist() == [0.0, H, 1.5 * H]
    assert od.delivered_h[1].tolist() == [1.0, 0.5]
    assert od.owed_h[1].tolist() == [2.0, 1.0]


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["A1", "A2", "B1"]), st.integers(0, 8),
                       st.floats(0, 10 * H), st.floats(0, 5 * H)), max_size=20),
    st.lists(st.tuples(st.floats(0, 10 * H), st.integers(0, 8), st.integers(0, 8)), max_size=8),
)
def test_metric_fractions_lie_in_zero_one_and_met_never_exceeds_owed_or_delivered(ivs, dem):
    led = ledger()
    for t, a, b in dem:
        led.record_demand(t, {"A1": a, "B1": b})
    led.record_intervals(Interval("j", p, "h100", g, s, s + d) for p, g, s, d in ivs)
    od = led.owed_delivered(0, 12 * H)
    assert np.all(od.met_h <= od.owed_h + 1e-12) and np.all(od.met_h <= od.delivered_h + 1e-12)
    for vals in (od.hourly(), od.period()):
        finite = vals[~np.isnan(vals)]
        assert np.all((finite >= 0) & (finite <= 1 + 1e-12))
    assert np.all(od.hourly()[~np.isnan(od.hourly())] <= od.period()[~np.isnan(od.period())] + 1e-12)


def test_report_rows_sum_projects_into_programs():
    led = ledger(lookback_h=2)
    led.record_demand(0, {"A1": 4, "B1": 2})
    led.record_interval(Interval("a", "A1", "h100", 4, 0, 2 * H))
    led.record_interval(Interval("b", "B1", "h100", 1, H, 2 * H))
    rows = {r.name: r for r in build_report(led, 2 * H)}
    assert [(r.name, r.depth, r.is_project) for r in build_report(led, 2 * H)] == [
        ("root", 0, False), ("A", 1, False), ("A1", 2, True), ("A2", 2, True), ("B1", 1, True)]
    a1 = rows["A1"]
    assert (a1.usage_gpu_h, a1.entitled_gpu_h, a1.ratio) == (8.0, 4.0, 2.0)
    # owed 2/h (entitled 2, asked 4), delivered 4/h: met 2/h
    assert (a1.owed_gpu_h, a1.delivered_gpu_h, a1.met_gpu_h, a1.met_owed, a1.period_owed) == (
        4.0, 8.0, 4.0, 1.0, 1.0)
    b1 = rows["B1"]  # owed 2/h (asked 2), delivered 0 then 1
    assert (b1.owed_gpu_h, b1.delivered_gpu_h, b1.met_gpu_h, b1.met_owed, b1.period_owed) == (
        4.0, 1.0, 1.0, 0.25, 0.25)
    assert rows["A"].entitlement_pct == pytest.approx(50.0)
    assert rows["A2"].entitlement_pct == pytest.approx(25.0)
    root = rows["root"]  # A1's surplus does not cover B1's shortfall
    assert (root.owed_gpu_h, root.delivered_gpu_h, root.met_gpu_h) == (8.0, 9.0, 5.0)
    assert root.met_owed == pytest.approx(5 / 8) and root.period_owed == pytest.approx(5 / 8)
    assert math.isnan(rows["A2"].met_owed) and math.isnan(rows["A2"].period_owed)
    assert all(r.untracked_gpu_h == 0 for r in rows.values())
    table = format_table(build_report(led, 2 * H))
    assert table.splitlines()[4].startswith("    A1")
    doc = rows_to_json(build_report(led, 2 * H), 2 * H)
    assert '"met_owed": null' in doc and '"period_owed": null' in doc


def test_hours_before_the_first_demand_sample_are_left_out_of_owed_and_delivered():
    """The demo's trap: jobs ran for hours before optalloc saw any demand. Those hours cannot
    be owed, so counting them as delivered made a project look 100% delivered-and-unowed."""
    led = ledger(lookback_h=8)
    led.record_interval(Interval("early", "A1", "h100", 2, 0, 6 * H))  # 12 GPU-h, untracked
    led.record_interval(Interval("late", "B1", "h100", 4, 5 * H, 8 * H))  # 4 before, 8 after
    led.record_demand(6 * H, {"A1": 2, "B1": 4})
    rows = {r.name: r for r in build_report(led, 8 * H)}
    a1, b1, root = rows["A1"], rows["B1"], rows["root"]
    assert (a1.usage_gpu_h, a1.owed_gpu_h, a1.delivered_gpu_h, a1.untracked_gpu_h) == (
        12.0, 4.0, 0.0, 12.0)
    assert a1.met_owed == 0.0  # owed 2/h for 2 h, got nothing: a real shortfall, shown as one
    assert (b1.owed_gpu_h, b1.delivered_gpu_h, b1.met_gpu_h, b1.untracked_gpu_h) == (
        8.0, 8.0, 8.0, 4.0)
    assert (root.owed_gpu_h, root.delivered_gpu_h, root.met_gpu_h, root.untracked_gpu_h) == (
        12.0, 8.0, 8.0, 16.0)
    from optalloc.ledger.report import tracked_since

    assert tracked_since(led, 8 * H) == 6 * H
    assert tracked_since(led, 6 * H) is None  # the sample starts at now: nothing tracked yet


def test_without_demand_samples_nothing_is_owed_and_everything_is_untracked():
    led = ledger(lookback_h=4)
    led.record_interval(Interval("a", "A1", "h100", 2, 0, 3 * H))
    rows = {r.name: r for r in build_report(led, 4 * H)}
    assert (rows["A1"].owed_gpu_h, rows["A1"].delivered_gpu_h, rows["A1"].untracked_gpu_h) == (
        0.0, 0.0, 6.0)
    assert math.isnan(rows["A1"].met_owed)


@pytest.mark.parametrize(
    "case, intervals, now_h, expected",
    [
        # A1 owed 2/h, delivered 1/h for 3 h (3 short); A2 owed 2/h, delivered 3/h (no
        # shortfall: over-delivery is not owed back); program A: owed 12, delivered 12 -> 0;
        # B1 owed 4/h, delivered 4/h -> 0
        ("a project's shortfall is what it was owed and not delivered; its program nets its "
         "projects", [("A1", 1, 0, 3), ("A2", 3, 0, 3), ("B1", 4, 0, 3)], 3,
         {"A1": 3.0, "A2": 0.0, "A": 0.0, "B1": 0.0, "root": 0.0}),
        # lookback 4 h: at 6 h only [2 h, 6 h] counts: B1 ran nothing from 0 to 2 h (8 short)
        # and 4 GPUs from 2 h on (owed 4/h): nothing short inside the window
        ("hours older than the window are forgotten", [("B1", 4, 2, 6)], 6,
         {"A1": 8.0, "A2": 8.0, "A": 16.0, "B1": 0.0, "root": 16.0}),
        ("a project that ran nothing for two hours is owed two hours of its share",
         [("A1", 2, 0, 2), ("A2", 2, 0, 2)], 2,
         {"A1": 0.0, "A2": 0.0, "A": 0.0, "B1": 8.0, "root": 8.0}),
    ],
)
def test_owed_shortfall_sums_what_each_org_node_was_owed_and_not_delivered(
        case, intervals, now_h, expected):
    led = ledger()
    led.record_demand(0, {"A1": 4, "A2": 4, "B1": 8})  # every project wants more than its share
    for i, (p, g, s, e) in enumerate(intervals):
        led.record_interval(Interval(f"j{i}", p, "h100", g, s * H, e * H))
    got = led.owed_shortfall(now_h * H)
    assert {k: pytest.approx(v) for k, v in got.items()} == expected


def test_owed_shortfall_counts_a_running_jobs_open_interval():
    led = ledger()
    led.record_demand(0, {"B1": 8})
    assert led.owed_shortfall(2 * H)["B1"] == pytest.approx(8.0)
    running = [Interval("j", "B1", "h100", 4, 0.0, 2 * H)]
    assert led.owed_shortfall(2 * H, open_intervals=running)["B1"] == pytest.approx(0.0)


def test_without_capacity_samples_nothing_is_owed_short():
    led = Ledger(GPU_TYPES, OrgTree.build(ROOT, ["h100"]), Policy())
    assert set(led.owed_shortfall(H).values()) == {0.0}


def test_owed_shortfall_as_of_marks_ignores_what_was_recorded_after_them():
    led = ledger()
    led.record_demand(0, {"B1": 8})
    marks = led.marks()
    before = led.owed_shortfall(2 * H, marks=marks)
    led.record_interval(Interval("late", "B1", "h100", 4, 0.0, 2 * H))  # recorded after
    led.record_demand(H, {"B1": 0})
    led.record_capacity(H, {"h100": 16})
    assert before["B1"] == pytest.approx(8.0)
    assert led.owed_shortfall(2 * H, marks=marks) == before
    assert led.owed_shortfall(2 * H)["B1"] == pytest.approx(0.0)


def test_the_fair_shortfall_gives_an_idle_siblings_share_to_the_others_by_shares():
    # 8 GPUs: A {A1, A2} 4 (2 each), B1 4. A1 wants 6, A2 nothing, B1 2. Published owed:
    # A1 2, B1 2 (min(entitled, demanded)). Fair share: B1 2, A 6 (B1's unused 2 flow to A),
    # all of it A1's (A2's 2 flow to its sibling first)
    led = ledger()
    led.record_demand(0, {"A1": 6, "B1": 2})
    owed, fair = led.shortfalls(H)
    assert owed == pytest.approx({"root": 4.0, "A": 2.0, "A1": 2.0, "A2": 0.0, "B1": 2.0})
    assert fair == pytest.approx({"root": 8.0, "A": 6.0, "A1": 6.0, "A2": 0.0, "B1": 2.0})
    assert led.owed_shortfall(H) == owed
    # A1 delivered 4 of its fair 6: owed 2 more that way, nothing by the published measure
    led.record_interval(Interval("a", "A1", "h100", 4, 0.0, H))
    owed, fair = led.shortfalls(H)
    assert (owed["A1"], fair["A1"], fair["A2"]) == pytest.approx((0.0, 2.0, 0.0))


def test_with_every_project_wanting_its_share_the_two_shortfalls_agree():
    led = ledger()
    led.record_demand(0, {"A1": 5, "A2": 3, "B1": 9})
    led.record_interval(Interval("b", "B1", "h100", 1, 0.0, 2 * H))
    owed, fair = led.shortfalls(2 * H)
    assert owed == pytest.approx(fair)
    assert fair == pytest.approx({"root": 14.0, "A": 8.0, "A1": 4.0, "A2": 4.0, "B1": 6.0})
