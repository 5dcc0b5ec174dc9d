"""An outside review of the floors' debt (Ledger.owed_shortfall -> Snapshot.owed_shortfall ->
impact.debt_tilt, and the holder text of true_causes.holders_outside).

Every expected plan below was worked out by hand from DESIGN.md section 8 and the weights the
change documents (a floor GPU of org node o is worth 1 + RANK_TILT * q_o + b_o, b_o what o was
owed and not delivered, in hours of o's whole share of the up GPUs, beyond the least of its
siblings with work; a node alone among its siblings takes its parent's) before the case was run.
Where the code disagrees and the disagreement is a fault, the case keeps the hand expectation and
is a strict xfail whose reason names the cause. Three faults it found are fixed (stop 49:
tests/test_epoch_floor_debt_review.py); their cases here now pass.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import textwrap

import pytest

from optalloc.epoch import run_epoch
from optalloc.ledger import Ledger
from optalloc.model.objective.impact import debt_tilt
from optalloc.org import OrgTree
from optalloc.sim.invariants import check_plan
from optalloc.sim.policies.greedy import GreedyScheduler
from optalloc.snapshot import build_snapshot
from optalloc.types import (
    Config,
    GpuType,
    Interval,
    Job,
    JobState,
    Node,
    NodeAlloc,
    NodeState,
    OrgNode,
    Placement,
    Policy,
)

H = 3600.0
WFC, OVER, PFS = "WaitingForCapacity", "OverShare", "PreemptedForFairShare"
OWED = "GPU-hours owed and not delivered over the window"


# ----------------------------------------------------------------------------- helpers


def flat(**shares) -> OrgNode:
    return OrgNode("root", children=tuple(OrgNode(p, share=s) for p, s in shares.items()))


def programs(**progs) -> OrgNode:
    """root -> programs (equal shares) -> projects (equal shares)."""
    return OrgNode("root", children=tuple(
        OrgNode(p, children=tuple(OrgNode(x) for x in leaves)) for p, leaves in progs.items()))


def nodes(n: int, gpus: int = 8, gpu_type: str = "h100", prefix: str = "n",
          state: NodeState = NodeState.UP) -> list[Node]:
    return [Node(f"{prefix}{i:02d}", gpu_type, gpus, state) for i in range(n)]


def queued(project: str, n: int, gpus: int, *, prefix: str | None = None, **kw) -> list[Job]:
    prefix = prefix or project
    mr = kw.pop("min_runtime_s", H)
    return [Job(f"{prefix}{i:02d}", project, gpus, min_runtime_s=mr, submit_time=float(i), **kw)
            for i in range(n)]


def running(jid: str, project: str, node: str, gpus: int, start: float, **kw) -> Job:
    pl = Placement(jid, "h100", (NodeAlloc(node, tuple(range(gpus))),))
    return Job(jid, project, gpus, min_runtime_s=kw.pop("min_runtime_s", H),
               state=JobState.RUNNING, start_time=start, placement=pl, **kw)


def snap_of(org, node_list, jobs, usage, shortfall, types=(GpuType("h100"),), now=10 * H):
    cfg = Config(tuple(types), tuple(node_list), org, Policy(), tuple(jobs))
    return build_snapshot(cfg, now=now, usage_ratio=usage, shortfall=shortfall)


def outcome(snap, plan) -> dict:
    """The whole plan: every job that runs after it (type, GPUs per node, sorted), every
    preemption and every pending job with its code."""
    return {
        "runs": {p.job_id: (p.gpu_type, tuple(sorted(len(a.gpus) for a in p.nodes)))
                 for p in plan.placements},
        "preempted": {p.job_id: p.code.value for p in plan.preemptions},
        "pending": {r.job_id: r.code.value for r in plan.pending},
    }


def decide(snap) -> tuple[dict, dict]:
    plan = run_epoch(snap)
    check_plan(snap, plan)
    return outcome(snap, plan), {r.job_id: r.message for r in plan.pending}


def plan(runs, preempted=None, pending=None) -> dict:
    return {"runs": runs, "preempted": preempted or {}, "pending": pending or {}}


def tilts(snap) -> dict:
    return {k: round(float(v), 6) for k, v in zip(snap.org.names, debt_tilt(snap, 8.0))}


# ----------------------------------------------------------------------------- hand-built epochs


def _one_node_a_big_b_small(shortfall, shares=None, b_gpus=2):
    """One 8-GPU node. A (usage ratio 2.0, ranked last) wants it for an 8-GPU job, B (ratio
    0.1, ranked first) for a small one; C, if it has a share, never submits."""
    shares = shares or {"A": 0.75, "B": 0.25}
    jobs = queued("A", 1, 8) + queued("B", 1, b_gpus)
    return snap_of(flat(**shares), nodes(1), jobs, {"A": 2.0, "B": 0.1, "C": 0.0}, shortfall)


def test_floors_that_fit_together_are_both_met_whatever_one_project_is_owed():
    # 4 + 4 on one 8-GPU node: no exclusive floors, nothing for the debt to decide
    jobs = queued("A", 1, 4) + queued("B", 1, 4)
    snap = snap_of(flat(A=1, B=1), nodes(1), jobs, {"A": 0.1, "B": 3.0}, {"B": 500.0})
    got, _ = decide(snap)
    assert got == plan({"A00": ("h100", (4,)), "B00": ("h100", (4,))})


def test_what_a_project_without_work_is_owed_changes_nothing():
    # A 0.6, B 0.2, C 0.2 (C idle: its 1.6 flows to A and B 3:1): floors A 6, B 2. B (ranked
    # first) weighs 2 per floor GPU: 2 x 2 = 4 < A's 6 x 1, so A's 8-GPU job runs, and C's
    # debt (no work) is 0 in the tilt
    snap = _one_node_a_big_b_small({"C": 500.0}, shares={"A": 0.6, "B": 0.2, "C": 0.2})
    assert tilts(snap) == {"root": 0.0, "A": 0.0, "B": 0.0, "C": 0.0}
    got, _ = decide(snap)
    assert got == plan({"A00": ("h100", (8,))}, pending={"B00": WFC})


def test_equal_hours_owed_by_both_projects_cancel_and_the_larger_floor_still_wins():
    # A owed 18 GPU-h of a 6-GPU share (3 h), B 6 of a 2-GPU share (3 h): no debt beyond the
    # other, so as with no debt: A 6 x 1 > B 2 x 2
    snap = _one_node_a_big_b_small({"A": 18.0, "B": 6.0})
    assert tilts(snap)["A"] == tilts(snap)["B"] == 0.0
    got, _ = decide(snap)
    assert got == plan({"A00": ("h100", (8,))}, pending={"B00": WFC})


def test_the_owed_project_gets_its_floor_and_the_message_of_the_job_that_waits_says_so():
    # B owed 6 GPU-h of a 2-GPU share: 3 h beyond A. B 2 x (2 + 3) = 10 > A's 6
    snap = _one_node_a_big_b_small({"B": 6.0})
    got, msg = decide(snap)
    assert got == plan({"B00": ("h100", (2,))}, pending={"A00": WFC})
    assert f"B (2 of target 2, 6.0 {OWED})" in msg["A00"]


def test_a_protected_job_is_kept_however_much_the_other_project_is_owed():
    # A's 8-GPU job started 30 min ago, protected for 1 h (rule 4): B waits whatever its debt
    jobs = [running("A00", "A", "n00", 8, start=10 * H - 1800)] + queued("B", 1, 2)
    snap = snap_of(flat(A=0.75, B=0.25), nodes(1), jobs, {"A": 2.0, "B": 0.1}, {"B": 1000.0})
    got, _ = decide(snap)
    assert got == plan({"A00": ("h100", (8,))}, pending={"B00": WFC})


def test_a_job_past_its_protection_yields_to_the_owed_projects_floor():
    # the same, A's job started 2 h ago (protected 1 h): keeping it meets A's floor of 6
    # (x 1), B's job meets 2 x (2 + 3): A's job is preempted and B's starts
    jobs = [running("A00", "A", "n00", 8, start=8 * H)] + queued("B", 1, 2)
    snap = snap_of(flat(A=0.75, B=0.25), nodes(1), jobs, {"A": 2.0, "B": 0.1}, {"B": 6.0})
    got, _ = decide(snap)
    assert got == plan({"B00": ("h100", (2,))}, preempted={"A00": PFS})


@pytest.mark.parametrize("owed_b, winner", [(4.0, "A"), (16.0, "B")],
                         ids=["half-an-hour-of-its-share-is-not-enough",
                              "two-hours-of-its-share-are"])
def test_a_two_node_gang_against_single_gpu_jobs_goes_by_rank_until_the_debt_passes_the_tilt(
        owed_b, winner):
    # 2 x 8, A = B (floors 8 each). A (ranked first) wants a 16-GPU gang, B eight 1-GPU jobs:
    # exclusive. A 8 x 2 against B 8 x (1 + b_B): B wins once b_B > 1, i.e. owed more than
    # 8 GPU-h (an hour of its 8-GPU share)
    jobs = [Job("A00", "A", 16, min_runtime_s=H, gpus_per_node=8)] + queued("B", 8, 1)
    snap = snap_of(flat(A=1, B=1), nodes(2), jobs, {"A": 0.1, "B": 2.0}, {"B": owed_b})
    got, _ = decide(snap)
    if winner == "A":
        assert got == plan({"A00": ("h100", (8, 8))}, pending={f"B{i:02d}": WFC for i in range(8)})
    else:
        assert got["runs"] == {f"B{i:02d}": ("h100", (1,)) for i in range(8)}
        assert got["preempted"] == {} and set(got["pending"]) == {"A00"}


@pytest.mark.parametrize("owed_p2, winner", [(2.0, "P1"), (8.0, "P2")],
                         ids=["half-an-hour-of-the-programs-share-is-not-enough",
                              "two-hours-of-the-programs-share-are"])
def test_a_project_alone_in_its_program_carries_its_programs_debt(owed_p2, winner):
    # one 8-GPU node; P1 {A1, A2} (ratio 0.1, first) wants it for two 4-GPU jobs, P2 {B}
    # (ratio 2.0) for one 8-GPU job. Floors: P1 4 (A1 2, A2 2), P2 4 (B 4). P1's plan meets
    # 4 x (1 + 1) + 2 x (1 + q_A1) + 2 x (1 + q_A2) = 8 + 4 + 3 = 15 (q 1 and 0.5); B's
    # 4 x (1 + b) + 4 x (1 + b) with b = P2's debt (B alone takes its program's): B wins once
    # 8 + 8 b > 15, b > 0.875 -> more than 3.5 GPU-h of P2's 4-GPU share
    org = programs(P1=("A1", "A2"), P2=("B",))
    jobs = queued("A1", 1, 4) + queued("A2", 1, 4) + queued("B", 1, 8)
    usage = {"P1": 0.1, "A1": 0.1, "A2": 0.1, "P2": 2.0, "B": 2.0}
    snap = snap_of(org, nodes(1), jobs, usage, {"P2": owed_p2, "B": owed_p2})
    got, _ = decide(snap)
    if winner == "P1":
        assert got == plan({"A100": ("h100", (4,)), "A200": ("h100", (4,))},
                           pending={"B00": WFC})
    else:
        assert got == plan({"B00": ("h100", (8,))}, pending={"A100": WFC, "A200": WFC})


@pytest.mark.parametrize("owed_b, winner", [(3.0, "A"), (6.0, "B")],
                         ids=["three-gpu-hours-are-three-quarters-of-an-hour-of-the-up-share",
                              "six-are-one-and-a-half"])
def test_the_debt_is_counted_in_hours_of_the_share_of_the_up_gpus_only(owed_b, winner):
    # n00 up, n01 drained (empty): B's share is 4 up GPUs. A (ranked last) 8-GPU job meets 4,
    # B's 1-GPU job 1: B wins when 1 x 2 (1 + b) > 4, b > 1: more than 4 GPU-h. 6 GPU-h are
    # 1.5 hours (of 4 up GPUs; 0.75 of all 8: A would win), 3 GPU-h 0.75 hours
    node_list = nodes(1) + [Node("n01", "h100", 8, NodeState.DRAIN)]
    jobs = queued("A", 1, 8) + queued("B", 1, 1)
    snap = snap_of(flat(A=1, B=1), node_list, jobs, {"A": 2.0, "B": 0.1}, {"B": owed_b})
    got, _ = decide(snap)
    if winner == "A":
        assert got == plan({"A00": ("h100", (8,))}, pending={"B00": WFC})
    else:
        assert got == plan({"B00": ("h100", (1,))}, pending={"A00": WFC})


def test_with_a_pooled_budget_the_debt_is_counted_in_hours_of_the_share_of_every_type():
    # h100 + a100 (one 8-GPU node each, one billing weight, same shares): pooled, A and B are
    # entitled 8 GPUs each. Both confined to h100, whose 8 GPUs the floors split max-min by
    # demand: A 6, B 2 (B wants 2). A's 8-GPU job meets 6, B's 2-GPU job 2: B wins when
    # 2 x 2 (1 + b) > 6, b > 1/2. B owed 3 GPU-h: 0.375 hours of its 8 GPUs (0.75 of its 4
    # h100 GPUs alone, which would start B's): A's job runs
    types = (GpuType("h100"), GpuType("a100"))
    node_list = nodes(1) + nodes(1, gpu_type="a100", prefix="a")
    jobs = queued("A", 1, 8, gpu_types=("h100",)) + queued("B", 1, 2, gpu_types=("h100",))
    snap = snap_of(flat(A=1, B=1), node_list, jobs, {"A": 2.0, "B": 0.1}, {"B": 3.0},
                   types=types)
    assert tilts(snap)["B"] == pytest.approx(0.375)
    got, _ = decide(snap)
    assert got == plan({"A00": ("h100", (8,))}, pending={"B00": WFC})


def test_a_project_of_only_unallocated_work_gets_nothing_for_what_it_is_owed():
    # U's jobs are unallocated (min_runtime 0): no floor, no debt; they yield to A's job
    jobs = queued("A", 1, 8) + queued("U", 1, 8, min_runtime_s=0.0)
    snap = snap_of(flat(A=1, U=1), nodes(1), jobs, {"A": 2.0, "U": 0.0}, {"U": 1000.0})
    assert tilts(snap)["U"] == 0.0
    got, _ = decide(snap)
    assert got == plan({"A00": ("h100", (8,))}, pending={"U00": "UnallocatedYields"})


def test_the_debt_never_reorders_a_teams_own_jobs():
    # A's 6-GPU job and B's floor of 2 fit together; B, owed a lot, starts its priority-9 job,
    # not its earlier priority-0 one (rule 3: the team's own order)
    jobs = (queued("A", 1, 6) + [Job("Blo", "B", 2, min_runtime_s=H, submit_time=0.0),
                                 Job("Bhi", "B", 2, min_runtime_s=H, priority=9,
                                     submit_time=5.0)])
    snap = snap_of(flat(A=0.75, B=0.25), nodes(1), jobs, {"A": 2.0, "B": 0.1}, {"B": 200.0})
    got, _ = decide(snap)
    assert got == plan({"A00": ("h100", (6,)), "Bhi": ("h100", (2,))}, pending={"Blo": "LowerPriorityInProject"})


# ----------------------------------------------------------------------------- faults found


def _sibling_debt_case(owed_a1: float):
    org = programs(P1=("A1", "A2"), P2=("B",))
    jobs = queued("A1", 1, 6) + queued("A2", 1, 1) + queued("B", 1, 4)
    usage = {"P1": 1.0, "A1": 1.0, "A2": 1.0, "P2": 0.2, "B": 0.2}
    return snap_of(org, nodes(1), jobs, usage, {"A1": owed_a1})


@pytest.mark.parametrize("owed_a1", [10.0, 40.0])
def test_what_a_projects_sibling_owes_it_does_not_take_a_better_ranked_programs_floor(owed_a1):
    """One 8-GPU node. P2 {B} (ratio 0.2) ranks before P1 {A1, A2} (ratio 1.0). A1 wants a
    6-GPU job, A2 a 1-GPU one, B a 4-GPU one: B's and A1's cannot both run. A1 was owed GPU-h
    that A2 got (P1 as a whole was owed nothing: A2's surplus nets A1's shortfall), and P2
    nothing. Rule 1: P2's project goes ahead of P1's, whatever the projects' own standing;
    rule 2: a debt inside P1 is P1's to repay. So B and A2 run, A1 waits (greedy agrees).
    Fault: debt_tilt puts A1's debt beyond its sibling A2 on A1's floor row, which a
    cross-program trade also moves: A1 (6 GPUs, 3 of its floor) x (1 + 0.5 + 5) beats B's 4 x 2
    + P2's 4 x 2, and A1's job runs. Fixed: a node's debt beyond its siblings is bounded by
    its parent's own where the parent competes."""
    snap = _sibling_debt_case(owed_a1)
    got, _ = decide(snap)
    assert sorted(p.job_id for p in GreedyScheduler().decide(snap).placements) == ["A200", "B00"]
    assert got == plan({"A200": ("h100", (1,)), "B00": ("h100", (4,))}, pending={"A100": WFC})


