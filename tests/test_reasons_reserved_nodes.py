"""A job kept off reserved nodes is told so, whoever backfills them, and a fair-share target
below a floor says why (DESIGN.md section 8, rules 3, 6 and 7). A helper's hand-written cases at
stop 46, each with the whole expected outcome: starts, reservations and every pending reason.

The first case: four 4-GPU h100 nodes; B runs n0 and n1, C a protected job on n3 until t=63000;
B's 8-GPU gang G reserves n2 + n3. A (share 1 of 8, usage ratio 1.0) queues a priority-1 4-GPU
job `a` of 8 hours and two priority-0 2-GPU jobs of 10 minutes, which backfill n2: they end
before G's start, `a` would not. `a` was told only "OverShare ... target this epoch is 1
(floor 2)": its target below its floor with no word of why, and no word of the reservation,
which alone keeps it off n2 (without the lookahead it starts there, A past its target or not:
nobody else can use the node this epoch). Since stop 55 G's expected start counts the 60 s
notice (the policy's grace) that C's job gets when its protection ends: t=63060."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from optalloc.epoch import run_epoch
from optalloc.sim.invariants import team_order_breaks
from optalloc.types import Job, Node, Policy, ReasonCode

from test_epoch_toy import H, flat_org, running, snapshot

NOW = 10 * H
R = ReasonCode
LOOKAHEAD = Policy(max_reservations=2)
G_RESERVED = ("reserved nodes n[2-3] for job G (8 h100 GPUs of project B), expected start "
              "t=63060 (in 7.52h); 1 job there ends or loses protection by then")
KEPT_OFF_N2 = ("the 4 h100 GPUs on n2 (4 running c1, c2 until then) are held for job G's "
               "reservation (expected start t=63060 (in 7.52h)); this job would hold its GPUs "
               "until t=64800 (in 8h) (its protection, or its expected end if sooner), past "
               "that start; c1, c2 of project A rank below it in its team's order but end by "
               "that start, so they may backfill there and this job may not")
A_PAST = "; besides, A holds 4 h100 GPUs, its fair-share target this epoch is 1, and this "


def _nodes(k: int) -> list[Node]:
    return [Node(f"n{i}", "h100", 4) for i in range(k)]


def _running() -> list[Job]:
    return [running("rb0", "B", "h100", [("n0", range(4))], NOW - 0.5 * H, 8 * H),
            running("rb1", "B", "h100", [("n1", range(4))], NOW - 0.5 * H, 8 * H),
            running("ry", "C", "h100", [("n3", range(4))], NOW - 0.5 * H, 8 * H)]


def _gang() -> Job:
    return Job("G", "B", 8, min_runtime_s=8 * H, submit_time=0.0)


def _long(gpus: int = 4, min_runtime_s: float = 8 * H) -> Job:
    return Job("a", "A", gpus, min_runtime_s=min_runtime_s, priority=1, submit_time=5.0)


def _shorts(project: str = "A") -> list[Job]:
    return [Job(f"c{i}", project, 2, min_runtime_s=600, duration_s=600, submit_time=float(i))
            for i in (1, 2)]


@dataclass(frozen=True)
class Case:
    name: str
    nodes: list
    shares: dict
    jobs: list
    usage: dict
    started: dict  # job -> nodes it starts on
    reserved: dict  # job -> (nodes, expected start)
    pending: dict  # job -> (code, message)
    underlying: dict = field(default_factory=dict)  # job -> (code, message) without the lookahead


USAGE = {"A": 1.0, "B": 0.0, "C": 1.0}
SHARES = {"A": 1, "B": 6, "C": 1}
A_SHARE_LINE = (
    "A holds 4 h100 GPUs, its fair-share target this epoch is 1 (entitled 2.0, usage ratio "
    "1.00; its floor of 2 is cut to the target this epoch: protected jobs hold more GPUs than "
    "their projects' floors (C 4 of floor 2), so the floors share what is left in proportion); "
    "starting this 4-GPU job would exceed it")

CASES = [
    Case("a long job kept off the reserved node its short lower-priority teammates backfill is "
         "told so, and that its project is past its target besides",
         _nodes(4), SHARES, _running() + [_gang(), _long()] + _shorts(), USAGE,
         started={"c1": ("n2",), "c2": ("n2",)},
         reserved={"G": (("n2", "n3"), 63060.0)},
         pending={"G": (R.RESERVED, G_RESERVED),
                  "a": (R.HELD_FOR_RESERVATION,
                        KEPT_OFF_N2 + A_PAST + "4-GPU job would exceed "
                        "it")},
         underlying={"a": (R.OVER_SHARE, A_SHARE_LINE + "; the rest goes to B (usage ratio "
                           "0.00, holds 16 of target 11, 8 of them for its reserved gangs), C "
                           "(usage ratio 1.00, holds 4 of target 4); 4 of them run 2 of its "
                           "jobs with a lower priority than 1 that start on h100 this epoch "
                           "(c1, c2): it does not fit in their places, alone or together with "
                           "the free GPUs beside them, or a job ahead of it in its team's order "
                           "waits, or they backfill nodes reserved for a gang, which end or may "
                           "be preempted before its start and this job would not")}),
    Case("a long job of a project within its share, kept off the reserved node its teammates "
         "backfill, is told of the reservation alone",
         _nodes(4), {"A": 3, "B": 4, "C": 1}, _running() + [_gang(), _long()] + _shorts(),
         {"A": 0.0, "B": 0.0, "C": 1.0},
         started={"c1": ("n2",), "c2": ("n2",)},
         reserved={"G": (("n2", "n3"), 63060.0)},
         pending={"G": (R.RESERVED, G_RESERVED),
                  "a": (R.HELD_FOR_RESERVATION, KEPT_OFF_N2)}),
    Case("a job short enough to end before the reservation's start goes first in its team's "
         "order, and its lower-priority teammates wait behind it",
         _nodes(4), SHARES, _running() + [_gang(), _long(min_runtime_s=H)] + _shorts(), USAGE,
         started={"a": ("n2",)},
         reserved={"G": (("n2", "n3"), 63060.0)},
         pending={"G": (R.RESERVED, G_RESERVED)} | {
             c: (R.LOWER_PRIORITY_IN_PROJECT,
                 "project A's h100 target this epoch is 1 GPUs and it holds 4, 4 of them in 1 of "
                 "its jobs with a higher priority than 0 (a), which a job behind them in the "
                 "team's order does not displace; this job needs 2") for c in ("c1", "c2")}),
    Case("another project's short jobs on the reserved node do not keep off a job that waits "
         "for capacity: the reservation does (it could not use the node were they not there; "
         "tests/test_reasons_reserved_nodes_more.py)",
         _nodes(4), SHARES, _running() + [_gang(), _long()] + _shorts("C"), USAGE,
         started={"c1": ("n2",), "c2": ("n2",)},
         reserved={"G": (("n2", "n3"), 63060.0)},
         pending={"G": (R.RESERVED, G_RESERVED),
                  "a": (R.HELD_FOR_RESERVATION,
                        KEPT_OFF_N2.replace("of project A rank below it in its team's order but "
                                            "end", "of project C end"))}),
    Case("a long job of the reserved gang's own project is told its project is past its "
         "target with its reserved gang, not that it holds every allocated GPU",
         _nodes(4), SHARES, _running() + [
             _gang(), Job("b4", "B", 4, min_runtime_s=8 * H, submit_time=3.0), _long()]
         + _shorts(), USAGE,
         started={"c1": ("n2",), "c2": ("n2",)},
         reserved={"G": (("n2", "n3"), 63060.0)},
         pending={"G": (R.RESERVED, G_RESERVED),
                  "b4": (R.OVER_SHARE,
                         "B holds 16 h100 GPUs (8 of them for its reserved gangs), its "
                         "fair-share target this epoch is 11 (entitled 12.0, usage ratio 0.00; "
                         "its floor of 12 is cut to the target this epoch: protected jobs hold "
                         "more GPUs than their projects' floors (C 4 of floor 2), so the floors "
                         "share what is left in proportion); starting this 4-GPU job would "
                         "exceed it; the rest goes to A (usage ratio 1.00, holds 4 of target 1), "
                         "C (usage ratio 1.00, holds 4 of target 4)"),
                  "a": (R.HELD_FOR_RESERVATION,
                        KEPT_OFF_N2 + A_PAST + "4-GPU job would exceed "
                        "it")}),
    Case("with two reservations, a two-node job kept off both free nodes of the nearer one, "
         "one backfilled by its teammates, is told of both nodes",
         _nodes(8), {"A": 1, "B": 6, "C": 1, "D": 6, "E": 2},
         _running() + [
             running("re", "E", "h100", [("n4", range(4))], NOW - 4 * H, 8 * H),
             running("rd", "D", "h100", [("n5", range(4))], NOW - H, 8 * H),
             running("rf", "E", "h100", [("n7", range(4))], NOW - 5 * H, 8 * H),
             Job("G", "B", 12, min_runtime_s=8 * H, submit_time=0.0),
             Job("GD", "D", 12, min_runtime_s=8 * H, submit_time=0.5),
             _long(gpus=8)] + _shorts(),
         {"A": 1.0, "B": 0.0, "C": 1.0, "D": 0.0, "E": 1.0},
         started={"c1": ("n2",), "c2": ("n2",)},
         reserved={"G": (("n2", "n6", "n7"), 46860.0), "GD": (("n0", "n1", "n3"), 63060.0)},
         pending={
             "G": (R.RESERVED, "reserved nodes n[2,6-7] for job G (12 h100 GPUs of project B), "
                   "expected start t=46860 (in 3.02h); 1 job there ends or loses protection by "
                   "then"),
             "GD": (R.RESERVED, "reserved nodes n[0-1,3] for job GD (12 h100 GPUs of project "
                    "D), expected start t=63060 (in 7.52h); 3 jobs there end or lose protection "
                    "by then"),
             "a": (R.HELD_FOR_RESERVATION,
                   "the 8 h100 GPUs on n[2,6] (4 free, 4 running c1, c2 until then) are held "
                   "for job G's reservation (expected start t=46860 (in 3.02h)); this job would "
                   "hold its GPUs until t=64800 (in 8h) (its protection, or its expected end if "
                   "sooner), past that start; c1, c2 of project A rank below it in its team's order but end by that "
                   "start, so they may backfill there and this job may not" + A_PAST
                   + "8-GPU job would exceed it")}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reserved_nodes(case: Case):
    check_case(case)


def check_case(case: Case) -> None:
    """The case's epoch with the lookahead: its whole expected outcome (also
    tests/test_reasons_reserved_nodes_more.py)."""
    snap = snapshot(case.nodes, flat_org(case.shares), case.jobs, usage=case.usage,
                    policy=LOOKAHEAD)
    plan = run_epoch(snap)
    running_ids = {j.id for j in case.jobs if j.running}
    assert {p.job_id: tuple(a.node for a in p.nodes) for p in plan.placements
            if p.job_id not in running_ids} == case.started
    assert running_ids <= {p.job_id for p in plan.placements}
    assert plan.preemptions == ()
    assert {r.job_id: (r.nodes, r.expected_start) for r in plan.reservations} == case.reserved
    assert {r.job_id: (r.code, r.message) for r in plan.pending} == case.pending
    for job, (code, message) in case.underlying.items():
        d = dict(next(r for r in plan.pending if r.job_id == job).details)
        assert (d["underlying"], d["underlying_message"]) == (code.value, message)
    # backfilling reserved nodes past a teammate ranked above is the scheme's own exception
    # to the team's order (README, "Large gangs: lookahead"), which the invariant allows
    assert not team_order_breaks(snap, plan)


def test_without_the_lookahead_the_long_job_starts_on_the_node_past_its_projects_target():
    """The reservation, not A's share, keeps `a` off n2: without it `a` starts there (no one
    else can use the node this epoch), and its teammates wait behind it in its team's order."""
    snap = snapshot(_nodes(4), flat_org(SHARES), _running() + [_gang(), _long()] + _shorts(),
                    usage=USAGE)
    plan = run_epoch(snap)
    assert {p.job_id: tuple(a.node for a in p.nodes) for p in plan.placements
            if p.job_id in ("a", "c1", "c2")} == {"a": ("n2",)}


