"""A pending job is told the true cause, not a true-sounding other one (DESIGN.md section 8; a
reviewer's three faults after stop 46, optalloc.plan.true_causes), each case with the whole
expected outcome: starts, reservations and every pending reason.

1. A gang whose shape fits the free GPUs, but only with those of nodes reserved for a gang it
   would outlast, was told (as the reason without the lookahead, under its HeldForReservation)
   that its shape fits no free nodes: "needs 4 GPUs as one node; h100 has 6 free GPUs but the
   largest free node has 4".
2. A job waiting for capacity was told the GPUs neither protected nor free were held by
   projects whose GPUs there were all protected, for their floors and targets (or past a
   target): those GPUs are counted as protected already, and no target of theirs holds them.
3. A job whose start the plan gave back so that a waiting teammate of a higher priority took
   its place (optalloc.plan.several_places; step 4c, optalloc.plan.repack_order) was told only
   of a share (the bench's 1,024-GPU epoch, seed 0: j01839, j01371 and j01781 of P2-4, told D0
   held its h100 target, while P2-4's priority-2 j01081 took their places).

The expected starts count the 60 s notice (the policy's grace) of the jobs still on the
reserved nodes when their protections end (stop 55): t=63060, not 63000."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from optalloc.bench.instances import scale_instance
from optalloc.epoch import run_epoch
from optalloc.epoch_status import repack_team_order
from optalloc.plan.reasons import pending_reasons
from optalloc.types import Job, Node, ReasonCode

from test_epoch_repack_order import _scattered
from test_epoch_toy import H, flat_org, running, snapshot
from test_reasons_reserved_nodes import Case, check_case

NOW = 10 * H
R = ReasonCode
G_AT_63000 = "job G's reservation (expected start t=63060 (in 7.52h))"
HOLD = "this job would hold its GPUs until t=64800 (in 8h)"
PAST = "past a target with whole jobs, which cannot shrink to it"


def _nodes(k: int, gpus: int = 4) -> list[Node]:
    return [Node(f"n{i}", "h100", gpus) for i in range(k)]


def _b_c(c_on: str = "n4", *more: Job) -> list[Job]:
    """B's protected jobs on n0 and n1, C's on `c_on` (all until t=63000), B's 12-GPU gang G."""
    return [running("rb0", "B", "h100", [("n0", range(4))], NOW - 0.5 * H, 8 * H),
            running("rb1", "B", "h100", [("n1", range(4))], NOW - 0.5 * H, 8 * H),
            running("ry", "C", "h100", [(c_on, range(4))], NOW - 0.5 * H, 8 * H), *more,
            Job("G", "B", 12, min_runtime_s=8 * H, submit_time=0.0)]


def _rz() -> Job:
    """C's protected 2-GPU job on n5, 2 GPUs free beside it."""
    return running("rz", "C", "h100", [("n5", range(2))], NOW - 0.5 * H, 20 * H)


def _a(gpus: int, gpus_per_node: int | None = None, priority: int = 1) -> Job:
    return Job("a", "A", gpus, gpus_per_node=gpus_per_node, min_runtime_s=8 * H,
               priority=priority, submit_time=5.0)


SHARES, USAGE = {"A": 3, "B": 4, "C": 1}, {"A": 0.0, "B": 0.0, "C": 1.0}
G_N2_4 = ("reserved nodes n[2-4] for job G (12 h100 GPUs of project B), expected start "
          "t=63060 (in 7.52h); 1 job there ends or loses protection by then")
G_N3_5 = ("reserved nodes n[3-5] for job G (12 h100 GPUs of project B), expected start "
          "t=63060 (in 7.52h); 2 jobs there end or lose protection by then")


def _held(gpus: str, nodes: str) -> str:
    return (f"the {gpus} free h100 GPUs on {nodes} are held for {G_AT_63000}; {HOLD} (its "
            "protection, or its expected end if sooner), past that start")


