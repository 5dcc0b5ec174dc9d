"""The SQLite state store: round-trips, the queue and its history, epochs, events, and the
ledger it loads."""

from __future__ import annotations

from dataclasses import astuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optalloc.errors import OptallocError, StateError
from optalloc.ledger import Ledger, build_report
from optalloc.state import StateStore
from optalloc.org import OrgTree
from optalloc.types import (
    GpuType, Interval, Job, JobState, NodeAlloc, OrgNode, Placement, Policy, UsageMode,
)

H = 3600.0
GPU_TYPES = (GpuType("h100", 1.0), GpuType("b200", 1.6))
ROOT = OrgNode("root", children=(OrgNode("A", children=(OrgNode("A1"), OrgNode("A2"))),
                                 OrgNode("B1", share=2)))


@pytest.fixture
def store(tmp_path):
    s = StateStore(tmp_path / "state.db")
    yield s
    s.close()


def running_job(job_id: str = "j1") -> Job:
    return Job(
        id=job_id, project="A1", gpus=16, gpus_per_node=8, gpu_types=("h100",),
        speedup={"b200": 1.8}, min_runtime_s=2 * H, resumable=False, priority=3,
        submit_time=100.0, duration_s=10 * H, checkpoint_interval_s=1800.0,
        state=JobState.RUNNING, start_time=200.0,
        placement=Placement(job_id, "h100", (NodeAlloc("n1", tuple(range(8))),
                                             NodeAlloc("n2", tuple(range(8))))),
        command=("python", "train.py"),
    )


# ------------------------------------------------------------------ intervals

interval_lists = st.lists(
    st.builds(
        Interval,
        job_id=st.sampled_from(["j1", "j2", "j3", "ünï"]),
        project=st.sampled_from(["A1", "A2", "B1"]),
        gpu_type=st.sampled_from(["h100", "b200"]),
        gpus=st.integers(0, 1024),
        start=st.floats(0, 1e9, allow_nan=False),
        end=st.just(0.0),
        allocated=st.booleans(),
    ).map(lambda iv: Interval(iv.job_id, iv.project, iv.gpu_type, iv.gpus, iv.start,
                              iv.start + 1234.5, iv.allocated)),
    max_size=20,
    unique_by=lambda iv: (iv.job_id, iv.start),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ivs=interval_lists)
def test_intervals_round_trip_in_start_order(tmp_path_factory, ivs):
    with StateStore(tmp_path_factory.mktemp("rt") / "s.db") as s:
        s.record_intervals(ivs)
        assert s.intervals() == sorted(ivs, key=lambda iv: iv.start)


def test_intervals_since_returns_those_ending_after_it(store):
    ivs = [Interval("a", "A1", "h100", 1, 0, 10), Interval("b", "A1", "h100", 1, 5, 20),
           Interval("c", "B1", "b200", 2, 30, 40)]
    store.record_intervals(ivs)
    assert store.intervals(since=10) == ivs[1:]
    assert store.intervals(since=40) == []


def test_recording_the_same_job_and_start_again_replaces_it_instead_of_charging_twice(store):
    store.record_interval(Interval("j", "A1", "h100", 8, 0, H))
    store.record_interval(Interval("j", "A1", "h100", 8, 0, 2 * H))
    assert store.intervals() == [Interval("j", "A1", "h100", 8, 0, 2 * H)]


def test_an_interval_ending_before_it_starts_is_refused(store):
    with pytest.raises(OptallocError, match="ends .* before it starts"):
        store.record_interval(Interval("j", "A1", "h100", 8, H, 0))
    assert store.n_intervals() == 0


# ------------------------------------------------------------------ the loaded ledger


def test_the_loaded_ledger_answers_like_one_built_in_memory(store):
    rng = np.random.default_rng(3)
    ivs = [
        Interval(f"j{i}", str(rng.choice(["A1", "A2", "B1"])), str(rng.choice(["h100", "b200"])),
                 int(rng.integers(1, 17)), float(s), float(s + rng.uniform(0, 9 * H)),
                 bool(rng.random() < 0.7))
        for i, s in enumerate(rng.uniform(0, 48 * H, 300))
    ]
    for policy in (Policy(lookback_s=24 * H), Policy(usage_mode=UsageMode.DECAY, half_life_s=12 * H)):
        tree = OrgTree.build(ROOT, ["h100", "b200"])
        mem = Ledger(GPU_TYPES, tree, policy)
        mem.record_intervals(ivs)
        for t in range(0, 48, 6):
            mem.record_capacity(t * H, {"h100": 64 - t, "b200": 32})
            mem.record_demand(t * H, {"A1": t, "B1": 40 - t})
        if store.n_intervals() == 0:
            store.record_intervals(ivs)
            for t in range(0, 48, 6):
                store.record_capacity(t * H, {"h100": 64 - t, "b200": 32})
                store.record_demand(t * H, {"A1": t, "B1": 40 - t})
        loaded = store.ledger(GPU_TYPES, tree, policy)
        now = 50 * H
        np.testing.assert_allclose(loaded.usage(now), mem.usage(now))
        np.testing.assert_allclose(loaded.entitled(now), mem.entitled(now))
        a, b = loaded.owed_delivered(0, now), mem.owed_delivered(0, now)
        np.testing.assert_allclose(a.owed_h, b.owed_h)
        np.testing.assert_allclose(a.delivered_h, b.delivered_h)
        ra, rb = build_report(loaded, now), build_report(mem, now)
        assert [(r.name, r.depth) for r in ra] == [(r.name, r.depth) for r in rb]
        np.testing.assert_allclose([astuple(r)[3:] for r in ra], [astuple(r)[3:] for r in rb])


