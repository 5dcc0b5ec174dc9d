"""An outside judge (stop 54) of the time-slicing contract and of preemption over several
epochs (DESIGN.md section 1 part 3, section 8 rules 4-5): notices and grace periods, who is
charged during a notice, jobs preempted twice, protections longer than the run or capped,
min_runtime 0, jobs finishing inside their notice, drains that must wait for a protection, and
the ledger's conservation across preemption and resume.

Every expected outcome below was worked out by hand from the rules before it was run (the
comment of each case shows the working). One-epoch cases use the snapshot helpers of
tests/test_scheme_judge_cases_s51.py (nodes of 8 h100 GPUs, now = 10 h, grace 60 s unless a
case says) and assert ilp no worse than greedy on the scheme's order; simulations use the
helpers of tests/test_sim_judge_cases_s51.py (epoch 1800 s, checkpoints every 600 s, lookback
24 h, org root -> A, B) and run both policies; `_run` there also checks that no plan preempts
a protected job, no job is lost or runs twice at once, and the ledger charged exactly the
allocated run intervals.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from optalloc.codec import plan_to_dict
from optalloc.ledger import Ledger
from optalloc.org import OrgTree
from optalloc.plan.explain import explain, format_explanation
from optalloc.sim.scenario.spec import NodeEvent
from optalloc.types import Job, NodeState, Policy
from optalloc.units import format_time
from tests.test_epoch_toy import flat_org, nodes_of, running
from tests.test_scheme_judge_cases_s51 import decide, pend, pre, snap, where
from tests.test_sim_judge_cases_s51 import H, _ivs, _run, _sc

POLICIES = ("ilp", "greedy")
NOW = 10 * H


# ============================================================ one epoch: the plan's decisions

def test_a_job_past_its_protection_gets_notice_of_the_policys_grace_and_the_waiting_job_takes_its_gpus():
    # 1 x 8. A's a1 (8 GPUs) started 8 h, protected 1 h: past at 10 h. B's b (8) waits; usage
    # A 1.0, B 0.0: B ranks first. Plan: a1 PreemptedForFairShare, needed_by (b,), grace the
    # policy's 120 s; b placed on all of n00 (allocated); nothing pending. The plan file
    # carries the same fields, and b's explanation says it starts once a1 has left.
    s = snap(nodes_of(1, 8), flat_org({"A": 1, "B": 1}),
             [running("a1", "A", "h100", [("n00", range(8))], start=8 * H),
              Job("b", "B", 8, min_runtime_s=H)],
             usage={"A": 1.0, "B": 0.0}, policy=Policy(grace_s=120.0))
    plan = decide(s)
    assert where(plan) == {"b": ("h100", ("n00",), True)}
    assert pre(plan) == {"a1": ("PreemptedForFairShare", ("b",))}
    assert pend(plan) == {}
    doc = plan_to_dict(plan)
    (p,) = doc["preemptions"]
    assert (p["job_id"], p["code"], p["grace_s"], list(p["needed_by"])) == (
        "a1", "PreemptedForFairShare", 120.0, ["b"])
    assert p["message"].startswith("past its protection")
    e = explain(s, plan, "b")
    assert e["outcome"] == "started"
    assert "a1 (PreemptedForFairShare, grace 120 s)" in e["message"]
    ea = explain(s, plan, "a1")
    assert (ea["outcome"], ea["grace_s"], ea["needed_by"]) == ("preempted", 120.0, ["b"])
    # the explanation says when the notice ends: now + grace = 36120, then requeued
    assert ea["stops_by"] == NOW + 120.0
    assert "notice now, 120 s grace: it stops by t=36120, then requeued" in \
        format_explanation(ea)


def test_a_protected_job_is_never_preempted_for_a_high_priority_gang():
    # 2 x 8. A's a1 (8 GPUs on n00) started 9.5 h, protected 1 h: until 10.5 h. n01 is free.
    # B (usage 0, ranks first) asks a 16-GPU gang at priority 100. The gang cannot start
    # without n00, which is protected: no preemption, a1 kept, the gang waits; B's 8-GPU job
    # bq fits n01 and takes it (rule 6: no idle GPU while a job that fits waits).
    s = snap(nodes_of(2, 8), flat_org({"A": 1, "B": 1}),
             [running("a1", "A", "h100", [("n00", range(8))], start=9.5 * H),
              Job("g", "B", 16, min_runtime_s=H, priority=100),
              Job("bq", "B", 8, min_runtime_s=H, submit_time=5.0)],
             usage={"A": 1.0, "B": 0.0})
    plan = decide(s)
    assert pre(plan) == {}
    assert where(plan) == {"a1": ("h100", ("n00",), True), "bq": ("h100", ("n01",), True)}
    assert set(pend(plan)) == {"g"}


@pytest.mark.parametrize("min_runtime", [H, 600.0], ids=["one-hour-job", "debug-job"])
def test_a_protected_job_is_never_preempted_for_another_projects_floor(min_runtime):
    # 1 x 8, A = B (floor 4 each). A's a1 holds all 8, protected until 10.5 h. B (usage 0)
    # wants 4 GPUs (a 1 h job, or a 10 min debug job): below its floor, but a1 is protected:
    # nothing is preempted and b waits.
    s = snap(nodes_of(1, 8), flat_org({"A": 1, "B": 1}),
             [running("a1", "A", "h100", [("n00", range(8))], start=9.5 * H),
              Job("b", "B", 4, min_runtime_s=min_runtime)],
             usage={"A": 1.0, "B": 0.0})
    plan = decide(s)
    assert pre(plan) == {} and set(where(plan)) == {"a1"}
    assert pend(plan) == {"b": "WaitingForCapacity"}


def test_min_runtime_zero_work_started_a_minute_ago_yields_at_once_to_allocated_demand():
    # 1 x 8. A's u (8 GPUs, min_runtime 0: unallocated) started 9.98 h. B's b (8, allocated)
    # waits. Unallocated work is never protected and yields to allocated work at once:
    # u PreemptedUnallocated needed_by (b,), b on n00 allocated.
    s = snap(nodes_of(1, 8), flat_org({"A": 1, "B": 1}),
             [running("u", "A", "h100", [("n00", range(8))], start=9.98 * H, min_runtime_s=0.0),
              Job("b", "B", 8, min_runtime_s=H)])
    plan = decide(s)
    assert where(plan) == {"b": ("h100", ("n00",), True)}
    assert pre(plan) == {"u": ("PreemptedUnallocated", ("b",))}
    assert pend(plan) == {}


@pytest.mark.parametrize("x1_start", [1.5 * H, 2 * H], ids=["past-the-cap", "exactly-the-cap"])
def test_a_min_runtime_above_the_cap_protects_only_for_the_cap(x1_start):
    # 2 x 8, cap 8 h. A's x1 and x2 (8 GPUs each, min_runtime 10 h) started 1.5 h (8.5 h ago:
    # past the 8 h cap; or 2 h: exactly 8 h ago, its protection ends now) and 2.5 h (7.5 h
    # ago: protected to 10.5 h). B (usage 0) queues two 8-GPU jobs b0, b1. A = B: entitled 8
    # each; x1 is preemptible and yields to b0; x2 stays; b1 waits.
    s = snap(nodes_of(2, 8), flat_org({"A": 1, "B": 1}),
             [running("x1", "A", "h100", [("n00", range(8))], start=x1_start, min_runtime_s=10 * H),
              running("x2", "A", "h100", [("n01", range(8))], start=2.5 * H, min_runtime_s=10 * H),
              Job("b0", "B", 8, min_runtime_s=H), Job("b1", "B", 8, min_runtime_s=H, submit_time=1.0)],
             usage={"A": 1.0, "B": 0.0})
    plan = decide(s)
    assert where(plan) == {"x2": ("h100", ("n01",), True), "b0": ("h100", ("n00",), True)}
    assert pre(plan) == {"x1": ("PreemptedForFairShare", ("b0",))}
    assert set(pend(plan)) == {"b1"}


def test_a_drain_waits_for_a_protected_job_and_reports_when_the_node_will_be_empty():
    # d00 draining holds A's D1 (8 GPUs), started 9.5 h, protected until 10.5 h; n00 is free
    # and B's b (8) waits. Rule 5: D1 stays (protected), no preemption; b goes to n00, never
    # to the drain. The drain reports D1 staying, nobody leaving, not ready; D1 is given
    # notice at 10.5 h at the earliest and keeps its GPUs through the 60 s grace: the node is
    # empty at 10.5 h + 60 s.
    nodes = nodes_of(1, 8) + nodes_of(1, 8, prefix="d", state=NodeState.DRAIN)
    s = snap(nodes, flat_org({"A": 1, "B": 1}),
             [running("D1", "A", "h100", [("d00", range(8))], start=9.5 * H),
              Job("b", "B", 8, min_runtime_s=H)])
    plan = decide(s)
    assert pre(plan) == {}
    assert where(plan) == {"D1": ("h100", ("d00",), True), "b": ("h100", ("n00",), True)}
    (d,) = plan.drains
    assert (d.node, d.staying, d.leaving, d.ready) == ("d00", ("D1",), (), False)
    assert d.empty_at == pytest.approx(10.5 * H + 60.0)
    e = explain(s, plan, "D1")
    assert e["outcome"] == "running" and e["protected_until"] == pytest.approx(10.5 * H)
    # its explanation names the drain and when it leaves (before: only "keeps its GPUs")
    assert e["draining"] == ["d00"]
    assert e["message"] == (f"keeps its GPUs for now: node d00 is draining; it leaves with "
                            f"notice when its protection ends ({format_time(10.5 * H)}), 60 s "
                            "grace")


# ============================================================ simulations over several epochs

def _plan_at(w, t):
    (p,) = [p for s, p in w.seen if s.now == t]
    return p


def _decisions(w):
    return [s.now for s, _ in w.seen]


def _rec(res, jid):
    (r,) = [r for r in res.jobs if r.job_id == jid]
    return r


def _charged(m, p):
    return m["projects"][p]["delivered_gpu_h"]


@functools.lru_cache(maxsize=None)
def _notice(policy, grace):
    # 1 x 8. a (A, 8, protected 1 h, 3 h of work) from 0; b (B, 8, protected 1 h, 1 h of
    # work) submitted at 600.
    jobs = [Job("a", "A", 8, min_runtime_s=H, duration_s=3 * H),
            Job("b", "B", 8, min_runtime_s=H, duration_s=H, submit_time=600.0)]
    return _run(_sc(jobs, grace_s=grace), policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_notice_keeps_the_job_running_and_charged_until_the_grace_ends_then_the_next_job_starts(policy):
    # grace 300. 1800: a protected, b waits. 3600: a past protection, B (usage 0) ranks
    # first: notice to a (grace 300, needed_by b); a runs on to 3900 (3900 % 600 = 300 s
    # lost: 2400 GPU-s; 10800 - 3600 = 7200 s left); b starts at 3900 when the GPUs are
    # released, protected to 7500 = its end. 5400: a waits (b protected); 7200: nothing new,
    # no refresh yet; b ends 7500; 9000: a resumes, 9000 -> 16200. A is charged its notice as
    # allocated time: 8 x (3900 + 7200) s = 24.667 GPU-h; B 8 GPU-h; nothing unallocated.
    res, m, w = _notice(policy, 300.0)
    assert _ivs(res, "a") == [(0.0, 3900.0), (9000.0, 16200.0)]
    assert _ivs(res, "b") == [(3900.0, 7500.0)]
    p = _plan_at(w, 3600.0)
    assert pre(p) == {"a": ("PreemptedForFairShare", ("b",))}
    assert [x.grace_s for x in p.preemptions] == [300.0]
    assert where(p) == {"b": ("h100", ("n1",), True)}
    assert pend(_plan_at(w, 5400.0)) == {"a": "WaitingForCapacity"}
    assert pre(_plan_at(w, 5400.0)) == {}
    assert _decisions(w) == [0.0, 1800.0, 3600.0, 5400.0, 9000.0]
    a = _rec(res, "a")
    assert (a.completed, a.preemptions, a.lost_gpu_s, a.end_time) == (True, 1, 2400.0, 16200.0)
    assert _rec(res, "b").first_start == 3900.0
    assert _charged(m, "A") == pytest.approx(8 * 11100 / H)
    assert _charged(m, "B") == pytest.approx(8.0)
    assert m["projects"]["A"]["unallocated_gpu_h"] == 0 == m["projects"]["B"]["unallocated_gpu_h"]


@pytest.mark.parametrize("policy", POLICIES)
def test_a_notice_longer_than_an_epoch_is_never_given_twice_and_no_plan_is_made_on_its_gpus(policy):
    # grace 2500 > epoch 1800. 3600: notice to a, it stops at 6100 (6100 % 600 = 100 s lost:
    # 800 GPU-s; 10800 - 6000 = 4800 s left); b starts at 6100 (protected to 9700 = its end).
    # 5400: nothing waits (b counts as started): no decision. 7200: a waits. 9700 b ends;
    # 10800: a resumes, 10800 -> 15600. One notice, one preemption.
    res, m, w = _notice(policy, 2500.0)
    assert _ivs(res, "a") == [(0.0, 6100.0), (10800.0, 15600.0)]
    assert _ivs(res, "b") == [(6100.0, 9700.0)]
    assert _decisions(w) == [0.0, 1800.0, 3600.0, 7200.0, 10800.0]
    assert [s.now for s, p in w.seen if p.preemptions] == [3600.0]
    a = _rec(res, "a")
    assert (a.preemptions, a.lost_gpu_s) == (1, 800.0)
    assert _charged(m, "A") == pytest.approx(8 * (6100 + 4800) / H)
    assert _charged(m, "B") == pytest.approx(8.0)


@pytest.mark.parametrize("work", [3700.0, 3900.0], ids=["inside", "at-the-stop"])
@pytest.mark.parametrize("policy", POLICIES)
def test_a_job_finishing_inside_its_notice_completes_and_the_next_job_starts_at_its_end(policy, work):
    # grace 300; a has 3700 s (or exactly 3900 s: its work ends at the stop) of work. 3600: a
    # past protection, B ranks first: notice to a. a finishes at `work` inside its notice:
    # completed, nothing lost, not requeued; b starts then (the GPUs are released early),
    # runs 1 h. A charged 8 x work, B 8 GPU-h.
    jobs = [Job("a", "A", 8, min_runtime_s=H, duration_s=work),
            Job("b", "B", 8, min_runtime_s=H, duration_s=H, submit_time=600.0)]
    res, m, w = _run(_sc(jobs, grace_s=300.0), policy)
    assert pre(_plan_at(w, 3600.0)) == {"a": ("PreemptedForFairShare", ("b",))}
    assert _ivs(res, "a") == [(0.0, work)]
    assert _ivs(res, "b") == [(work, work + H)]
    a = _rec(res, "a")
    assert (a.completed, a.end_time, a.lost_gpu_s) == (True, work, 0.0)
    assert _charged(m, "A") == pytest.approx(8 * work / H)
    assert _charged(m, "B") == pytest.approx(8.0)


@functools.lru_cache(maxsize=None)
def _twice(policy):
    # 1 x 8, grace 0. a (A, 8, protected 1 h, 4 h of work) from 0; b and c (B, 8, protected
    # 1 h, 1 h of work) submitted at 600 and 7300.
    jobs = [Job("a", "A", 8, min_runtime_s=H, duration_s=4 * H),
            Job("b", "B", 8, min_runtime_s=H, duration_s=H, submit_time=600.0),
            Job("c", "B", 8, min_runtime_s=H, duration_s=H, submit_time=7300.0)]
    return _run(_sc(jobs), policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_job_preempted_twice_resumes_each_time_from_its_checkpoint_and_is_never_lost(policy):
    # 3600: a (past protection) yields to b (B usage 0). b 3600 -> 7200. 7200: a resumes
    # (protected to 10800; 14400 - 3600 = 10800 s left). c at 7300 waits (9000: a protected).
    # 10800: usage A 16, B 8 GPU-h: B first, a yields again (7200 s left); c 10800 -> 14400;
    # a resumes 14400 -> 21600. Checkpoints every 600 s: nothing lost. A 32, B 16 GPU-h.
    res, m, w = _twice(policy)
    assert _ivs(res, "a") == [(0.0, 3600.0), (7200.0, 10800.0), (14400.0, 21600.0)]
    assert _ivs(res, "b") == [(3600.0, 7200.0)]
    assert _ivs(res, "c") == [(10800.0, 14400.0)]
    assert [(s.now, pre(p)) for s, p in w.seen if p.preemptions] == [
        (3600.0, {"a": ("PreemptedForFairShare", ("b",))}),
        (10800.0, {"a": ("PreemptedForFairShare", ("c",))})]
    assert pend(_plan_at(w, 9000.0)) == {"c": "WaitingForCapacity"}
    a = _rec(res, "a")
    assert (a.completed, a.preemptions, a.lost_gpu_s, a.first_start, a.end_time) == (
        True, 2, 0.0, 0.0, 21600.0)
    assert (_charged(m, "A"), _charged(m, "B")) == (pytest.approx(32.0), pytest.approx(16.0))
    assert m["preemptions"]["count"] == 2


@pytest.mark.parametrize("policy", POLICIES)
def test_the_usage_each_decision_sees_is_exactly_what_each_project_ran_until_then(policy):
    # Per project, per epoch, across both preemptions and resumes of the case above: the
    # charged GPU-hours up to each decision (running jobs' runs so far included), by hand:
    #   0: A 0, B 0; 1800: A 4; 3600: A 8, B 0; 7200: A 8, B 8; 9000: A 12, B 8;
    #   10800: A 16, B 8; 14400: A 16, B 16.
    # A and B have equal shares, hence the same entitled GPU-hours in the window: the usage
    # ratios the snapshot carries are in the ratio of the charged GPU-hours, and ratio x
    # entitled is the same entitled figure for both.
    res, m, w = _twice(policy)
    want = {1800.0: (4, 0), 3600.0: (8, 0), 7200.0: (8, 8), 9000.0: (12, 8),
            10800.0: (16, 8), 14400.0: (16, 16)}
    seen = {s.now: s for s, _ in w.seen}
    assert set(want) <= set(seen)
    for t, (ua, ub) in want.items():
        s = seen[t]
        ra = float(s.usage_ratio[s.org.index["A"]])
        rb = float(s.usage_ratio[s.org.index["B"]])
        assert (ra > 0) == (ua > 0) and (rb > 0) == (ub > 0), t
        if ub:
            assert ra / rb == pytest.approx(ua / ub), t
        # the window's entitled GPU-hours implied by each ratio are equal (one figure per t)
        ent = ua / ra
        if ub:
            assert ub / rb == pytest.approx(ent), t
    # and over the whole run the ledger charged exactly the allocated run intervals per project
    cfg = res.config
    led = Ledger(cfg.gpu_types, OrgTree.build(cfg.org, [g.name for g in cfg.gpu_types]), cfg.policy)
    led.record_intervals(res.intervals)
    cols = led.columns()
    names = led.tree.names
    for p, gpu_h in (("A", 32.0), ("B", 16.0)):
        mine = cols["org"] == names.index(p)
        assert float(np.sum((cols["charge"] * (cols["end"] - cols["start"]))[mine])) / H == \
            pytest.approx(gpu_h), p


@pytest.mark.parametrize("policy", POLICIES)
def test_a_min_runtime_longer_than_the_run_protects_the_job_to_the_end(policy):
    # 4 h run. a (A, 8, min_runtime 6 h: protected to 21600, past the run's end) from 0; b
    # (B, 8, 1 h) at 600 waits the whole run though B ranks first: no plan preempts a. At the
    # end a's run is cut at 14400 and charged: A 32 GPU-h, B 0; b never started, not lost.
    jobs = [Job("a", "A", 8, min_runtime_s=6 * H, duration_s=10 * H),
            Job("b", "B", 8, min_runtime_s=H, duration_s=H, submit_time=600.0)]
    res, m, w = _run(_sc(jobs, duration=4 * H), policy)
    assert _ivs(res, "a") == [(0.0, 14400.0)]
    assert _ivs(res, "b") == []
    assert all(not p.preemptions for _, p in w.seen)
    assert all(pend(p) == {"b": "WaitingForCapacity"} for s, p in w.seen if s.now >= 1800)
    b = _rec(res, "b")
    assert (b.first_start, b.end_time, b.completed) == (None, None, False)
    assert (_charged(m, "A"), _charged(m, "B")) == (pytest.approx(32.0), 0.0)


@pytest.mark.parametrize("policy", POLICIES)
def test_unallocated_work_in_its_notice_is_never_charged_and_resumes_after_allocated_work(policy):
    # grace 300. u (A, 8, min_runtime 0: unallocated, 10 h of work) from 0; b (B, 8,
    # protected 1 h, 1 h of work) at 600. 1800: u yields at once (PreemptedUnallocated,
    # needed_by b), runs its notice to 2100 (300 s lost: 2400 GPU-s; 36000 - 1800 = 34200 s
    # left); b 2100 -> 5700. 3600: u waits (UnallocatedYields); b ends 5700; 7200: u resumes
    # -> 41400. A is charged nothing, its notice included (unallocated 8 x 36300 s); B 8 GPU-h.
    jobs = [Job("u", "A", 8, min_runtime_s=0.0, duration_s=10 * H),
            Job("b", "B", 8, min_runtime_s=H, duration_s=H, submit_time=600.0)]
    res, m, w = _run(_sc(jobs, grace_s=300.0), policy)
    assert pre(_plan_at(w, 1800.0)) == {"u": ("PreemptedUnallocated", ("b",))}
    assert pend(_plan_at(w, 3600.0)) == {"u": "UnallocatedYields"}
    assert _ivs(res, "u") == [(0.0, 2100.0), (7200.0, 41400.0)]
    assert _ivs(res, "b") == [(2100.0, 5700.0)]
    assert all(not iv.allocated for iv in res.intervals if iv.job_id == "u")
    assert _rec(res, "u").lost_gpu_s == 2400.0
    assert _charged(m, "A") == 0.0
    assert m["projects"]["A"]["unallocated_gpu_h"] == pytest.approx(8 * 36300 / H)
    assert _charged(m, "B") == pytest.approx(8.0)


@functools.lru_cache(maxsize=None)
def _drain_protected(policy):
    # 1 x 8 (n1), grace 60, 4 h run. a1 (A, 8, protected 2 h, 6 h of work) from 0; n1
    # drains at 1 h.
    jobs = [Job("a1", "A", 8, min_runtime_s=2 * H, duration_s=6 * H)]
    return _run(_sc(jobs, grace_s=60.0, duration=4 * H,
                    events=(NodeEvent(H, ("n1",), NodeState.DRAIN),)), policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_drain_that_needs_a_protected_job_waits_for_its_protection_and_says_so(policy):
    # 3600: n1 drains; a1 is protected to 7200: it stays, the drain says a1 stays and the
    # node is empty at 7200 + 60 (notice at the protection end, then the grace). 5400: the
    # same. 7200: a1 gets notice (PreemptedNodeDrain), leaves at 7260 (60 s lost: 480 GPU-s),
    # requeued; it cannot go anywhere (the only node drains). 9000: n1 is empty, ready for
    # repair; a1 waits with NodeDraining. A charged 8 x 7260 s.
    from optalloc.cli.drains import drain_lines

    res, m, w = _drain_protected(policy)
    p = _plan_at(w, 3600.0)
    assert pre(p) == {} and set(where(p)) == {"a1"}
    assert [(d.node, d.staying, d.leaving, d.empty_at, d.ready) for d in p.drains] == [
        ("n1", ("a1",), (), 7260.0, False)]
    (line,) = drain_lines(plan_to_dict(p))
    assert line.startswith("drain n1: 1 protected job(s) stay: a1; empty by ")
    s = [s for s, q in w.seen if s.now == 3600.0][0]
    assert explain(s, p, "a1")["protected_until"] == 7200.0
    p = _plan_at(w, 7200.0)
    assert pre(p) == {"a1": ("PreemptedNodeDrain", ())}
    assert [(d.staying, d.leaving, d.empty_at, d.ready) for d in p.drains] == [
        ((), ("a1",), 7260.0, False)]
    p = _plan_at(w, 9000.0)
    assert [(d.staying, d.leaving, d.ready) for d in p.drains] == [((), (), True)]
    assert pend(p) == {"a1": "NodeDraining"}
    assert _ivs(res, "a1") == [(0.0, 7260.0)]
    assert _rec(res, "a1").lost_gpu_s == 480.0
    assert _charged(m, "A") == pytest.approx(8 * 7260 / H)


# ============================================================ more contract edges

def _no_share_org():
    # A has no share on b200 (its work there is unallocated); B has all of b200
    from optalloc.types import OrgNode
    return OrgNode("root", children=(OrgNode("A", share_by_type={"b200": 0.0}), OrgNode("B")))


def test_work_on_a_type_where_its_project_has_no_share_is_never_protected():
    # one b200 node. A's x (8 GPUs, min_runtime 2 h) started 9.9 h: it would be protected to
    # 11.9 h if allocated, but A has no share on b200, so it runs as unallocated work: never
    # protected, it yields at once to B's allocated b (PreemptedUnallocated, needed_by b).
    from optalloc.types import Node, Placement, NodeAlloc, JobState
    x = Job("x", "A", 8, min_runtime_s=2 * H, state=JobState.RUNNING, start_time=9.9 * H,
            placement=Placement("x", "b200", (NodeAlloc("m00", tuple(range(8))),),
                                allocated=False))
    s = snap([Node("m00", "b200", 8)], _no_share_org(),
             [x, Job("b", "B", 8, min_runtime_s=H)], types=("b200",))
    plan = decide(s)
    assert where(plan) == {"b": ("b200", ("m00",), True)}
    assert pre(plan) == {"x": ("PreemptedUnallocated", ("b",))}


@pytest.mark.parametrize("policy", POLICIES)
def test_a_non_resumable_job_runs_its_notice_is_charged_for_it_and_then_ends_for_good(policy):
    # grace 300, a non-resumable (3 h of work). 3600: notice; a stops at 3900 and ends (not
    # completed; its whole run lost: 8 x 3900 GPU-s), never restarts. b 3900 -> 7500. A is
    # charged its whole run, notice included: 8 x 3900 s; B 8 GPU-h.
    jobs = [Job("a", "A", 8, min_runtime_s=H, duration_s=3 * H, resumable=False),
            Job("b", "B", 8, min_runtime_s=H, duration_s=H, submit_time=600.0)]
    res, m, w = _run(_sc(jobs, grace_s=300.0), policy)
    assert _ivs(res, "a") == [(0.0, 3900.0)]
    assert _ivs(res, "b") == [(3900.0, 7500.0)]
    a = _rec(res, "a")
    assert (a.completed, a.end_time, a.lost_gpu_s) == (False, 3900.0, 8 * 3900.0)
    assert _charged(m, "A") == pytest.approx(8 * 3900 / H)
    assert _charged(m, "B") == pytest.approx(8.0)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_node_going_down_during_a_notice_kills_the_job_and_the_start_waiting_for_it_never_begins(policy):
    # grace 300. 3600: notice to a, b planned onto n1 from 3900. n1 goes down at 3700: a is
    # killed at once (3700 % 600 = 100 s lost: 800 GPU-s; 10800 - 3600 = 7200 s left); b
    # never began (no interval, back to the queue). n1 up at 7200 (a tick): B (usage 0) ranks
    # first: b 7200 -> 10800; 10800: a resumes -> 18000. A charged 8 x (3700 + 7200) s.
    jobs = [Job("a", "A", 8, min_runtime_s=H, duration_s=3 * H),
            Job("b", "B", 8, min_runtime_s=H, duration_s=H, submit_time=600.0)]
    ev = (NodeEvent(3700.0, ("n1",), NodeState.DOWN), NodeEvent(2 * H, ("n1",), NodeState.UP))
    res, m, w = _run(_sc(jobs, grace_s=300.0, events=ev), policy)
    assert _ivs(res, "a") == [(0.0, 3700.0), (10800.0, 18000.0)]
    assert _ivs(res, "b") == [(7200.0, 10800.0)]
    assert _rec(res, "a").lost_gpu_s == 800.0
    assert _rec(res, "b").first_start == 7200.0
    assert _charged(m, "A") == pytest.approx(8 * 10900 / H)
    assert _charged(m, "B") == pytest.approx(8.0)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_node_draining_during_a_notice_takes_no_new_work_from_the_plan_before(policy):
    # grace 300; 2 x 8 (n1 h100, n2 a100; a and b ask h100 only). 3600: notice to a, b
    # planned onto n1 from 3900. n1 drains at 3700, before b has begun: a drain node takes
    # no new work (rule 5), so b must not begin there; a leaves at 3900 (300 s lost: 2400
    # GPU-s) and nothing runs on n1 after; b and a wait (h100 only) to the end (4 h).
    jobs = [Job("a", "A", 8, gpu_types=("h100",), min_runtime_s=H, duration_s=3 * H),
            Job("b", "B", 8, gpu_types=("h100",), min_runtime_s=H, duration_s=H,
                submit_time=600.0)]
    ev = (NodeEvent(3700.0, ("n1",), NodeState.DRAIN),)
    res, m, w = _run(_sc(jobs, nodes=(("h100", 8), ("a100", 8)), types=("h100", "a100"),
                         grace_s=300.0, events=ev, duration=4 * H), policy)
    assert _ivs(res, "a") == [(0.0, 3900.0)]
    assert _ivs(res, "b") == []
    b = _rec(res, "b")
    assert (b.first_start, b.end_time, b.completed) == (None, None, False)
    assert _rec(res, "a").lost_gpu_s == 2400.0
    assert [d.empty_at for d in _plan_at(w, 5400.0).drains] == [5400.0]


def test_a_gang_that_cannot_start_for_a_protection_preempts_nothing_past_protection_for_nothing():
    # 2 x 8. A's a1 on n00 started 8 h (past its 1 h protection) and a2 on n01 started 9.5 h
    # (protected to 10.5 h). B (usage 0, ranks first) wants one 16-GPU gang. The gang needs
    # both nodes and n01 is protected: stopping a1 would leave 8 GPUs idle for nothing (rule
    # 6; without the lookahead no reservation is named). Plan: nothing preempted, a1 and a2
    # keep their nodes, the gang waits.
    s = snap(nodes_of(2, 8), flat_org({"A": 1, "B": 1}),
             [running("a1", "A", "h100", [("n00", range(8))], start=8 * H),
              running("a2", "A", "h100", [("n01", range(8))], start=9.5 * H),
              Job("g", "B", 16, min_runtime_s=H)],
             usage={"A": 1.0, "B": 0.0})
    plan = decide(s)
    assert pre(plan) == {}
    assert where(plan) == {"a1": ("h100", ("n00",), True), "a2": ("h100", ("n01",), True)}
    assert set(pend(plan)) == {"g"}


@pytest.mark.parametrize("start, stopped", [(9.5 * H, False), (8 * H, True)],
                         ids=["protected-stays", "past-protection-yields"])
def test_a_higher_priority_job_of_the_same_project_waits_for_the_protection_then_takes_its_place(
        start, stopped):
    # 1 x 8, only A has work. A's a1 (priority 0) holds n00; A's a2 (priority 10, 8 GPUs)
    # waits. Protected (started 9.5 h): nothing moves, a2 waits. Past protection (started
    # 8 h): a1 yields to a2 (PreemptedForFairShare, needed_by a2; the message names the
    # priorities), a2 on n00.
    s = snap(nodes_of(1, 8), flat_org({"A": 1, "B": 1}),
             [running("a1", "A", "h100", [("n00", range(8))], start=start),
              Job("a2", "A", 8, min_runtime_s=H, priority=10)])
    plan = decide(s)
    if stopped:
        assert where(plan) == {"a2": ("h100", ("n00",), True)}
        assert pre(plan) == {"a1": ("PreemptedForFairShare", ("a2",))}
        assert "a higher-priority job of project A takes its place (priority 10 > 0)" in \
            plan.preemptions[0].message
    else:
        assert where(plan) == {"a1": ("h100", ("n00",), True)} and pre(plan) == {}
        assert set(pend(plan)) == {"a2"}


@pytest.mark.parametrize("policy", POLICIES)
def test_a_gang_taking_two_jobs_gpus_starts_when_the_last_of_them_has_left(policy):
    # 2 x 8, grace 300. A's a1 (8, protected 1 h, 3700 s of work) and a2 (8, protected 1 h,
    # 3 h of work) from 0, one per node. B's 16-GPU gang g (protected 1 h, 1 h of work) at
    # 600. 3600: both past protection, B ranks first, g needs both nodes: notice to both.
    # a1 finishes at 3700 inside its notice; a2 stops at 3900 (300 s lost: 2400 GPU-s; 7200
    # s left); g starts at 3900 whole, runs to 7500. 5400: a2 waits (g protected); 9000:
    # a2 resumes -> 16200. A charged 8 x 3700 + 8 x (3900 + 7200) s, B 16 GPU-h.
    jobs = [Job("a1", "A", 8, min_runtime_s=H, duration_s=3700.0),
            Job("a2", "A", 8, min_runtime_s=H, duration_s=3 * H),
            Job("g", "B", 16, min_runtime_s=H, duration_s=H, submit_time=600.0)]
    res, m, w = _run(_sc(jobs, nodes=(("h100", 8),) * 2, grace_s=300.0), policy)
    p = _plan_at(w, 3600.0)
    assert {k: v[0] for k, v in pre(p).items()} == {"a1": "PreemptedForFairShare",
                                                     "a2": "PreemptedForFairShare"}
    assert where(p) == {"g": ("h100", ("n1", "n2"), True)}
    assert _ivs(res, "a1") == [(0.0, 3700.0)]
    assert _ivs(res, "a2") == [(0.0, 3900.0), (9000.0, 16200.0)]
    assert _ivs(res, "g") == [(3900.0, 7500.0)]
    assert (_rec(res, "a1").completed, _rec(res, "a2").lost_gpu_s) == (True, 2400.0)
    assert _charged(m, "A") == pytest.approx(8 * (3700 + 3900 + 7200) / H)
    assert _charged(m, "B") == pytest.approx(16.0)


def test_a_reservations_expected_start_counts_the_notice_of_the_job_it_waits_for():
    # 2 x 8, lookahead on (max_reservations 1), grace 60. n00 free; A's a2 on n01 protected
    # to 10.5 h. B's 16-GPU gang g (ranks first) reserves n00 + n01. a2 gets notice at
    # 10.5 h and keeps its GPUs through the 60 s grace: the gang can start at 10.5 h + 60 s.
    s = snap(nodes_of(2, 8), flat_org({"A": 1, "B": 1}),
             [running("a2", "A", "h100", [("n01", range(8))], start=9.5 * H),
              Job("g", "B", 16, min_runtime_s=H)],
             usage={"A": 1.0, "B": 0.0}, policy=Policy(max_reservations=1, grace_s=60.0))
    plan = decide(s, dominance=False)
    assert pend(plan) == {"g": "Reserved"} and pre(plan) == {}
    (r,) = plan.reservations
    assert (set(r.nodes), r.expected_start) == ({"n00", "n01"}, 10.5 * H + 60.0)


@pytest.mark.parametrize("start, resumable, outcome", [
    (9.5 * H, True, "protected"), (8 * H, True, "moved"), (8 * H, False, "ends")],
    ids=["protected-never-moves", "past-protection-moves", "non-resumable-never-moves"])
def test_a_job_is_moved_to_make_room_only_past_its_protection_and_only_if_resumable(
        start, resumable, outcome):
    # 2 x 8. A's a1 (4 GPUs, n00 0-3) started `start`, A's a2 (4 GPUs, n01 0-3) started 9.5 h
    # (protected to 10.5 h). B (usage 0, ranks first) wants one 8-GPU single-node job b.
    # A holds 8 = its entitlement. b fits only if n00 is emptied.
    #  protected: a1 cannot move; nothing changes, b waits.
    #  past protection, resumable: a1 restarts at once on n01's free half (Moved, needed_by
    #    b), b takes n00: A 8, B 8.
    #  past protection, non-resumable: a1 never moves; it is preempted (ends) for b, which
    #    ranks first: b on n00, n01's other half idle (nothing else waits).
    a1 = running("a1", "A", "h100", [("n00", range(4))], start=start)
    if not resumable:
        import dataclasses
        a1 = dataclasses.replace(a1, resumable=False)
    s = snap(nodes_of(2, 8), flat_org({"A": 1, "B": 1}),
             [a1, running("a2", "A", "h100", [("n01", range(4))], start=9.5 * H),
              Job("b", "B", 8, min_runtime_s=H)],
             usage={"A": 1.0, "B": 0.0})
    plan = decide(s)
    a2 = {"a2": ("h100", ("n01",), True)}
    if outcome == "protected":
        assert pre(plan) == {} and where(plan) == {"a1": ("h100", ("n00",), True), **a2}
        assert set(pend(plan)) == {"b"}
    elif outcome == "moved":
        assert pre(plan) == {"a1": ("Moved", ("b",))}
        assert where(plan) == {"a1": ("h100", ("n01",), True), "b": ("h100", ("n00",), True),
                               **a2}
    else:
        assert pre(plan) == {"a1": ("PreemptedForFairShare", ("b",))}
        assert where(plan) == {"b": ("h100", ("n00",), True), **a2}


@pytest.mark.parametrize("policy", POLICIES)
def test_work_where_its_project_has_no_share_runs_unprotected_and_uncharged_over_epochs(policy):
    # one b200 node, grace 0; A has no share on b200. x (A, 8, min_runtime 2 h, 3 h of work)
    # from 0 runs as unallocated work; b (B, 8, protected 1 h, 1 h) at 600. 1800: x is not
    # protected (whatever its min_runtime): it yields to b (PreemptedUnallocated; 1800 % 600 =
    # 0 lost; 9000 s left); b 1800 -> 5400; x resumes 5400 -> 14400. A is charged nothing
    # (unallocated 8 x 10800 s = 24 GPU-h); B 8 GPU-h.
    jobs = [Job("x", "A", 8, min_runtime_s=2 * H, duration_s=3 * H),
            Job("b", "B", 8, min_runtime_s=H, duration_s=H, submit_time=600.0)]
    res, m, w = _run(_sc(jobs, nodes=(("b200", 8),), types=("b200",), org=_no_share_org()),
                     policy)
    assert pre(_plan_at(w, 1800.0)) == {"x": ("PreemptedUnallocated", ("b",))}
    assert _ivs(res, "x") == [(0.0, 1800.0), (5400.0, 14400.0)]
    assert _ivs(res, "b") == [(1800.0, 5400.0)]
    assert all(not iv.allocated for iv in res.intervals if iv.job_id == "x")
    assert _charged(m, "A") == 0.0
    assert m["projects"]["A"]["unallocated_gpu_h"] == pytest.approx(24.0)
    assert _charged(m, "B") == pytest.approx(8.0)


# ============================================================ the simulated runner, by hand

@pytest.mark.parametrize("state", [NodeState.DOWN, NodeState.DRAIN], ids=["down", "drain"])
def test_a_job_moving_onto_a_node_that_goes_away_during_its_notice_is_requeued_not_started_there(state):
    # the simulated runner alone, grace 300. a1 (4 GPUs, n1 0-3) and a2 (4 GPUs, n2 0-3) run
    # from 0. The plan at 3600 moves a1 to n2 4-7 (Moved: notice, restart after its stop at
    # 3900) and starts b (8) on n1 when a1 has left. n2 goes down (or drains) at 3700: a
    # down node runs nothing and a draining one takes no new work, so at 3900 a1 stops and is
    # requeued (3900 % 600 = 300 s lost x 4 GPUs), never started on n2; b starts on n1.
    from optalloc.runners.base import EventKind
    from optalloc.sim.runner import SimulatedRunner
    from optalloc.types import Node, NodeAlloc, Placement, Plan

    def pl(jid, node, gpus):
        return Placement(jid, "h100", (NodeAlloc(node, tuple(gpus)),))

    r = SimulatedRunner([Node("n1", "h100", 8), Node("n2", "h100", 8)], grace_s=300.0,
                        checkpoint_interval_s=600.0)
    jobs = {"a1": Job("a1", "A", 4, min_runtime_s=H), "a2": Job("a2", "A", 4, min_runtime_s=H),
            "b": Job("b", "B", 8, min_runtime_s=H)}
    r.apply(Plan(0.0, placements=(pl("a1", "n1", range(4)), pl("a2", "n2", range(4)))), jobs, 0.0)
    r.apply(Plan(3600.0, placements=(pl("a1", "n2", range(4, 8)), pl("a2", "n2", range(4)),
                                     pl("b", "n1", range(8)))), jobs, 3600.0)
    r.set_node_state("n2", state, 3700.0)
    obs = r.observe(4000.0)
    ev = [(e.job_id, e.kind, e.time) for e in obs.events]
    assert ("a1", EventKind.REQUEUED, 3900.0) in ev
    assert ("a1", EventKind.STARTED, 3900.0) not in ev
    assert "a1" not in obs.running
    assert obs.running["b"] == (pl("b", "n1", range(8)), 3900.0)
    assert r.stats["a1"].lost_gpu_s == 4 * 300.0


@pytest.mark.parametrize("policy", POLICIES)
def test_a_decision_put_off_to_a_notices_end_when_nothing_waits_any_more_does_not_stall_the_run(policy):
    # 3 x 8, grace 2500, 10 h run. j0 (A, 8, protected 600 s, 2 h of work) and j1 (A, 2,
    # protected 1 h, 5 h) at 2000: 3600 j0 takes n1 (empty nodes fill in node order), j1 n2.
    # n1 drains at 3650. 5400: j0 is past protection on a drain: it moves to n3 (Moved,
    # notice: it stops at 7900 and restarts there). 7200: j1's protection ends, a decision
    # is wanted, a node drains and a grace runs: put off to 7900. 7350: n1 up. 7900: j0 stops
    # (4300 s run, 100 s lost: 800 GPU-s; 3000 s left) and restarts on n3 -> 10900; nothing
    # waits and nothing drains, so no decision is needed, and the run goes on to its end:
    # j1 3600 -> 21600. (greedy requeues j0 at 5400 instead of moving it: then j0 waits at
    # 7900 and that decision places it at once, the same run intervals.)
    import signal

    def stalled(*_):
        raise TimeoutError("the simulation stalled")

    jobs = [Job("j0", "A", 8, min_runtime_s=600.0, duration_s=2 * H, submit_time=2000.0),
            Job("j1", "A", 2, min_runtime_s=H, duration_s=5 * H, submit_time=2000.0)]
    ev = (NodeEvent(3650.0, ("n1",), NodeState.DRAIN), NodeEvent(7350.0, ("n1",), NodeState.UP))
    sc = _sc(jobs, nodes=(("h100", 8),) * 3, grace_s=2500.0, events=ev, duration=10 * H)
    old = signal.signal(signal.SIGALRM, stalled)
    signal.alarm(60)
    try:
        res, m, w = _run(sc, policy)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert where(_plan_at(w, 3600.0)) == {"j0": ("h100", ("n1",), True),
                                           "j1": ("h100", ("n2",), True)}
    p = _plan_at(w, 5400.0)
    if policy == "ilp":
        assert pre(p) == {"j0": ("Moved", ())}
        assert where(p)["j0"] == ("h100", ("n3",), True)
        assert _decisions(w) == [3600.0, 5400.0]
    else:  # greedy moves nobody at once: j0 is requeued and placed again when it has left
        assert pre(p) == {"j0": ("PreemptedNodeDrain", ())} and "j0" not in where(p)
        assert _decisions(w) == [3600.0, 5400.0, 7900.0]
    assert _ivs(res, "j0") == [(3600.0, 7900.0), (7900.0, 10900.0)]
    assert _ivs(res, "j1") == [(3600.0, 21600.0)]
    j0 = _rec(res, "j0")
    assert (j0.completed, j0.lost_gpu_s, j0.end_time) == (True, 800.0, 10900.0)