# Until stop 49's review the debt was added to the rank tilt: equal debts beyond a third
# project owed nothing cut the 2x between A and B to 1.22x and A's job ran (now multiplied)
def test_two_projects_owed_the_same_trade_floors_as_if_neither_were_owed():
    """h100 (8) + a100 (8), one weight, same shares: pooled, A = B = C = 16/3 GPUs. A and B
    are confined to h100, C to a100 (where it runs alone). A (ratio 2.0, last) wants an 8-GPU
    job (5 floor GPUs), B (ratio 0.1, first) a 3-GPU job (3): 5 < 2 x 3, B's job runs (as with
    no debt, and as greedy). A and B are owed the same, 24 GPU-h each (4.5 hours of their
    shares); C nothing. Their trade should not change: B and C run, A waits."""
    types = (GpuType("h100"), GpuType("a100"))
    node_list = nodes(1) + nodes(1, gpu_type="a100", prefix="a")
    jobs = (queued("A", 1, 8, gpu_types=("h100",)) + queued("B", 1, 3, gpu_types=("h100",))
            + queued("C", 1, 8, gpu_types=("a100",)))
    usage = {"A": 2.0, "B": 0.1, "C": 0.5}
    for owed in ({}, {"A": 24.0, "B": 24.0, "C": 24.0}, {"A": 24.0, "B": 24.0}):
        snap = snap_of(flat(A=1, B=1, C=1), node_list, jobs, usage, owed, types=types)
        got, _ = decide(snap)
        assert got == plan({"B00": ("h100", (3,)), "C00": ("a100", (8,))},
                           pending={"A00": WFC}), owed


