"""The idle GPU-hours reservations held are charged to their projects over the lookback window,
also after the reservation ended (optalloc.model.reservation_idle): a project cannot drop a
reservation and make it again to hold nodes idle beyond what its budget pays for.

The cluster: 5 nodes of 8 GPUs, projects A and B with equal shares, a 1-day window, so A's
entitled GPU-hours over the window are E = 0.5 x 40 x 24 = 480. A's 40-GPU gang, protected
8 h, costs 320 of them; with A's usage ratio at 0.3 the budget test reads
0.3 + (320 + idle) / 480 <= 1, so it passes while A's reservations have held at most 16 GPU-hours
idle in the window, and fails past that."""

from __future__ import annotations

import numpy as np
import pytest

from optalloc.codec import plan_from_dict, plan_reservation_idle_from_dict, plan_to_dict
from optalloc.epoch import run_epoch
from optalloc.model.reservation_idle import carried, charged_by_org, weights
from optalloc.snapshot import build_snapshot
from optalloc.types import (
    Config,
    GpuType,
    Job,
    Policy,
    Reservation,
    ReservationIdle,
    UsageMode,
)

from test_epoch_toy import H, flat_org, nodes_of, running

DAY = 24 * H
NOW = 3 * DAY


def _snap(idle=(), prev=(), usage=0.3, policy=None, jobs=None):
    # B holds every node with protected 8-GPU jobs ending 1..5 h from now
    jobs = jobs if jobs is not None else (
        [running(f"b{i}", "B", "h100", [(f"n{i:02d}", range(8))], start=NOW - 7 * H + i * H,
                 min_runtime_s=8 * H) for i in range(5)]
        + [Job("G", "A", 40, min_runtime_s=8 * H, submit_time=0.0)])
    pol = policy or Policy(max_reservations=1, lookback_s=DAY)
    cfg = Config((GpuType("h100"),), tuple(nodes_of(5, 8)), flat_org({"A": 1, "B": 1}), pol,
                 tuple(jobs))
    return build_snapshot(cfg, now=NOW, usage_ratio={"A": usage, "B": 1.0}, reservations=prev,
                          reservation_idle=idle)


def _idle(gpu_h, start, end, project="A", job="G"):
    return ReservationIdle(job, project, "h100", start, end, gpu_h)


def test_a_gang_whose_budget_pays_for_it_reserves_nodes():
    plan = run_epoch(_snap())
    assert [(r.job_id, dict(r.details)["rank_test"]) for r in plan.reservations] == [("G", "budget")]
    assert plan.reservation_idle == ()


def test_idle_hours_an_ended_reservation_held_in_the_window_count_against_the_budget():
    # 24 GPU-hours held idle by A's earlier reservation, ended an hour ago: 0.3 + 344/480 > 1
    plan = run_epoch(_snap(idle=[_idle(24.0, NOW - 4 * H, NOW - H)]))
    assert plan.reservations == ()
    assert {r.job_id: r.code.value for r in plan.pending}["G"] != "Reserved"
    # the record is carried on for the next epoch
    assert plan.reservation_idle == (_idle(24.0, NOW - 4 * H, NOW - H),)


def test_idle_hours_outside_the_window_no_longer_count_and_are_no_longer_carried():
    old = _idle(24.0, NOW - 2 * DAY, NOW - DAY - H)
    plan = run_epoch(_snap(idle=[old]))
    assert [r.job_id for r in plan.reservations] == ["G"]
    assert plan.reservation_idle == ()


def test_only_the_part_of_the_idle_span_inside_the_window_counts():
    # 48 GPU-hours over 2 h, one of them inside the window: 24 count, as above
    rec = _idle(48.0, NOW - DAY - H, NOW - DAY + H)
    snap = _snap(idle=[rec])
    assert weights(snap, [rec]) == pytest.approx([0.5])
    a = snap.org.index["A"]
    assert charged_by_org(snap)[a] == pytest.approx(24.0)
    assert charged_by_org(snap)[0] == 0.0  # the root has no budget
    assert run_epoch(snap).reservations == ()


def test_another_projects_idle_hours_do_not_count_against_this_one():
    plan = run_epoch(_snap(idle=[_idle(100.0, NOW - 4 * H, NOW - H, project="B", job="X")]))
    assert [r.job_id for r in plan.reservations] == ["G"]