RESERVED_CASES = [
    Case("a whole-node gang whose two free nodes are reserved for a gang it would outlast is "
         "told the reservation keeps it off them, not that its shape fits no free nodes",
         _nodes(5), SHARES, _b_c() + [_a(8)], USAGE,
         started={}, reserved={"G": (("n2", "n3", "n4"), 63060.0)},
         pending={"G": (R.RESERVED, G_N2_4),
                  "a": (R.HELD_FOR_RESERVATION, _held("8", "n[2-3]"))},
         underlying={"a": (R.GANG_DOES_NOT_FIT, (
             "needs 8 GPUs as whole-node gang; h100 has 8 free GPUs and 2 nodes entirely "
             f"free, enough for it, but 8 of them, on n[2-3], are held for {G_AT_63000}, and "
             "this job would hold its GPUs until t=64800 (in 8h), past that start; off those "
             "nodes the largest free node has 0 and 0 nodes are entirely free"))}),
    Case("a one-node job whose only free whole node is reserved is told so, not that no free "
         "node holds it, and of its higher-priority teammate's start beside",
         _nodes(6), SHARES, _b_c("n4", _rz()) + [
             Job("a0", "A", 4, min_runtime_s=8 * H, priority=2, submit_time=4.0), _a(4)],
         USAGE,
         started={"a0": ("n2",)}, reserved={"G": (("n3", "n4", "n5"), 63060.0)},
         pending={"G": (R.RESERVED, G_N3_5),
                  "a": (R.HELD_FOR_RESERVATION, _held("6", "n[3,5]"))},
         underlying={"a": (R.GANG_DOES_NOT_FIT, (
             "needs 4 GPUs as one node; h100 has 6 free GPUs and 1 nodes entirely free, enough "
             f"for it, but 6 of them, on n[3,5], are held for {G_AT_63000}, and this job would "
             "hold its GPUs until t=64800 (in 8h), past that start; off those nodes the "
             "largest free node has 0 and 0 nodes are entirely free; the rest: 4 run 1 of its "
             "jobs with a higher priority than 1 that starts on h100 this epoch (a0): the "
             "team's order starts it first"))}),
    Case("a per-node gang that fits the free GPUs only with those of reserved nodes is told "
         "what fits it off them",
         _nodes(6), SHARES, _b_c("n4", _rz()) + [_a(4, gpus_per_node=2)], USAGE,
         started={}, reserved={"G": (("n3", "n4", "n5"), 63060.0)},
         pending={"G": (R.RESERVED, G_N3_5),
                  "a": (R.HELD_FOR_RESERVATION, _held("6", "n[3,5]"))},
         underlying={"a": (R.GANG_DOES_NOT_FIT, (
             "needs 4 GPUs as per-node gang; h100 has 10 free GPUs and 2 nodes entirely free, "
             f"enough for it, but 6 of them, on n[3,5], are held for {G_AT_63000}, and this "
             "job would hold its GPUs until t=64800 (in 8h), past that start; off those nodes "
             "the largest free node has 4 and 1 nodes are entirely free"))}),
]


@pytest.mark.parametrize("case", RESERVED_CASES, ids=[c.name for c in RESERVED_CASES])
def test_reserved_nodes_not_the_shape(case: Case):
    check_case(case)


def test_a_gang_that_fits_no_free_nodes_is_still_told_its_shape():
    """Four nodes with one free GPU each: no node holds A's 4-GPU job, reservation or not."""
    jobs = [running(f"rb{i}", "B", "h100", [(f"n{i}", range(3))], NOW - 0.5 * H, 8 * H)
            for i in range(4)] + [_a(4)]
    plan = run_epoch(snapshot(_nodes(4), flat_org({"A": 1, "B": 1}), jobs))
    assert {r.job_id: (r.code, r.message) for r in plan.pending} == {
        "a": (R.GANG_DOES_NOT_FIT, "needs 4 GPUs as one node; h100 has 4 free GPUs but the "
              "largest free node has 1 and 0 nodes are entirely free")}


@dataclass(frozen=True)
class Waits:
    name: str
    nodes: list
    shares: dict
    jobs: list
    usage: dict
    now: float
    started: dict  # job -> nodes it starts on
    pending: dict  # job -> (code, message)


def _ran(jid: str, project: str, node: str, gpus: int, ago: float, gpus_at: int = 0) -> Job:
    """A running job of `gpus` GPUs on `node`, started `ago` hours before NOW, 8 hours of
    protection (past it at 9 hours ago)."""
    return running(jid, project, "h100", [(node, range(gpus_at, gpus_at + gpus))],
                   NOW - ago * H, 8 * H)


