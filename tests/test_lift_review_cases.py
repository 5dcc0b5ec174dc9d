"""Outside review of stop 50 (8111e19..4b71c44): an idle sibling's share in the floors.

Under review: targets.lifted_floors / owed_nodes / nested_floors(top=...), org.share_capped,
OrgTree.fair_shares, Ledger.shortfalls, Snapshot.fair_shortfall, the cron's recorded inputs and
`optalloc explain`, true_causes.others_could_shrink / past_target_text.

Passing tests pin behaviour that is right; `xfail(strict=True)` tests are faults, each with a
diagnosis in its reason. The review's four faults of this stop are fixed (float noise read as
a debt, a program's lifted floor split past its projects' targets, and two untrue pending
reasons); of two older plan faults it found, one is fixed (a protected restart held its
team's order) and one was no fault (its better plan broke another team's own order).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optalloc.epoch import run_epoch
from optalloc.ledger import Ledger
from optalloc.model.build import build_model
from optalloc.model.targets import lifted_floors, nested_floors, owed_nodes
from optalloc.org import OrgTree
from optalloc.plan.holder_lines import floor_cut
from optalloc.plan.score import score
from optalloc.sim.invariants import check_plan
from optalloc.snapshot import build_snapshot
from optalloc.types import Config, GpuType, Interval, Job, OrgNode, Policy
from tests.test_epoch_properties import instances
from tests.test_epoch_toy import flat_org, nodes_of, queued, running

H = 3600.0


def cfg_of(org, nodes, jobs, types=(GpuType("h100"),)):
    return Config(tuple(types), tuple(nodes), org, Policy(), tuple(jobs))


def gpus_by_project(snap, plan) -> dict:
    out: dict = {}
    proj = {j.id: j.project for j in snap.jobs}
    for p in plan.placements:
        out[proj[p.job_id]] = out.get(proj[p.job_id], 0) + sum(len(a.gpus) for a in p.nodes)
    return out


# ============================================================================ 1. lifted floors


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(instances())
def test_lifted_floors_stay_within_demand_targets_and_capacity_on_random_epochs(snap):
    """The property suite's random epochs (1-2 types, pooled or per type, a program, drain and
    down nodes, random fair shortfalls): the lift never lowers a floor, never puts a
    top-level floor above max(its raw floor, its target), never makes the floors of a type
    (leaves, or the top level) sum above its up GPUs, and pooled, never above a type's
    target. (1,500 such epochs run by hand: 97 lifted, none broke these.)"""
    em = build_model(snap)
    raw = build_model(dataclasses.replace(snap, fair_shortfall=None)).tg
    tg, org = em.tg, snap.org
    cap = snap.capacity_by_type(up_only=True)
    assert (tg.floor >= raw.floor - 1e-9).all()
    for F in (tg.floor[org.is_leaf], tg.floor[org.depth == 1]):
        assert (F.sum(axis=0) <= cap + 1e-9).all() or (
            (raw.floor[org.is_leaf].sum(axis=0) > cap + 1e-9).any())  # not the lift's doing
    if tg.pooled:
        assert (tg.floor <= tg.target + 1e-9).all()
        assert (tg.share_floor[:, 0] <= tg.target.sum(axis=1) + 1e-9).all()
    else:
        top = org.depth == 1
        assert (tg.floor[top] <= np.maximum(raw.floor, tg.target)[top] + 1e-9).all()
        assert (tg.floor <= tg.demand + 1e-9).all() or (raw.floor > raw.demand + 1e-9).any()


def test_pooled_lift_is_split_over_the_types_within_each_types_target_and_capacity():
    # h100 2 x 8 + a100 1 x 8, one billing weight, equal shares: one budget of 24. C idle, A
    # only 16-GPU h100 gangs, B 24 1-GPU jobs. B owed its fair share and ranked first: its
    # pooled floor 8 -> 12 (its part of C's 8), split 6 + 6 over its targets (8 h100, 8 a100)
    nodes = nodes_of(2, 8, "h100", "h") + nodes_of(1, 8, "a100", "a")
    jobs = queued("A", 2, 16, gpu_types=("h100",)) + queued("B", 24, 1)
    cfg = cfg_of(flat_org({"A": 1, "B": 1, "C": 1}), nodes, jobs,
                 (GpuType("h100"), GpuType("a100")))
    snap = build_snapshot(cfg, now=10 * H, usage_ratio={"A": 0.6, "B": 0.3},
                          fair_shortfall={"B": 2.0})
    em = build_model(snap)
    assert em.tg.pooled
    assert em.tg.pool_floor.tolist() == [0.0, 8.0, 12.0, 0.0]
    assert em.floor.tolist() == [[0, 0], [8, 0], [6, 6], [0, 0]]
    assert (em.floor <= em.target).all()
    assert (em.floor[1:].sum(axis=0) <= [16, 8]).all()
    # ranked second, B's target leaves its floor at its raw 8 (rule 1)
    snap2 = build_snapshot(cfg, now=10 * H, usage_ratio={"A": 0.3, "B": 0.6},
                           fair_shortfall={"B": 2.0})
    assert build_model(snap2).tg.pool_floor.tolist() == [0.0, 8.0, 8.0, 0.0]


def _program_with_idle_sibling(fair):
    org = OrgNode("root", children=(OrgNode("P", children=(OrgNode("x"), OrgNode("y"))),
                                    OrgNode("Q"), OrgNode("R")))
    jobs = queued("x", 20, 1) + queued("y", 20, 1) + queued("Q", 20, 1)
    cfg = cfg_of(org, nodes_of(3, 8), jobs)
    return build_snapshot(cfg, now=10 * H, fair_shortfall=fair,
                          usage_ratio={"P": 0.1, "x": 0.05, "y": 0.9, "Q": 0.5})


# Fixed at stop 50 (was a strict xfail):
# lifted_floors shares a program's lifted floor among its projects by entitlement
# (nested_floors), while the targets share the program's spare by the Fair-Tree order inside
# it: P {x, y} owed, ranked first, idle R: P's floor 8 -> 12, split x 6 / y 6, while the
# targets are x 12 / y 4. y's floor (6) is above its target (4) only because of the split, and
# floor_cut then tells a user 'protected jobs hold more GPUs than their projects' floors, so
# the floors share what is left' in an epoch with no protected job; x, ranked first, gets 6 of
# its 12 as floor GPUs, so the leaf rows carry 10 of P's 12. Fix (fix.diff): cap each child's
# share of a lifted floor at max(its raw floor, its target), what it cannot take going to its
# siblings (x 8, y 4).
def test_a_programs_lifted_floor_is_not_split_past_its_projects_targets():
    snap = _program_with_idle_sibling({"P": 5.0, "x": 5.0})
    em = build_model(snap)
    i = {n: k for k, n in enumerate(snap.org.names)}
    assert em.floor[i["P"], 0] == 12 and em.target[i["y"], 0] == 4
    assert floor_cut(snap, em, i["y"], 0) == ""  # no cut to explain: nothing protected
    assert em.floor[i["y"], 0] <= em.target[i["y"], 0]
    assert em.floor[i["x"], 0] + em.floor[i["y"], 0] == 12


def test_without_a_fair_shortfall_the_program_case_keeps_its_raw_floors():
    snap = _program_with_idle_sibling({})
    em = build_model(snap)
    assert em.floor[:, 0].tolist() == [0, 8, 4, 4, 8, 0]
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert gpus_by_project(snap, plan) == {"x": 12, "y": 4, "Q": 8}


# ============================================================================ 2. owed_nodes


def _flat(shares: dict, demand: dict, fair: dict, usage=None, nodes=3):
    jobs = []
    for p, n in demand.items():
        jobs += queued(p, n, 1)
    cfg = cfg_of(flat_org(shares), nodes_of(nodes, 8), jobs)
    return build_snapshot(cfg, now=10 * H, usage_ratio=usage or {}, fair_shortfall=fair)


def _owed(snap) -> set:
    return {n for n, x in zip(snap.org.names, owed_nodes(snap)) if x}


@pytest.mark.parametrize("shares, demand, fair, expected", [
    # owed only by the fair measure (no published shortfall given at all)
    ({"A": 1, "B": 1, "C": 1}, {"A": 24, "B": 24}, {"B": 4.0}, {"B"}),
    # both owed the same, nobody else with work: neither is owed beyond its sibling
    ({"A": 1, "B": 1, "C": 1}, {"A": 24, "B": 24}, {"A": 4.0, "B": 4.0}, set()),
    # both owed the same beside a third with work owed nothing: both
    ({"A": 1, "B": 1, "C": 1, "D": 1}, {"A": 24, "B": 24, "D": 24}, {"A": 4.0, "B": 4.0},
     {"A", "B"}),
    # owed per hour of its share: A (share 3) owed 6 GPU-h is owed less than B (share 1) 4
    ({"A": 3, "B": 1, "C": 1}, {"A": 24, "B": 24}, {"A": 6.0, "B": 4.0}, {"B"}),
    # alone with work at the top level: no sibling to be owed beyond
    ({"A": 1, "B": 1, "C": 1}, {"A": 24}, {"A": 40.0}, set()),
    # a zero-share project's work is unallocated: no 'work', so it is no least sibling
    ({"A": 1, "B": 1, "Z": 0}, {"A": 24, "B": 24, "Z": 8}, {"A": 4.0, "B": 4.0}, set()),
], ids=["fair-only", "siblings-both-owed-alone", "both-owed-beside-a-third",
        "per-hour-of-share", "alone", "zero-share-sibling"])
def test_owed_nodes_count_the_fair_shortfall_beyond_the_siblings_with_work(
        shares, demand, fair, expected):
    assert _owed(_flat(shares, demand, fair)) == expected


def test_a_project_owed_inside_a_program_lifts_the_program_as_far_as_its_target():
    # P {x, y} vs Q, R idle: x owed by the fair measure, P not net of y's surplus. The review
    # pinned "nothing moves"; the day-long judge (tests/test_idle_share_judge_cases.py) found
    # that netted, a program whose gang project's whole jobs do not fit beside its sibling
    # never got its turn (A1 16 GPU-hours a day where 144 is owed), so since stop 50 a
    # program counts its projects' own fair shortfalls for the lift (targets.owed_nodes). P,
    # ranked first (target 16), is lifted 8 -> 12 and shares it as every floor is: x, ranked
    # first inside P (target 12), 8; y at its target 4
    org = OrgNode("root", children=(OrgNode("P", children=(OrgNode("x"), OrgNode("y"))),
                                    OrgNode("Q"), OrgNode("R")))
    jobs = queued("x", 20, 1) + queued("y", 20, 1) + queued("Q", 20, 1)
    cfg = cfg_of(org, nodes_of(3, 8), jobs)
    snap = build_snapshot(cfg, now=10 * H, fair_shortfall={"x": 9.0},
                          usage_ratio={"P": 0.1, "x": 0.05, "y": 0.9, "Q": 0.5})
    assert _owed(snap) == {"P", "x"}
    em = build_model(snap)
    raw = build_model(dataclasses.replace(snap, fair_shortfall=None))
    got = dict(zip(snap.org.names, em.floor[:, 0]))
    assert got == {"root": 0, "P": 12, "x": 8, "y": 4, "Q": 8, "R": 0}
    assert (em.floor <= np.maximum(raw.floor, em.target)).all()
    assert dict(zip(snap.org.names, raw.floor[:, 0]))["P"] == 8


def test_per_type_budgets_read_no_fair_shortfall():
    # billing weights that differ: no debt, so nothing is owed and nothing lifted
    nodes = nodes_of(1, 8, "h100", "h") + nodes_of(1, 8, "a100", "a")
    jobs = queued("A", 16, 1) + queued("B", 16, 1)
    cfg = cfg_of(flat_org({"A": 1, "B": 1, "C": 1}), nodes, jobs,
                 (GpuType("h100", 2.0), GpuType("a100", 1.0)))
    snap = build_snapshot(cfg, now=10 * H, usage_ratio={"A": 0.5, "B": 0.1},
                          fair_shortfall={"B": 50.0})
    assert _owed(snap) == set()


# ============================================================================ 3. the ledger


def _ledger(root: OrgNode, lookback_h=24) -> Ledger:
    return Ledger((GpuType("h100"),), OrgTree.build(root, ["h100"]),
                  Policy(lookback_s=lookback_h * H))


# Fixed at stop 50 (was a strict xfail):
# Ledger.shortfalls keeps float noise: max(0, fair - delivered) with no tolerance. 24 GPUs,
# shares A 1 / B 5 / C 5, C idle: A's fair share is 4 GPUs (24 * 1/6), it is delivered exactly
# 4 for 4 hours, and its fair shortfall reads 3.6e-15 GPU-hours. owed_nodes tests
# debt_tilt(...) > 0, so A counts as owed beyond B (0) and its floor is lifted from 2 to 4;
# the cron also records the 3.6e-15 in the plan's inputs. 530 of 4,690 flat cases (cap <= 64,
# shares 1-7, the third idle) whose fair shares are whole GPUs, delivered exactly, read such
# noise. README: 'A project that got what it was owed has no debt'. Fix (fix.diff): shortfalls
# below 1e-6 GPU-hours read as 0 (or owed_nodes compares against a tolerance).
def test_a_project_delivered_exactly_its_fair_share_is_not_owed_and_keeps_its_floor():
    org = flat_org({"A": 1, "B": 5, "C": 5})
    led = _ledger(org)
    led.record_capacity(0, {"h100": 24})
    led.record_demand(0, {"A": 24, "B": 24})
    led.record_interval(Interval("a", "A", "h100", 4, 0, 4 * H))
    led.record_interval(Interval("b", "B", "h100", 20, 0, 4 * H))
    owed, fair = led.shortfalls(4 * H)
    jobs = queued("A", 24, 1) + queued("B", 24, 1)
    snap = build_snapshot(cfg_of(org, nodes_of(3, 8), jobs), now=4 * H, shortfall=owed,
                          fair_shortfall=fair, usage_ratio={"A": 0.5, "B": 1.0})
    raw = build_model(dataclasses.replace(snap, fair_shortfall=None))
    assert build_model(snap).floor[:, 0].tolist() == raw.floor[:, 0].tolist() == [0, 2, 10, 0]
    assert fair == {"root": 0.0, "A": 0.0, "B": 0.0, "C": 0.0}


def _random_tree(draw):
    shares = [draw(st.sampled_from([0, 1, 2, 3, 5])) for _ in range(4)]
    if not any(shares[:2]):
        shares[0] = 1
    if not any(shares[2:]):
        shares[2] = 1
    if draw(st.booleans()):  # a program of two projects beside two top-level projects
        return OrgNode("root", children=(
            OrgNode("P", share=float(draw(st.sampled_from([1, 2]))), children=(
                OrgNode("a", share=float(shares[0])), OrgNode("b", share=float(shares[1])))),
            OrgNode("c", share=float(shares[2])), OrgNode("d", share=float(shares[3]))))
    return OrgNode("root", children=tuple(OrgNode(n, share=float(s))
                                          for n, s in zip("abcd", shares)))


@settings(max_examples=60, deadline=None, database=None)
@given(st.data())
def test_the_fair_share_is_never_below_the_published_owed_and_never_above_demand(data):
    """Random trees (flat, or a program), zero shares, capacity going down and up mid-hour,
    demand changing mid-hour, an open interval, marks: per node and in total, the fair share
    is at least the published owed (min(entitled, demanded), a program summing its
    projects'), at most the node's demand, and all of it at most the entitled GPU-hours."""
    draw = data.draw
    root = _random_tree(draw)
    led = _ledger(root, lookback_h=6)
    hours = 5
    caps = draw(st.lists(st.tuples(st.floats(0, hours * H), st.sampled_from([0, 4, 8, 13, 24])),
                         min_size=1, max_size=6))
    led.record_capacity(0.0, {"h100": 16})
    for t, c in caps:
        led.record_capacity(t, {"h100": c})
    led.record_demand(0.0, {p: draw(st.integers(0, 30)) for p in "abcd"})
    for _ in range(draw(st.integers(0, 6))):
        led.record_demand(draw(st.floats(0, hours * H)),
                          {p: draw(st.sampled_from([0, 1, 3, 8, 40])) for p in "abcd"})
    marks = led.marks()
    later = {p: draw(st.integers(0, 30)) for p in "abcd"}
    # no delivery: the shortfalls are then what each node was owed, in each measure
    owed, fair = led.shortfalls(hours * H, marks=marks)
    led.record_demand(hours * H - 1.0, later)  # after the marks: must not be read
    assert led.shortfalls(hours * H, marks=marks) == (owed, fair)
    od = led.owed_delivered(0.0, hours * H, marks=marks)
    tree = led.tree
    dem = led._per_node(od.demanded_h).sum(axis=1)
    for i, n in enumerate(tree.names[1:], start=1):
        assert fair[n] >= owed[n] - 1e-9
        assert fair[n] <= dem[i] + 1e-9
    top = [n for n, d in zip(tree.names, tree.depth) if d == 1]
    assert sum(fair[n] for n in top) <= od.entitled_h.sum() + 1e-9
    # an open interval counts as delivered
    run_iv = Interval("o", "a", "h100", 2, 0.0, hours * H)
    o2, f2 = led.shortfalls(hours * H, open_intervals=[run_iv], marks=marks)
    assert f2["a"] == pytest.approx(max(fair["a"] - 2 * hours, 0.0), abs=1e-9)


def test_one_project_tree_and_a_zero_share_project():
    led = _ledger(OrgNode("root", children=(OrgNode("only"),)))
    led.record_capacity(0, {"h100": 8})
    led.record_demand(0, {"only": 20})
    led.record_interval(Interval("x", "only", "h100", 5, 0, H))
    assert led.shortfalls(H) == ({"root": 3.0, "only": 3.0}, {"root": 3.0, "only": 3.0})
    # a zero-share project is owed nothing either way; its idle siblings' share goes to the
    # one with a share
    led = _ledger(flat_org({"A": 1, "B": 1, "Z": 0}))
    led.record_capacity(0, {"h100": 8})
    led.record_demand(0, {"A": 8, "Z": 8})
    owed, fair = led.shortfalls(H)
    assert (owed["Z"], fair["Z"], owed["A"], fair["A"]) == (0.0, 0.0, 4.0, 8.0)


def test_capacity_down_mid_hour_and_demand_mid_hour_are_integrated_within_the_hour():
    # 16 GPUs, 8 of them down from 0.5 h: 12 GPU-hours entitled in the hour, 6 each. B asks
    # 16 for the first half hour only (8 GPU-hours), A 16 all hour: fair A 6 / B 6, the
    # hour's integrals, as the published owed (A 6, B 6). Moment by moment the fair shares
    # are A 8 / B 4 (8 + 8 for half an hour, then A alone on 8): a plan that delivered
    # exactly that leaves B 'owed' 2 GPU-hours in both measures (the published metric's
    # own definition, hour by hour; noted in the report, not a fault of this stop)
    led = _ledger(flat_org({"A": 1, "B": 1}))
    led.record_capacity(0, {"h100": 16})
    led.record_capacity(0.5 * H, {"h100": 8})
    led.record_demand(0, {"A": 16, "B": 16})
    led.record_demand(0.5 * H, {"A": 16, "B": 0})
    owed, fair = led.shortfalls(H)
    assert owed == pytest.approx({"root": 12.0, "A": 6.0, "B": 6.0})
    assert fair == pytest.approx({"root": 12.0, "A": 6.0, "B": 6.0})
    led.record_interval(Interval("a", "A", "h100", 8, 0, H))
    led.record_interval(Interval("b", "B", "h100", 8, 0, 0.5 * H))
    owed, fair = led.shortfalls(H)
    assert (owed["B"], fair["B"], fair["A"]) == pytest.approx((2.0, 2.0, 0.0))


# ============================================================================ 4. the reason


def _fragmented():
    # 2 x 8 GPUs, A = B. B holds a protected 4-GPU job on each node and a 2-GPU job past its
    # protection on n00; A's 8-GPU job fits no node: 4 GPUs of each are protected
    now = 10 * H
    jobs = [running("B0", "B", "h100", [("n00", range(4))], now - 600),
            running("B1", "B", "h100", [("n01", range(4))], now - 600),
            running("B2", "B", "h100", [("n00", range(4, 6))], now - 5 * H)] + queued("A", 1, 8)
    cfg = cfg_of(flat_org({"A": 1, "B": 1}), nodes_of(2, 8), jobs)
    return build_snapshot(cfg, now=now, usage_ratio={"A": 0.1, "B": 0.5})


def test_the_fragmented_case_plan_is_right():
    snap = _fragmented()
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert sorted(p.job_id for p in plan.placements) == ["B0", "B1", "B2"]
    assert not plan.preemptions  # A's job fits nowhere whatever B gives back
    em = build_model(snap)
    assert em.target[:, 0].tolist() == [16, 8, 8]


# Fixed at stop 50 (was a strict xfail):
# past_target_text falls back to 'past a target with whole jobs, which cannot shrink to it'
# whenever the GPUs past the targets plus the free ones are at least what the job needs, even
# where others_could_shrink is True. Here B is 2 past its target (10 of 8) with exactly one
# unprotected job, of 2 GPUs: its jobs can shrink to the target; A's 8-GPU job waits because
# no node has 8 GPUs outside B's protected jobs (2 past + 6 free = 8, on two nodes). The
# stop's own message (the 1-GPU case) is right; this branch keeps the old, false one. Fix
# (fix.diff): say 'cannot shrink' only where no holder could, and where enough could, that
# they are not where the job's shape fits.
def test_a_holder_whose_job_could_shrink_is_not_said_to_run_whole_jobs_that_cannot():
    plan = run_epoch(_fragmented())
    (msg,) = [r.message for r in plan.pending if r.job_id == "A00"]
    assert "held by B (10 of target 8, 8 of them protected)" in msg
    assert "whole jobs, which cannot shrink" not in msg


def _pooled_past_on_other_type():
    # found by a random search over the property suite's epochs (reduced by hand is longer:
    # kept as found). h100 3 x 4 up (+1 drain), b200 2 x 4, one billing weight: pooled.
    # p1 holds 12 of its pooled target 4, 4 of them (unprotected, 2-GPU jobs) on b200, the
    # rest of b200 protected. p0's 8-GPU b200 job needs both b200 nodes.
    def job(i, p, g, mr, prio, types=(), run=None, start=None):
        kw = {}
        if run is not None:
            from optalloc.types import JobState, NodeAlloc, Placement
            kw = dict(state=JobState.RUNNING, start_time=start, placement=Placement(
                f"j{i}", run[0], (NodeAlloc(run[1], tuple(run[2])),)))
        return Job(f"j{i}", p, g, gpu_types=types, min_runtime_s=mr, priority=prio,
                   submit_time=float(i), **kw)

    now = 72000.0
    jobs = [job(0, "p1", 2, 7200, 0, ("b200",), ("b200", "b200-0", [0, 1]), 61200.0),
            job(1, "p0", 1, 900, 1, (), ("h100", "h100-0", [0]), 71400.0),
            job(2, "p0", 16, 7200, 2, ("b200",)),
            job(3, "p0", 4, 7200, 2, ("h100",), ("h100", "h100-1", [0, 1, 2, 3]), 71400.0),
            job(4, "p0", 8, 900, 0, ("b200",)),
            job(5, "p0", 1, 900, 2, (), ("h100", "h100-0", [1]), 36000.0),
            job(6, "p0", 1, 28800, 2, ("h100",)),
            job(7, "p1", 2, 28800, 0), job(8, "p1", 2, 900, 1), job(9, "p1", 2, 7200, 1),
            job(10, "p0", 8, 28800, 2),
            job(11, "p1", 4, 900, 0, ("b200",), ("b200", "b200-1", [0, 1, 2, 3]), 71400.0),
            job(12, "p0", 4, 0, 2, ("b200",)), job(13, "p0", 8, 0, 0, ("h100",)),
            job(14, "p1", 4, 7200, 2, ("b200",)),
            job(15, "p1", 2, 0, 1, (), ("h100", "h100-0", [2, 3]), 36000.0),
            job(16, "p0", 1, 28800, 2)]
    from optalloc.types import Node, NodeState
    nodes = [Node(f"h100-{i}", "h100", 4, NodeState.DRAIN if i == 2 else NodeState.UP)
             for i in range(4)] + [Node(f"b200-{i}", "b200", 4) for i in range(2)]
    cfg = cfg_of(flat_org({"p0": 5, "p1": 1}), nodes, jobs,
                 (GpuType("h100"), GpuType("b200")))
    return build_snapshot(cfg, now=now, usage_ratio={"p0": 1 / 3, "p1": 0.81},
                          shortfall={"p1": 500.0}, fair_shortfall={"p1": 500.0})


# Fixed at stop 50 (was a strict xfail):
# Pooled budgets: others_over counts a holder's GPUs past its target over ALL types (p1: 12 of
# target 4 over all types = 8) for a job that can use only b200, where p1 holds 4 unprotected
# GPUs (2-GPU jobs) and the other 4 are protected. 8 + 0 free >= 8 needed, so the text falls
# back to 'past a target with whole jobs, which cannot shrink to it': false (p1 runs 2-GPU
# jobs) -- the truth is 4 GPUs past the target on b200 + 0 free < 8. Fix (fix.diff): count
# each holder's excess on t at most its unprotected GPUs of t (others_over and
# others_could_shrink), and never say 'cannot shrink' where one could.
def test_pooled_gpus_past_a_target_are_counted_on_the_type_the_job_needs():
    snap = _pooled_past_on_other_type()
    plan = run_epoch(snap)
    check_plan(snap, plan)
    (msg,) = [r.message for r in plan.pending if r.job_id == "j4"]
    assert "held by p1 (12 of target 4 over all types" in msg
    assert msg.endswith("past a target by 4 GPUs, which with the 0 free are fewer than this "
                        "job needs (8) (0 free)")


def test_the_stops_own_message_is_true_where_it_is_emitted():
    # the stop's case: B 8 past its target with 1-GPU jobs, A's 16-GPU gang: 8 + 0 < 16
    from tests.test_idle_share_floors import B_FIRST, _idle_third

    plan = run_epoch(_idle_third({"B": 1.0}, B_FIRST))
    (msg,) = [r.message for r in plan.pending]
    assert msg.endswith("past a target by 8 GPUs, which with the 0 free are fewer than this "
                        "job needs (16)")


def _best_ranked_loses_to_the_worst():
    # 3 x 4 GPUs, shares A 5 / P 1 / B 5, ratios P 0.22 < A 0.44 < B 1.0: targets A 5, P 2,
    # B 5. P runs p1 (1 GPU, past protection) and asks p0 (1 GPU, a higher priority); A runs a
    # protected 4-GPU job and asks 1 GPU; B asks a 4-GPU job and two 1-GPU jobs
    now = 20 * H
    jobs = [Job("b0", "B", 1, min_runtime_s=8 * H, priority=2, submit_time=0.0),
            Job("b1", "B", 1, min_runtime_s=8 * H, priority=2, submit_time=4.0),
            Job("b2", "B", 4, min_runtime_s=2 * H, priority=2, submit_time=5.0),
            Job("a0", "A", 1, min_runtime_s=8 * H, priority=1, submit_time=3.0),
            running("a1", "A", "h100", [("n01", range(4))], now - 600, min_runtime_s=900,
                    priority=1, submit_time=6.0),
            Job("p0", "P", 1, min_runtime_s=900, priority=2, submit_time=7.0),
            running("p1", "P", "h100", [("n00", [1])], now - 10 * H, min_runtime_s=2 * H,
                    priority=1, submit_time=8.0)]
    cfg = cfg_of(flat_org({"A": 5, "P": 1, "B": 5}), nodes_of(3, 4), jobs)
    return build_snapshot(cfg, now=now, usage_ratio={"A": 0.44, "P": 0.22, "B": 1.0})


# Was a strict xfail (the review's "older fault A"), resolved at stop 50 as no fault: the
# review's better plan (keep p1, start b0 and b2 beside p0 and a0) starts B's 4-GPU b2 while
# b1, ahead of it in B's line (same priority, submitted first) and fitting its place, waits:
# the model's `order` row (rule 3, B's own order) forbids it. Keeping p1 within B's order
# leaves B at 2 of its target 5 and 3 GPUs idle; the epoch's plan gives P its floor (1), A
# its target and B 6, more target GPUs, and the scheme's order (plan.score) ranks it first
def test_the_best_ranked_project_gives_a_gpu_past_its_floor_where_the_worst_ones_order_needs_it():
    snap = _best_ranked_loses_to_the_worst()
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert sorted(p.job_id for p in plan.placements) == ["a0", "a1", "b0", "b1", "b2", "p0"]
    assert [p.job_id for p in plan.preemptions] == ["p1"]
    em = build_model(snap)
    idx = snap.job_index

    def plan_score(starts, stops=()):
        return score(em, [idx[j] for j in starts], [0] * len(starts), [idx[j] for j in stops])

    # the review's plan breaks B's order: b2 may start only where b1 does
    col = {snap.jobs[j].id: c for j, c in zip(em.req.cand_job, em.x)}
    x = np.zeros(em.lm.n_vars)
    x[col["b2"]] = 1.0
    rows = [r for r in range(em.lm.n_cons) if em.lm.family_of_row(r) == "order"]
    assert any((em.lm.A.tocsr()[r] @ x)[0] > em.lm.row_hi[r] for r in rows)
    # against the plan that keeps p1 within B's order, the epoch's is better by the scheme's
    # order (its floors and targets: P 1 = its floor, A 5, B 5 of its target + 1)
    kept = plan_score(["a0", "a1", "b0", "b1", "p0", "p1"])
    assert plan_score(["a0", "a1", "b0", "b1", "b2", "p0"], ["p1"]) > kept


def _floor_lost_beside_moves():
    # h100-0 8 + h100-2 4 + h100-3 4 up, h100-1 (8) down. p0 runs 8 (past protection) on
    # h100-0; p1 a protected 4-GPU job and p2 a protected 2-GPU job on the down node (to
    # move); p1 a 2-GPU job past protection on h100-2, of a HIGHER priority (2) than its
    # protected one (1); p3 (floor 1, target 1) asks 1 GPU
    from optalloc.types import Node, NodeState

    now = 72000.0
    nodes = [Node("h100-0", "h100", 8), Node("h100-1", "h100", 8, NodeState.DOWN),
             Node("h100-2", "h100", 4), Node("h100-3", "h100", 4)]
    jobs = [running("j1", "p0", "h100", [("h100-0", range(8))], 36000.0, min_runtime_s=900),
            running("j5", "p1", "h100", [("h100-1", range(4))], 61200.0,
                    min_runtime_s=28800, priority=1),
            running("j6", "p2", "h100", [("h100-1", range(2))], 71400.0, min_runtime_s=900),
            Job("j8", "p3", 1, min_runtime_s=900, priority=2, submit_time=8.0),
            running("j11", "p1", "h100", [("h100-2", range(2))], 36000.0, min_runtime_s=900,
                    priority=2)]
    cfg = cfg_of(flat_org({"p0": 5, "p1": 2, "p2": 1, "p3": 2}), nodes, jobs)
    return build_snapshot(cfg, now=now, usage_ratio={"p0": 0.0, "p1": 2.16, "p2": 1.89,
                                                     "p3": 3.71})


# Fixed at stop 50 (was a strict xfail, older than this stop): p1's protected priority-1 job
# j5, displaced by a down node, restarting counted as a start below j11 (priority 2, past its
# protection) in p1's order (model.order.keep_links), so j11 had to stay and p3's floor of 1
# went unmet beside it; a protected job's restart runs by the contract (rule 4), not by the
# team's order (rule 3)
def test_a_floor_is_not_left_unmet_beside_a_job_past_its_target_and_protection():
    snap = _floor_lost_beside_moves()
    plan = run_epoch(snap)
    check_plan(snap, plan)
    em = build_model(snap)
    idx = snap.job_index
    got = score(em, [idx[p.job_id] for p in plan.placements], [0] * len(plan.placements),
                [idx[p.job_id] for p in plan.preemptions])
    hand = score(em, [idx[j] for j in ("j1", "j5", "j6", "j8")], [0] * 4,
                 [idx[j] for j in ("j5", "j6", "j11")])
    assert got >= hand


# ============================================================================ 5. the cron path


CRON = textwrap.dedent("""
    gpu_types: [{name: h100}]
    nodes: [{name: "n[1-3]", gpu_type: h100, gpus: 8}]
    org:
      name: root
      children:
        - {name: a, share: 1}
        - {name: b, share: 1}
        - {name: c, share: 1}
    policy: {solver: {backend: highs, time_limit: 10s}}
    jobs:
    """) + "".join(
    f"  - {{id: a{i}, project: a, gpus: 16, min_runtime: 1h, duration: 3h}}\n"
    for i in range(3)) + "".join(
    f"  - {{id: b{i:02d}, project: b, gpus: 1, min_runtime: 1h, duration: 3h, submit_time: 1}}\n"
    for i in range(30))


def test_explain_rebuilds_the_decisions_lifted_floors_from_the_recorded_inputs(tmp_path):
    """3 x 8, a's 16-GPU gangs, b's 1-GPU jobs (30: some wait at every epoch), c idle, cron
    epochs at 0-3 h: b is owed its fair share (c's idle 8 flow to a and b) and, ranked first,
    its floor is lifted 8 -> 12.
    The plan records the fair shortfall; `optalloc explain` reads it back and shows the same
    floors the decision used."""
    from optalloc.cli import main
    from optalloc.clock import FixedClock
    from optalloc.config.load import load_config
    from optalloc.cycle import run_cycle
    from optalloc.state import StateStore
    from tests.test_cycle import ScriptedRunner

    (tmp_path / "c.yaml").write_text(CRON)
    cfg = load_config(tmp_path / "c.yaml")
    store = StateStore(tmp_path / "s.db")
    runner = ScriptedRunner()
    try:
        for t in (0.0, H, 2 * H, 3 * H):
            res = run_cycle(cfg, store, runner, FixedClock(t))
        inputs = store.last_epoch()["plan"]["inputs"]
    finally:
        store.close()
    snap = res.snapshot
    floors = build_model(snap).floor[:, 0]
    assert dict(zip(snap.org.names, floors.tolist())) == {"root": 0, "a": 8, "b": 12, "c": 0}
    assert inputs["fair_shortfall"] == {"root": pytest.approx(8.0), "b": pytest.approx(8.0)}
    assert inputs["shortfall"] == {}  # b owed nothing by the published measure
    pending_b = next(r.job_id for r in res.plan.pending if r.job_id.startswith("b"))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["explain", pending_b, "--config", str(tmp_path / "c.yaml"),
                     "--state", str(tmp_path / "s.db"), "--json"]) == 0
    levels = json.loads(buf.getvalue())["details"]["targets"]["h100"]
    assert [(x["org"], x["floor"]) for x in levels] == [("b", 12.0)]