def _per_type_history():
    """h100 (weight 2) and a100 (weight 0.25), one 8-GPU node each, A = B: per-type budgets
    (different weights), A 4 + 4 and B 4 + 4. All day A (h100-only jobs) held 5 h100 GPUs,
    one more than its h100 share, and B 3 h100 + all 8 a100 (A cannot use a100)."""
    types = (GpuType("h100", 2.0), GpuType("a100", 0.25))
    org = flat(A=1, B=1)
    led = Ledger(types, OrgTree.build(org, ["h100", "a100"]), Policy())
    led.record_capacity(0.0, {"h100": 8, "a100": 8})
    led.record_demand(0.0, {"A": 8, "B": 11})
    led.record_interval(Interval("a", "A", "h100", 5, 0.0, 24 * H))
    led.record_interval(Interval("b", "B", "h100", 3, 0.0, 24 * H))
    led.record_interval(Interval("b2", "B", "a100", 8, 0.0, 24 * H))
    return types, org, led


def test_the_ledger_calls_a_project_owed_what_only_a_type_its_jobs_cannot_use_would_give():
    # a fact, not a fault on its own: owed = min(entitled over all types, demand) per hour,
    # so A, above its h100 share all day, is 'owed' 3 GPUs an hour (72 GPU-h) of a100
    types, org, led = _per_type_history()
    assert led.owed_shortfall(24 * H) == {"root": 0.0, "A": 72.0, "B": 0.0}


