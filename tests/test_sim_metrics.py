"""Metrics of a tiny run whose every number is worked out by hand below, plus invariants on
random runs (hypothesis).

The hand-checked run: one node of 4 GPUs, two hours, projects A (share 3 -> entitled 3 GPUs)
and B (share 1 -> 1 GPU).

    job   project  GPUs  min_runtime  submit  runs                 notes
    a1    A        2     8h (other)   0       0 - 7200             still running at the end
    a2    A        2     10m (debug)  0       1800 - 3600          completed
    b1    B        2     8h (other)   0       3600 - 7200          still running
    u     B        2     0 (unalloc)  0       0 - 1800             preempted once, lost 0.5 GPU-h
    big   A        64    8h (large)   3600    never                censored at 7200

    demand (allocated, by project)  0-1800: A 4, B 2 (all jobs 8)
                                    1800-3600: A 4, B 2 (all 6: u gone)
                                    3600-7200: A 66, B 2 (all 68: big submitted, a2 done)

    hour 1: A entitled 3, demanded 4 -> owed 3, delivered 2 + 1 = 3 -> met 3
            B entitled 1, demanded 2 -> owed 1, delivered 0 (u is unallocated) -> met 0
    hour 2: A owed 3, delivered 2 -> met 2;  B owed 1, delivered 2 -> met 1
    hourly: A 5/6, B 1/2, overall (5 + 1) / (6 + 2) = 3/4
    period: A min(5, 6)/6 = 5/6, B min(2, 2)/2 = 1, overall (5 + 2) / 8 = 7/8
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optalloc.sim.compare import compare
from optalloc.sim.metrics import compute_metrics, wait_classes
from optalloc.sim.timeseries import time_series
from optalloc.sim.result import CapacitySample, DemandSample, EpochRecord, JobRecord, SimResult
from optalloc.types import Config, GpuType, Interval, Node, OrgNode, frozen_map

H = 3600.0


def tiny_config() -> Config:
    return Config(
        gpu_types=(GpuType("g1"),),
        nodes=(Node("n1", "g1", 4),),
        org=OrgNode("root", children=(OrgNode("A", share=3), OrgNode("B", share=1))),
    )


def tiny_result(policy: str = "greedy") -> SimResult:
    intervals = (
        Interval("a1", "A", "g1", 2, 0.0, 7200.0, True),
        Interval("u", "B", "g1", 2, 0.0, 1800.0, False),
        Interval("a2", "A", "g1", 2, 1800.0, 3600.0, True),
        Interval("b1", "B", "g1", 2, 3600.0, 7200.0, True),
    )
    jobs = (
        JobRecord("a1", "A", 2, 8 * H, 0.0, 0.0, None, False),
        JobRecord("a2", "A", 2, 600.0, 0.0, 1800.0, 3600.0, True),
        JobRecord("b1", "B", 2, 8 * H, 0.0, 3600.0, None, False),
        JobRecord("u", "B", 2, 0.0, 0.0, 0.0, 1800.0, False, preemptions=1, lost_gpu_s=1800.0),
        JobRecord("big", "A", 64, 8 * H, 3600.0, None, None, False),
    )
    demand = (
        DemandSample(0.0, frozen_map({"A": 4, "B": 2}), 8),
        DemandSample(1800.0, frozen_map({"A": 4, "B": 2}), 6),
        DemandSample(3600.0, frozen_map({"A": 66, "B": 2}), 68),
    )
    epochs = (
        EpochRecord(0.0, 0.1, "optimal", n_queued=3, n_running=2),
        EpochRecord(1800.0, 0.2, "optimal", n_queued=1, n_running=2),
        EpochRecord(3600.0, 0.6, "optimal", n_queued=1, n_running=2),
    )
    return SimResult(
        policy=policy,
        scenario="tiny",
        config=tiny_config(),
        start=0.0,
        end=7200.0,
        intervals=intervals,
        jobs=jobs,
        epochs=epochs,
        demand=demand,
        capacity=(CapacitySample(0.0, frozen_map({"g1": 4})),),
        seed=0,
    )


def test_owed_delivered_both_forms_overall_per_project_and_worst():
    m = compute_metrics(tiny_result())
    od = m["owed_delivered"]
    assert od["hourly"] == pytest.approx(6 / 8)
    assert od["period"] == pytest.approx(7 / 8)
    assert od["worst_hourly"] == {"project": "B", "value": pytest.approx(0.5)}
    assert od["worst_period"] == {"project": "A", "value": pytest.approx(5 / 6)}
    assert m["projects"] == {
        "A": {"owed_gpu_h": pytest.approx(6.0), "delivered_gpu_h": pytest.approx(5.0),
              "hourly": pytest.approx(5 / 6), "period": pytest.approx(5 / 6), "unallocated_gpu_h": 0.0},
        "B": {"owed_gpu_h": pytest.approx(2.0), "delivered_gpu_h": pytest.approx(2.0),
              "hourly": pytest.approx(0.5), "period": pytest.approx(1.0), "unallocated_gpu_h": pytest.approx(1.0)},
    }


def test_occupancy_limit_demand_ratio_and_unallocated_share():
    m = compute_metrics(tiny_result())
    # available 4 GPUs x 2 h = 8; allocated 4 + 1 + 2 = 7; unallocated 1
    assert m["occupancy"] == {
        "allocated": pytest.approx(7 / 8),
        "total": pytest.approx(1.0),
        "limit": pytest.approx(1.0),  # demand >= capacity all the time
        "of_limit": pytest.approx(1.0),
    }
    # (8/4 * 0.5 h + 6/4 * 0.5 h + 68/4 * 1 h) / 2 h
    assert m["demand_ratio"] == pytest.approx((1.0 + 0.75 + 17.0) / 2)
    assert m["unallocated_share"] == pytest.approx(1 / 8)
    assert m["gpu_hours"] == {
        "available": pytest.approx(8.0),
        "demanded": pytest.approx(4.0 + 3.0 + 68.0),
        "delivered": pytest.approx(8.0),
        "allocated": pytest.approx(7.0),
        "unallocated": pytest.approx(1.0),
    }


def test_waits_by_class_count_never_started_jobs_as_censored_at_the_horizon():
    w = compute_metrics(tiny_result())["waits"]
    assert w["debug"] == {"n": 1, "n_censored": 0, "mean_s": 1800.0, "p50_s": 1800.0,
                          "p90_s": 1800.0, "p99_s": 1800.0, "max_s": 1800.0}
    assert w["large"] == {"n": 1, "n_censored": 1, "mean_s": 3600.0, "p50_s": 3600.0,
                          "p90_s": 3600.0, "p99_s": 3600.0, "max_s": 3600.0}
    # other: a1 waited 0, b1 3600 -> linear percentiles
    assert w["other"] == {"n": 2, "n_censored": 0, "mean_s": 1800.0, "p50_s": 1800.0,
                          "p90_s": pytest.approx(3240.0), "p99_s": pytest.approx(3564.0), "max_s": 3600.0}
    assert w["unallocated"] == {"n": 1, "n_censored": 0, "mean_s": 0.0, "p50_s": 0.0,
                                "p90_s": 0.0, "p99_s": 0.0, "max_s": 0.0}
    # all: sorted [0, 0, 1800, 3600, 3600]
    assert w["all"]["n"] == 5 and w["all"]["n_censored"] == 1
    assert w["all"]["p50_s"] == 1800.0 and w["all"]["p90_s"] == 3600.0


def test_preemptions_solver_and_job_counts():
    m = compute_metrics(tiny_result())
    assert m["preemptions"] == {"count": 1, "per_1000_gpu_h": pytest.approx(125.0), "lost_gpu_h": pytest.approx(0.5)}
    assert m["solver"]["epochs"] == 3
    assert m["solver"]["mean_s"] == pytest.approx(0.3)
    assert m["solver"]["p50_s"] == pytest.approx(0.2)
    assert m["solver"]["p99_s"] == pytest.approx(0.2 + 0.98 * 0.4)
    assert m["solver"]["max_s"] == pytest.approx(0.6)
    assert m["solver"]["status"] == {"optimal": 3}
    assert m["jobs"] == {"submitted": 5, "started": 4, "completed": 1}


def test_hourly_time_series_match_the_hand_computed_hours():
    ts = time_series(tiny_result())
    assert ts.projects == ("A", "B")
    np.testing.assert_allclose(ts.edges, [0.0, 3600.0, 7200.0])
    np.testing.assert_allclose(ts.delivered_h, [[3.0, 2.0], [0.0, 2.0]])
    np.testing.assert_allclose(ts.owed_h, [[3.0, 3.0], [1.0, 1.0]])
    np.testing.assert_allclose(ts.occupancy_allocated, [0.75, 1.0])
    np.testing.assert_allclose(ts.occupancy_total, [1.0, 1.0])
    np.testing.assert_allclose(ts.demand_ratio, [1.75, 17.0])
    np.testing.assert_allclose(ts.capacity, [4.0, 4.0])
    np.testing.assert_allclose(ts.queue_length, [2.0, 1.0])  # epochs at 0, 1800 | 3600


@pytest.mark.parametrize(
    "min_runtime, gpus, expected",
    [
        (600.0, 1, "debug"),  # a short protected job is debug
        (900.0, 64, "debug"),  # debug wins over size: the class is about the contract
        (8 * H, 64, "large"),
        (0.0, 128, "large"),  # a large unallocated gang is still large
        (0.0, 1, "unallocated"),
        (901.0, 8, "other"),
    ],
)
def test_wait_class_of_a_job(min_runtime, gpus, expected):
    assert wait_classes(np.array([min_runtime]), np.array([gpus])).tolist() == [expected]


@pytest.mark.parametrize(
    "gpus, gpus_per_node, widest, nodes, expected",
    [
        (32, 4, 8, 8, "large"),  # 8 nodes of 4 GPUs: large by nodes (DESIGN.md 6), not GPUs
        (28, 4, 8, 7, "other"),
        (32, None, 4, 8, "large"),  # no gpus_per_node: whole 4-GPU nodes
        (32, None, 8, 4, "other"),
        (8, None, 8, 1, "other"),  # one node if it fits
    ],
)
def test_a_gang_of_eight_nodes_is_large_whatever_its_gpus(gpus, gpus_per_node, widest, nodes,
                                                          expected):
    from optalloc.sim.result import job_nodes
    from optalloc.types import Job

    job = Job("g", "A", gpus, min_runtime_s=8 * H, gpus_per_node=gpus_per_node)
    assert job_nodes(job, widest) == nodes
    assert wait_classes(np.array([8 * H]), np.array([gpus]), np.array([nodes])).tolist() == [
        expected]


def test_compare_marks_the_best_policy_per_row_by_direction():
    a = compute_metrics(tiny_result("greedy"))
    b = compute_metrics(tiny_result("ilp"))
    b["owed_delivered"]["hourly"] = 0.9
    b["waits"]["debug"]["p90_s"] = 5000.0
    rows = {r["key"]: r for r in compare({"greedy": a, "ilp": b})}
    assert rows["owed_delivered.hourly"]["values"] == {"greedy": pytest.approx(0.75), "ilp": 0.9}
    assert rows["owed_delivered.hourly"]["best"] == ["ilp"]
    assert rows["waits.debug.p90_s"]["best"] == ["greedy"]  # lower is better
    assert rows["occupancy.total"]["best"] == ["greedy", "ilp"]  # a tie names both
    assert rows["demand_ratio"]["best"] == []  # no direction


def test_capacity_drop_lowers_available_time_and_the_limit():
    r = tiny_result()
    # the node is down for the second hour: capacity 0 then; b1 and a1 intervals end at 3600
    r2 = SimResult(
        policy=r.policy, scenario=r.scenario, config=r.config, start=0.0, end=7200.0,
        intervals=(
            Interval("a1", "A", "g1", 2, 0.0, 3600.0, True),
            Interval("u", "B", "g1", 2, 0.0, 1800.0, False),
            Interval("a2", "A", "g1", 2, 1800.0, 3600.0, True),
        ),
        jobs=r.jobs, epochs=r.epochs, demand=r.demand,
        capacity=(CapacitySample(0.0, frozen_map({"g1": 4})), CapacitySample(3600.0, frozen_map({"g1": 0}))),
    )
    m = compute_metrics(r2)
    assert m["gpu_hours"]["available"] == pytest.approx(4.0)
    assert m["occupancy"]["total"] == pytest.approx(1.0)
    assert m["occupancy"]["limit"] == pytest.approx(1.0)
    # the ratio is averaged over the hour with capacity only: (8/4 + 6/4) / 2
    assert m["demand_ratio"] == pytest.approx(1.75)


# --------------------------------------------------------------------------- invariants


@st.composite
def random_runs(draw):
    cap = draw(st.integers(1, 16))
    end = float(draw(st.integers(1, 6))) * H
    n = draw(st.integers(0, 8))
    intervals, jobs = [], []
    for i in range(n):
        s = draw(st.floats(0, end, allow_nan=False))
        e = draw(st.floats(s, end, allow_nan=False))
        g = draw(st.integers(1, cap))
        alloc = draw(st.booleans())
        proj = draw(st.sampled_from(["A", "B"]))
        intervals.append(Interval(f"j{i}", proj, "g1", g, s, e, alloc))
        jobs.append(JobRecord(f"j{i}", proj, g, 3600.0 if alloc else 0.0, s, s, e, draw(st.booleans()),
                              preemptions=draw(st.integers(0, 3))))
    k = draw(st.integers(1, 4))
    times = sorted(draw(st.lists(st.floats(0, end, allow_nan=False), min_size=k, max_size=k)))
    times[0] = 0.0
    demand = tuple(
        DemandSample(t, frozen_map({"A": draw(st.integers(0, 40)), "B": draw(st.integers(0, 40))}),
                     draw(st.integers(0, 100)))
        for t in times
    )
    return SimResult(
        policy="p", scenario="s",
        config=Config(gpu_types=(GpuType("g1"),), nodes=(Node("n1", "g1", cap),),
                      org=OrgNode("root", children=(OrgNode("A", share=2), OrgNode("B", share=1)))),
        start=0.0, end=end, intervals=tuple(intervals), jobs=tuple(jobs), epochs=(),
        demand=demand, capacity=(CapacitySample(0.0, frozen_map({"g1": cap})),),
    )


@settings(max_examples=60, deadline=None)
@given(random_runs())
def test_fractions_stay_in_range_and_series_sum_to_the_totals(result):
    m = compute_metrics(result)
    for key in ("hourly", "period"):
        v = m["owed_delivered"][key]
        assert v is None or -1e-9 <= v <= 1 + 1e-9
    assert 0.0 <= m["occupancy"]["limit"] <= 1.0 + 1e-9
    share = m["unallocated_share"]
    assert share is None or 0.0 <= share <= 1.0
    # hourly form never exceeds the period form (a shortfall is never repaid)
    for p in m["projects"].values():
        if p["hourly"] is not None:
            assert p["hourly"] <= p["period"] + 1e-9
    ts = time_series(result)
    assert ts.delivered_h.sum() == pytest.approx(m["gpu_hours"]["allocated"], abs=1e-6)
    assert sum(p["owed_gpu_h"] for p in m["projects"].values()) == pytest.approx(ts.owed_h.sum(), abs=1e-6)
    width_h = np.diff(ts.edges) / H
    assert float(np.sum(ts.occupancy_total * ts.capacity * width_h)) == pytest.approx(
        m["gpu_hours"]["delivered"], abs=1e-6)
    assert math.isfinite(m["demand_ratio"])


def test_jobs_submitted_before_the_horizon_wait_from_its_start():
    r = tiny_result()
    early = (
        JobRecord("q1", "A", 1, 8 * H, -5000.0, 600.0, None, False),  # waited 600 s inside the run
        JobRecord("q2", "B", 1, 8 * H, -5000.0, None, None, False),  # never started: 7200 s, censored
    )
    m = compute_metrics(SimResult(
        policy=r.policy, scenario=r.scenario, config=r.config, start=0.0, end=7200.0,
        intervals=r.intervals, jobs=early, epochs=(), demand=r.demand, capacity=r.capacity,
    ))
    assert m["waits"]["other"] == {"n": 2, "n_censored": 1, "mean_s": 3900.0, "p50_s": 3900.0,
                                   "p90_s": pytest.approx(6540.0), "p99_s": pytest.approx(7134.0),
                                   "max_s": 7200.0}


def test_large_jobs_are_split_by_contract_and_by_whether_they_fit_their_projects_share():
    # the tiny run plus three more large jobs on a 128-GPU cluster where A is entitled to 96
    # GPUs and B to 32: an allocated 64-GPU gang of A (fits A's share) started after 1 h, an
    # allocated 64-GPU gang of B (beyond B's share) never started, an unallocated 128-GPU job
    # of B started after 30 min
    import dataclasses

    r = tiny_result()
    cfg = dataclasses.replace(r.config, nodes=(Node("n1", "g1", 128),))
    jobs = r.jobs + (
        JobRecord("ga", "A", 64, 8 * H, 0.0, 1 * H, None, False),
        JobRecord("gb", "B", 64, 8 * H, 0.0, None, None, False),
        JobRecord("ub", "B", 128, 0.0, 0.0, 0.5 * H, 1 * H, True),
    )
    w = compute_metrics(dataclasses.replace(r, config=cfg, jobs=jobs))["waits"]
    assert w["large"]["n"] == 4  # big, ga, gb, ub: the DESIGN class, contract aside
    assert w["large_allocated"]["n"] == 3 and w["large_allocated"]["n_censored"] == 2
    # within A's share: big (censored at 3600 s) and ga (3600 s)
    assert (w["large_within_share"]["n"], w["large_within_share"]["max_s"]) == (2, 3600.0)
    # beyond B's share: gb, censored at the horizon (7200 s)
    assert w["large_beyond_share"] == {"n": 1, "n_censored": 1, "mean_s": 7200.0,
                                       "p50_s": 7200.0, "p90_s": 7200.0, "p99_s": 7200.0,
                                       "max_s": 7200.0}