def _four_full(c_jobs: list[Job]) -> list[Job]:
    """4 x 4 GPUs: B's protected jobs on n0 and n1, C's `c_jobs` and D's job past its
    protection on n2 and n3; A queues an 8-GPU job."""
    return [_ran("rb0", "B", "n0", 4, 0.5), _ran("rb1", "B", "n1", 4, 0.5), *c_jobs,
            _ran("rd", "D", "n3", 4, 9), Job("a", "A", 8, min_runtime_s=8 * H, submit_time=5.0)]


A_BELOW = ("A is below its h100 floor (0 of 2 GPUs) and this job needs 8 more: 8 h100 GPUs are "
           "protected (the first protection ends at t=63000), 0 free; ")
WAITS = [
    Waits("a project whose GPUs are all protected is not named among those that hold the rest "
          "past their targets",
          _nodes(4), {"A": 2, "B": 2, "C": 6, "D": 6}, _four_full([_ran("rc", "C", "n2", 4, 9)]),
          {"A": 0.0, "B": 1.0, "C": 1.0, "D": 1.0}, NOW, started={},
          pending={"a": (R.WAITING_FOR_CAPACITY, A_BELOW + "the rest are held by C (4 of "
                         f"target 3), D (4 of target 3): {PAST}")}),
    Waits("a project holding the rest with some of its jobs protected says how many",
          _nodes(4), {"A": 2, "B": 2, "C": 6, "D": 6},
          _four_full([_ran("rc1", "C", "n2", 2, 0.5), _ran("rc2", "C", "n2", 2, 9, 2)]),
          {"A": 0.0, "B": 1.0, "C": 1.0, "D": 1.0}, NOW, started={},
          pending={"a": (R.WAITING_FOR_CAPACITY, A_BELOW.replace(
              "8 h100 GPUs are protected", "10 h100 GPUs are protected")
              + f"the rest are held by D (4 of target 3), C (4 of target 3, 2 of them "
              f"protected): {PAST}")}),
    Waits("a gang below its floor is told only the unprotected holders hold their own floors "
          "and targets",
          _nodes(6), SHARES, _b_c("n4", _rz()) + [_a(4)], USAGE, NOW,
          started={"a": ("n2",)},
          pending={"G": (R.WAITING_FOR_CAPACITY, (
              "B is below its h100 floor (8 of 12 GPUs) and this job needs 12 more: 14 h100 "
              "GPUs are protected (the first protection ends at t=63000), 6 free; the rest hold "
              "their own floors and targets: A (4 of target 4)"))}),
    Waits("a gang below its floor is not told that a project running only protected jobs holds "
          "the rest past its target",
          _nodes(5), SHARES, _b_c() + [_a(8)], USAGE, NOW, started={"a": ("n2", "n3")},
          pending={"G": (R.WAITING_FOR_CAPACITY, (
              "B is below its h100 floor (8 of 10 GPUs) and this job needs 12 more: 12 h100 "
              "GPUs are protected (the first protection ends at t=63000), 0 free; the rest are "
              f"held by A (8 of target 6): {PAST}"))}),
    Waits("a job with room in its target is told only the unprotected holders are past theirs",
          _nodes(3, 8), {"A": 1, "B": 2, "C": 1},
          [running("rb", "B", "h100", [("n0", range(8))], 17 * H, 8 * H),
           running("ra", "A", "h100", [("n1", range(8))], 17 * H, 8 * H),
           running("rc", "C", "h100", [("n2", range(8))], 19 * H, 900.0),
           Job("b", "B", 2, min_runtime_s=900.0, submit_time=2.0)],
          {"A": 0.0, "B": 2.5, "C": 2.0}, 20 * H, started={},
          pending={"b": (R.WAITING_FOR_CAPACITY, (
              "project B is below its floor (8 of 10 h100 GPUs; its target 10), but 2 GPUs of "
              "h100 are not free, and the plan preempts none for it: 16 h100 GPUs are protected "
              f"(the first protection ends at t=90000), the rest are held by C (8 of target 6): "
              f"{PAST} (0 free)"))}),
]


