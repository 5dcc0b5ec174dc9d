"""An outside judge's cases: tiny scenarios run end to end through the simulator (engine +
policy + compute_metrics), every metric worked out by hand from the documented definitions
(optalloc/sim/metrics.py's docstring, optalloc/ledger/owed.py, DESIGN.md section 6).

Common setup: GPU type h100, org root -> A, B (equal shares: each entitled to half of the GPUs
that are up), epoch 300 s, grace 0 (one case 60 s), checkpoints every 600 s of run time.

Waits are given as the hand-computed per-job lists; the percentile of a list is numpy's linear
interpolation (the documented definition), so the expected stats are derived from the lists.
"""

from __future__ import annotations

import numpy as np
import pytest

from optalloc.sim.engine import simulate
from optalloc.sim.metrics import compute_metrics
from optalloc.sim.policies import make_policy
from optalloc.sim.scenario import NodeEvent, Scenario
from optalloc.types import Config, GpuType, Job, Node, NodeState, OrgNode, Policy

H = 3600.0
CLASSES = ("debug", "large", "other", "unallocated", "all", "large_allocated",
           "large_within_share", "large_beyond_share")


def scenario(jobs, *, nodes=(8,), duration=H, early=True, events=(), **policy):
    pol = {"grace_s": 0.0, "epoch_s": 300.0, "checkpoint_interval_s": 600.0, **policy}
    cfg = Config(
        gpu_types=(GpuType("h100"),),
        nodes=tuple(Node(f"n{i + 1}", "h100", g) for i, g in enumerate(nodes)),
        org=OrgNode("root", children=(OrgNode("A"), OrgNode("B"))),
        policy=Policy(**pol),
    )
    return Scenario("judge", cfg, tuple(jobs), duration_s=duration, early_solve=early,
                    node_events=tuple(events))


def stats(waits, censored=0):
    if not waits:
        return {"n": 0, "n_censored": 0, "mean_s": None, "p50_s": None, "p90_s": None,
                "p99_s": None, "max_s": None}
    w = np.array(waits, dtype=float)
    p50, p90, p99 = np.percentile(w, [50, 90, 99])
    return {"n": len(w), "n_censored": censored, "mean_s": pytest.approx(w.mean()),
            "p50_s": pytest.approx(p50), "p90_s": pytest.approx(p90),
            "p99_s": pytest.approx(p99), "max_s": pytest.approx(w.max())}


def waits(**by_class):
    """Class -> (wait list, n censored) or a wait list; missing classes are empty."""
    out = {}
    for k in CLASSES:
        v = by_class.get(k, [])
        out[k] = stats(*v) if isinstance(v, tuple) else stats(v)
    return out


def proj(owed, delivered, hourly, period, unalloc=0.0):
    return {"owed_gpu_h": pytest.approx(owed), "delivered_gpu_h": pytest.approx(delivered),
            "hourly": None if hourly is None else pytest.approx(hourly),
            "period": None if period is None else pytest.approx(period),
            "unallocated_gpu_h": pytest.approx(unalloc)}


def no_reservations():
    return {"made": 0, "kept": 0, "dropped": 0, "dropped_by": {}, "open_at_end": 0,
            "idle_gpu_h": 0.0, "held_to_start_mean_h": None, "held_to_start_max_h": None,
            "idle_share": 0.0}


def expected(*, od, projects, occ, demand_ratio, unalloc_share, gpu_h, waits, pre, jobs,
             reservations=None):
    hourly, period, worst_h, worst_p = od
    alloc, total, limit, of_limit = occ
    return {
        "owed_delivered": {
            "hourly": pytest.approx(hourly), "period": pytest.approx(period),
            "worst_hourly": {"project": worst_h[0], "value": pytest.approx(worst_h[1])},
            "worst_period": {"project": worst_p[0], "value": pytest.approx(worst_p[1])},
        },
        "projects": projects,
        "occupancy": {"allocated": pytest.approx(alloc), "total": pytest.approx(total),
                      "limit": pytest.approx(limit), "of_limit": pytest.approx(of_limit)},
        "demand_ratio": pytest.approx(demand_ratio),
        "unallocated_share": pytest.approx(unalloc_share),
        "gpu_hours": dict(zip(("available", "demanded", "delivered", "allocated", "unallocated"),
                              map(pytest.approx, gpu_h))),
        "waits": waits,
        "preemptions": {"count": pre[0], "per_1000_gpu_h": pytest.approx(pre[1]),
                        "lost_gpu_h": pytest.approx(pre[2])},
        "reservations": reservations or no_reservations(),
        "jobs": dict(zip(("submitted", "started", "completed"), jobs)),
    }


