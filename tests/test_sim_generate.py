"""Synthetic generator: determinism, the offered-load target and distribution sanity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optalloc.sim.generate import PHILLY_SIZES, SyntheticSpec, closest_prefix, draw_jobs, generate, team_weights

TEAMS = ("t0", "t1", "t2", "t3")
DAY = 86400.0


def same(a, b) -> bool:
    return (
        a.job_id.tolist() == b.job_id.tolist()
        and np.array_equal(a.submit_time, b.submit_time)
        and np.array_equal(a.duration_s, b.duration_s)
        and np.array_equal(a.gpus, b.gpus)
        and a.team.tolist() == b.team.tolist()
    )


def test_the_same_seed_gives_identical_jobs_and_another_seed_does_not():
    spec = SyntheticSpec(teams=TEAMS)
    a = generate(spec, capacity_gpus=64, horizon_s=2 * DAY, seed=3)
    b = generate(spec, capacity_gpus=64, horizon_s=2 * DAY, seed=3)
    c = generate(spec, capacity_gpus=64, horizon_s=2 * DAY, seed=4)
    assert same(a, b)
    assert not same(a, c)


@settings(max_examples=200, deadline=None)
@given(
    work=st.lists(st.floats(0.0, 1e6, allow_nan=False), min_size=1, max_size=40),
    frac=st.floats(0.0, 1.0),
)
def test_the_job_count_is_the_prefix_whose_work_is_closest_to_the_target(work, frac):
    w = np.array(work)
    target = frac * w.sum()
    n = closest_prefix(w, target)
    errors = np.abs(np.cumsum(w) - target)
    assert 1 <= n <= len(w)
    assert errors[n - 1] == errors.min()


@pytest.mark.parametrize(
    "load, capacity, days, seed",
    [(0.95, 256, 7, 11), (0.5, 64, 3, 0), (1.2, 1024, 14, 5), (0.9, 16, 30, 2)],
    ids=["a week on 256 GPUs", "light load on a small cluster", "overload on a big cluster",
         "a month on 16 GPUs"],
)
def test_total_work_is_the_offered_load_and_arrivals_fill_the_horizon(load, capacity, days, seed):
    spec = SyntheticSpec(teams=TEAMS, offered_load=load, max_gpus=capacity)
    r = generate(spec, capacity_gpus=capacity, horizon_s=days * DAY, seed=seed)
    assert r.gpu_seconds / (capacity * days * DAY) == pytest.approx(load, rel=0.05)
    assert np.all(np.diff(r.submit_time) >= 0)
    assert r.submit_time.min() >= 0 and r.submit_time.max() < days * DAY
    assert r.gpus.max() <= capacity


def test_sizes_durations_and_debug_share_follow_the_spec():
    spec = SyntheticSpec(
        teams=TEAMS, debug_fraction=0.25, duration_median_s=2 * 3600, duration_sigma=1.6,
        debug_duration_s=(60.0, 900.0),
    )
    gpus, dur, debug = draw_jobs(spec, 100_000, np.random.default_rng(0))
    assert debug.mean() == pytest.approx(0.25, abs=0.01)
    assert dur[debug].min() >= 60.0 and dur[debug].max() <= 900.0
    assert set(np.unique(gpus[debug]).tolist()) <= {1, 2, 4, 8}
    train = dur[~debug]
    assert np.median(train) == pytest.approx(2 * 3600, rel=0.05)
    assert train.mean() > 2.5 * np.median(train)  # heavy tail: mean >> median
    assert train.min() >= 5 * 60 and train.max() <= 14 * DAY
    sizes, counts = np.unique(gpus[~debug], return_counts=True)
    share = dict(zip(sizes.tolist(), (counts / counts.sum()).tolist()))
    assert set(share) == {1, 2, 4, 8, 16, 32, 64, 128}
    for size, p in PHILLY_SIZES.items():
        assert share[size] == pytest.approx(p, abs=0.01)


def test_teams_are_drawn_with_zipf_skew():
    r = generate(SyntheticSpec(teams=TEAMS, team_skew=1.0), capacity_gpus=1024, horizon_s=10 * DAY, seed=1)
    teams, counts = np.unique(r.team, return_counts=True)
    assert teams.tolist() == list(TEAMS)
    np.testing.assert_allclose(counts / len(r), team_weights(4, 1.0), atol=0.015)


@pytest.mark.parametrize(
    "n, skew, expected",
    [(3, 0.0, [1 / 3, 1 / 3, 1 / 3]), (2, 1.0, [2 / 3, 1 / 3]), (3, 2.0, [36 / 49, 9 / 49, 4 / 49])],
    ids=["skew 0 is uniform", "skew 1 halves the second team", "skew 2 is inverse square"],
)
def test_team_weights_are_zipf_like(n, skew, expected):
    np.testing.assert_allclose(team_weights(n, skew), expected)


def test_sizes_above_max_gpus_are_never_drawn():
    spec = SyntheticSpec(teams=TEAMS, max_gpus=8)
    r = generate(spec, capacity_gpus=8, horizon_s=3 * DAY, seed=0)
    assert set(np.unique(r.gpus).tolist()) <= {1, 2, 4, 8}
