"""An outside judge of MULTI-EPOCH behaviour (stop 51): drains, down/up nodes, protections and
checkpoints over time, the ledger and the owed-delivered metrics, the lookahead for gangs,
finishes mid-run and debug waits, each a tiny simulation (engine + policy + compute_metrics)
whose outcome was worked out by hand from DESIGN.md (section 8 rules 4-6, section 6 metrics)
BEFORE it was run, under `ilp` and `greedy` (and `ilp` with `policy.max_reservations`, the
lookahead, where `scripts/gangs_compare.py` calls it `ilp-lookahead`; make_policy has no such
name).

Common setup: nodes of 8 GPUs, epoch 1800 s, checkpoints every 600 s, no early solve unless a
case says, lookback 24 h, org root -> A, B (equal shares) unless a case says. Every run is
also checked for the properties that hold whatever the policy (`_always`): no job runs twice
at once, every submitted job finished or is still queued/running at the end (none lost), a
finished resumable job ran exactly its work plus what it lost since its last checkpoints,
delivered GPU-hours per project = the sum of its allocated run intervals, unallocated
intervals are never delivered (charged), and the ledger charged what the cluster ran.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest

from optalloc.contract import protection_s
from optalloc.sim.engine import check_conservation, simulate
from optalloc.sim.metrics import compute_metrics
from optalloc.sim.policies import make_policy
from optalloc.sim.scenario import Scenario
from optalloc.sim.scenario.spec import NodeEvent
from optalloc.types import Config, GpuType, Job, Node, NodeState, OrgNode, Policy
from tests.test_turn_equivalence import Recording

H = 3600.0
POLICIES = ("ilp", "greedy")


def _org(*names):
    return OrgNode("root", children=tuple(OrgNode(n) for n in names))


def _sc(jobs, *, nodes=(("h100", 8),), types=("h100",), org=None, early=False, events=(),
        duration=None, **policy):
    pol = {"grace_s": 0.0, "epoch_s": 1800.0, "checkpoint_interval_s": 600.0,
           "lookback_s": 24 * H, **policy}
    cfg = Config(gpu_types=tuple(GpuType(t) for t in types),
                 nodes=tuple(Node(f"n{i + 1}", t, g) for i, (t, g) in enumerate(nodes)),
                 org=org or _org("A", "B"), policy=Policy(**pol))
    return Scenario("sim-judge-s51", cfg, tuple(jobs), duration_s=duration, early_solve=early,
                    node_events=tuple(events))


def _run(sc, policy):
    w = Recording(make_policy(policy))  # keeps every (snapshot, plan)
    res = simulate(sc, w, check=True)
    m = compute_metrics(res)
    _always(sc, res, m, w)
    return res, m, w


def _ivs(res, jid):
    return [(iv.start, iv.end) for iv in res.intervals if iv.job_id == jid]


def _always(sc, res, m, w):
    jobs = {j.id: j for j in sc.jobs}
    recs = {r.job_id: r for r in res.jobs}
    # every submitted job is accounted for
    assert set(recs) == {j for j, job in jobs.items() if job.submit_time <= res.end}
    for jid, job in jobs.items():
        ivs = sorted(_ivs(res, jid))
        for (s0, e0), (s1, e1) in zip(ivs, ivs[1:]):  # never twice at once
            assert e0 <= s1 + 1e-9, (jid, ivs)
        r = recs[jid]
        if r.completed and job.resumable and job.duration_s is not None:
            ran = sum(e - s for s, e in ivs)  # speed 1 everywhere in this file
            assert ran - r.lost_gpu_s / job.gpus == pytest.approx(job.duration_s, abs=1e-6), jid
        if r.end_time is None:  # not ended: still queued or running, never lost
            assert not r.completed
    # delivered per project = its allocated run intervals; unallocated never delivered
    for p, v in m["projects"].items():
        alloc = sum(iv.gpus * (iv.end - iv.start) for iv in res.intervals
                    if iv.project == p and iv.allocated) / H
        unal = sum(iv.gpus * (iv.end - iv.start) for iv in res.intervals
                   if iv.project == p and not iv.allocated) / H
        assert v["delivered_gpu_h"] == pytest.approx(alloc, abs=1e-6), p
        assert v["unallocated_gpu_h"] == pytest.approx(unal, abs=1e-6), p
    check_conservation(res)
    # no plan preempts (or moves) a job inside its protection
    cap = sc.config.policy.min_runtime_cap_s
    for snap, plan in w.seen:
        running = {j.id: j for j in snap.jobs if j.running}
        moved = {p.job_id for p in plan.placements
                 if p.job_id in running and running[p.job_id].placement != p}
        for jid in {p.job_id for p in plan.preemptions} | moved:
            j = running[jid]
            if j.placement.allocated:
                assert snap.now >= j.start_time + protection_s(j.min_runtime_s, cap) - 1e-6, \
                    (jid, snap.now, j.start_time)


def _starts_on(w, node):
    """(time, job) of every new placement that touches `node`."""
    out = []
    for snap, plan in w.seen:
        running = {j.id: j.placement for j in snap.jobs if j.running}
        for p in plan.placements:
            if node in p.node_names and running.get(p.job_id) != p:
                out.append((snap.now, p.job_id))
    return out


# ------------------------------------------------------------------ 1. drain, then up again

def _drain_case():
    # n1 h100, n2 a100 (one budget: billing weights 1), grace 60. a1 (A, 4 GPUs, h100 only,
    # protected 2 h, 6 h of work) and u (A, 4 GPUs, h100 only, unallocated, 10 h) start at 0
    # on n1. n1 drains at 1 h; q (B, 4 GPUs, h100 only, 1 h) arrives at 1.5 h; n1 is up again
    # at 4 h.
    jobs = [Job("a1", "A", 4, gpu_types=("h100",), min_runtime_s=2 * H, duration_s=6 * H),
            Job("u", "A", 4, gpu_types=("h100",), min_runtime_s=0.0, duration_s=10 * H),
            Job("q", "B", 4, gpu_types=("h100",), min_runtime_s=H, duration_s=H,
                submit_time=1.5 * H)]
    return _sc(jobs, nodes=(("h100", 8), ("a100", 8)), types=("h100", "a100"), grace_s=60.0,
               events=(NodeEvent(H, ("n1",), NodeState.DRAIN),
                       NodeEvent(4 * H, ("n1",), NodeState.UP)))


@functools.lru_cache(maxsize=None)
def _drain(policy):
    return _run(_drain_case(), policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_drained_node_takes_nothing_new_and_its_jobs_leave_when_their_protection_ends(policy):
    # Rule 5. Drain at 3600 (a tick): u is unallocated, so it gets notice at once and stops
    # at 3660 (grace 60; 3660 % 600 = 60 s lost x 4 GPUs = 240 GPU-s); a1 is protected until
    # 7200: notice then, stops 7260 (60 s lost, 240 GPU-s; 14400 s of work left). q (h100
    # only) waits: n1 takes no new work. n1 is empty from 7260 to 14400. Up at 14400: a1
    # (allocated) and q start at once (4 + 4 = 8), q ends 18000, a1 at 14400 + 14400 = 28800;
    # u (unallocated) waits until q's GPUs free at 18000 (a tick), 36000 - 3600 s of work
    # left: ends 50400.
    res, m, w = _drain(policy)
    assert _ivs(res, "u")[0] == (0.0, 3660.0)
    assert _ivs(res, "a1")[0] == (0.0, 7260.0)
    assert [t for t, _ in _starts_on(w, "n1") if H <= t < 4 * H] == []
    recs = {r.job_id: r for r in res.jobs}
    assert recs["a1"].lost_gpu_s == pytest.approx(240.0)
    assert recs["u"].lost_gpu_s == pytest.approx(240.0)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_node_up_again_after_a_drain_takes_the_waiting_work_at_once(policy):
    # continued from the case above: a1 and q start at 14400, u at 18000
    res, m, w = _drain(policy)
    assert sorted(_ivs(res, "a1")) == [(0.0, 7260.0), (14400.0, 28800.0)]
    assert _ivs(res, "q") == [(14400.0, 18000.0)]
    assert sorted(_ivs(res, "u")) == [(0.0, 3660.0), (18000.0, 50400.0)]


@pytest.mark.parametrize("policy", POLICIES)
def test_a_drain_case_delivers_and_charges_exactly_the_run_intervals(policy):
    # A allocated: 4 x (7260 + 14400) s = 24.0667 GPU-h; u's 4 x (3660 + 32400) s = 40.0667
    # GPU-h are unallocated (never charged); B 4 GPU-h. n1 is unavailable while drained:
    # available GPU-h = 8 (a100) x 14 h + 8 (h100) x (1 + 10) h = 200.
    res, m, w = _drain(policy)
    assert m["projects"]["A"]["delivered_gpu_h"] == pytest.approx(4 * 21660 / H)
    assert m["projects"]["A"]["unallocated_gpu_h"] == pytest.approx(4 * 36060 / H)
    assert m["projects"]["B"]["delivered_gpu_h"] == pytest.approx(4.0)
    assert m["gpu_hours"]["available"] == pytest.approx(8 * 14 + 8 * 11)
    # 2 preemptions (u, a1), 480 GPU-s lost; delivered 24.0667 + 40.0667 + 4 = 68.133 GPU-h:
    # 29.35 preemptions per 1000 GPU-h, unallocated share 0.588, occupancy 28.067 / 200
    assert m["preemptions"]["count"] == 2
    assert m["preemptions"]["lost_gpu_h"] == pytest.approx(480 / H)
    delivered = (4 * 21660 + 4 * 36060) / H + 4.0
    assert m["preemptions"]["per_1000_gpu_h"] == pytest.approx(2000 / delivered)
    assert m["unallocated_share"] == pytest.approx(4 * 36060 / H / delivered)
    assert m["occupancy"]["allocated"] == pytest.approx((4 * 21660 / H + 4.0) / 200)


# ------------------------------------------------------------------ 2. down, then up

def _down_case():
    # 2 x 8 h100. a (A, 8 GPUs) and b (B, 8 GPUs), both protected 3 h = their work, start at
    # 0 (one per node). n1 goes down at 1000 s and is up again at 2 h.
    jobs = [Job("a", "A", 8, min_runtime_s=3 * H, duration_s=3 * H),
            Job("b", "B", 8, min_runtime_s=3 * H, duration_s=3 * H)]
    return _sc(jobs, nodes=(("h100", 8), ("h100", 8)),
               events=(NodeEvent(1000.0, ("n1",), NodeState.DOWN),
                       NodeEvent(2 * H, ("n1",), NodeState.UP)))


@pytest.mark.parametrize("policy", POLICIES)
def test_a_node_going_down_requeues_its_job_and_up_again_it_restarts_there(policy):
    # the job on n1 is killed at 1000 (400 s since the 600 s checkpoint lost: 3200 GPU-s),
    # requeued with 10800 - 600 = 10200 s of work; n2's job is protected to 10800, so the
    # killed one waits for n1: up at 7200 (a tick), it runs 7200 -> 17400. The other: 0 -> 10800
    res, m, w = _run(_down_case(), policy)
    killed = [r for r in res.jobs if r.preemptions]
    assert len(killed) == 1
    k = killed[0]
    other = "b" if k.job_id == "a" else "a"
    assert sorted(_ivs(res, k.job_id)) == [(0.0, 1000.0), (7200.0, 17400.0)]
    assert _ivs(res, other) == [(0.0, 10800.0)]
    assert k.lost_gpu_s == pytest.approx(3200.0) and k.completed
    assert [t for t, _ in _starts_on(w, "n1") if 1000 <= t < 2 * H] == []


# ------------------------------------------------------------------ 3. protection and checkpoints

@pytest.mark.parametrize("policy", POLICIES)
def test_a_job_past_protection_yields_to_a_better_ranked_one_and_resumes_from_its_checkpoint(policy):
    # 1 x 8, checkpoints every 1500 s. a (A, 8, protected 1 h, 3 h of work) from 0; b (B, 8,
    # protected 1 h, 1 h) at 600 waits (a protected). At 3600 a is past protection and B
    # (usage 0) ranks above A: a stops (3600 % 1500 = 600 s lost: 4800 GPU-s; 10800 - 3000 =
    # 7800 s left), b runs 3600 -> 7200, then a 7200 -> 15000.
    jobs = [Job("a", "A", 8, min_runtime_s=H, duration_s=3 * H),
            Job("b", "B", 8, min_runtime_s=H, duration_s=H, submit_time=600.0)]
    res, m, w = _run(_sc(jobs, checkpoint_interval_s=1500.0), policy)
    assert sorted(_ivs(res, "a")) == [(0.0, 3600.0), (7200.0, 15000.0)]
    assert _ivs(res, "b") == [(3600.0, 7200.0)]
    assert {r.job_id: r.lost_gpu_s for r in res.jobs} == {"a": 4800.0, "b": 0.0}


@pytest.mark.parametrize("policy", POLICIES)
def test_a_non_resumable_job_preempted_after_protection_ends_and_is_not_lost_from_the_records(policy):
    # as above with a non-resumable: it ends at 3600 (not completed, its 8 x 3600 GPU-s lost);
    # b runs 3600 -> 7200; nothing else runs
    jobs = [Job("a", "A", 8, min_runtime_s=H, duration_s=3 * H, resumable=False),
            Job("b", "B", 8, min_runtime_s=H, duration_s=H, submit_time=600.0)]
    res, m, w = _run(_sc(jobs, checkpoint_interval_s=1500.0), policy)
    recs = {r.job_id: r for r in res.jobs}
    assert _ivs(res, "a") == [(0.0, 3600.0)]
    assert (recs["a"].end_time, recs["a"].completed, recs["a"].lost_gpu_s) == (3600.0, False, 28800.0)
    assert _ivs(res, "b") == [(3600.0, 7200.0)]


@pytest.mark.parametrize("policy", POLICIES)
def test_a_job_finishing_inside_its_protection_frees_its_gpus_at_the_next_tick(policy):
    # 1 x 8. a (A, 8, protected 1 h, 1000 s of work) finishes at 1000; b (A, 8, submitted 0)
    # starts at the next tick 1800 and runs 1 h; c (B, 4, submitted 2000) waits for b's
    # protection end 5400 (b is then done anyway) and runs 5400 -> 9000
    jobs = [Job("a", "A", 8, min_runtime_s=H, duration_s=1000.0, priority=1),
            Job("b", "A", 8, min_runtime_s=H, duration_s=H),
            Job("c", "B", 4, min_runtime_s=H, duration_s=H, submit_time=2000.0)]
    res, m, w = _run(_sc(jobs), policy)
    assert _ivs(res, "a") == [(0.0, 1000.0)]
    assert _ivs(res, "b") == [(1800.0, 5400.0)]
    assert _ivs(res, "c") == [(5400.0, 9000.0)]


# ------------------------------------------------------------------ 4. owed-delivered by hand

@functools.lru_cache(maxsize=None)
def _owed(policy):
    # 1 x 8, A = B (entitled 4 each). a (A, 8, protected 2 h = its work) at 0; b (B, 8,
    # protected 1 h, 2 h of work) at 1800 waits for a's end (7200), runs 7200 -> 14400.
    jobs = [Job("a", "A", 8, min_runtime_s=2 * H, duration_s=2 * H),
            Job("b", "B", 8, min_runtime_s=H, duration_s=2 * H, submit_time=1800.0)]
    return _run(_sc(jobs, duration=4 * H), policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_owed_delivered_hourly_and_period_match_the_hand_computed_hours(policy):
    # Hours 0..3. A: demand 8, 8, 0, 0 -> owed min(4, .) = 4, 4, 0, 0; delivered 8, 8, 0, 0;
    # met 4, 4. B: demand 8 x 0.5 = 4, 8, 8, 8 -> owed 4, 4, 4, 4; delivered 0, 0, 8, 8; met
    # 0, 0, 4, 4. A hourly 8/8 = 1, period 1; B hourly 8/16 = 0.5, period min(16, 16)/16 = 1.
    # Overall hourly (8 + 8)/(8 + 16) = 2/3, period (8 + 16)/24 = 1.
    res, m, w = _owed(policy)
    p = m["projects"]
    assert (p["A"]["owed_gpu_h"], p["A"]["delivered_gpu_h"]) == pytest.approx((8.0, 16.0))
    assert (p["B"]["owed_gpu_h"], p["B"]["delivered_gpu_h"]) == pytest.approx((16.0, 16.0))
    assert (p["A"]["hourly"], p["A"]["period"]) == pytest.approx((1.0, 1.0))
    assert (p["B"]["hourly"], p["B"]["period"]) == pytest.approx((0.5, 1.0))
    od = m["owed_delivered"]
    assert (od["hourly"], od["period"]) == pytest.approx((2 / 3, 1.0))
    assert od["worst_hourly"] == {"project": "B", "value": pytest.approx(0.5)}


@pytest.mark.parametrize("policy", POLICIES)
def test_occupancy_demand_ratio_and_waits_of_the_owed_case(policy):
    # allocated 32 GPU-h of 32 available: occupancy 1 = its limit; demand ratio: 8/8 for
    # 0.5 h, 16/8 for 1.5 h, 8/8 for 2 h -> (0.5 + 3 + 2)/4 = 1.375; b waited 5400 s
    res, m, w = _owed(policy)
    assert m["occupancy"]["allocated"] == pytest.approx(1.0)
    assert m["occupancy"]["limit"] == pytest.approx(1.0)
    assert m["demand_ratio"] == pytest.approx(1.375)
    assert m["waits"]["other"]["max_s"] == pytest.approx(5400.0)


# ------------------------------------------------------------------ 5. debug waits

@pytest.mark.parametrize("policy", POLICIES)
def test_debug_jobs_wait_about_a_grace_period_not_hours(policy):
    # 1 x 8, early solve, grace 60. A: 8 one-GPU jobs protected 1 h, 24 h of work, from 0.
    # B: debug jobs (1 GPU, protected 10 min, 10 min of work) at 1.25 h, 5.1 h, 9.6 h. At each
    # submission B (usage ~0) ranks first and A's jobs are past protection (a job restarted
    # after the previous debug job is protected only 1 h): one A job gets notice, the debug
    # job starts 60 s later. Waits 60 s each; at most one A preemption per debug job.
    jobs = [Job(f"a{i}", "A", 1, min_runtime_s=H, duration_s=24 * H) for i in range(8)]
    jobs += [Job(f"d{k}", "B", 1, min_runtime_s=600.0, duration_s=600.0, submit_time=t)
             for k, t in enumerate((1.25 * H, 5.1 * H, 9.6 * H))]
    res, m, w = _run(_sc(jobs, early=True, grace_s=60.0, duration=12 * H), policy)
    waits = {r.job_id: r.first_start - r.submit_time for r in res.jobs if r.job_id[0] == "d"}
    assert waits == pytest.approx({"d0": 60.0, "d1": 60.0, "d2": 60.0})
    assert (m["waits"]["debug"]["n"], m["waits"]["debug"]["p90_s"]) == (3, pytest.approx(60.0))
    assert m["preemptions"]["count"] <= 3


# ------------------------------------------------------------------ 6. the lookahead

def _gang_case(long_protection_s=1.5 * H, **policy):
    # 2 x 8, A = G (entitled 8 each). A: 8 jobs of 1 GPU protected 1.5 h (= their work, a
    # higher priority: they start first) and 200 of 1 GPU protected 1 h (= their work), all
    # at 0. G: one 16-GPU gang (both nodes) protected 1 h, 2 h of work, at 900 s.
    # At 0: the 8 long ones and 8 short ones (ends 5400 and 3600). From then on A's GPUs
    # free 8 at a time, half an hour apart, and every job on them is protected to its end.
    jobs = [Job(f"L{i}", "A", 1, min_runtime_s=long_protection_s, duration_s=1.5 * H,
                priority=1) for i in range(8)]
    jobs += [Job(f"S{i:03d}", "A", 1, min_runtime_s=H, duration_s=H) for i in range(200)]
    jobs += [Job("gang", "G", 16, min_runtime_s=H, duration_s=2 * H, submit_time=900.0)]
    return _sc(jobs, nodes=(("h100", 8), ("h100", 8)), org=_org("A", "G"), duration=12 * H,
               **policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_without_the_lookahead_a_gang_waits_while_protected_work_backfills_every_free_gpu(policy):
    # Rule 6 without a reservation: each half hour 8 GPUs free and A's next 1-h jobs take
    # them (the gang needs 16 and the other 8 are protected): the gang never starts in 12 h
    # (the published open problem). Greedy and ilp alike.
    res, m, w = _run(_gang_case(), policy)
    assert {r.job_id: r.first_start for r in res.jobs}["gang"] is None


def test_with_the_lookahead_the_gang_starts_when_the_protections_on_its_nodes_end():
    # ilp with max_reservations 1: at the tick 1800 the gang (a 2-node gang that cannot start
    # now; share test fails, 16 > 8, the budget test passes: (16 GPU-h + idle) / 192 <= 1)
    # reserves n1 + n2 with start S = 5400 (the long jobs' end). At 3600 the 8 short jobs
    # end; A's next ones would hold to 7200 > S, so nothing starts there (8 GPUs idle for
    # 0.5 h = 4 GPU-h held); at 5400 the gang starts, breaking no protection (checked in
    # _always), and runs 5400 -> 12600 (protected to 9000; G's ratio stays below A's).
    res, m, w = _run(_gang_case(max_reservations=1), "ilp")
    assert _ivs(res, "gang") == [(5400.0, 12600.0)]
    assert m["reservations"]["kept"] == 1
    assert m["reservations"]["idle_gpu_h"] == pytest.approx(4.0)


# ------------------------------------------------------------------ 7. more over-time cases

@pytest.mark.parametrize("policy", POLICIES)
def test_protection_is_capped_and_a_job_asking_more_is_preempted_at_the_cap(policy):
    # cap 2 h. a (A, 8, min_runtime 10 h, 5 h of work) from 0 is protected min(10, 2) = 2 h;
    # b (B, 8, 1 h) at 600 runs at 7200 (B ranks first), a resumes at 10800 with 3 h left
    # (7200 % 600 = 0 lost) and ends 21600
    jobs = [Job("a", "A", 8, min_runtime_s=10 * H, duration_s=5 * H),
            Job("b", "B", 8, min_runtime_s=H, duration_s=H, submit_time=600.0)]
    res, m, w = _run(_sc(jobs, min_runtime_cap_s=2 * H), policy)
    assert sorted(_ivs(res, "a")) == [(0.0, 7200.0), (10800.0, 21600.0)]
    assert _ivs(res, "b") == [(7200.0, 10800.0)]


@pytest.mark.parametrize("policy", POLICIES)
def test_unallocated_work_is_never_charged_so_it_costs_its_project_no_rank(policy):
    # 1 x 8, A = B. A runs 8 unallocated 1-GPU jobs (100 h) alone for 6 h: 48 unallocated
    # GPU-h, 0 charged. At 6 h A and B both submit 100 1-h jobs: the unallocated ones yield at
    # once and A and B tie (both charged 0): 24 / 24 GPU-h over 6-12 h (ilp splits 4 / 4;
    # greedy alternates whole hours: within 8)
    jobs = [Job(f"u{i}", "A", 1, min_runtime_s=0.0, duration_s=100 * H) for i in range(8)]
    jobs += [Job(f"{p}{i}", p, 1, min_runtime_s=H, duration_s=H, submit_time=6 * H)
             for p in "AB" for i in range(100)]
    res, m, w = _run(_sc(jobs, duration=12 * H), policy)
    p = m["projects"]
    assert p["A"]["unallocated_gpu_h"] == pytest.approx(48.0)
    tol = 4.0 if policy == "ilp" else 8.0
    assert (p["A"]["delivered_gpu_h"], p["B"]["delivered_gpu_h"]) == pytest.approx((24.0, 24.0), abs=tol)


def _gang_drain_case():
    # 3 x 8. g (A, 16 GPUs, protected 1 h, 3 h of work) from 0 on n1 + n2 (checked); n1
    # drains at 1000
    jobs = [Job("g", "A", 16, min_runtime_s=H, duration_s=3 * H)]
    return _sc(jobs, nodes=(("h100", 8),) * 3, events=(NodeEvent(1000.0, ("n1",), NodeState.DRAIN),))


@pytest.mark.parametrize("policy", POLICIES)
def test_a_gang_with_one_node_draining_leaves_whole_when_protected_and_restarts_on_up_nodes(policy):
    # g is protected to 3600: it runs there on n1 + n2 (nothing lost at 3600: 3600 % 600 = 0),
    # then leaves n1 and restarts on n2 + n3 with 7200 s of work: ilp in the same plan
    # (3600 -> 10800, README: a job leaving a drain node restarts as a queued job would),
    # greedy at the next tick (5400 -> 12600)
    res, m, w = _run(_gang_drain_case(), policy)
    first = w.seen[0][1].placements[0]
    assert set(first.node_names) == {"n1", "n2"}
    start = 3600.0 if policy == "ilp" else 5400.0
    assert sorted(_ivs(res, "g")) == [(0.0, 3600.0), (start, start + 7200.0)]
    assert [t for t, _ in _starts_on(w, "n1") if t >= 1000] == []


@functools.lru_cache(maxsize=None)
def _drain_down(policy):
    # n1 h100, n2 a100 (one budget). a (A, 8, h100 only, protected 3 h = its work) from 0 on
    # n1; n1 drains at 1000, goes down at 2000, is up again at 2 h. b (B, 8, h100 only,
    # protected 1 h = its work) at 1500.
    jobs = [Job("a", "A", 8, gpu_types=("h100",), min_runtime_s=3 * H, duration_s=3 * H),
            Job("b", "B", 8, gpu_types=("h100",), min_runtime_s=H, duration_s=H, submit_time=1500.0)]
    sc = _sc(jobs, nodes=(("h100", 8), ("a100", 8)), types=("h100", "a100"),
             events=(NodeEvent(1000.0, ("n1",), NodeState.DRAIN),
                     NodeEvent(2000.0, ("n1",), NodeState.DOWN),
                     NodeEvent(2 * H, ("n1",), NodeState.UP)))
    return _run(sc, policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_drained_node_going_down_kills_its_protected_job_and_up_again_serves_the_better_ranked_first(policy):
    # a stays on the draining n1 (protected) until n1 goes down at 2000: killed (200 s since
    # the 1800 s checkpoint lost: 1600 GPU-s), 9000 s of work left. Up at 7200: B (charged 0)
    # ranks above A (8 x 2000 s): b 7200 -> 10800, then a 10800 -> 19800
    res, m, w = _drain_down(policy)
    assert sorted(_ivs(res, "a")) == [(0.0, 2000.0), (10800.0, 19800.0)]
    assert _ivs(res, "b") == [(7200.0, 10800.0)]
    assert {r.job_id: r.lost_gpu_s for r in res.jobs} == {"a": 1600.0, "b": 0.0}


@pytest.mark.parametrize("policy", POLICIES)
def test_owed_follows_the_up_capacity_through_a_drain_and_a_down_node(policy):
    # capacity: 16 on [0, 1000), 8 (a100 only: drained and down nodes are not available) on
    # [1000, 7200), 16 after; entitled half each: hour 0 (16 x 1000 + 8 x 2600)/2/3600 =
    # 5.111, hour 1 4, hours 2-4 8, hour 5 (to 19800) 4. A demands 8 all run: owed 5.111 + 4 +
    # 8 + 8 + 8 + 4 = 37.111; delivered 4.444 (h0) + 8 (h3) + 8 (h4) + 4 (h5) = 24.444, met the
    # same: hourly = period = 0.6587. B demands 8 on [1500, 10800): owed min(5.111, 4.667) + 4
    # + 8 = 16.667, delivered 8 (h2): 0.48 both
    res, m, w = _drain_down(policy)
    p = m["projects"]
    assert (p["A"]["owed_gpu_h"], p["A"]["delivered_gpu_h"]) == pytest.approx((37.111, 24.444), abs=1e-3)
    assert (p["A"]["hourly"], p["A"]["period"]) == pytest.approx((24.444 / 37.111,) * 2, abs=1e-4)
    assert (p["B"]["owed_gpu_h"], p["B"]["delivered_gpu_h"]) == pytest.approx((16.667, 8.0), abs=1e-3)
    assert (p["B"]["hourly"], p["B"]["period"]) == pytest.approx((0.48, 0.48), abs=1e-4)


def test_with_the_lookahead_unallocated_work_fills_the_reserved_gpus_and_yields_to_the_gang():
    # the gang case with U (share 0): 16 unallocated 1-GPU jobs (100 h) at 0. A's allocated
    # work takes every GPU at 0; at 3600 the reserved node's 8 free GPUs may not take A's next
    # jobs (hold 7200 > S 5400) but may take unallocated work (holds nothing): U fills them
    # 3600 -> 5400, yields at once to the gang at 5400: 4 unallocated GPU-h, no idle GPU-h
    sc = _gang_case(max_reservations=1)
    u = [Job(f"U{i}", "U", 1, min_runtime_s=0.0, duration_s=100 * H) for i in range(16)]
    sc = dataclasses.replace(sc, jobs=sc.jobs + tuple(u), config=dataclasses.replace(
        sc.config, org=OrgNode("root", children=(OrgNode("A"), OrgNode("G"), OrgNode("U", share=0)))))
    res, m, w = _run(sc, "ilp")
    assert _ivs(res, "gang") == [(5400.0, 12600.0)]
    assert m["projects"]["U"]["unallocated_gpu_h"] == pytest.approx(4.0)
    assert m["reservations"]["idle_gpu_h"] == pytest.approx(0.0)


# fixed at stop 51 (were strict xfails): engine.py's next wake-up took self.expiries[0][0],
# the protection expiry of a run that had already ended, and kept an open-ended run
# (duration_s None) going to it (horizon 2 h, occupancy 0.5 where 1 h and 1.0 are right);
# _next_expiry drops expiries of runs that ended


@pytest.mark.parametrize("policy", POLICIES)
def test_an_open_ended_run_ends_when_its_last_job_finishes_inside_its_protection(policy):
    # 1 x 8, duration None. a (A, 8, protected 2 h, 1 h of work) runs 0 -> 3600 and is the
    # only job: the run ends at 3600; 8 GPU-h available, 8 delivered, occupancy 1
    res, m, w = _run(_sc([Job("a", "A", 8, min_runtime_s=2 * H, duration_s=H)]), policy)
    assert res.end == 3600.0
    assert (m["horizon_h"], m["gpu_hours"]["available"], m["occupancy"]["allocated"]) == (1.0, 8.0, 1.0)


@pytest.mark.parametrize("policy", POLICIES)
def test_the_drain_down_case_ends_with_its_last_job(policy):
    # the case above ends when a finishes, at 19800 (its restart's protection would run to
    # 21600): available = 16 x 1000 + 8 x 6200 + 16 x 12600 GPU-s = 74.22 GPU-h
    res, m, w = _drain_down(policy)
    assert res.end == 19800.0
    assert m["gpu_hours"]["available"] == pytest.approx((16 * 1000 + 8 * 6200 + 16 * 12600) / H)


# fixed at stop 51 (was a strict xfail for greedy): greedy's and priority's plans carried no
# drain report (plan/ranked.make_plan built Plan without `drains`); plan/drain.drain_status_of


@pytest.mark.parametrize("policy", ["ilp", "greedy"])
def test_a_drain_reports_who_stays_who_leaves_and_then_that_the_node_is_ready(policy):
    # the drain case: the plan at 3600 keeps a1 (protected to 7200) and sends u off; the
    # plan at 7200 sends a1 off; the next plan (9000: a1's requeue is a change, n1 empty
    # since 7260) reports n1 ready for repair
    res, m, w = _drain(policy)
    st = {snap.now: {d.node: d for d in plan.drains} for snap, plan in w.seen}
    assert (st[3600.0]["n1"].staying, st[3600.0]["n1"].leaving) == (("a1",), ("u",))
    assert st[7200.0]["n1"].leaving == ("a1",) and not st[7200.0]["n1"].ready
    after = [t for t in st if 7260.0 < t < 4 * H]
    assert after and all(st[t]["n1"].ready for t in after)


def _moved_case():
    # 3 x 8, grace 60. g (A, 16, protected 1 h, 5 h of work) from 0 on n1 + n2; n1 drains at
    # 1000; b (B, 8, protected 1 h = its work) arrives at 5000
    jobs = [Job("g", "A", 16, min_runtime_s=H, duration_s=5 * H),
            Job("b", "B", 8, min_runtime_s=H, duration_s=H, submit_time=5000.0)]
    return _sc(jobs, nodes=(("h100", 8),) * 3, grace_s=60.0,
               events=(NodeEvent(1000.0, ("n1",), NodeState.DRAIN),))


@pytest.mark.parametrize("policy", POLICIES)
def test_a_gang_moved_off_a_drain_node_is_protected_from_its_new_start_after_the_grace(policy):
    # ilp: at 3600 g gets notice, stops at 3660 (60 s lost x 16 = 960 GPU-s) and restarts on
    # n2 + n3 at 3660, protected to 7260 (not 7200). b (B, charged 0, ranks first) waits: the
    # expiry at 7260 makes the next tick, 9000, decide: g off (notice, stops 9060; 5400 s run,
    # nothing lost), b 9060 -> 12660; g (16) needs both nodes: back at the tick 14400 with
    # 18000 - 3600 - 5400 = 9000 s left, ends 23400.
    # greedy: g requeued at 3660, not restarted in that plan; at 5400 b (ranked first) takes a
    # node, g waits for it: b 5400 -> 9000, g 9000 -> 9000 + 14400 = 23400
    res, m, w = _run(_moved_case(), policy)
    if policy == "ilp":
        assert sorted(_ivs(res, "g")) == [(0.0, 3660.0), (3660.0, 9060.0), (14400.0, 23400.0)]
        assert _ivs(res, "b") == [(9060.0, 12660.0)]
    else:
        assert sorted(_ivs(res, "g")) == [(0.0, 3660.0), (9000.0, 23400.0)]
        assert _ivs(res, "b") == [(5400.0, 9000.0)]
    assert {r.job_id: r.lost_gpu_s for r in res.jobs} == {"g": 960.0, "b": 0.0}


def _big_gang_case(**policy):
    # 10 x 8, A = G (entitled 40 each). A: a first wave of 10 one-node jobs protected k x 0.5
    # h = their work (k = 1..10, a higher priority) and 80 one-node jobs protected 2 h = their
    # work, all at 0; G: a 64-GPU gang (8 nodes), protected 1 h, 2 h of work, at 900 s
    jobs = [Job(f"W{k:02d}", "A", 8, min_runtime_s=k * 1800.0, duration_s=k * 1800.0, priority=1)
            for k in range(1, 11)]
    jobs += [Job(f"S{i:03d}", "A", 8, min_runtime_s=2 * H, duration_s=2 * H) for i in range(80)]
    jobs += [Job("gang", "G", 64, min_runtime_s=H, duration_s=2 * H, submit_time=900.0)]
    return _sc(jobs, nodes=(("h100", 8),) * 10, org=_org("A", "G"), duration=12 * H, **policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_without_the_lookahead_an_eight_node_gang_starves_behind_staggered_protections(policy):
    # node k frees at k x 1800 and every freed node takes A's next 2 h job (rule 6): at most 3
    # nodes are ever free together, the gang never starts in 12 h
    res, m, w = _run(_big_gang_case(), policy)
    assert _ivs(res, "gang") == []
    # the large class (8 nodes) holds it, censored at the horizon: 43200 - 900 s
    big = m["waits"]["large"]
    assert (big["n"], big["n_censored"], big["max_s"]) == (1, 1, 43200.0 - 900.0)


def test_with_the_lookahead_an_eight_node_gang_starts_at_the_eighth_nodes_free_time():
    # at 1800 the gang reserves the 8 soonest-free nodes (n1..n8), S = 8 x 1800 = 14400.
    # A's 2 h jobs may still start there while they end by S (start <= 7200): node 1 runs one
    # 1800 -> 9000 and idles 1.5 h, node 2 3600 -> 10800 (1 h), node 3 (0.5 h), node 4 none,
    # node 5 frees 9000 (1.5 h), 6 (1 h), 7 (0.5 h), 8 none: 8 x (1.5 + 1 + 0.5) x 2 = 48
    # GPU-h held idle; the gang runs 14400 -> 21600
    res, m, w = _run(_big_gang_case(max_reservations=1), "ilp")
    assert _ivs(res, "gang") == [(14400.0, 21600.0)]
    assert (m["reservations"]["kept"], m["reservations"]["idle_gpu_h"]) == (1, pytest.approx(48.0))


# ------------------------------------------------------------------ 8. unallocated work over time

@pytest.mark.parametrize("policy", POLICIES)
def test_unallocated_work_never_displaces_other_unallocated_work_over_a_day(policy):
    # 1 x 8, U1 and U2 run only unallocated 1-GPU jobs (24 h). U1's 8 start at 0; U2's 8
    # arrive at 1 h and wait (rule 4: never displaces other unallocated work for nothing):
    # U1 96 unallocated GPU-h over 12 h, U2 0, no preemption
    jobs = [Job(f"X{i}", "U1", 1, min_runtime_s=0.0, duration_s=24 * H) for i in range(8)]
    jobs += [Job(f"Y{i}", "U2", 1, min_runtime_s=0.0, duration_s=24 * H, submit_time=H)
             for i in range(8)]
    res, m, w = _run(_sc(jobs, org=_org("U1", "U2"), duration=12 * H), policy)
    assert m["preemptions"]["count"] == 0
    assert {p: v["unallocated_gpu_h"] for p, v in m["projects"].items()} == {"U1": 96.0, "U2": 0.0}


def _no_share_case():
    # n1 h100, n2 a100; B has no a100 share (share_by_type), so its a100-only job b (8 GPUs,
    # min_runtime 2 h, 6 h of work) is unallocated work there (rule 4). a (A, 8, a100 only, 1 h)
    # arrives at 1800.
    org = OrgNode("root", children=(OrgNode("A"), OrgNode("B", share_by_type={"a100": 0.0})))
    jobs = [Job("b", "B", 8, gpu_types=("a100",), min_runtime_s=2 * H, duration_s=6 * H),
            Job("a", "A", 8, gpu_types=("a100",), min_runtime_s=H, duration_s=H, submit_time=1800.0)]
    return _sc(jobs, nodes=(("h100", 8), ("a100", 8)), types=("h100", "a100"), org=org)


@pytest.mark.parametrize("policy", POLICIES)
def test_work_on_a_type_without_share_is_unprotected_and_never_charged(policy):
    # b is not protected (its 2 h min_runtime buys nothing without a share): at 1800 it yields
    # at once to a (1800 % 600 = 0 lost), a runs 1800 -> 5400, b resumes 5400 with 19800 s
    # left -> 25200. B is charged nothing: delivered 0, unallocated 8 x 6 = 48 GPU-h; A 8
    res, m, w = _run(_no_share_case(), policy)
    assert sorted(_ivs(res, "b")) == [(0.0, 1800.0), (5400.0, 25200.0)]
    assert _ivs(res, "a") == [(1800.0, 5400.0)]
    assert (m["projects"]["B"]["delivered_gpu_h"], m["projects"]["B"]["unallocated_gpu_h"]) == (0.0, 48.0)


# fixed at stop 51 (was a strict xfail): turn.Demand counted a job as allocated demand by
# min_runtime > 0 alone, so B, whose only job is a100-only work without an a100 share, was owed
# 28 GPU-hours it could never be given (worst project B at 0.0, overall 0.222 where 1.0 is
# right); Demand(org) counts only jobs with a share on a type they may use
@pytest.mark.parametrize("policy", POLICIES)
def test_work_that_can_run_only_unallocated_is_not_owed_to_its_project(policy):
    # A: entitled 4 (h100) + 8 (a100) per hour, demands 8 for 1 h, owed 8, delivered 8.
    # B: entitled 4 per hour on h100 only, but demands no allocated GPU (its only job is
    # unallocated work): owed 0. Overall hourly = period = 8 / 8 = 1
    res, m, w = _run(_no_share_case(), policy)
    assert m["projects"]["B"]["owed_gpu_h"] == 0.0
    assert (m["owed_delivered"]["hourly"], m["owed_delivered"]["period"]) == (1.0, 1.0)


# ------------------------------------------------------------------ 9. more debug and lookahead

@pytest.mark.parametrize("policy", POLICIES)
def test_a_second_debug_job_inside_the_first_ones_grace_waits_for_it_then_one_more_grace(policy):
    # 1 x 8, early solve, grace 60, A's 8 long 1-GPU jobs past protection. d0 at 7200: notice
    # to one A job, d0 starts 7260 (wait 60). d1 at 7210: no decision while a grace runs, so it
    # decides at 7260: a second A job's notice, d1 starts 7320 (wait 110)
    jobs = [Job(f"a{i}", "A", 1, min_runtime_s=H, duration_s=24 * H) for i in range(8)]
    jobs += [Job(f"d{k}", "B", 1, min_runtime_s=600.0, duration_s=600.0, submit_time=t)
             for k, t in enumerate((2 * H, 2 * H + 10))]
    res, m, w = _run(_sc(jobs, early=True, grace_s=60.0, duration=6 * H), policy)
    waits = {r.job_id: r.first_start - r.submit_time for r in res.jobs if r.job_id[0] == "d"}
    assert waits == {"d0": 60.0, "d1": 110.0}
    assert m["preemptions"]["count"] == 2


def _expected_end_case(**policy):
    # the gang case with the 8 first jobs protected 3 h but 1.5 h of expected work
    return _gang_case(long_protection_s=3 * H, **policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_without_the_lookahead_expected_ends_do_not_help_the_gang(policy):
    # every freed node is refilled with 1 h protected work (rule 6): no start in 12 h
    res, m, w = _run(_expected_end_case(), policy)
    assert _ivs(res, "gang") == []


def test_the_lookahead_reads_expected_ends_shorter_than_protections():
    # the long jobs end at 5400 (expected end, before their protection's 10800): S = 5400, as
    # in the gang case: 8 GPUs held idle 3600 -> 5400 (4 GPU-h), the gang 5400 -> 12600 (with
    # protection ends alone S would be 10800 and A's 1 h jobs would fill n(short) again)
    res, m, w = _run(_expected_end_case(max_reservations=1), "ilp")
    assert _ivs(res, "gang") == [(5400.0, 12600.0)]
    assert m["reservations"]["idle_gpu_h"] == pytest.approx(4.0)


def test_with_the_lookahead_a_reserved_node_going_down_moves_the_reservation_to_the_next_free_node():
    # the eight-node gang case with n3 down from 2 h (its job killed and requeued): at 7200 the
    # reservation drops n3 for n9, the next to free (W09 ends 9 x 1800 = 16200): S = 16200,
    # the gang runs 16200 -> 23400, still one reservation, kept
    sc = dataclasses.replace(_big_gang_case(max_reservations=1),
                             node_events=(NodeEvent(2 * H, ("n3",), NodeState.DOWN),))
    res, m, w = _run(sc, "ilp")
    assert _ivs(res, "gang") == [(16200.0, 23400.0)]
    assert (m["reservations"]["made"], m["reservations"]["kept"]) == (1, 1)


# ------------------------------------------------------------------ 10. order and turns over time

@pytest.mark.parametrize("policy", POLICIES)
def test_a_preempted_job_keeps_its_place_in_its_teams_order_when_it_is_requeued(policy):
    # 1 x 8. a1 (A, 8, protected 1 h, 3 h of work) at 0, a2 (A, 8, 1 h) at 100, b (B, 8, 1 h)
    # at 600. 3600: a1 past protection, B first: b 3600 -> 7200. 7200: A's order is submit
    # time (rule 3), so a1 (submitted 0) before a2: a1 7200 -> 14400, a2 14400 -> 18000
    jobs = [Job("a1", "A", 8, min_runtime_s=H, duration_s=3 * H),
            Job("a2", "A", 8, min_runtime_s=H, duration_s=H, submit_time=100.0),
            Job("b", "B", 8, min_runtime_s=H, duration_s=H, submit_time=600.0)]
    res, m, w = _run(_sc(jobs), policy)
    assert {j: sorted(_ivs(res, j)) for j in ("a1", "a2", "b")} == {
        "a1": [(0.0, 3600.0), (7200.0, 14400.0)], "a2": [(14400.0, 18000.0)], "b": [(3600.0, 7200.0)]}


@pytest.mark.parametrize("policy", POLICIES)
def test_two_whole_node_jobs_past_protection_take_turns_and_split_the_day(policy):
    # 1 x 8, A = B, one 8-GPU job each (30 h of work, protected 2 h), b at 60 s. Each turn
    # lasts one protection (2 h), then the other ranks first: 12 turns in 24 h, 11 switches;
    # A 96, B 96 (within one turn, 16)
    jobs = [Job("a", "A", 8, min_runtime_s=2 * H, duration_s=30 * H),
            Job("b", "B", 8, min_runtime_s=2 * H, duration_s=30 * H, submit_time=60.0)]
    res, m, w = _run(_sc(jobs, duration=24 * H), policy)
    got = (m["projects"]["A"]["delivered_gpu_h"], m["projects"]["B"]["delivered_gpu_h"])
    assert got == pytest.approx((96.0, 96.0), abs=16.0)
    assert m["preemptions"]["count"] <= 12


@pytest.mark.parametrize("policy", POLICIES)
def test_a_node_going_down_inside_a_moves_grace_kills_the_job_once_and_it_restarts_later(policy):
    # the moved-gang case with n2 down at 3630 (inside g's 60 s notice, under ilp while g is
    # being moved to n3 + n2) and up at 2 h: g is killed at 3630 (30 s lost x 16 = 480 GPU-s,
    # one preemption; no restart from the cancelled move), 14400 s left. b (arrives 5000)
    # takes n3 at 5400 (n1 drained, n2 down) to 9000; n2 is up at 7200 but g needs n2 + n3:
    # g 9000 -> 23400. Same under greedy (its notice at 3600 ends the same way)
    sc = _moved_case()
    sc = dataclasses.replace(sc, node_events=sc.node_events + (
        NodeEvent(3630.0, ("n2",), NodeState.DOWN), NodeEvent(2 * H, ("n2",), NodeState.UP)))
    res, m, w = _run(sc, policy)
    assert sorted(_ivs(res, "g")) == [(0.0, 3630.0), (9000.0, 23400.0)]
    assert _ivs(res, "b") == [(5400.0, 9000.0)]
    assert [(r.job_id, r.lost_gpu_s, r.preemptions) for r in sorted(res.jobs, key=lambda r: r.job_id)] \
        == [("b", 0.0, 0), ("g", 480.0, 1)]


def _two_gangs_case(**policy):
    # 4 x 8, A = G1 = G2. A: 4 one-node jobs protected k x 0.5 h = their work (k = 1..4, a
    # higher priority) and 40 one-node 2 h jobs, at 0; G1 and G2: a 16-GPU gang each (1 h
    # protected, 2 h of work) at 900 s
    jobs = [Job(f"W{k}", "A", 8, min_runtime_s=k * 1800.0, duration_s=k * 1800.0, priority=1)
            for k in range(1, 5)]
    jobs += [Job(f"S{i:03d}", "A", 8, min_runtime_s=2 * H, duration_s=2 * H) for i in range(40)]
    jobs += [Job(f"gang{g}", f"G{g}", 16, min_runtime_s=H, duration_s=2 * H, submit_time=900.0)
             for g in (1, 2)]
    return _sc(jobs, nodes=(("h100", 8),) * 4, org=_org("A", "G1", "G2"), duration=12 * H, **policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_without_the_lookahead_two_gangs_both_starve(policy):
    res, m, w = _run(_two_gangs_case(), policy)
    assert _ivs(res, "gang1") == [] and _ivs(res, "gang2") == []


def test_with_two_reservations_two_gangs_take_the_two_soonest_pairs_of_nodes():
    # at 1800 (G1 and G2 tie, G1 by name first): gang1 reserves n1 + n2 (free 1800, 3600),
    # S 3600; gang2 n3 + n4 (5400, 7200), S 7200. A's 2 h jobs end after either S, so
    # nothing starts there: n1 idles 1800 -> 3600, n3 5400 -> 7200: 8 GPU-h held idle. gang1
    # 3600 -> 10800, gang2 7200 -> 14400
    res, m, w = _run(_two_gangs_case(max_reservations=2), "ilp")
    assert _ivs(res, "gang1") == [(3600.0, 10800.0)]
    assert _ivs(res, "gang2") == [(7200.0, 14400.0)]
    assert (m["reservations"]["kept"], m["reservations"]["idle_gpu_h"]) == (2, pytest.approx(8.0))


# fixed at stop 52 (was a strict xfail, ilp and greedy): the simulated runner fixed a new job's
# start when the plan was applied (the predecessor's stop time) and nothing moved it earlier
# when the predecessor finished inside its grace; now the run's GPUs are released when it
# ends and a run waiting for them starts then (sim/runner.py `_release`)
@pytest.mark.parametrize("policy", POLICIES)
def test_a_successor_starts_when_a_job_in_its_grace_period_finishes_early(policy):
    # 1 x 8, grace 300. a (A, 8, protected 1 h, 3700 s of work) from 0; b (B, 8, 1 h) at 600.
    # 3600: a is past protection, B ranks first: a gets notice (stop at 3900) but finishes its
    # work at 3700 (completed, not preempted); its GPUs are released then, b runs 3700 -> 7300
    jobs = [Job("a", "A", 8, min_runtime_s=H, duration_s=3700.0),
            Job("b", "B", 8, min_runtime_s=H, duration_s=H, submit_time=600.0)]
    res, m, w = _run(_sc(jobs, grace_s=300.0), policy)
    assert _ivs(res, "a") == [(0.0, 3700.0)]
    assert [(r.job_id, r.completed, r.preemptions) for r in sorted(res.jobs, key=lambda r: r.job_id)] \
        == [("a", True, 0), ("b", True, 0)]
    assert _ivs(res, "b") == [(3700.0, 7300.0)]


def test_debug_jobs_among_long_jobs_past_protection_wait_at_most_a_grace_period():
    # 2 x 8, A = B = C, early solve, grace 60. A and B: 60 one-GPU jobs each, protected 1 h,
    # 4 h of work (they run past protection). C: a debug job (1 GPU, protected 10 min, 10 min)
    # every 20 min from 1 h + 7 s. C is charged almost nothing and ranks first; from 1 h on
    # most of A's and B's jobs are past protection, so each debug job takes a GPU at once (one
    # left by the previous debug job) or after one A/B job's 60 s notice: every wait <= 60 s;
    # C 30 x 10 min = 5 GPU-h; A and B split the rest evenly (within 4 GPU-h).
    # ilp only: greedy flips whole projects every hour (at equal ratios the one first by name
    # takes every GPU past protection, 120 preemptions), so every running job is freshly
    # protected and debug waits reach 4860 s (p90 2579 s): the published sort, not a rule
    # broken, so not asserted here
    jobs = [Job(f"{p}{i:03d}", p, 1, min_runtime_s=H, duration_s=4 * H) for p in "AB" for i in range(60)]
    jobs += [Job(f"d{k:02d}", "C", 1, min_runtime_s=600.0, duration_s=600.0,
                 submit_time=H + k * 1200.0 + 7) for k in range(30)]
    sc = _sc(jobs, nodes=(("h100", 8),) * 2, org=_org("A", "B", "C"), early=True, grace_s=60.0,
             duration=12 * H)
    res, m, w = _run(sc, "ilp")
    waits = [r.first_start - r.submit_time for r in res.jobs if r.job_id[0] == "d"]
    assert len(waits) == 30 and max(waits) <= 60.0
    p = m["projects"]
    assert p["C"]["delivered_gpu_h"] == pytest.approx(5.0)
    assert p["A"]["delivered_gpu_h"] == pytest.approx(p["B"]["delivered_gpu_h"], abs=4.0)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_job_leaves_a_drain_node_when_its_protection_ends_even_minutes_before_its_end(policy):
    # n1 h100 drains at 1000, n2 a100. a (A, 8, h100 only, protected 1 h, 3900 s of work) is
    # sent off at 3600 (rule 5: as soon as its protection ends, whatever is left; nothing
    # lost at a checkpoint), and with no other h100 node it stays queued, not lost, to 3 h
    jobs = [Job("a", "A", 8, gpu_types=("h100",), min_runtime_s=H, duration_s=3900.0)]
    sc = _sc(jobs, nodes=(("h100", 8), ("a100", 8)), types=("h100", "a100"), duration=3 * H,
             events=(NodeEvent(1000.0, ("n1",), NodeState.DRAIN),))
    res, m, w = _run(sc, policy)
    assert _ivs(res, "a") == [(0.0, 3600.0)]
    assert [(r.completed, r.end_time, r.preemptions, r.lost_gpu_s) for r in res.jobs] == [(False, None, 1, 0.0)]


def _random_case(seed, lookahead):
    import random

    r = random.Random(seed)
    nn = r.choice([2, 3, 4])
    jobs = [Job(f"j{i}", r.choice("ABC"), r.choice([1, 2, 4, 8, 8, 16]),
                min_runtime_s=r.choice([0.0, 600.0, H, 2 * H, 3 * H]),
                duration_s=r.choice([600.0, 1800.0, H, 2.5 * H, 5 * H, None]),
                submit_time=r.choice([0.0, 100.0, 1000.0, H, 2 * H, 4 * H]),
                resumable=r.random() < 0.8, priority=r.choice([0, 0, 1]),
                checkpoint_interval_s=r.choice([None, 900.0]))
            for i in range(r.randint(6, 20))]
    ev = sorted((NodeEvent(r.choice([500.0, 1800.0, 3000.0, 2 * H, 5 * H]), (f"n{r.randint(1, nn)}",),
                           r.choice([NodeState.DRAIN, NodeState.DOWN, NodeState.UP]))
                 for _ in range(r.randint(0, 3))), key=lambda e: e.time)
    pol = {"grace_s": r.choice([0.0, 60.0, 300.0])} | ({"max_reservations": 2} if lookahead else {})
    return _sc(jobs, nodes=(("h100", 8),) * nn, org=_org("A", "B", "C"), early=r.random() < 0.5,
               events=tuple(ev), duration=12 * H, **pol)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("policy, lookahead", [("ilp", False), ("greedy", False), ("ilp", True)])
def test_random_small_days_keep_every_job_once_and_every_protection(seed, policy, lookahead):
    # what holds whatever the policy decides (the module doc's `_always`): no job twice at
    # once, none lost, a finished resumable job ran its work plus what it lost since its
    # checkpoints, delivered = its allocated intervals, unallocated never charged, no
    # protection broken (drains, downs, ups, grace periods and the lookahead mixed at random;
    # 200 seeds x 3 passed when this file was written)
    _run(_random_case(seed, lookahead), policy)
