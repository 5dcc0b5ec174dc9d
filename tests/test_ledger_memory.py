"""The in-memory ledger: window edges, decay, ratios, unallocated, conservation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from optalloc.errors import OptallocError
from optalloc.ledger import Ledger
from optalloc.org import OrgTree
from optalloc.types import GpuType, Interval, OrgNode, Policy, UsageMode

H = 3600.0
DAY = 86400.0
GPU_TYPES = (GpuType("h100", 1.0), GpuType("b200", 2.0))


def tree_two_programs() -> OrgTree:
    """root -> A (share 3) -> A1, A2 ; B (share 1) -> B1"""
    root = OrgNode(
        "root",
        children=(
            OrgNode("A", share=3, children=(OrgNode("A1"), OrgNode("A2"))),
            OrgNode("B", share=1, children=(OrgNode("B1"),)),
        ),
    )
    return OrgTree.build(root, [g.name for g in GPU_TYPES])


def ledger(policy: Policy | None = None, tree: OrgTree | None = None) -> Ledger:
    return Ledger(GPU_TYPES, tree or tree_two_programs(), policy or Policy(lookback_s=DAY))


def usage_of(led: Ledger, now: float, name: str, open_intervals=()) -> float:
    return float(led.usage(now, open_intervals)[led.tree.index[name]])


# ------------------------------------------------------------------ window edges

NOW = 10 * DAY
LO = NOW - DAY  # lookback one day


@pytest.mark.parametrize(
    "case, start, end, charged_h",
    [
        ("an interval inside the window is charged in full", LO + H, LO + 3 * H, 2.0),
        ("an interval straddling the window start is charged from the start", LO - 5 * H, LO + 2 * H, 2.0),
        ("an interval straddling now is charged up to now", NOW - 2 * H, NOW + 5 * H, 2.0),
        ("an interval straddling both edges is charged the whole window", LO - H, NOW + H, 24.0),
        ("an interval ending exactly at now is charged in full", NOW - 3 * H, NOW, 3.0),
        ("an interval starting exactly at the window start is charged in full", LO, LO + H, 1.0),
        ("an interval ending exactly at the window start is not charged", LO - H, LO, 0.0),
        ("an interval entirely before the window is not charged", LO - 5 * H, LO - 2 * H, 0.0),
        ("an interval starting at now is not charged", NOW, NOW + H, 0.0),
        ("an interval of zero length is not charged", LO + H, LO + H, 0.0),
    ],
)
def test_window_edges(case, start, end, charged_h):
    led = ledger()
    led.record_interval(Interval("j", "A1", "h100", 4, start, end))
    use = led.usage(NOW)
    idx = led.tree.index
    expected = {"root": 4 * charged_h, "A": 4 * charged_h, "A1": 4 * charged_h,
                "A2": 0.0, "B": 0.0, "B1": 0.0}
    assert {n: pytest.approx(use[idx[n]]) for n in idx} == expected


def test_billing_weight_multiplies_the_charge():
    led = ledger()
    led.record_interval(Interval("j", "B1", "b200", 2, NOW - 3 * H, NOW))
    assert usage_of(led, NOW, "B1") == pytest.approx(2 * 2.0 * 3)


def test_open_intervals_are_charged_like_recorded_ones_without_being_stored():
    led = ledger()
    running = Interval("j", "A2", "h100", 8, NOW - 2 * H, NOW)
    assert usage_of(led, NOW, "A2", [running]) == pytest.approx(16.0)
    assert usage_of(led, NOW, "A2") == 0.0
    assert led.n_intervals == 0


def test_unallocated_intervals_are_recorded_but_never_charged_or_delivered():
    led = ledger()
    led.record_capacity(LO, {"h100": 8})
    led.record_demand(LO, {"A1": 8})
    led.record_interval(Interval("u", "A1", "h100", 8, LO, NOW, allocated=False))
    od = led.owed_delivered(LO, NOW)
    assert led.n_intervals == 1
    assert led.usage(NOW).tolist() == [0.0] * led.tree.n
    assert od.delivered_h.sum() == 0.0
    assert od.owed_h.sum() > 0


def test_querying_before_an_interval_starts_ignores_it():
    led = ledger()
    led.record_interval(Interval("j", "A1", "h100", 1, NOW, NOW + H))
    assert usage_of(led, NOW - H, "root") == 0.0
    assert usage_of(led, NOW + H, "root") == pytest.approx(1.0)


# ------------------------------------------------------------------ decay


@pytest.mark.parametrize(
    "case, start, end, half_life",
    [
        ("a long-past short interval", NOW - 20 * DAY, NOW - 19.5 * DAY, 7 * DAY),
        ("an interval ending at now", NOW - 2 * DAY, NOW, 7 * DAY),
        ("an interval running past now", NOW - 3 * H, NOW + DAY, 1 * DAY),
        ("a one-second interval", NOW - 10 * H, NOW - 10 * H + 1, 2 * H),
        ("an interval with a short half-life", NOW - 5 * DAY, NOW - DAY, 6 * H),
    ],
)
def test_decay_matches_numeric_integration_of_the_kernel(case, start, end, half_life):
    led = ledger(Policy(usage_mode=UsageMode.DECAY, half_life_s=half_life))
    led.record_interval(Interval("j", "B1", "b200", 3, start, end))
    numeric, _ = integrate.quad(
        lambda s: 2.0 ** (-(NOW - s) / half_life), start, min(end, NOW), epsabs=0, epsrel=1e-12
    )
    assert usage_of(led, NOW, "B1") == pytest.approx(3 * 2.0 * numeric / H, rel=1e-9)


def test_decay_halves_the_charge_of_an_interval_after_one_half_life():
    led = ledger(Policy(usage_mode=UsageMode.DECAY, half_life_s=DAY))
    led.record_interval(Interval("j", "A1", "h100", 1, NOW - H, NOW))
    assert usage_of(led, NOW + DAY, "A1") == pytest.approx(usage_of(led, NOW, "A1") / 2)


def test_decay_entitlement_uses_the_same_kernel_and_the_first_capacity_sample_before_it():
    hl = 2 * DAY
    led = ledger(Policy(usage_mode=UsageMode.DECAY, half_life_s=hl))
    led.record_capacity(NOW - DAY, {"h100": 8})
    led.record_capacity(NOW - H, {"h100": 16})
    lam = math.log(2) / hl
    # 8 GPUs from -inf to now - 1h (first sample applies before it), 16 GPUs after
    seconds = 8 * math.exp(-lam * H) / lam + 16 * (1 - math.exp(-lam * H)) / lam
    ent = led.entitled(NOW)
    assert ent[0] == pytest.approx(seconds / H)
    assert ent[led.tree.index["A1"]] == pytest.approx(0.375 * seconds / H)


# ------------------------------------------------------------------ entitled and ratios


def test_entitled_integrates_capacity_changes_in_the_window_with_weights_and_shares():
    led = ledger()
    led.record_capacity(LO - DAY, {"h100": 8, "b200": 8})  # applies from before the window
    led.record_capacity(NOW - 6 * H, {"h100": 8, "b200": 0})  # b200 nodes go down
    ent = led.entitled(NOW)
    root = 8 * 24 * 1.0 + 8 * 18 * 2.0
    assert ent[0] == pytest.approx(root)
    assert ent[led.tree.index["B1"]] == pytest.approx(0.25 * root)
    assert ent[led.tree.index["A"]] == pytest.approx(0.75 * root)


def test_without_capacity_samples_nothing_is_entitled_and_unused_nodes_have_ratio_zero():
    led = ledger()
    assert led.usage_ratios(NOW) == {n: 0.0 for n in led.tree.names}


def test_a_project_that_used_gpus_without_entitlement_ranks_last():
    led = ledger()
    led.record_interval(Interval("j", "A1", "h100", 1, NOW - H, NOW))
    ratios = led.usage_ratios(NOW)
    assert ratios["A1"] == math.inf and ratios["A2"] == 0.0


def test_a_zero_share_project_has_infinite_ratio_even_when_idle():
    root = OrgNode("root", children=(OrgNode("P", share=1), OrgNode("Z", share=0)))
    tree = OrgTree.build(root, ["h100", "b200"])
    led = Ledger(GPU_TYPES, tree, Policy(lookback_s=DAY))
    led.record_capacity(LO, {"h100": 8})
    assert led.usage_ratios(NOW) == {"root": 0.0, "P": 0.0, "Z": math.inf}


DEEP = OrgNode("root", children=(
    OrgNode("X", children=(OrgNode("X1", children=(OrgNode("p1"), OrgNode("p2"))),
                           OrgNode("X2", children=(OrgNode("p3"),)))),
    OrgNode("Y", children=(OrgNode("Y1", children=(OrgNode("p4"),)),)),
))


@settings(max_examples=60, deadline=None)
@given(
    more=st.integers(min_value=1, max_value=64),
    less=st.integers(min_value=0, max_value=64),
    pair=st.sampled_from([("p1", "p2", "p1", "p2"), ("p1", "p3", "X1", "X2"), ("p1", "p4", "X", "Y")]),
)
def test_the_ratio_ranks_the_sibling_that_used_more_below_at_every_level(more, less, pair):
    """heavy and light projects whose paths split at siblings (a, b) of equal share: a's ratio
    is above b's exactly when heavy used more, at the split and at every project."""
    heavy, light, a, b = pair
    less = min(less, more - 1)
    led = Ledger(GPU_TYPES, OrgTree.build(DEEP, ["h100", "b200"]), Policy(lookback_s=DAY))
    led.record_capacity(LO, {"h100": 64, "b200": 64})
    led.record_interval(Interval("h", heavy, "h100", more, NOW - 4 * H, NOW))
    led.record_interval(Interval("l", light, "b200", less, NOW - 4 * H, NOW - 2 * H))
    led.record_interval(Interval("l", light, "b200", less, NOW - 2 * H, NOW))
    r = led.usage_ratios(NOW)
    # b200 weighs 2.0: light used 2 * less weighted GPU-hours per hour, so compare weighted
    if more > 2 * less:
        assert r[a] > r[b] and r[heavy] > r[light]
    elif more == 2 * less:
        assert r[a] == pytest.approx(r[b])
    else:
        assert r[a] < r[b]