def test_a_dropped_reservation_leaves_its_idle_hours_behind_and_the_gang_cannot_reserve_again():
    # the repro: A's reservation held 8 GPUs idle for 3 h (24 GPU-hours); this epoch A's usage
    # ratio is too high for it to qualify (dropped as outranked); the next epoch its ratio is
    # back at 0.3, which alone would pass, but the 24 GPU-hours it held still count
    prev = Reservation("G", "h100", ("n00", "n01", "n02", "n03", "n04"), NOW + 5 * H,
                       project="A", gpus=40, since=NOW - 3 * H, idle_gpus=8, at=NOW - H,
                       idle_gpu_h=16.0)
    first = run_epoch(_snap(prev=[prev], usage=0.95))
    assert [(e.job_id, e.outcome) for e in first.reservations_ended] == [("G", "outranked")]
    (rec,) = first.reservation_idle
    assert (rec.job_id, rec.project, rec.start, rec.end) == ("G", "A", NOW - 3 * H, NOW)
    assert rec.gpu_h == pytest.approx(24.0)  # 16 so far + 8 GPUs for the last hour
    # through the plan file, as cron carries it
    stored = plan_to_dict(first)
    assert plan_reservation_idle_from_dict(stored) == first.reservation_idle
    assert plan_from_dict(stored).reservation_idle == first.reservation_idle
    again = run_epoch(_snap(prev=first.reservations, idle=first.reservation_idle))
    assert again.reservations == ()
    # without the carried hours (the bug) it would have reserved again with nothing charged
    assert [r.job_id for r in run_epoch(_snap(prev=first.reservations)).reservations] == ["G"]


def test_a_started_gang_leaves_its_reservations_idle_hours_behind_too():
    # G's nodes are free now (B's jobs gone): its reservation is due and the gang starts
    prev = Reservation("G", "h100", ("n00", "n01", "n02", "n03", "n04"), NOW,
                       project="A", gpus=40, since=NOW - 2 * H, idle_gpus=8, at=NOW - H,
                       idle_gpu_h=4.0)
    plan = run_epoch(_snap(prev=[prev], jobs=[Job("G", "A", 40, min_runtime_s=8 * H,
                                                  submit_time=0.0)]))
    assert [(e.job_id, e.outcome) for e in plan.reservations_ended] == [("G", "started")]
    (rec,) = plan.reservation_idle
    assert (rec.project, rec.start, rec.end) == ("A", NOW - 2 * H, NOW)
    assert rec.gpu_h == pytest.approx(12.0)


def test_decay_mode_weighs_idle_hours_by_their_age():
    pol = Policy(max_reservations=1, usage_mode=UsageMode.DECAY, half_life_s=DAY)
    rec = _idle(10.0, NOW - DAY, NOW - DAY)  # one half-life ago, at a point
    snap = _snap(idle=[rec], policy=pol)
    assert weights(snap, [rec]) == pytest.approx([0.5])
    spread = _idle(10.0, NOW - 2 * H, NOW)  # spread over the last 2 h: almost all of it
    w = weights(snap, [spread])[0]
    assert 0.94 < w < 1.0
    assert np.isclose(w, DAY / np.log(2) / (2 * H) * (1 - 2 ** (-2 * H / DAY)))
    # a record whose weight is negligible is dropped from the carry
    ancient = _idle(10.0, NOW - 20 * DAY, NOW - 20 * DAY)
    assert carried(_snap(policy=pol), []) == ()
    assert carried(_snap(idle=[ancient, rec], policy=pol), [spread]) == (rec, spread)


def test_a_dropped_reservation_says_the_idle_hours_its_project_was_charged():
    prev = Reservation("G", "h100", ("n00", "n01", "n02", "n03", "n04"), NOW + 5 * H,
                       project="A", gpus=40, since=NOW - 3 * H, idle_gpus=8, at=NOW - H,
                       idle_gpu_h=16.0)
    # a reservation already held keeps qualifying with 25% slack: 150 GPU-hours of an earlier
    # one, + 16 so far + 8 GPUs for the last hour: 0.3 + (320 + 174) / 480 = 1.33
    plan = run_epoch(_snap(prev=[prev], idle=[_idle(150.0, NOW - 6 * H, NOW - 4 * H)]))
    (e,) = plan.reservations_ended
    assert e.outcome == "outranked"
    assert e.message.endswith("and its protected run, with 174 GPU-hours its reservations have "
                              "held idle in the window, would take A's usage ratio over the "
                              "window to 1.33 (> 1.25, the slack a reservation already held keeps)")
