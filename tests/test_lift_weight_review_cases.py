"""An outside review of stop 51: a lifted floor weighs its node's fair debt
(`impact.tier_weights` lifted_weight, `fairshare.lifted_rows`).

Every expectation below was worked out by hand from DESIGN.md section 8 before the case was
run. Weights as `tests/test_lift_weight.py` reads them: a floor GPU of a node is worth
(1 + rank tilt) x (1 + debt) (RANK_TILT = 1: x2 for the best-ranked project with work, x1
for the worst, tied ranks both x2), a lifted row weighs the larger of the published and the
fair debt (in hours of the node's whole share), and plans are compared floors first. `fault`
cases are strict xfails with the diagnosis."""

from __future__ import annotations

import pytest

from optalloc.model.constraints.fairshare import lifted_rows
from optalloc.types import Config, GpuType, OrgNode, Policy
from tests.test_epoch_toy import flat_org, nodes_of, queued
from tests.test_fairness_over_time_judge_cases import H, _window, endless, flat, scenario
from tests.test_idle_share_floors import gpus_by_project

TIED = {"A": 0.5, "B": 0.5}




def _epoch(cfg, usage, fair=None, owed=None):
    """(snapshot, model, plan) of one epoch at 10 h, the plan checked."""
    from optalloc.epoch import run_epoch
    from optalloc.model.build import build_model
    from optalloc.sim.invariants import check_plan
    from optalloc.snapshot import build_snapshot

    snap = build_snapshot(cfg, now=36000.0, usage_ratio=usage, shortfall=owed,
                          fair_shortfall=fair)
    em = build_model(snap)
    plan = run_epoch(snap)
    check_plan(snap, plan)
    return snap, em, plan


def _lifted(snap, em) -> set:
    up = lifted_rows(em.tg)
    return {n for i, n in enumerate(snap.org.names) if up is not None and up[i].any()}


# ------------------------------------------------------------------ 1. rule 1: packing
def _six_gpu_jobs():
    """3 x 8 GPUs, A = B = C (8 each), C idle. A wants one 6-GPU job (within its share), B
    four 6-GPU jobs. A node holds one 6-GPU job: A's job and B's three cannot all run."""
    jobs = queued("A", 1, 6) + queued("B", 4, 6)
    return Config((GpuType("h100"),), tuple(nodes_of(3, 8)),
                  flat_org({"A": 1, "B": 1, "C": 1}), Policy(), tuple(jobs))


def test_a_lifted_node_ranked_second_does_not_take_a_better_ranked_nodes_floor_within_its_share():
    # A ranks first (usage ratio 0.75 against B's 1.5), its floor min(6, 8) = 6 within its
    # own share, unlifted. B ranks second, got 12 every hour (no published debt) but is owed
    # 12 GPU-h of its fair share (1.5 h of its 8: C's idle 8 and A's unused 2 flow to it).
    # Rule 1: A's job goes first; B's 6-GPU jobs fill the other two nodes: A 6, B 12. B's
    # claim on an idle sibling's share is no claim on A's own (rule 2: unused share flows
    # to those who want it, it does not displace a better-ranked sibling's floor).
    snap, em, plan = _epoch(_six_gpu_jobs(), {"A": 0.75, "B": 1.5}, fair={"B": 12.0})
    assert tuple(em.floor[1:4, 0]) == (6, 18, 0) and _lifted(snap, em) == {"B"}
    assert gpus_by_project(snap, plan) == {"A": 6, "B": 12}


def test_the_same_packing_with_a_small_fair_debt_keeps_the_better_ranked_job():
    # as above with B owed 4 GPU-h (0.5 h of its share): the plan without A meets B's 18 at
    # 1.5 = 27 against A's 6 x2 + B's 12 x1.5 = 30: A 6, B 12 (the code agrees here; the
    # fault above needs a fair debt over 1 h of B's share: 6 (1 + f) > 12)
    snap, em, plan = _epoch(_six_gpu_jobs(), {"A": 0.75, "B": 1.5}, fair={"B": 4.0})
    assert _lifted(snap, em) == {"B"}
    assert gpus_by_project(snap, plan) == {"A": 6, "B": 12}