def _per_type_epoch():
    types, org, led = _per_type_history()
    node_list = [Node("h0", "h100", 8), Node("a0", "a100", 8)]
    jobs = queued("A", 1, 8, gpu_types=("h100",)) + queued("B", 1, 3, gpu_types=("h100",))
    return snap_of(org, node_list, jobs, led.usage_ratios(24 * H), led.owed_shortfall(24 * H),
                   types=types, now=24 * H)


def test_with_per_type_budgets_a_project_above_its_share_of_a_type_is_not_owed_on_it():
    """The history above, then an epoch: A (usage ratio 0.159) wants h100 for an 8-GPU job
    (4 floor GPUs), B (0.127, ranked first) for a 3-GPU one (3). 4 < 2 x 3: B's job runs,
    A's waits (as greedy, and as the ILP with no debt)."""
    got, msg = decide(_per_type_epoch())
    assert got == plan({"B00": ("h100", (3,))}, pending={"A00": WFC})
    assert OWED not in msg["A00"]


def _imported_history_ledger():
    """8 GPUs, A = B, lookback 24 h. A ran 8 GPUs from 0 to 12 h (imported with `optalloc
    ledger import`, before optalloc first saw the queue); the first epoch, at 12 h, records
    demand A 8, B 8; from then on B holds all 8 GPUs and A gets none."""
    org = flat(A=1, B=1)
    led = Ledger((GpuType("h100"),), OrgTree.build(org, ["h100"]), Policy(lookback_s=24 * H))
    led.record_capacity(0.0, {"h100": 8})
    led.record_interval(Interval("imp", "A", "h100", 8, 0.0, 12 * H))
    led.record_demand(12 * H, {"A": 8, "B": 8})
    led.record_interval(Interval("b", "B", "h100", 8, 12 * H, 24 * H))
    return led