# ------------------------------------------------------------------ recording


def test_unknown_project_is_refused_when_strict_and_unattributed_when_not():
    with pytest.raises(OptallocError, match="'ghost' is not in the org tree"):
        ledger().record_intervals([Interval("j", "ghost", "h100", 1, 0, H)])
    lenient = Ledger(GPU_TYPES, tree_two_programs(), Policy(lookback_s=DAY), strict=False)
    lenient.record_intervals([Interval("j", "ghost", "h100", 2, NOW - H, NOW)])
    assert lenient.usage(NOW).sum() == 0.0
    assert lenient.unattributed_gpu_hours(NOW) == pytest.approx(2.0)


def test_an_interval_ending_before_it_starts_is_refused():
    with pytest.raises(OptallocError, match="ends .* before it starts"):
        ledger().record_intervals([Interval("j", "A1", "h100", 1, H, 0)])


def test_one_by_one_chunked_and_columnar_recording_agree():
    rng = np.random.default_rng(7)
    ivs = [
        Interval(f"j{i}", str(rng.choice(["A1", "A2", "B1"])), str(rng.choice(["h100", "b200"])),
                 int(rng.integers(1, 9)), float(s), float(s + rng.uniform(0, DAY)),
                 bool(rng.random() < 0.8))
        for i, s in enumerate(rng.uniform(NOW - 2 * DAY, NOW, 5000))
    ]
    one = ledger()
    for iv in ivs:
        one.record_interval(iv)
    chunked = ledger()
    chunked.record_intervals(ivs[:1234])
    chunked.record_intervals(ivs[1234:])
    projects, types = ["A1", "A2", "B1"], ["h100", "b200"]
    cols = ledger()
    cols.record_columns(
        start=[iv.start for iv in ivs], end=[iv.end for iv in ivs], gpus=[iv.gpus for iv in ivs],
        project_code=[projects.index(iv.project) for iv in ivs], project_names=projects,
        type_code=[types.index(iv.gpu_type) for iv in ivs], type_names=types,
        allocated=[iv.allocated for iv in ivs],
    )
    assert one.n_intervals == chunked.n_intervals == cols.n_intervals == 5000
    np.testing.assert_allclose(one.usage(NOW), chunked.usage(NOW))
    np.testing.assert_allclose(one.usage(NOW), cols.usage(NOW))