def test_loading_since_keeps_the_sample_in_force_and_the_window_answer(store):
    tree = OrgTree.build(ROOT, ["h100", "b200"])
    store.record_capacity(0, {"h100": 8})
    store.record_capacity(10 * H, {"h100": 16})
    store.record_capacity(30 * H, {"h100": 4})
    store.record_intervals([Interval("old", "A1", "h100", 8, 0, H),
                            Interval("new", "A1", "h100", 8, 20 * H, 22 * H)])
    policy = Policy(lookback_s=12 * H)
    full = store.ledger(GPU_TYPES, tree, policy)
    part = store.ledger(GPU_TYPES, tree, policy, since=24 * H - 12 * H)
    assert part.n_intervals == 1
    np.testing.assert_allclose(part.usage(24 * H), full.usage(24 * H))
    np.testing.assert_allclose(part.entitled(24 * H), full.entitled(24 * H))


def test_intervals_of_projects_no_longer_configured_are_kept_unattributed(store):
    store.record_intervals([Interval("j", "retired", "h100", 4, 0, H),
                            Interval("k", "A1", "h100", 1, 0, H)])
    led = store.ledger(GPU_TYPES, OrgTree.build(ROOT, ["h100", "b200"]), Policy(lookback_s=H))
    assert led.usage(H)[0] == pytest.approx(1.0)
    assert led.unattributed_gpu_hours(H) == pytest.approx(4.0)


def test_a_second_sample_at_the_same_time_replaces_the_first(store):
    store.record_capacity(0, {"h100": 8})
    store.record_capacity(0, {"h100": 2})
    led = store.ledger(GPU_TYPES, OrgTree.build(ROOT, ["h100", "b200"]), Policy(lookback_s=H))
    assert led.entitled(H)[0] == pytest.approx(2.0)


# ------------------------------------------------------------------ jobs


def test_a_job_round_trips_with_every_field(store):
    job = running_job()
    store.add_job(job)
    assert store.get_job("j1") == job
    assert store.get_job("nope") is None


def test_adding_a_job_twice_is_an_error_that_names_it(store):
    store.add_job(running_job())
    with pytest.raises(StateError, match="job 'j1' already exists"):
        store.add_job(running_job())


def test_the_queue_lists_live_jobs_and_finished_jobs_stay_as_history(store):
    q1 = Job("q1", "A2", 1, submit_time=5.0)
    q2 = Job("q2", "B1", 2, submit_time=1.0)
    store.add_job(q1)
    store.add_job(q2)
    store.add_job(running_job("r1"))
    store.add_job(Job("x", "A1", 1, submit_time=0.0))
    store.finish_job("x", "cancelled", 300.0, "user asked")
    store.upsert_job(Job("q2", "B1", 4, submit_time=1.0))  # edited in place
    assert [j.id for j in store.list_jobs()] == ["q2", "q1", "r1"]  # by submit time
    assert store.get_job("q2").gpus == 4
    assert [j.id for j in store.list_jobs(states=("finished",))] == ["x"]
    assert [j.id for j in store.list_jobs(states=("cancelled",))] == ["x"]
    assert store.list_jobs(states=("failed",)) == []
    assert [store.job_status(i) for i in ("q1", "r1", "x")] == ["queued", "running", "cancelled"]
    assert store.events(job_id="x") == [
        {"id": 1, "time": 300.0, "job_id": "x", "kind": "cancelled", "message": "user asked"}
    ]


def test_finishing_requires_a_known_job_and_status(store):
    store.add_job(Job("a", "A1", 1))
    with pytest.raises(OptallocError, match="status must be one of"):
        store.finish_job("a", "done", 1.0)
    with pytest.raises(StateError, match="no job 'zz'"):
        store.finish_job("zz", "failed", 1.0)
    with pytest.raises(StateError, match="no job 'zz'"):
        store.job_status("zz")
    assert store.job_status("a") == "queued"


# ------------------------------------------------------------------ epochs and events


def test_epochs_come_back_newest_first_with_their_documents(store):
    assert store.last_epoch() is None
    for t in (300.0, 600.0, 900.0):
        store.record_epoch(t, {"now": t, "placements": []}, {"status": "optimal"} if t < 900 else None,
                           "solver timeout" if t == 900 else None)
    assert store.last_epoch() == {"id": 3, "time": 900.0, "plan": {"now": 900.0, "placements": []},
                                  "report": None, "degraded": "solver timeout"}
    assert [e["time"] for e in store.epochs(limit=2)] == [900.0, 600.0]


def test_events_keep_the_latest_in_time_order(store):
    for i in range(5):
        store.record_event(float(i), "j1" if i % 2 == 0 else "j2", "started", f"m{i}")
    assert [e["message"] for e in store.events(limit=3)] == ["m2", "m3", "m4"]
    assert [e["message"] for e in store.events(job_id="j1")] == ["m0", "m2", "m4"]