def test_a_target_cut_below_its_floor_by_its_teams_order_says_so():
    """Two 8-GPU nodes; A (entitled 5) queues two 4-GPU jobs: whole, in its team's order, they
    fill 4 of its floor of 5, so the rest flows to B and A's target is 4."""
    jobs = [Job("a1", "A", 4, min_runtime_s=8 * H, submit_time=1.0),
            Job("a2", "A", 4, min_runtime_s=8 * H, submit_time=2.0)]
    jobs += [Job(f"b{i}", "B", 1, min_runtime_s=8 * H, submit_time=3.0 + i) for i in range(16)]
    snap = snapshot([Node("n0", "h100", 8), Node("n1", "h100", 8)], flat_org({"A": 5, "B": 11}),
                    jobs, usage={"A": 0.5, "B": 1.0})
    plan = run_epoch(snap)
    why = {r.job_id: (r.code, r.message) for r in plan.pending}
    assert why["a2"] == (R.WAITING_FOR_CAPACITY, (
        "A is below its h100 floor (4 of 5 GPUs; its target 4, cut below the floor this epoch: "
        "its jobs, whole and in its team's order, fill only 4 GPUs of it) and this job needs 4 "
        "more: 0 h100 GPUs are protected, 0 free; the rest hold their own floors and targets: B "
        "(12 of target 12)"))
    assert {j for j, (c, _) in why.items() if c is R.OVER_SHARE} == {f"b{i}" for i in range(12, 16)}