@pytest.mark.parametrize("case", WAITS, ids=[c.name for c in WAITS])
def test_the_rest_is_held_by_unprotected_jobs(case: Waits):
    snap = snapshot(case.nodes, flat_org(case.shares), case.jobs, now=case.now,
                    usage=case.usage)
    plan = run_epoch(snap)
    running_ids = {j.id for j in case.jobs if j.running}
    assert {p.job_id: tuple(a.node for a in p.nodes) for p in plan.placements
            if p.job_id not in running_ids} == case.started
    assert plan.preemptions == ()
    assert {r.job_id: (r.code, r.message) for r in plan.pending} == case.pending


TOOK = ("of project {p}, with a higher priority than {prio}, starts in its place on {t} this "
        "epoch: the team's order gives a waiting job the places of its lower-priority "
        "teammates' starts; ")


def test_a_start_given_back_for_a_higher_priority_teammate_is_told_who_took_its_place():
    """Step 4c on tests/test_epoch_repack_order.py's scattered places: hi takes n0 with b1
    moved, lo (A's priority-0 1 + 1 gang) waits, and is told hi took its place first."""
    snap, em, out = _scattered()
    alt = repack_team_order(em, out, snap.policy.solver)
    why = {r.job_id: (r.code, r.message, dict(r.details).get("taken_by"))
           for r in pending_reasons(em, alt.placed, None)}
    assert why == {"lo": (
        R.LOWER_PRIORITY_IN_PROJECT,
        "hi " + TOOK.format(p="A", prio=0, t="h100") + "project A's h100 target this epoch is "
        "3 GPUs and it holds 2, 2 of them in 1 of its jobs with a higher priority than 0 (hi), "
        "which a job behind them in the team's order does not displace; this job needs 2",
        ["hi"])}


D1_HOLDS = ("D1 holds 307 h100 GPUs, its fair-share target this epoch is 303 (floor 302, "
            "entitled 302.4, usage ratio 0.33); starting this {g}-GPU job would exceed it; the "
            "rest goes to D0 (usage ratio 0.35, holds 197 of target 201)")


@pytest.mark.parametrize("job, gpus, prio, took, project", [
    ("j00249", 4, 1, "j00889", "P1-3"), ("j00744", 2, 0, "j01208", "P1-1")])
def test_on_the_1024_gpu_bench_epoch_seed_0_starts_given_back_name_who_took_their_places(
        job, gpus, prio, took, project):
    """The bench's seed 0: step 4c gives P1-3's priority-2 8-GPU j00889 (h100 only) the h100
    places of its lower-priority j00249 (4 GPUs, priority 1, on h100-008 and h100-051), among
    others, and P1-1's priority-1 4-GPU j01208 (h100 only) those of its j00744 (2 GPUs,
    priority 0, on h100-062); each is told so before D1's h100 target (D1 holds 307 of the
    504 h100 GPUs the plan runs, D0 197), which it was told alone. (Until stop 55 the case
    was P1-5's j00112 on b200, taking the places of j00133 and j01175: the same-priority
    type-order links (optalloc.model.type_order) moved the plan; until stop 54 P2-4's j01081
    on h100: a non-resumable job whose node is down is no restart candidate since, and the
    plan moved.)"""
    plan = _bench_seed_0()
    r = next(r for r in plan.pending if r.job_id == job)
    assert (r.code, r.message, dict(r.details)["taken_by"]) == (
        R.OVER_SHARE, f"{took} " + TOOK.format(p=project, prio=prio, t="h100")
        + D1_HOLDS.format(g=gpus), [took])


def test_on_the_1024_gpu_bench_epoch_seed_0_every_start_given_back_names_who_took_it():
    plan = _bench_seed_0()
    named = [r for r in plan.pending if "taken_by" in dict(r.details)]
    assert len(named) >= 3
    on = {p.job_id for p in plan.placements}
    for r in named:
        took = dict(r.details)["taken_by"]
        assert set(took) <= on and r.message.startswith(f"{', '.join(took[:3])} of project ")


_PLANS: dict = {}


def _bench_seed_0():
    if "M0" not in _PLANS:
        _PLANS["M0"] = run_epoch(scale_instance("M", 0))
    return _PLANS["M0"]