def test_what_ran_before_optalloc_tracked_the_queue_does_not_cancel_what_is_owed_after():
    from optalloc.ledger import build_report

    led = _imported_history_ledger()
    rows = {r.name: r for r in build_report(led, 24 * H)}
    assert (rows["A"].owed_gpu_h, rows["A"].delivered_gpu_h) == (48.0, 0.0)
    assert led.owed_shortfall(24 * H) == {"root": 0.0, "A": 48.0, "B": 0.0}


def test_the_owed_number_in_a_reason_nets_surplus_hours_where_the_report_counts_hour_by_hour():
    # a fact for the wording: A (entitled 4, wants 8) got 0 for 12 h, then 6 for 12 h. The
    # report: owed 96, met 48 (a shortfall never repaid by a surplus later); the debt and the
    # reason's "... GPU-hours owed and not delivered": 96 - 72 = 24
    from optalloc.ledger import build_report

    org = flat(A=1, B=1)
    led = Ledger((GpuType("h100"),), OrgTree.build(org, ["h100"]), Policy(lookback_s=24 * H))
    led.record_capacity(0.0, {"h100": 8})
    led.record_demand(0.0, {"A": 8, "B": 8})
    led.record_interval(Interval("b", "B", "h100", 8, 0.0, 12 * H))
    led.record_interval(Interval("a", "A", "h100", 6, 12 * H, 24 * H))
    led.record_interval(Interval("b2", "B", "h100", 2, 12 * H, 24 * H))
    rows = {r.name: r for r in build_report(led, 24 * H)}
    assert (rows["A"].owed_gpu_h, rows["A"].met_gpu_h) == (96.0, 48.0)
    assert led.owed_shortfall(24 * H)["A"] == 24.0