def test_over_a_day_the_better_ranked_projects_hourly_job_runs_every_hour():
    # 3 x 8, A = B = C, C idle. A submits one 1-h 6-GPU job each hour (a minute before the
    # epoch), B endless 6-GPU jobs. A's usage ratio (6 of 8) stays below B's (12 of 8), so A
    # ranks first all day and its job, within its share, runs each hour: A 6 every hour,
    # B 12 every hour (greedy: exactly). A 144, B 288.
    from optalloc.sim.engine import simulate
    from optalloc.sim.policies import make_policy

    a = [j for h in range(24)
         for j in endless("A", 1, gpus=6, at=max(h * H - 60.0, 0.0), tag=f"h{h}_")]
    sc = scenario(a + endless("B", 120, gpus=6), flat(A=1, B=1, C=1), nodes=(8, 8, 8))
    res = simulate(sc, make_policy("ilp"), check=True)
    hours = [(_window(res, "A", h * H, (h + 1) * H), _window(res, "B", h * H, (h + 1) * H))
             for h in range(24)]
    assert hours == [(6.0, 12.0)] * 24


# ------------------------------------------------------------------ 2. the debts
def _idle_third_cfg(types=None, nodes=None, org=None, a_types=None):
    """The idle-third epoch (tests/test_idle_share_floors._idle_third): A one 16-GPU gang,
    B 24 1-GPU jobs, C idle; `types`/`nodes`/`org` to vary the cluster and the tree."""
    jobs = queued("A", 1, 16, **({"gpu_types": a_types} if a_types else {})) + queued("B", 24, 1)
    return Config(types or (GpuType("h100"),), tuple(nodes or nodes_of(3, 8)),
                  org or flat_org({"A": 1, "B": 1, "C": 1}), Policy(), tuple(jobs))


def test_a_lifted_floor_weighs_the_published_debt_where_it_is_the_larger():
    # tied ranks (x2 each). B owed 12 GPU-h published (1.5 h of its 8) and 4 fair (0.5 h):
    # B lifted 8 -> 12 (its fair debt is beyond A's, 0). Its row weighs max(1.5, 0.5) = 1.5:
    # the gang plan meets A 8 x2 + B 8 x2 x2.5 = 56, B's 24 meet B's 12 x2 x2.5 = 60: B 24.
    # (Weighed by the fair debt alone: 16 + 24 = 40 against 36, the gang.)
    snap, em, plan = _epoch(_idle_third_cfg(), TIED, fair={"B": 4.0}, owed={"B": 12.0})
    assert _lifted(snap, em) == {"B"}
    assert gpus_by_project(snap, plan) == {"B": 24}
    assert plan.report.status == "optimal" and plan.report.gap == pytest.approx(0.0, abs=1e-6)


def test_two_equally_owed_nodes_are_neither_lifted_and_the_gang_meets_both_raw_floors():
    # A and B each owed 24 GPU-h of their fair shares: beyond each other, 0 (the debt counts
    # what a node is owed beyond its least sibling with work), so neither is owed for the
    # lift; floors 8 / 8, tied ranks: the gang plan meets A 8 + B 8 = 16 floor GPUs against
    # B's 8: A 16, B 8
    snap, em, plan = _epoch(_idle_third_cfg(), TIED, fair={"A": 24.0, "B": 24.0})
    assert tuple(em.floor[1:3, 0]) == (8, 8) and _lifted(snap, em) == set()
    assert gpus_by_project(snap, plan) == {"A": 16, "B": 8}


def test_of_two_owed_nodes_only_the_one_owed_more_is_lifted_by_the_difference():
    # A owed 12, B owed 24 GPU-h fair: B beyond A by 12 (1.5 h of its 8): as B alone owed 12,
    # B lifted to 12, weight x2 x2.5: B's 24 (60) beat the gang (16 + 40 = 56): B 24
    snap, em, plan = _epoch(_idle_third_cfg(), TIED, fair={"A": 12.0, "B": 24.0})
    assert _lifted(snap, em) == {"B"}
    assert gpus_by_project(snap, plan) == {"B": 24}


# ------------------------------------------------------------------ 3. pooled, programs
def test_pooled_types_a_lifted_floor_weighs_the_fair_debt():
    # h100 x 2 + a100 x 1 (8 each), one billing weight, the same shares: one budget of 24
    # (model/pooled.py). A's gang (16) only on the two h100 nodes, B's singles anywhere.
    # As the one-type case: tied, B owed 12 GPU-h fair (1.5 h): B lifted 8 -> 12 in the one
    # pooled column; gang plan 8 x2 + 8 x5 = 56 against B's 12 x5 = 60: B 24 (on all three)
    cfg = _idle_third_cfg(types=(GpuType("h100"), GpuType("a100")),
                          nodes=nodes_of(2, 8) + nodes_of(1, 8, "a100", prefix="m"),
                          a_types=("h100",))
    snap, em, plan = _epoch(cfg, TIED, fair={"B": 12.0})
    assert em.tg.pooled and em.tg.share_floor[1:3, 0].tolist() == [8, 12]
    assert _lifted(snap, em) == {"B"}
    assert gpus_by_project(snap, plan) == {"B": 24}
    assert plan.report.status == "optimal" and plan.report.gap == pytest.approx(0.0, abs=1e-6)