CASES = [
    pytest.param(
        # 1 node x 8, 1 h. a1 (A, 8) runs 0-600; b1 (B, 8) submitted at 60 waits for the tick
        # at 600 (no early solve): wait 540, runs 600-1800. Each project entitled 4 GPU-h.
        # A: demanded 8*600/3600 = 4/3 = owed = delivered. B: demanded 8*1740/3600 = 3.8667,
        # owed 3.8667, delivered 8*1200/3600 = 8/3 -> 20/29. Overall 4 / 5.2.
        # Demand 8 | 16 (60-600) | 8 (600-1800) | 0: limit = 8*1800 / 8*3600 = 0.5,
        # ratio (60 + 2*540 + 1200) / 3600 = 0.65.
        ["greedy", "ilp"],
        scenario([Job("a1", "A", 8, min_runtime_s=H, submit_time=0.0, duration_s=600.0),
                  Job("b1", "B", 8, min_runtime_s=H, submit_time=60.0, duration_s=1200.0)],
                 early=False),
        expected(
            od=(4 / 5.2, 4 / 5.2, ("B", 20 / 29), ("B", 20 / 29)),
            projects={"A": proj(4 / 3, 4 / 3, 1.0, 1.0), "B": proj(5.2 - 4 / 3, 8 / 3, 20 / 29, 20 / 29)},
            occ=(0.5, 0.5, 0.5, 1.0), demand_ratio=0.65, unalloc_share=0.0,
            gpu_h=(8.0, 5.2, 4.0, 4.0, 0.0),
            waits=waits(other=[0, 540], all=[0, 540]),
            pre=(0, 0.0, 0.0), jobs=(2, 2, 2)),
        id="a-job-submitted-between-ticks-waits-for-the-tick-after-the-gpus-free",
    ),
    pytest.param(
        # 1 node x 64, 1 h, no early solve. big (A, 64, large) runs 0-1200; j63 (B, 63) and
        # d (B, 1 GPU, min_runtime exactly 900 s = debug) submitted at 10 wait to 1200:
        # 1190 each. d runs 1200-1500, j63 1200-2400. Entitled 32 GPU-h each.
        # A owed = delivered = 64/3. B demanded 63*2390/3600 + 1490/3600 = 42.24 -> owed 32,
        # delivered 21 + 300/3600. big is beyond share (64 > A's 32 entitled GPUs).
        # min(C, D): 64 until 1500, 63 to 2400 -> limit 152700 / 230400.
        ["greedy", "ilp"],
        scenario([Job("big", "A", 64, min_runtime_s=H, submit_time=0.0, duration_s=1200.0),
                  Job("j63", "B", 63, min_runtime_s=H, submit_time=10.0, duration_s=1200.0),
                  Job("d", "B", 1, min_runtime_s=900.0, submit_time=10.0, duration_s=300.0)],
                 nodes=(64,), early=False),
        expected(
            od=((64 / 3 + 21 + 1 / 12) / (64 / 3 + 32), (64 / 3 + 21 + 1 / 12) / (64 / 3 + 32),
                ("B", (21 + 1 / 12) / 32), ("B", (21 + 1 / 12) / 32)),
            projects={"A": proj(64 / 3, 64 / 3, 1.0, 1.0),
                      "B": proj(32.0, 21 + 1 / 12, (21 + 1 / 12) / 32, (21 + 1 / 12) / 32)},
            occ=(152700 / 230400, 152700 / 230400, 152700 / 230400, 1.0),
            demand_ratio=(10 + 2 * 1190 + 300 + 900 * 63 / 64) / 3600, unalloc_share=0.0,
            gpu_h=(64.0, (64 * 1200 + 63 * 2390 + 1490) / 3600, 64 / 3 + 21 + 1 / 12,
                   64 / 3 + 21 + 1 / 12, 0.0),
            waits=waits(debug=[1190], large=[0], other=[1190], all=[0, 1190, 1190],
                        large_allocated=[0], large_beyond_share=[0]),
            pre=(0, 0.0, 0.0), jobs=(3, 3, 3)),
        id="debug-at-exactly-15-min-and-a-64-gpu-gang-are-classed-and-timed-from-submit",
    ),
    pytest.param(
        # 1 node x 8, 1 h. u (B, unallocated) runs from 0; a1 (A, 8) submitted at 1000 preempts
        # it at once: 1000 % 600 = 400 s lost x 8 GPUs = 0.8889 GPU-h. a1 runs 1000-2200, u
        # resumes at the tick 2400 to the end. B owes nothing (unallocated demand is not owed).
        # Delivered: alloc 8*1200/3600 = 8/3, unalloc 8*2200/3600 = 44/9.
        ["greedy", "ilp"],
        scenario([Job("u", "B", 8, min_runtime_s=0.0, submit_time=0.0, duration_s=2 * H),
                  Job("a1", "A", 8, min_runtime_s=H, submit_time=1000.0, duration_s=1200.0)]),
        expected(
            od=(1.0, 1.0, ("A", 1.0), ("A", 1.0)),
            projects={"A": proj(8 / 3, 8 / 3, 1.0, 1.0), "B": proj(0.0, 0.0, None, None, 44 / 9)},
            occ=(1 / 3, (8 / 3 + 44 / 9) / 8, 1.0, (8 / 3 + 44 / 9) / 8),
            demand_ratio=4800 / 3600, unalloc_share=22 / 34,
            gpu_h=(8.0, 8 * 4800 / 3600, 8 / 3 + 44 / 9, 8 / 3, 44 / 9),
            waits=waits(other=[0], unallocated=[0], all=[0, 0]),
            pre=(1, 1000 / (8 / 3 + 44 / 9), 3200 / 3600), jobs=(2, 2, 1)),
        id="unallocated-work-yields-at-once-and-loses-the-work-since-its-last-checkpoint",
    ),
    pytest.param(
        # 2 nodes x 8, 1 h; n2 drains at 1800. j (A, 8) runs the whole hour. Available:
        # 16*0.5 + 8*0.5 = 12 GPU-h; A entitled 6, demanded 8 -> owed 6, delivered 8.
        ["greedy", "ilp"],
        scenario([Job("j", "A", 8, min_runtime_s=H, submit_time=0.0, duration_s=2 * H)],
                 nodes=(8, 8), events=[NodeEvent(1800.0, ("n2",), NodeState.DRAIN)]),
        expected(
            od=(1.0, 1.0, ("A", 1.0), ("A", 1.0)),
            projects={"A": proj(6.0, 8.0, 1.0, 1.0), "B": proj(0.0, 0.0, None, None)},
            occ=(8 / 12, 8 / 12, 8 / 12, 1.0), demand_ratio=0.75, unalloc_share=0.0,
            gpu_h=(12.0, 8.0, 8.0, 8.0, 0.0),
            waits=waits(other=[0], all=[0]),
            pre=(0, 0.0, 0.0), jobs=(1, 1, 0)),
        id="a-drained-node-leaves-available-gpu-time-and-entitlement",
    ),
    pytest.param(
        # 1 node x 8, 2 h. a1 (A, protected 2 h) runs 0-3600; b1 (B) submitted at 1 waits
        # 3599 s and runs 3600-7200. Hour 1: A owed 4 met 4, B owed 4 met 0; hour 2: A owed 0,
        # B owed 4 met 4 (delivered 8). B hourly 4/8, period min(8, 8)/8 = 1.
        ["greedy", "ilp"],
        scenario([Job("a1", "A", 8, min_runtime_s=2 * H, submit_time=0.0, duration_s=H),
                  Job("b1", "B", 8, min_runtime_s=H, submit_time=1.0, duration_s=H)],
                 duration=2 * H),
        expected(
            od=(8 / 12, 1.0, ("B", 0.5), ("A", 1.0)),
            projects={"A": proj(4.0, 8.0, 1.0, 1.0), "B": proj(8.0, 8.0, 0.5, 1.0)},
            occ=(1.0, 1.0, 1.0, 1.0), demand_ratio=(1 + 2 * 3599 + 3600) / 7200,
            unalloc_share=0.0, gpu_h=(16.0, (8 * 3600 + 8 * 7199) / 3600, 16.0, 16.0, 0.0),
            waits=waits(other=[0, 3599], all=[0, 3599]),
            pre=(0, 0.0, 0.0), jobs=(2, 2, 2)),
        id="a-shortfall-in-one-hour-is-not-repaid-hourly-but-is-over-the-period",
    ),
    pytest.param(
        # 1 node x 8, 1 h. b1 (B) submitted at 600 never starts (a1 protected 2 h): censored,
        # wait = 3600 - 600. B owed min(4, 8*3000/3600) = 4, delivered 0.
        ["greedy", "ilp"],
        scenario([Job("a1", "A", 8, min_runtime_s=2 * H, submit_time=0.0, duration_s=2 * H),
                  Job("b1", "B", 8, min_runtime_s=H, submit_time=600.0, duration_s=H)]),
        expected(
            od=(0.5, 0.5, ("B", 0.0), ("B", 0.0)),
            projects={"A": proj(4.0, 8.0, 1.0, 1.0), "B": proj(4.0, 0.0, 0.0, 0.0)},
            occ=(1.0, 1.0, 1.0, 1.0), demand_ratio=(3600 + 3000) / 3600, unalloc_share=0.0,
            gpu_h=(8.0, 8 + 8 * 3000 / 3600, 8.0, 8.0, 0.0),
            waits=waits(other=([0, 3000], 1), all=([0, 3000], 1)),
            pre=(0, 0.0, 0.0), jobs=(2, 1, 0)),
        id="a-job-never-started-is-censored-at-the-horizon",
    ),
    pytest.param(
        # 1 node x 8, 1.5 h, grace 60 s. a1 (A) submitted at 1000: u gets notice, stops at 1060
        # (1060 % 600 = 460 s lost x 8); a1 runs 1060-2260 (wait 60); u resumes at the tick
        # 2400 to 5400. Hour 1: A entitled 4, demanded 8*1260/3600 = 2.8 -> owed 2.8,
        # delivered 8/3; half hour 2: A demands nothing.
        ["greedy", "ilp"],
        scenario([Job("u", "B", 8, min_runtime_s=0.0, submit_time=0.0, duration_s=2 * H),
                  Job("a1", "A", 8, min_runtime_s=H, submit_time=1000.0, duration_s=1200.0)],
                 duration=5400.0, grace_s=60.0),
        expected(
            od=((8 / 3) / 2.8, (8 / 3) / 2.8, ("A", (8 / 3) / 2.8), ("A", (8 / 3) / 2.8)),
            projects={"A": proj(2.8, 8 / 3, (8 / 3) / 2.8, (8 / 3) / 2.8),
                      "B": proj(0.0, 0.0, None, None, 8 * 4060 / 3600)},
            occ=((8 / 3) / 12, (8 / 3 + 8 * 4060 / 3600) / 12, 1.0, (8 / 3 + 8 * 4060 / 3600) / 12),
            demand_ratio=1 + 1260 / 5400, unalloc_share=4060 / 5260,
            gpu_h=(12.0, 14.8, 8 * 5260 / 3600, 8 / 3, 8 * 4060 / 3600),
            waits=waits(other=[60], unallocated=[0], all=[0, 60]),
            pre=(1, 1000 / (8 * 5260 / 3600), 8 * 460 / 3600), jobs=(2, 2, 1)),
        id="a-grace-period-delays-the-start-and-adds-to-the-lost-work-in-a-short-last-hour",
    ),
    pytest.param(
        # 1 node x 8, 1 h; n1 down 1800-2700. j1 (A, not resumable) is killed at 1800: its
        # whole 1800 s x 8 is lost, it ends. b1 (B, submitted at 5) starts at 2700 (the tick
        # when n1 is back), waits 2695, runs 600 s. Available 8 * 2700 s = 6 GPU-h, 3 each.
        # The demand ratio averages over the 2700 s with capacity only.
        ["greedy", "ilp"],
        scenario([Job("j1", "A", 8, min_runtime_s=H, submit_time=0.0, duration_s=2 * H,
                      resumable=False),
                  Job("b1", "B", 8, min_runtime_s=H, submit_time=5.0, duration_s=600.0)],
                 events=[NodeEvent(1800.0, ("n1",), NodeState.DOWN),
                         NodeEvent(2700.0, ("n1",), NodeState.UP)]),
        expected(
            od=((3 + 4 / 3) / 6, (3 + 4 / 3) / 6, ("B", 4 / 9), ("B", 4 / 9)),
            projects={"A": proj(3.0, 4.0, 1.0, 1.0), "B": proj(3.0, 4 / 3, 4 / 9, 4 / 9)},
            occ=(16 / 18, 16 / 18, 16 / 18, 1.0), demand_ratio=(5 + 2 * 1795 + 600) / 2700,
            unalloc_share=0.0, gpu_h=(6.0, 4 + 8 * 3295 / 3600, 16 / 3, 16 / 3, 0.0),
            waits=waits(other=[0, 2695], all=[0, 2695]),
            pre=(1, 187.5, 4.0), jobs=(2, 2, 1)),
        id="a-node-failure-kills-a-non-resumable-job-and-capacity-leaves-while-down",
    ),
    pytest.param(
        # 1 node x 64, 1 h. u64 (A, 64, unallocated) is large (large before unallocated), not
        # large_allocated; o63 (B, 63) and d901 (B, 1, min_runtime 901 s) are other. o63 and
        # d901 run 0-600, u64 600-1200. B owed = delivered = 64*600/3600.
        ["greedy", "ilp"],
        scenario([Job("u64", "A", 64, min_runtime_s=0.0, submit_time=0.0, duration_s=600.0),
                  Job("o63", "B", 63, min_runtime_s=H, submit_time=0.0, duration_s=600.0),
                  Job("d901", "B", 1, min_runtime_s=901.0, submit_time=0.0, duration_s=600.0)],
                 nodes=(64,)),
        expected(
            od=(1.0, 1.0, ("B", 1.0), ("B", 1.0)),
            projects={"A": proj(0.0, 0.0, None, None, 32 / 3), "B": proj(32 / 3, 32 / 3, 1.0, 1.0)},
            occ=(1 / 6, 1 / 3, 1 / 3, 1.0), demand_ratio=0.5, unalloc_share=0.5,
            gpu_h=(64.0, 32.0, 64 / 3, 32 / 3, 32 / 3),
            waits=waits(large=[600], other=[0, 0], all=[0, 0, 600]),
            pre=(0, 0.0, 0.0), jobs=(3, 3, 3)),
        id="class-boundaries-63-gpus-and-901-s-are-other-an-unallocated-64-gpu-job-is-large",
    ),
    pytest.param(
        # 2 nodes x 8, 2 h, lookahead on (ilp). a1 (A, 8, protected 1 h) on one node; g (B, 16,
        # two nodes) submitted at 10 reserves both; the free node is held idle 10-3600
        # (8 x 3590 s), g starts at 3600 (a1 preempted at a checkpoint: 0 lost), runs to 5400;
        # a1 resumes 5400-7200. Hour 1: A owed 8 met 8, B owed 8 met 0; hour 2: A owed 8
        # met 4, B owed 8 met 8.
        ["ilp"],
        scenario([Job("a1", "A", 8, min_runtime_s=H, submit_time=0.0, duration_s=2 * H),
                  Job("g", "B", 16, min_runtime_s=H, submit_time=10.0, duration_s=1800.0)],
                 nodes=(8, 8), duration=2 * H, max_reservations=1),
        expected(
            od=(20 / 32, 20 / 32, ("B", 0.5), ("B", 0.5)),
            projects={"A": proj(16.0, 12.0, 0.75, 0.75), "B": proj(16.0, 8.0, 0.5, 0.5)},
            occ=(20 / 32, 20 / 32, 100720 / 115200, (20 / 32) / (100720 / 115200)),
            demand_ratio=(10 * 8 + 3590 * 24 + 1800 * 24 + 1800 * 8) / 16 / 7200,
            unalloc_share=0.0,
            gpu_h=(32.0, (8 * 10 + 24 * 5390 + 8 * 1800) / 3600, 20.0, 20.0, 0.0),
            waits=waits(other=[0, 3590], all=[0, 3590]),
            pre=(1, 50.0, 0.0), jobs=(2, 2, 1),
            reservations={"made": 1, "kept": 1, "dropped": 0, "dropped_by": {}, "open_at_end": 0,
                          "idle_gpu_h": pytest.approx(8 * 3590 / 3600),
                          "held_to_start_mean_h": pytest.approx(3590 / 3600),
                          "held_to_start_max_h": pytest.approx(3590 / 3600),
                          "idle_share": pytest.approx(8 * 3590 / 3600 / 32)}),
        id="a-kept-reservation-holds-a-node-idle-until-its-gang-starts",
    ),
    pytest.param(
        # the same, cut at 1800: the reservation is still open; idle 8 x 1790 s; g censored.
        ["ilp"],
        scenario([Job("a1", "A", 8, min_runtime_s=H, submit_time=0.0, duration_s=2 * H),
                  Job("g", "B", 16, min_runtime_s=H, submit_time=10.0, duration_s=1800.0)],
                 nodes=(8, 8), duration=1800.0, max_reservations=1),
        expected(
            od=(0.5, 0.5, ("B", 0.0), ("B", 0.0)),
            projects={"A": proj(4.0, 4.0, 1.0, 1.0), "B": proj(4.0, 0.0, 0.0, 0.0)},
            occ=(0.5, 0.5, 28720 / 28800, 0.5 / (28720 / 28800)),
            demand_ratio=(10 * 8 + 1790 * 24) / 16 / 1800, unalloc_share=0.0,
            gpu_h=(8.0, (8 * 1800 + 16 * 1790) / 3600, 4.0, 4.0, 0.0),
            waits=waits(other=([0, 1790], 1), all=([0, 1790], 1)),
            pre=(0, 0.0, 0.0), jobs=(2, 1, 0),
            reservations={"made": 1, "kept": 0, "dropped": 0, "dropped_by": {}, "open_at_end": 1,
                          "idle_gpu_h": pytest.approx(8 * 1790 / 3600),
                          "held_to_start_mean_h": None, "held_to_start_max_h": None,
                          "idle_share": pytest.approx(8 * 1790 / 3600 / 8)}),
        id="a-reservation-open-at-the-horizon-counts-its-idle-time-up-to-the-end",
    ),
    pytest.param(
        # 1 node x 8, 1 h. u (B, unallocated) is preempted twice: by a1 at 1000 (400 s since the
        # 600 s checkpoint lost) and, resumed at the tick 1800, by a2 at 2000 (200 s lost); it
        # resumes at the tick 2700 after a2 ends at 2600. Lost (400 + 200) x 8 GPU-s; its wait
        # is to its first start only (0). Delivered: alloc 2 x 8 x 600, unalloc 8 x 2100.
        ["greedy", "ilp"],
        scenario([Job("u", "B", 8, min_runtime_s=0.0, submit_time=0.0, duration_s=2 * H),
                  Job("a1", "A", 8, min_runtime_s=H, submit_time=1000.0, duration_s=600.0),
                  Job("a2", "A", 8, min_runtime_s=H, submit_time=2000.0, duration_s=600.0)]),
        expected(
            od=(1.0, 1.0, ("A", 1.0), ("A", 1.0)),
            projects={"A": proj(8 / 3, 8 / 3, 1.0, 1.0), "B": proj(0.0, 0.0, None, None, 14 / 3)},
            occ=(1 / 3, (8 / 3 + 14 / 3) / 8, 1.0, (8 / 3 + 14 / 3) / 8),
            demand_ratio=4800 / 3600, unalloc_share=(14 / 3) / (22 / 3),
            gpu_h=(8.0, 8 * 4800 / 3600, 22 / 3, 8 / 3, 14 / 3),
            waits=waits(other=[0, 0], unallocated=[0], all=[0, 0, 0]),
            pre=(2, 2000 / (22 / 3), 4800 / 3600), jobs=(3, 3, 2)),
        id="lost-work-adds-up-over-two-preemptions-and-the-wait-counts-the-first-start-only",
    ),
]


@pytest.mark.parametrize("policies, sc, want", CASES)
def test_every_metric_matches_the_hand_computed_value(policies, sc, want):
    for name in policies:
        got = compute_metrics(simulate(sc, make_policy(name), check=True))
        got = {k: got[k] for k in want}
        assert got == want, name