class _Keeps:
    """Greedy (which never reads the shortfall), keeping every snapshot; `eager` reads each
    snapshot's shortfall at its decision, as the ILP does."""

    def __init__(self, eager: bool):
        from optalloc.sim.policies import make_policy

        self.inner, self.name, self.eager, self.snaps = make_policy("greedy"), "greedy", eager, []

    def decide(self, snap):
        if self.eager:
            snap.owed_shortfall
        self.snaps.append(snap)
        return self.inner.decide(snap)


# Until stop 49's review the callable read the live ledger: after the engine recorded the
# epoch's closed runs it counted them twice (B: 12 GPU-h at 4200 s, 0 when read after the
# run). It now reads the ledger as of its epoch (Ledger.marks)
def test_a_snapshot_kept_past_its_epoch_still_says_what_the_ledger_said_at_the_epoch():
    from optalloc.sim.engine import simulate
    from tests.test_fairness_over_time_judge_cases import endless
    from tests.test_fairness_over_time_judge_cases import flat as sim_flat
    from tests.test_fairness_over_time_judge_cases import scenario

    sc = scenario(endless("A", 40, gpus=16, hours=3) + endless("B", 400, hours=3),
                  sim_flat(A=1, B=1), nodes=(8, 8, 8), hours=6, epoch_s=600)
    lazy, eager = _Keeps(False), _Keeps(True)
    simulate(sc, lazy)
    simulate(sc, eager)
    assert [s.now for s in lazy.snaps] == [s.now for s in eager.snaps]
    assert [s.owed_shortfall.tolist() for s in lazy.snaps] == [
        s.owed_shortfall.tolist() for s in eager.snaps]


