"""Exact integrals of step functions and interval overlaps over bins, against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optalloc.ledger.kernel import (decay_integral, interval_bins, step_integrals, window_overlap,
                                   window_rows)


def brute_interval_bins(start, end, rate, group, n_groups, edges):
    out = np.zeros((n_groups, len(edges) - 1))
    for s, e, r, g in zip(start, end, rate, group):
        for h in range(len(edges) - 1):
            out[g, h] += r * max(0.0, min(e, edges[h + 1]) - max(s, edges[h]))
    return out


def brute_step_integrals(times, values, edges, before):
    out = np.zeros((len(edges) - 1, values.shape[1]))
    for h in range(len(edges) - 1):
        lo, hi = edges[h], edges[h + 1]
        cuts = sorted({lo, hi, *[t for t in times if lo < t < hi]})
        for a, b in zip(cuts[:-1], cuts[1:]):
            k = np.searchsorted(times, a, side="right") - 1
            if k < 0:
                v = values[0] if before == "first" else np.zeros(values.shape[1])
            else:
                v = values[k]
            out[h] += v * (b - a)
    return out


def edges_for(start, end, step):
    n = int(np.ceil((end - start) / step - 1e-9))
    e = np.minimum(start + step * np.arange(n + 1), end)
    e[-1] = end
    return e


@settings(max_examples=120, deadline=None)
@given(
    ivs=st.lists(
        st.tuples(
            st.floats(-50, 150), st.floats(0, 120), st.integers(0, 8), st.integers(0, 2)
        ),
        max_size=25,
    ),
    start=st.floats(0, 20),
    length=st.floats(0.5, 100),
    step=st.sampled_from([1.0, 7.0, 10.0, 33.3]),
)
def test_interval_bins_equal_per_bin_overlaps(ivs, start, length, step):
    s = np.array([a for a, _, _, _ in ivs], dtype=float)
    e = s + np.array([d for _, d, _, _ in ivs], dtype=float)
    r = np.array([g for _, _, g, _ in ivs], dtype=float)
    grp = np.array([p for _, _, _, p in ivs], dtype=np.int64)
    edges = edges_for(start, start + length, step)
    got = interval_bins(s, e, r, grp, 3, edges)
    np.testing.assert_allclose(got, brute_interval_bins(s, e, r, grp, 3, edges), atol=1e-7)


@pytest.mark.parametrize(
    "case, start, end, expected",
    [
        ("an interval inside one bin fills part of it", 2.0, 5.0, [3, 0, 0]),
        ("an interval ending exactly on an edge stays in its bin", 0.0, 10.0, [10, 0, 0]),
        ("an interval spanning every bin fills each", -5.0, 40.0, [10, 10, 5]),
        ("an interval crossing one edge is split", 8.0, 12.0, [2, 2, 0]),
        ("an interval starting on the last edge adds nothing", 25.0, 30.0, [0, 0, 0]),
    ],
)
def test_interval_bins_cases(case, start, end, expected):
    edges = np.array([0.0, 10.0, 20.0, 25.0])  # last bin shorter
    got = interval_bins(np.array([start]), np.array([end]), np.array([1.0]),
                        np.array([0]), 1, edges)
    assert got.tolist() == [list(map(float, expected))]


@settings(max_examples=100, deadline=None)
@given(
    samples=st.lists(st.tuples(st.floats(0, 100), st.integers(0, 16), st.integers(0, 16)),
                     min_size=1, max_size=12),
    start=st.floats(-20, 80),
    length=st.floats(1, 100),
    before=st.sampled_from(["first", "zero"]),
)
def test_step_integrals_equal_piecewise_sums(samples, start, length, before):
    samples = sorted(samples, key=lambda x: x[0])
    times = np.array([t for t, _, _ in samples])
    values = np.array([[a, b] for _, a, b in samples], dtype=float)
    edges = edges_for(start, start + length, 10.0)
    got = step_integrals(times, values, edges, before)
    np.testing.assert_allclose(got, brute_step_integrals(times, values, edges, before), atol=1e-7)


@settings(max_examples=300, deadline=None)
@given(
    samples=st.lists(st.tuples(st.sampled_from([0.0, 5.0, 10.0, 12.5, 30.0, 60.0, 99.0]),
                               st.integers(0, 16)), min_size=0, max_size=14),
    start=st.sampled_from([-20.0, 0.0, 5.0, 10.0, 11.0, 30.0, 95.0, 99.0, 120.0]),
    length=st.sampled_from([1.0, 5.0, 20.0, 25.0, 70.0, 100.0]),
    before=st.sampled_from(["first", "zero"]),
)
def test_step_integrals_over_the_window_rows_only_are_the_same_bits(samples, start, length,
                                                                   before):
    """The ledger passes only `window_rows` of its samples (a 60-day simulation's ~28,000):
    the same integrals bit for bit, ties on the edges and times outside the window included."""
    samples = sorted(samples, key=lambda x: x[0])
    times = np.array([t for t, _ in samples], dtype=float)
    values = np.array([[a, 2 * a + 1] for _, a in samples], dtype=float).reshape(-1, 2)
    edges = edges_for(start, start + length, 10.0)
    w = window_rows(times, edges)
    assert np.array_equal(step_integrals(times[w], values[w], edges, before),
                          step_integrals(times, values, edges, before))


def test_step_integrals_take_the_last_of_equal_times():
    got = step_integrals(np.array([0.0, 5.0, 5.0]), np.array([[1.0], [2.0], [3.0]]),
                         np.array([0.0, 10.0]))
    assert got.tolist() == [[1.0 * 5 + 3.0 * 5]]


def test_window_overlap_and_decay_cases():
    a = np.array([0.0, 5.0, -np.inf])
    b = np.array([10.0, 20.0, 3.0])
    assert window_overlap(a, b, 2.0, 8.0).tolist() == [6.0, 3.0, 1.0]
    # half-life 1: integral of 2^-(now-s) from -inf to now is 1/ln2
    assert decay_integral(np.array([-np.inf]), np.array([np.inf]), 0.0, 1.0)[0] == pytest.approx(
        1 / np.log(2)
    )
    assert decay_integral(np.array([1.0]), np.array([2.0]), 0.0, 1.0)[0] == 0.0  # after now