# ------------------------------------------------------------------ conservation

interval_st = st.builds(
    lambda p, t, g, s, d, a: Interval("j", p, t, g, s, s + d, a),
    st.sampled_from(["A1", "A2", "B1"]),
    st.sampled_from(["h100", "b200"]),
    st.integers(min_value=0, max_value=64),
    st.floats(min_value=0, max_value=10 * DAY, allow_nan=False),
    st.floats(min_value=0, max_value=3 * DAY, allow_nan=False),
    st.booleans(),
)


@settings(max_examples=80, deadline=None)
@given(
    ivs=st.lists(interval_st, max_size=30),
    now=st.floats(min_value=0, max_value=12 * DAY),
    lookback=st.floats(min_value=1, max_value=5 * DAY),
)
def test_charged_gpu_hours_equal_the_sum_of_allocated_overlaps(ivs, now, lookback):
    led = ledger(Policy(lookback_s=lookback))
    led.record_intervals(ivs)
    use = led.usage(now)
    weight = {"h100": 1.0, "b200": 2.0}
    by_project = {"A1": 0.0, "A2": 0.0, "B1": 0.0}
    for iv in ivs:
        overlap = max(0.0, min(iv.end, now) - max(iv.start, now - lookback))
        if iv.allocated:
            by_project[iv.project] += iv.gpus * weight[iv.gpu_type] * overlap / H
    idx = led.tree.index
    assert use[0] == pytest.approx(sum(by_project.values()), rel=1e-9, abs=1e-9)
    for p, v in by_project.items():
        assert use[idx[p]] == pytest.approx(v, rel=1e-9, abs=1e-9)
    assert use[idx["A"]] == pytest.approx(use[idx["A1"]] + use[idx["A2"]], rel=1e-12, abs=1e-12)
    od = led.owed_delivered(now - lookback, now) if now - lookback < now else None
    if od is not None:
        plain = sum(
            iv.gpus * max(0.0, min(iv.end, now) - max(iv.start, now - lookback)) / H
            for iv in ivs if iv.allocated
        )
        assert od.delivered_h.sum() == pytest.approx(plain, rel=1e-9, abs=1e-6)