def test_the_window_edges_and_the_names_the_snapshot_does_not_know():
    # lookback 4 h at 6 h: only [2 h, 6 h]. B1's run [0, 2 h] is outside, [2 h, 3 h] inside;
    # names outside the org tree and negative entries read as nothing
    org = flat(A=1, B=1)
    led = Ledger((GpuType("h100"),), OrgTree.build(org, ["h100"]), Policy(lookback_s=4 * H))
    led.record_capacity(0.0, {"h100": 8})
    led.record_demand(0.0, {"A": 4, "B": 4})
    led.record_interval(Interval("b0", "B", "h100", 4, 0.0, 2 * H))
    led.record_interval(Interval("b1", "B", "h100", 4, 2 * H, 3 * H))
    led.record_interval(Interval("a0", "A", "h100", 4, 6 * H, 7 * H))  # after now: nothing
    assert led.owed_shortfall(6 * H) == {"root": 28.0, "A": 16.0, "B": 12.0}
    snap = snap_of(org, nodes(1), queued("A", 1, 8), {}, {"ghost": 5.0, "A": -3.0, "B": 2.0})
    assert snap.owed_shortfall.tolist() == [0.0, 0.0, 2.0]


# ----------------------------------------------------------------------------- records


CONFIG = textwrap.dedent(
    """
    gpu_types: [{name: h100}]
    nodes: [{name: "n[1-2]", gpu_type: h100, gpus: 8}]
    org:
      name: root
      children:
        - {name: a, share: 1}
        - {name: b, share: 1}
    policy: {solver: {backend: highs, time_limit: 10s}}
    jobs:
      - {id: a1, project: a, gpus: 16, min_runtime: 8h, duration: 20h}
      - {id: b1, project: b, gpus: 4, min_runtime: 1h, duration: 2h, submit_time: 60}
    """
)


@pytest.mark.parametrize("policy", ["ilp", "greedy"])
def test_the_recorded_shortfall_is_what_the_ledger_said_at_the_epoch_whatever_the_policy(
        tmp_path, policy, capsys):
    # a's 16-GPU job holds both nodes from 0 (protected 8 h); b's 4-GPU job waits from 60 s.
    # Epochs at 0, 60, 2 h: at 2 h b was owed 4 GPUs from 60 s and got none. Greedy never
    # reads the shortfall: the record asks for it after the decision (the lazy callable) and
    # must still see the ledger as it was then
    from optalloc.cli import main

    cfg, db = tmp_path / "c.yaml", tmp_path / "s.db"
    cfg.write_text(CONFIG)
    for t in ("0", "60", "7200"):
        assert main(["epoch", "--config", str(cfg), "--state", str(db), "--now", t,
                     "--policy", policy]) == 0
    con = sqlite3.connect(db)
    (doc,) = con.execute("SELECT plan FROM epochs ORDER BY id DESC LIMIT 1").fetchone()
    con.close()
    assert json.loads(doc)["inputs"]["shortfall"] == {"b": pytest.approx(4 * 7140 / H)}


def test_explain_on_a_state_db_written_before_the_debt_reads_no_shortfall(tmp_path, capsys):
    from optalloc.cli import main

    cfg, db = tmp_path / "c.yaml", tmp_path / "s.db"
    cfg.write_text(CONFIG)
    for t in ("0", "60", "7200"):
        assert main(["epoch", "--config", str(cfg), "--state", str(db), "--now", t]) == 0
    capsys.readouterr()
    assert main(["explain", "b1", "--config", str(cfg), "--state", str(db), "--json"]) == 0
    now = json.loads(capsys.readouterr().out)
    con = sqlite3.connect(db)
    (i, doc) = con.execute("SELECT id, plan FROM epochs ORDER BY id DESC LIMIT 1").fetchone()
    old = json.loads(doc)
    del old["inputs"]["shortfall"]  # as written before the change
    con.execute("UPDATE epochs SET plan = ? WHERE id = ?", (json.dumps(old), i))
    con.commit()
    con.close()
    assert main(["explain", "b1", "--config", str(cfg), "--state", str(db), "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert before == now and before["outcome"] == "pending"
