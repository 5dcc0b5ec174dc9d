"""An outside judge of the lookahead (`policy.max_reservations`) over MANY epochs in the
simulator (stop 52): each case is a tiny simulation built with the helpers of
`tests/test_sim_judge_cases_s51.py` (nodes of 8 GPUs, epoch 1800 s, checkpoints every 600 s, no
early solve, lookback 24 h; `_run` also checks that no plan breaks a protection, no job is lost
or runs twice, and the ledger charges exactly the run intervals) under `ilp`; the outcome
(run intervals, reservations made / kept / dropped with their reason, idle GPU-hours, and when a
gang starts against the start its plan named) was worked out by hand from DESIGN.md section 8
and README "How an epoch decides" item 6 before it was asserted.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest

from optalloc.sim.scenario.spec import NodeEvent
from optalloc.types import Job, NodeState, OrgNode
from tests.test_sim_judge_cases_s51 import H, _gang_case, _ivs, _org, _run, _sc


def _plans(w):
    return [(snap, plan) for snap, plan in w.seen]


def _held(w):
    """[(now, {gang: (nodes, expected start, idle GPUs)})] of every plan with a reservation."""
    return [(s.now, {r.job_id: (tuple(sorted(r.nodes)), r.expected_start, r.idle_gpus)
                     for r in p.reservations}) for s, p in w.seen if p.reservations]


def _ended(w):
    return [(s.now, e.job_id, e.outcome) for s, p in w.seen for e in p.reservations_ended]


def _res_counts(m):
    r = m["reservations"]
    return (r["made"], r["kept"], r["dropped_by"], r["open_at_end"])


# ------------------------------------------------------------------ 1. three gangs, two slots

@functools.lru_cache(maxsize=None)
def _three():
    # 6 x 8, A = G1 = G2 = G3 (12 GPUs each: no 16-GPU gang is within its share, each passes
    # the budget test: 16 GPU-h / 288). A: W1..W6 one per node, protected k x 0.5 h = their
    # work (priority 1), and 60 one-node 2 h jobs, at 0; three 16-GPU gangs (1 h protected, 2 h
    # of work) at 900 s. max_reservations 2.
    jobs = [Job(f"W{k}", "A", 8, min_runtime_s=k * 1800.0, duration_s=k * 1800.0, priority=1)
            for k in range(1, 7)]
    jobs += [Job(f"S{i:03d}", "A", 8, min_runtime_s=2 * H, duration_s=2 * H) for i in range(60)]
    jobs += [Job(f"gang{g}", f"G{g}", 16, min_runtime_s=H, duration_s=2 * H, submit_time=900.0)
             for g in (1, 2, 3)]
    sc = _sc(jobs, nodes=(("h100", 8),) * 6, org=_org("A", "G1", "G2", "G3"), duration=12 * H,
             max_reservations=2)
    return _run(sc, "ilp")


def test_three_gangs_with_two_slots_never_hold_more_than_two_reservations_one_per_project():
    # 1800: gang1 takes n1 (free now) + n2 (W2 ends 3600), S 3600; gang2 n3 + n4 (5400, 7200),
    # S 7200; gang3 gets no slot. 3600: gang1 is due and starts (its reservation still counts
    # in this plan, so gang3 waits one more epoch). 5400: gang3 reserves n1 + n2, where gang1
    # is protected to 7200 (G1 now ranks below G3): S 7200. Then gang1 (past protection) is
    # reserved again at 9000 for n1 + n2 (gang3 protected to 10800): S 10800.
    res, m, w = _three()
    held = _held(w)
    assert all(len(h) <= 2 for _, h in held)
    for s, p in w.seen:
        projects = [r.project for r in p.reservations]
        assert len(projects) == len(set(projects))
    assert held == [
        (1800.0, {"gang1": (("n1", "n2"), 3600.0, 8), "gang2": (("n3", "n4"), 7200.0, 0)}),
        (3600.0, {"gang2": (("n3", "n4"), 7200.0, 0)}),
        (5400.0, {"gang2": (("n3", "n4"), 7200.0, 8), "gang3": (("n1", "n2"), 7200.0, 0)}),
        (9000.0, {"gang1": (("n1", "n2"), 10800.0, 0)})]


def test_three_gangs_start_at_their_named_starts_and_take_turns_only_after_protections():
    # gang1 3600 -> 7200 (protected to 7200, then preempted for G3, which ranks first), again
    # 10800 -> 14400 (its second reservation); gang2 7200 -> 12600 (protected to 10800;
    # preempted at 12600, 1800 s left), 14400 -> 16200; gang3 7200 -> 10800 (preempted at
    # its protection end for gang1's due start), 12600 -> 16200. Four reservations, all kept,
    # every start at its plan's expected start; no work lost (all stops on checkpoints)
    res, m, w = _three()
    assert {g: _ivs(res, g) for g in ("gang1", "gang2", "gang3")} == {
        "gang1": [(3600.0, 7200.0), (10800.0, 14400.0)],
        "gang2": [(7200.0, 12600.0), (14400.0, 16200.0)],
        "gang3": [(7200.0, 10800.0), (12600.0, 16200.0)]}
    assert _ended(w) == [(3600.0, "gang1", "started"), (7200.0, "gang2", "started"),
                         (7200.0, "gang3", "started"), (10800.0, "gang1", "started")]
    assert _res_counts(m) == (4, 4, {}, 0)
    assert (m["preemptions"]["count"], m["preemptions"]["lost_gpu_h"]) == (3, 0.0)


def test_reserved_idle_gpu_hours_are_counted_and_carried_to_the_budget_after_each_start():
    # n1 idles 1800 -> 3600 for gang1 (8 x 0.5 = 4 GPU-h) and n3 5400 -> 7200 for gang2 (4):
    # 8 GPU-h in the metrics; each ended reservation's idle hours ride on every later plan
    # (`reservation_idle`, charged in its project's budget test for the window), none for
    # gang3 or gang1's second reservation, which held nothing idle
    res, m, w = _three()
    assert m["reservations"]["idle_gpu_h"] == pytest.approx(8.0)
    last = w.seen[-1][1].reservation_idle
    assert sorted((r.job_id, r.project, r.start, r.end, r.gpu_h) for r in last) == [
        ("gang1", "G1", 1800.0, 3600.0, pytest.approx(4.0)),
        ("gang2", "G2", 1800.0, 7200.0, pytest.approx(4.0))]
    assert sum(r.gpu_h for r in last) == pytest.approx(m["reservations"]["idle_gpu_h"])


# ------------------------------------------------------------------ 2. backfill

def _with_b(extra):
    sc = _gang_case(max_reservations=1)
    return dataclasses.replace(sc, jobs=sc.jobs + tuple(extra),
                               config=dataclasses.replace(sc.config, org=_org("A", "G", "B")))


def test_short_jobs_of_another_project_backfill_the_reserved_gpus_and_end_at_the_start():
    # the s51 gang case (n1 + n2 reserved at 1800, S 5400) with B's 8 one-GPU jobs (0.5 h
    # protected, 0.5 h of work) at 3000: at 3600 A's 1 h jobs may not take the freed
    # reserved node (hold 7200 > S), B's may (hold 5400 <= S): 3600 -> 5400, no GPU idle, no
    # preemption, the gang 5400 -> 12600
    res, m, w = _run(_with_b(Job(f"b{i}", "B", 1, min_runtime_s=1800.0, duration_s=1800.0,
                                 submit_time=3000.0) for i in range(8)), "ilp")
    assert {j: _ivs(res, j) for j in ("gang", "b0", "b7")} == {
        "gang": [(5400.0, 12600.0)], "b0": [(3600.0, 5400.0)], "b7": [(3600.0, 5400.0)]}
    assert _res_counts(m) == (1, 1, {}, 0)
    assert (m["reservations"]["idle_gpu_h"], m["preemptions"]["count"]) == (0.0, 0)


def test_a_backfilled_job_whose_protection_ends_by_the_start_is_preempted_when_the_gang_is_due():
    # b (B, 8 GPUs, protected 0.5 h, 3 h of work) at 3000 backfills the freed reserved node at
    # 3600 (hold 5400 <= S) and is still there, unprotected, at 5400: preempted for the gang
    # (on a checkpoint, nothing lost). The gang's protection ends at 9000, B (4 GPU-h) ranks
    # before G (16): b 9000 -> 12600, the gang reserves again at 10800 (S 12600, b's
    # protection end) and starts then; b ends 16200 -> 21600 (1800 + 3600 + 5400 s = 3 h)
    res, m, w = _run(_with_b([Job("b", "B", 8, min_runtime_s=1800.0, duration_s=3 * H,
                                  submit_time=3000.0)]), "ilp")
    assert _ivs(res, "gang") == [(5400.0, 9000.0), (12600.0, 16200.0)]
    assert _ivs(res, "b") == [(3600.0, 5400.0), (9000.0, 12600.0), (16200.0, 21600.0)]
    pre = [(s.now, x.job_id, x.code.value) for s, p in w.seen for x in p.preemptions]
    assert pre == [(5400.0, "b", "PreemptedForFairShare"), (9000.0, "gang", "PreemptedForFairShare"),
                   (12600.0, "b", "PreemptedForFairShare")]
    assert [(t, h) for t, h in _held(w)] == [
        (1800.0, {"gang": (("n1", "n2"), 5400.0, 0)}), (3600.0, {"gang": (("n1", "n2"), 5400.0, 0)}),
        (10800.0, {"gang": (("n1", "n2"), 12600.0, 0)})]
    assert _res_counts(m) == (2, 2, {}, 0)


# ------------------------------------------------------------------ 3. grace on reserved nodes

@functools.lru_cache(maxsize=None)
def _grace():
    # the s51 unallocated-backfill case (U, share 0: 16 one-GPU unallocated jobs of 100 h at
    # 0) with grace 300
    sc = _gang_case(max_reservations=1, grace_s=300.0)
    u = [Job(f"U{i}", "U", 1, min_runtime_s=0.0, duration_s=100 * H) for i in range(16)]
    sc = dataclasses.replace(sc, jobs=sc.jobs + tuple(u), config=dataclasses.replace(
        sc.config, org=OrgNode("root", children=(OrgNode("A"), OrgNode("G"), OrgNode("U", share=0)))))
    return _run(sc, "ilp")


def test_unallocated_backfill_on_reserved_nodes_gets_the_grace_and_the_gang_starts_after_it():
    # U fills the reserved node's 8 free GPUs 3600 -> 5400 (holds nothing); at 5400 the gang
    # is due: U0-U7 get notice (PreemptedUnallocated) and stop at 5700 (300 s since the 5400
    # checkpoint lost x 8 = 0.667 GPU-h), the gang starts on their GPUs then: 5700 -> 11100
    # (see the next case); the reservation held no GPU idle
    res, m, w = _grace()
    assert _ivs(res, "U0") == [(3600.0, 5700.0)] and _ivs(res, "U8") == []
    assert _ivs(res, "gang")[0] == (5700.0, 11100.0)
    pre = sorted(x.job_id for s, p in w.seen if s.now == 5400.0 for x in p.preemptions)
    assert pre == sorted(f"U{i}" for i in (0, 1, 10, 11, 12, 13, 14, 15))
    assert m["projects"]["U"]["unallocated_gpu_h"] == pytest.approx(8 * 2100 / H)
    assert m["preemptions"]["lost_gpu_h"] == pytest.approx(8 * 300 / H)
    assert m["reservations"]["idle_gpu_h"] == 0.0


def test_a_gang_stopped_after_its_protection_reserves_again_and_starts_at_the_first_epoch_past_the_named_start():
    # continued: gang protected 5700 -> 9300; at 10800 A (20 GPU-h used) ranks before G
    # (16 x 5100 s = 22.7 GPU-h): notice, the gang stops at 11100 (a checkpoint, 1800 s
    # left) and A's 1 h jobs start on both nodes at 11100 (protected to 14700). 12600: the
    # gang reserves n1 + n2 again, S 14700; 14400 has no epoch (nothing changed), the next is
    # 16200 (no early solve): the gang runs 16200 -> 18000. Two reservations, both kept.
    res, m, w = _grace()
    assert _ivs(res, "gang") == [(5700.0, 11100.0), (16200.0, 18000.0)]
    # at 3600 the plan backfills U onto n1, to run on past 5400: it names 5700, the start
    # after U's notice (until stop 58 it named 5400, the clear time, and the gang started at
    # 5700 all the same; tests/test_lookahead_review_s58.py)
    assert _held(w) == [(1800.0, {"gang": (("n1", "n2"), 5400.0, 0)}),
                        (3600.0, {"gang": (("n1", "n2"), 5700.0, 0)}),
                        (12600.0, {"gang": (("n1", "n2"), 14700.0, 0)})]
    assert _ended(w) == [(5400.0, "gang", "started"), (16200.0, "gang", "started")]
    assert _res_counts(m) == (2, 2, {}, 0)


# ------------------------------------------------------------------ 4. a node down under it

def test_a_reserved_node_going_down_with_no_spare_drops_the_reservation_as_unplaceable():
    # the s51 gang case (n1 + n2 reserved at 1800, S 5400) with n1 down at 2700 (its 8 L
    # jobs killed: 300 s since the 2400 checkpoint x 8 = 0.667 GPU-h lost) and up at 10800.
    # 3600: the gang fits no up nodes: dropped "unplaceable" (no new one: it fits nowhere);
    # the L jobs finish on n2 3600 -> 6600. 10800: both nodes free at once (n1 back, A's jobs
    # on n2 end), G ranks first: the gang starts without a reservation, 10800 -> 18000
    sc = dataclasses.replace(_gang_case(max_reservations=1), node_events=(
        NodeEvent(2700.0, ("n1",), NodeState.DOWN), NodeEvent(3 * H, ("n1",), NodeState.UP)))
    res, m, w = _run(sc, "ilp")
    assert _ivs(res, "gang") == [(10800.0, 18000.0)]
    assert _ivs(res, "L0") == [(0.0, 2700.0), (3600.0, 6600.0)]
    assert _held(w) == [(1800.0, {"gang": (("n1", "n2"), 5400.0, 0)})]
    assert _ended(w) == [(3600.0, "gang", "unplaceable")]
    assert _res_counts(m) == (1, 0, {"unplaceable": 1}, 0)
    assert (m["preemptions"]["count"], m["preemptions"]["lost_gpu_h"]) == (8, pytest.approx(8 * 300 / H))


# ------------------------------------------------------------------ 5. over share / outranked

def _over(prot_h):
    # 2 x 8, A = C = D = G (4 GPUs each; E_G = 0.25 x 16 x 24 = 96 GPU-h): A, C, D each 30
    # one-node 1 h jobs at 0; G one 16-GPU gang at 900, protected prot_h (= its work)
    jobs = [Job(f"{p}{i:03d}", p, 8, min_runtime_s=H, duration_s=H) for p in "ACD" for i in range(30)]
    jobs += [Job("gang", "G", 16, min_runtime_s=prot_h * H, duration_s=prot_h * H, submit_time=900.0)]
    sc = _sc(jobs, nodes=(("h100", 8),) * 2, org=_org("A", "C", "D", "G"), duration=12 * H,
             max_reservations=1)
    return _run(sc, "ilp")


def test_a_gang_whose_protected_run_exceeds_its_projects_window_budget_never_reserves():
    # 16 GPUs x 8 h = 128 GPU-h > 96 (ratio 1.33), and 16 > 4 for the share test: no plan
    # reserves anything, the gang is never Reserved
    res, m, w = _over(8)
    assert _held(w) == [] and _ended(w) == []
    assert _res_counts(m) == (0, 0, {}, 0)
    assert all(r.code.value != "Reserved" for s, p in w.seen for r in p.pending)


def test_the_same_gang_with_a_short_protection_reserves_and_starts_at_the_named_start():
    # 16 x 2 = 32 GPU-h <= 96: at 1800 it reserves n1 + n2 (both free at 3600), starts 3600
    res, m, w = _over(2)
    assert _held(w) == [(1800.0, {"gang": (("n1", "n2"), 3600.0, 0)})]
    assert _ivs(res, "gang") == [(3600.0, 10800.0)]
    assert _res_counts(m) == (1, 1, {}, 0)


def test_a_reservation_is_dropped_as_outranked_when_its_projects_usage_passes_the_kept_slack():
    # 2 x 8, A = G (E_G = 192 GPU-h). G's g0 (8 GPUs, priority 1, protected 8 h, 30 h of work)
    # runs from 0 on one node: the gang (16, protected 8 h: 128 GPU-h = 0.667) sees it holding
    # its GPUs to its expected end, S = 108000. 1800: ratio 8 x 0.5 / 192 + 0.667 <= 1: made.
    # Kept with 25% slack while 8t/192 + 0.667 <= 1.25, t <= 14 h (50400); at 54000 (15 h:
    # 0.625 + 0.667 = 1.29) dropped "outranked", with that number in its message; never made
    # again (G's ratio only rises). A's 1 h jobs backfill the other node (hold <= S): no idle.
    jobs = [Job("g0", "G", 8, min_runtime_s=8 * H, duration_s=30 * H, priority=1)]
    jobs += [Job(f"A{i:03d}", "A", 8, min_runtime_s=H, duration_s=H) for i in range(40)]
    jobs += [Job("gang", "G", 16, min_runtime_s=8 * H, duration_s=8 * H, submit_time=900.0)]
    res, m, w = _run(_sc(jobs, nodes=(("h100", 8),) * 2, org=_org("A", "G"), duration=24 * H,
                         max_reservations=1), "ilp")
    held = _held(w)
    assert (held[0][0], held[-1][0]) == (1800.0, 50400.0)
    assert all(h == {"gang": (("n1", "n2"), 108000.0, 0)} for _, h in held)
    assert _ended(w) == [(54000.0, "gang", "outranked")]
    msg = [e.message for s, p in w.seen for e in p.reservations_ended][0]
    assert "usage ratio over the window to 1.29 (> 1.25, the slack a reservation already held keeps)" in msg
    assert _ivs(res, "gang") == [] and _ivs(res, "g0") == [(0.0, 86400.0)]
    assert _res_counts(m) == (1, 0, {"outranked": 1}, 0)
    assert m["reservations"]["idle_gpu_h"] == 0.0


# ------------------------------------------------------------------ 6. properties over these runs

def _all_runs():
    return [_three(), _grace()]


def test_no_new_job_lands_on_reserved_nodes_unless_it_ends_or_loses_protection_by_the_start():
    # every plan with a reservation not yet due: each job it starts on a reserved node holds
    # its GPUs (start + min(protection, work)) no later than the expected start, or is
    # unallocated
    for res, m, w in _all_runs():
        for s, p in w.seen:
            running = {j.id: j for j in s.jobs if j.running}
            jobs = {j.id: j for j in s.jobs}
            for r in p.reservations:
                if r.expected_start <= s.now:
                    continue
                for pl in p.placements:
                    if pl.job_id in running and running[pl.job_id].placement == pl:
                        continue
                    if not set(pl.node_names) & set(r.nodes) or pl.job_id == r.job_id:
                        continue
                    j = jobs[pl.job_id]
                    if j.min_runtime_s > 0:
                        hold = s.now + min(j.min_runtime_s, j.duration_s or float("inf"))
                        assert hold <= r.expected_start + 1e-6, (s.now, j.id, r.job_id)


def test_every_kept_gang_starts_no_earlier_than_its_named_start_and_within_an_epoch_plus_grace():
    for res, m, w in _all_runs():
        last = {}
        for s, p in w.seen:
            for r in p.reservations:
                last[r.job_id] = r.expected_start
            for e in p.reservations_ended:
                if e.outcome == "started":
                    first = min(st for st, en in _ivs(res, e.job_id) if st >= s.now)
                    assert last[e.job_id] <= first <= last[e.job_id] + 1800.0 + 300.0, \
                        (e.job_id, last[e.job_id], first)
