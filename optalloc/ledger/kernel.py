"""The time kernels of the ledger and exact integrals of step functions over bins.

Everything here is vectorized over intervals / samples / columns; no Python loop runs over
the elements. Times are seconds; results are in seconds (callers divide by 3600 for hours).

Window kernel (usage_mode=window): k(s) = 1 on [now - lookback, now], else 0. The integral of
k over an interval [a, b) is its overlap with the window.

Decay kernel (usage_mode=decay): k(s) = 2^(-(now - s) / half_life) for s <= now, 0 after now.
With lam = ln 2 / half_life and b' = min(b, now), a' = min(a, now):

    integral_a^b k(s) ds = (exp(-lam (now - b')) - exp(-lam (now - a'))) / lam
                         = exp(-lam (now - b')) * (-expm1(-lam (b' - a'))) / lam

(the second form keeps full precision for short intervals). For a = -inf the second factor is 1.
"""

from __future__ import annotations

import math

import numpy as np

from optalloc.types import Policy, UsageMode


def kernel_integral(a: np.ndarray, b: np.ndarray, now: float, policy: Policy) -> np.ndarray:
    """Integral of the policy's usage kernel over each [a_i, b_i) (seconds; a may be -inf,
    b may be +inf). Parts after `now` never count."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if policy.usage_mode is UsageMode.DECAY:
        return decay_integral(a, b, now, policy.half_life_s)
    return window_overlap(a, b, now - policy.lookback_s, now)


def window_overlap(a: np.ndarray, b: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Length of [a_i, b_i) ∩ [lo, hi], zero when they do not meet."""
    return np.clip(np.minimum(b, hi) - np.maximum(a, lo), 0.0, None)


def decay_integral(a: np.ndarray, b: np.ndarray, now: float, half_life_s: float) -> np.ndarray:
    """Closed-form integral of 2^(-(now - s)/half_life) over [a_i, min(b_i, now))."""
    if half_life_s <= 0:
        raise ValueError(f"half_life must be > 0 seconds, got {half_life_s}")
    lam = math.log(2.0) / half_life_s
    hi = np.minimum(b, now)
    lo = np.minimum(a, hi)
    with np.errstate(invalid="ignore", over="ignore"):
        head = np.exp(-lam * (now - hi))
        body = -np.expm1(-lam * (hi - lo))  # 1 when lo = -inf
    out = head * body / lam
    return np.where(hi > lo, out, 0.0)


def step_integrals(
    times: np.ndarray, values: np.ndarray, edges: np.ndarray, before: str = "first"
) -> np.ndarray:
    """Integral over each bin [edges[i], edges[i+1]) of a right-continuous step function.

    The function equals `values[k]` (a row; shape (K, C)) on [times[k], times[k+1]) and the
    last row after the last time. Before times[0] it is the first row (`before="first"`,
    capacity) or zero (`before="zero"`, demand). `times` must be sorted ascending; `edges`
    sorted ascending with at least two entries. Returns (len(edges) - 1, C) in value-seconds.
    Exact: the cumulative integral is piecewise linear between the union of breakpoints.
    """
    times = np.asarray(times, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    edges = np.asarray(edges, dtype=np.float64)
    n_cols = values.shape[1] if values.ndim == 2 else 0
    if len(times) == 0:
        return np.zeros((len(edges) - 1, n_cols))
    inside = times[(times > edges[0]) & (times < edges[-1])]
    pts = np.union1d(edges, inside)  # sorted, unique
    row = np.searchsorted(times, pts[:-1], side="right") - 1  # value row on [pts[i], pts[i+1])
    seg_vals = values[np.maximum(row, 0)]
    if before == "zero":
        seg_vals = np.where((row >= 0)[:, None], seg_vals, 0.0)
    elif before != "first":
        raise ValueError(f"before must be 'first' or 'zero', got {before!r}")
    cum = np.zeros((len(pts), n_cols))
    np.cumsum(seg_vals * np.diff(pts)[:, None], axis=0, out=cum[1:])
    at_edges = cum[np.searchsorted(pts, edges)]
    return np.diff(at_edges, axis=0)


def window_rows(times: np.ndarray, edges: np.ndarray) -> slice:
    """The rows of a sorted step function's `times` that `step_integrals` over `edges` reads:
    from the last time at or before edges[0] (the value in effect there; the first row where
    none is) to the last before edges[-1], at least one row. `step_integrals(times[s],
    values[s], edges)` is `step_integrals(times, values, edges)` bit for bit (the same
    breakpoints, each segment on the same row, summed in the same order), so a caller selects
    columns of the window's rows only: a 60-day simulation holds ~28,000 demand samples, each
    epoch's lookback window a few hundred of them."""
    if not len(times):
        return slice(0, 0)
    lo = max(int(np.searchsorted(times, edges[0], side="right")) - 1, 0)
    return slice(lo, max(int(np.searchsorted(times, edges[-1], side="left")), lo + 1))


def interval_bins(
    start: np.ndarray, end: np.ndarray, rate: np.ndarray, group: np.ndarray, n_groups: int,
    edges: np.ndarray,
) -> np.ndarray:
    """Sum over intervals of rate_i * |[start_i, end_i) ∩ bin_h|, per group and bin.

    `edges` are evenly spaced by edges[1] - edges[0] except the last bin, which may be shorter.
    Returns (n_groups, len(edges) - 1) in rate-seconds. Each interval touches a first bin, a last
    bin and a run of full bins between; the run is added with a difference array, so the cost is
    O(intervals + groups * bins) whatever the interval lengths.
    """
    n_bins = len(edges) - 1
    out_shape = (n_groups, n_bins)
    if n_bins <= 0 or len(start) == 0:
        return np.zeros(out_shape)
    lo_e, hi_e = float(edges[0]), float(edges[-1])
    s = np.clip(np.asarray(start, dtype=np.float64), lo_e, hi_e)
    e = np.clip(np.asarray(end, dtype=np.float64), lo_e, hi_e)
    keep = e > s
    s, e, r, g = s[keep], e[keep], np.asarray(rate, dtype=np.float64)[keep], group[keep]
    step = float(edges[1] - edges[0])
    hs = np.minimum(((s - lo_e) // step).astype(np.int64), n_bins - 1)
    he = np.minimum(((e - lo_e) // step).astype(np.int64), n_bins - 1)
    # an end exactly on a bin edge belongs to the bin before it
    he = np.where((he > hs) & (edges[he] >= e), he - 1, he)
    same = hs == he
    flat = g * n_bins
    width = np.diff(edges)
    total = np.zeros(n_groups * n_bins)
    total += np.bincount(
        (flat + hs)[same], weights=(r * (e - s))[same], minlength=n_groups * n_bins
    )
    d = ~same
    total += np.bincount(
        (flat + hs)[d], weights=(r * (edges[hs + 1] - s))[d], minlength=n_groups * n_bins
    )
    total += np.bincount(
        (flat + he)[d], weights=(r * (e - edges[he]))[d], minlength=n_groups * n_bins
    )
    # full bins hs+1 .. he-1: rate difference array per group, then cumsum along bins
    diff = np.zeros(n_groups * (n_bins + 1))
    row = g * (n_bins + 1)
    diff += np.bincount((row + hs + 1)[d], weights=r[d], minlength=diff.size)
    diff -= np.bincount((row + he)[d], weights=r[d], minlength=diff.size)
    full_rate = np.cumsum(diff.reshape(n_groups, n_bins + 1), axis=1)[:, :n_bins]
    return total.reshape(out_shape) + full_rate * width[None, :]
