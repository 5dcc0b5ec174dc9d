"""Each benchmark row runs in its own process: its result comes back with its peak memory, and a
row past its memory or wall limit, or one that raises, comes back as a row saying so."""

from __future__ import annotations

import sys

import pytest

from optalloc.bench.isolate import run_isolated

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

CASES = [
    # (target, kwargs, limits, expected status, expected note fragment, progress key kept)
    ("fine", {"value": 7}, {}, "optimal", None, "started"),
    ("hog", {"mb": 400}, {"rss_limit_mb": 250}, "killed", "passed the 250 MB limit", "allocating_mb"),
    ("sleeper", {"seconds": 30}, {"wall_s": 1.5}, "killed", "ran past the 1.5 s wall limit", "step"),
    ("boom", {}, {}, "error", "ValueError: a bad row", None),
]


@pytest.mark.parametrize("target,kwargs,limits,status,note,kept", CASES, ids=[c[0] for c in CASES])
def test_a_row_in_its_own_process_reports_its_outcome(target, kwargs, limits, status, note, kept):
    row = run_isolated(f"bench_targets:{target}", kwargs, **limits)
    assert row["status"] == status
    if note:
        assert note in row["note"]
    if kept:
        assert kept in row
    assert row["peak_rss_mb"] > 0


def test_a_row_that_finishes_returns_its_own_dict_and_a_peak_rss_above_its_allocation():
    small = run_isolated("bench_targets:fine", {"value": 3})
    assert {k: small[k] for k in ("status", "value", "started")} == {
        "status": "optimal", "value": 3, "started": True}
    big = run_isolated("bench_targets:hog", {"mb": 300}, wall_s=5.0, rss_limit_mb=10_000)
    assert big["status"] == "killed" and big["peak_rss_mb"] >= 300