def test_pooled_types_a_small_fair_debt_leaves_the_gang_its_turn():
    # the same with B owed 4 GPU-h (0.5 h): 8 x2 + 8 x3 = 40 against 12 x3 = 36: A 16, B 8
    cfg = _idle_third_cfg(types=(GpuType("h100"), GpuType("a100")),
                          nodes=nodes_of(2, 8) + nodes_of(1, 8, "a100", prefix="m"),
                          a_types=("h100",))
    snap, em, plan = _epoch(cfg, TIED, fair={"B": 4.0})
    assert _lifted(snap, em) == {"B"}
    assert gpus_by_project(snap, plan) == {"A": 16, "B": 8}


def _programs():
    # root -> P1 {A (gang project), A2 (idle)}, P2 {B}, C (idle top-level project)
    return OrgNode("root", children=(
        OrgNode("P1", children=(OrgNode("A"), OrgNode("A2"))),
        OrgNode("P2", children=(OrgNode("B"),)), OrgNode("C")))


@pytest.mark.parametrize("fair, lifted, gpus", [
    # P1 = P2 = C (8 each), A2 and C idle: A's floor 8 (A2's 4 go to A), P2's and B's 8.
    # B owed 12 GPU-h fair (1.5 h of its 8; P2 counts it, alone in P2 B takes P2's): P2 and
    # B lifted 8 -> 12. A GPU counts in its program's and its project's rows: gang plan
    # (P1 8 + A 8) x2 + (P2 8 + B 8) x2 x2.5 = 32 + 80 = 112, B's 24 (P2 12 + B 12) x5 =
    # 120: B 24
    ({"B": 12.0}, {"P2", "B"}, {"B": 24}),
    # owed 4 (0.5 h): 32 + 48 = 80 against 72: the gang, A 16 / B 8
    ({"B": 4.0}, {"P2", "B"}, {"A": 16, "B": 8}),
], ids=["a-lifted-program-and-its-project-weigh-the-fair-debt-on-both-rows",
        "a-small-fair-debt-leaves-the-gang-its-turn"])
def test_a_lifted_programs_rows_weigh_its_projects_fair_debt(fair, lifted, gpus):
    cfg = _idle_third_cfg(org=_programs())
    snap, em, plan = _epoch(cfg, {"P1": 0.5, "A": 0.5, "P2": 0.5, "B": 0.5}, fair=fair)
    names = snap.org.names
    assert {n: int(em.floor[names.index(n), 0]) for n in ("P1", "A", "P2", "B")} == \
        {"P1": 8, "A": 8, "P2": 12, "B": 12}
    assert _lifted(snap, em) == lifted
    assert gpus_by_project(snap, plan) == gpus
    assert plan.report.status == "optimal" and plan.report.gap == pytest.approx(0.0, abs=1e-6)


def test_a_better_ranked_projects_long_running_job_past_protection_keeps_its_node_all_day():
    # as above with A's one 6-GPU job running all day (30 h long, protected 1 h) where it was
    # one a hour: A's work is all running, none waits. A's usage ratio (6 of 8) stays below
    # B's (12 of 8), so A ranks first all day; its floor 6 is within its own share. B, lifted
    # to 18 with C idle, is fair-owed from the first hour, but its claim on C's share is no
    # claim on A's own (rule 1): B's lift must not outweigh A's floor once A's job is past
    # its protection. A 6 and B 12 every hour: A 144, B 288 (greedy: exactly)
    from optalloc.sim.engine import simulate
    from optalloc.sim.policies import make_policy

    a = endless("A", 1, gpus=6, hours=30.0)
    sc = scenario(a + endless("B", 120, gpus=6), flat(A=1, B=1, C=1), nodes=(8, 8, 8))
    for policy in ("ilp", "greedy"):
        res = simulate(sc, make_policy(policy), check=True)
        hours = [(_window(res, "A", h * H, (h + 1) * H), _window(res, "B", h * H, (h + 1) * H))
                 for h in range(24)]
        assert hours == [(6.0, 12.0)] * 24, policy
