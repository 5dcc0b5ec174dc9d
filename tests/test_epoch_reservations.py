"""The lookahead for large gangs (optalloc.model.reservations): one table of hand-built
epochs, each with the whole expected outcome (GPUs per job after the plan, preemptions with
their codes and takers, pending codes, the reservations after the plan with their nodes,
expected start and idle GPUs, and the reservations that ended with their outcome), named like
the sentence it checks. Properties over random gang-heavy clusters are in
tests/test_epoch_reservation_properties.py; the starving 512-GPU gang in
tests/test_sim_gangs.py."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from optalloc.epoch import run_epoch
from optalloc.snapshot import build_snapshot
from optalloc.types import Config, GpuType, Job, Policy, Reservation

from test_epoch_toy import H, flat_org, nodes_of, running

M = 60.0
NOW = 10 * H
# the jobs still on a gang's reserved nodes when they are clear (nothing protected left) get
# notice then and keep their GPUs through the grace (Policy's default, 60 s): the expected
# start is that much later than the clear time (stop 55; the plans are unchanged)
NOTICE = Policy().grace_s


def _b(jid: str, node: str, ends_in: float, project: str = "B", **kw) -> Job:
    """A running 8-GPU job on `node` whose 8 h protection ends `ends_in` from now (negative:
    it ended that long ago)."""
    return running(jid, project, "h100", [(node, range(8))], start=NOW - 8 * H + ends_in,
                   min_runtime_s=8 * H, **kw)


def _snap(nodes, shares, jobs, usage=None, prev=(), policy=None):
    cfg = Config((GpuType("h100"),), tuple(nodes), flat_org(shares), policy or Policy(max_reservations=2),
                 tuple(jobs))
    return build_snapshot(cfg, now=NOW, usage_ratio=usage or {}, reservations=prev)


def _prev(job: str, nodes, start: float, since: float = NOW - H) -> Reservation:
    return Reservation(job, "h100", tuple(nodes), start, since=since)


@dataclass
class Case:
    name: str
    snap: object
    placed: dict  # job id -> GPUs: every job running after the epoch
    pending: dict  # job id -> code
    reserved: dict  # job id -> (nodes, expected start, idle GPUs)
    preempted: dict = field(default_factory=dict)  # job id -> (code, needed_by)
    ended: dict = field(default_factory=dict)  # job id -> outcome


def _staggered() -> list[Job]:
    """n00 and n01 free; n02..n06 each held by a protected B job ending 1..5 h from now."""
    return [_b(f"b{i}", f"n{i:02d}", (i - 1) * H) for i in range(2, 7)]


def cases() -> list[Case]:
    gang = Job("G", "A", 24, min_runtime_s=8 * H, submit_time=0.0)
    out = []
    out.append(Case(
        "a gang whose project has room reserves the nodes free soonest; long work stays off "
        "them, a debug job and a job that ends before the start backfill them",
        _snap(nodes_of(7, 8), {"A": 1, "B": 1}, _staggered() + [
            gang,
            Job("L", "B", 8, min_runtime_s=8 * H, submit_time=1.0),
            Job("S", "B", 4, min_runtime_s=15 * M, submit_time=2.0),
            Job("E", "B", 4, min_runtime_s=8 * H, duration_s=30 * M, submit_time=3.0)]),
        placed={"b2": 8, "b3": 8, "b4": 8, "b5": 8, "b6": 8, "S": 4, "E": 4},
        pending={"G": "Reserved", "L": "HeldForReservation"},
        reserved={"G": (("n00", "n01", "n02"), NOW + H + NOTICE, 8)}))
    out.append(Case(
        "unallocated work backfills reserved nodes too: it is preemptible at any time",
        _snap(nodes_of(7, 8), {"A": 1, "B": 1}, _staggered() + [
            gang, Job("U", "B", 8, min_runtime_s=0.0, submit_time=1.0)]),
        placed={"b2": 8, "b3": 8, "b4": 8, "b5": 8, "b6": 8, "U": 8},
        pending={"G": "Reserved"},
        reserved={"G": (("n00", "n01", "n02"), NOW + H + NOTICE, 8)}))
    due = [_b("b0", "n00", -H), _b("b1", "n01", -2 * H), _b("b2", "n02", -10 * M),
           _b("b3", "n03", 3 * H), _b("b4", "n04", 4 * H), _b("b5", "n05", 5 * H)]
    out.append(Case(
        "once nothing protected is left on its nodes the gang starts there and the jobs past "
        "their protection are preempted with notice",
        _snap(nodes_of(6, 8), {"A": 1, "B": 1}, due + [gang], usage={"B": 1.0},
              prev=[_prev("G", ("n00", "n01", "n02"), NOW - 10 * M)]),
        placed={"G": 24, "b3": 8, "b4": 8, "b5": 8},
        pending={},
        reserved={},
        preempted={f"b{i}": ("PreemptedForFairShare", ("G",)) for i in range(3)},
        ended={"G": "started"}))
    for prio, why in ((1, "a higher priority"), (0, "its own priority submitted before it")):
        team = [_b("a0", "n00", -H, project="A", priority=prio, submit_time=0.0)] + due[1:]
        out.append(Case(
            f"a gang's reservation never holds the node of a running teammate of {why}: the "
            "team's order keeps it there, so a due reservation on it moves to nodes the gang "
            "may take and nothing is preempted",
            _snap(nodes_of(6, 8), {"A": 1, "B": 1}, team + [gang], usage={"B": 1.0},
                  prev=[_prev("G", ("n00", "n01", "n02"), NOW - 10 * M)]),
            placed={"a0": 8, "b1": 8, "b2": 8, "b3": 8, "b4": 8, "b5": 8},
            pending={"G": "Reserved"},
            reserved={"G": (("n01", "n02", "n03"), NOW + 3 * H + NOTICE, 0)}))
    out.append(Case(
        "a due gang starts on its reserved nodes, not on the node of its team's higher-priority "
        "job past its protection: the model keeps that job and stops the other project's",
        _snap(nodes_of(3, 8), {"A": 1, "B": 1},
              [_b("a0", "n00", -H, project="A", priority=1, submit_time=0.0), due[1], due[2],
               Job("G", "A", 16, min_runtime_s=8 * H, submit_time=1.0)],
              usage={"A": 0.1, "B": 1.0}, prev=[_prev("G", ("n01", "n02"), NOW - 10 * M)]),
        placed={"a0": 8, "G": 16},
        pending={},
        reserved={},
        preempted={j: ("PreemptedForFairShare", ("G",)) for j in ("b1", "b2")},
        ended={"G": "started"}))
    out.append(Case(
        "a running teammate of the gang's priority submitted after it (it ran because the gang "
        "could not) leaves with notice when the gang's reservation is due",
        _snap(nodes_of(6, 8), {"A": 1, "B": 1},
              [_b("a0", "n00", -H, project="A", submit_time=5.0)] + due[1:] + [gang],
              usage={"B": 1.0}, prev=[_prev("G", ("n00", "n01", "n02"), NOW - 10 * M)]),
        placed={"G": 24, "b3": 8, "b4": 8, "b5": 8},
        pending={},
        reserved={},
        preempted={j: ("PreemptedForFairShare", ("G",)) for j in ("a0", "b1", "b2")},
        ended={"G": "started"}))
    wait = due[:2] + [_b("b2", "n02", 10 * M)] + due[3:]
    out.append(Case(
        "a reservation never breaks a protection: with one protected job left on its nodes "
        "the gang waits for it and nothing is preempted",
        _snap(nodes_of(6, 8), {"A": 1, "B": 1}, wait + [gang], usage={"B": 1.0},
              prev=[_prev("G", ("n00", "n01", "n02"), NOW + 10 * M)]),
        placed={"b0": 8, "b1": 8, "b2": 8, "b3": 8, "b4": 8, "b5": 8},
        pending={"G": "Reserved"},
        reserved={"G": (("n00", "n01", "n02"), NOW + 10 * M + NOTICE, 0)}))
    big = Job("G", "A", 40, min_runtime_s=8 * H, submit_time=0.0)
    out.append(Case(
        "a gang larger than its project's share now holds no reservation when its project "
        "has used its share over the window: a project cannot block the cluster with huge jobs",
        _snap(nodes_of(7, 8), {"A": 1, "B": 1}, _staggered() + [
            big, Job("L", "B", 8, min_runtime_s=8 * H, submit_time=1.0)],
            usage={"A": 0.95, "B": 2.0}),
        placed={"b2": 8, "b3": 8, "b4": 8, "b5": 8, "b6": 8, "L": 8},
        pending={"G": "WaitingForCapacity"},
        reserved={}))
    out.append(Case(
        "a gang larger than its project's share now reserves when its project left enough of "
        "its share unused over the window to pay for its protected run",
        _snap(nodes_of(7, 8), {"A": 1, "B": 1}, _staggered() + [
            big, Job("L", "B", 8, min_runtime_s=8 * H, submit_time=1.0)],
            usage={"A": 0.2, "B": 2.0}),
        placed={"b2": 8, "b3": 8, "b4": 8, "b5": 8, "b6": 8},
        pending={"G": "Reserved", "L": "HeldForReservation"},
        reserved={"G": (("n00", "n01", "n02", "n03", "n04"), NOW + 3 * H + NOTICE, 16)}))
    out.append(Case(
        "a reservation is dropped when its job leaves the queue (cancelled), and says so",
        _snap(nodes_of(7, 8), {"A": 1, "B": 1}, _staggered(),
              prev=[_prev("gone", ("n00", "n01", "n02"), NOW + H)]),
        placed={"b2": 8, "b3": 8, "b4": 8, "b5": 8, "b6": 8},
        pending={},
        reserved={},
        ended={"gone": "cancelled"}))
    out.append(Case(
        "a reservation is dropped when its project is outranked: the gang no longer fits its "
        "share, and the freed nodes take long work again",
        _snap(nodes_of(7, 8), {"A": 1, "B": 1}, _staggered() + [
            big, Job("L", "B", 8, min_runtime_s=8 * H, submit_time=1.0)],
            usage={"A": 1.3, "B": 2.0},
            prev=[_prev("G", ("n00", "n01", "n02", "n03", "n04"), NOW + 3 * H)]),
        placed={"b2": 8, "b3": 8, "b4": 8, "b5": 8, "b6": 8, "L": 8},
        pending={"G": "WaitingForCapacity"},
        reserved={},
        ended={"G": "outranked"}))
    out.append(Case(
        "a reservation is dropped when a higher-priority job of its project waits (it goes "
        "first)",
        _snap(nodes_of(7, 8), {"A": 1, "B": 1}, _staggered() + [
            Job("G", "A", 24, min_runtime_s=8 * H, submit_time=0.0),
            Job("first", "A", 16, min_runtime_s=8 * H, submit_time=5.0, priority=1)],
            prev=[_prev("G", ("n00", "n01", "n02"), NOW + H)]),
        placed={"b2": 8, "b3": 8, "b4": 8, "b5": 8, "b6": 8, "first": 16},
        pending={"G": "LowerPriorityInProject"},
        reserved={},
        ended={"G": "order"}))
    out.append(Case(
        "a reservation keeps its place against an equal-priority job of its project queued "
        "again ahead of it (requeued with its older submit time): that job waits behind it",
        _snap(nodes_of(7, 8), {"A": 1, "B": 1}, _staggered() + [
            Job("G", "A", 24, min_runtime_s=8 * H, submit_time=5.0),
            Job("again", "A", 16, min_runtime_s=8 * H, submit_time=0.0)],
            prev=[_prev("G", ("n00", "n01", "n02"), NOW + H)]),
        placed={"b2": 8, "b3": 8, "b4": 8, "b5": 8, "b6": 8},
        pending={"G": "Reserved", "again": "HeldForReservation"},
        reserved={"G": (("n00", "n01", "n02"), NOW + H + NOTICE, 16)}))
    three = [Job(f"G{p}", p, 16, min_runtime_s=8 * H, submit_time=float(i))
             for i, p in enumerate("ABC")] + [Job("A2", "A", 16, min_runtime_s=8 * H,
                                                   submit_time=9.0)]
    out.append(Case(
        "at most max_reservations gangs hold nodes, one per project, best-ranked project first",
        _snap(nodes_of(8, 8), {"A": 1, "B": 1, "C": 1, "D": 1},
              [_b(f"d{i}", f"n{i:02d}", (i + 1) * H, project="D") for i in range(8)] + three,
              usage={"A": 0.5, "B": 0.1, "C": 0.3, "D": 2.0}),
        placed={f"d{i}": 8 for i in range(8)},
        pending={"GA": "WaitingForCapacity", "GB": "Reserved", "GC": "Reserved",
                 "A2": "WaitingForCapacity"},
        reserved={"GB": (("n00", "n01"), NOW + 2 * H + NOTICE, 0),
                  "GC": (("n02", "n03"), NOW + 4 * H + NOTICE, 0)}))
    out.append(Case(
        "a due gang that ends before another reservation starts may take that reservation's "
        "free node, and long work then fits on the due gang's own: longest hold placed first",
        _snap(nodes_of(4, 8), {"A": 1, "B": 1, "C": 1}, [
            running("c1", "C", "h100", [("n03", range(8))], start=NOW - 6 * H,
                    min_runtime_s=8 * H, submit_time=1.5),  # after G2: G2's turn comes first
            Job("D", "A", 16, min_runtime_s=8 * H, duration_s=H, submit_time=0.0),
            Job("G2", "C", 16, min_runtime_s=8 * H, submit_time=1.0),
            Job("L", "B", 8, min_runtime_s=8 * H, submit_time=2.0)],
            prev=[_prev("D", ("n00", "n01"), NOW - 10 * M),
                  _prev("G2", ("n02", "n03"), NOW + 2 * H)]),
        placed={"c1": 8, "D": 16, "L": 8},
        pending={"G2": "Reserved"},
        reserved={"G2": (("n02", "n03"), NOW + 2 * H + NOTICE, 0)},
        ended={"D": "started"}))
    out.append(Case(
        "a short job takes the reserved node's GPU (evicting unallocated work there) and "
        "leaves the free GPU off the reserved nodes to the long job: longest hold placed first",
        _snap(nodes_of(3, 8), {"A": 1, "B": 1, "C": 1}, [
            running("P0", "C", "h100", [("n00", range(7))], start=NOW - 8 * H + 30 * M,
                    min_runtime_s=8 * H),
            running("U", "C", "h100", [("n00", [7])], start=NOW - H, min_runtime_s=0.0),
            running("P2", "C", "h100", [("n02", range(8))], start=NOW - 7 * H,
                    min_runtime_s=8 * H),
            running("Q", "C", "h100", [("n01", range(7))], start=NOW - H, min_runtime_s=8 * H),
            Job("G", "A", 16, min_runtime_s=8 * H, submit_time=0.0),
            Job("S", "B", 1, min_runtime_s=15 * M, submit_time=1.0),
            Job("L", "B", 1, min_runtime_s=8 * H, submit_time=2.0)],
            prev=[_prev("G", ("n00", "n02"), NOW + H)]),
        placed={"P0": 7, "P2": 8, "Q": 7, "S": 1, "L": 1},
        pending={"G": "Reserved"},
        reserved={"G": (("n00", "n02"), NOW + H + NOTICE, 0)},
        preempted={"U": ("PreemptedUnallocated", ("S",))}))
    out.append(Case(
        "max_reservations 0 turns the lookahead off: long work takes the free nodes",
        _snap(nodes_of(7, 8), {"A": 1, "B": 1}, _staggered() + [
            gang, Job("L", "B", 8, min_runtime_s=8 * H, submit_time=1.0)],
            policy=Policy(max_reservations=0),
            prev=[_prev("G", ("n00", "n01", "n02"), NOW + H)]),
        placed={"b2": 8, "b3": 8, "b4": 8, "b5": 8, "b6": 8, "L": 8},
        pending={"G": "WaitingForCapacity"},
        reserved={},
        ended={"G": "off"}))
    return out


def _outcome(plan):
    placed = {p.job_id: p.gpus for p in plan.placements}
    pending = {r.job_id: r.code.value for r in plan.pending}
    reserved = {r.job_id: (r.nodes, r.expected_start, r.idle_gpus) for r in plan.reservations}
    preempted = {p.job_id: (p.code.value, p.needed_by) for p in plan.preemptions}
    ended = {e.job_id: e.outcome for e in plan.reservations_ended}
    return placed, pending, reserved, preempted, ended


@pytest.mark.parametrize("case", cases(), ids=lambda c: c.name)
def test_reservation_epoch(case: Case):
    plan = run_epoch(case.snap)
    assert plan.degraded is None
    assert _outcome(plan) == (case.placed, case.pending, case.reserved, case.preempted,
                              case.ended)


def test_the_reserved_gang_and_the_job_kept_off_its_nodes_say_why_with_the_numbers():
    snap = cases()[0].snap
    plan = run_epoch(snap)
    why = {r.job_id: r.message for r in plan.pending}
    # b2's protection ends at t=39600, then its 60 s notice
    assert why["G"] == ("reserved nodes n[00-02] for job G (24 h100 GPUs of project A), "
                        "expected start t=39660 (in 1.02h); 1 job there ends or loses "
                        "protection by then")
    # S and E backfill one of the two free reserved nodes (which one is the LP's vertex), L
    # is kept off both: S and E, behind L in B's order, take the one they use only because
    # they end by the start (stop 46: L was told of the other node alone)
    (used,) = {a.node for p in plan.placements if p.job_id in ("S", "E") for a in p.nodes}
    assert used in ("n00", "n01")
    assert why["L"] == ("the 16 h100 GPUs on n[00-01] (8 free, 8 running S, E until then) are "
                        "held for job G's reservation (expected start t=39660 (in 1.02h)); this "
                        "job would hold its GPUs until t=64800 (in 8h) (its protection, or its "
                        "expected end if sooner), past that start; S, E of project B rank below "
                        "it in its team's order but end by that start, so they may backfill "
                        "there and this job may not")
    (r,) = plan.reservations
    assert r.message == why["G"]
    assert (r.project, r.gpus, r.since) == ("A", 24, NOW)
    assert dict(r.details)["blockers"] == [{"job": "b2", "until": NOW + H, "holds": True,
                                            "protected": True}]


def test_a_reservation_keeps_its_first_epoch_and_its_nodes_from_the_previous_plan():
    first = run_epoch(cases()[0].snap)
    (r,) = first.reservations
    again = _snap(nodes_of(7, 8), {"A": 1, "B": 1}, list(cases()[0].snap.jobs),
                  prev=[Reservation("G", "h100", r.nodes, r.expected_start, since=NOW - 2 * H)])
    (r2,) = run_epoch(again).reservations
    assert (r2.nodes, r2.expected_start, r2.since) == (r.nodes, r.expected_start, NOW - 2 * H)


def test_the_message_counts_only_the_jobs_that_end_by_the_start_and_names_those_that_stay():
    # a 20-GPU gang (8 + 8 + 4): its remainder node n03 keeps a 4-GPU job protected 6 h
    jobs = [_b(f"b{i}", f"n{i:02d}", (i + 1) * H) for i in range(3)]
    jobs.append(running("c3", "B", "h100", [("n03", range(4))], start=NOW - 2 * H,
                        min_runtime_s=8 * H))
    jobs.append(Job("G", "A", 20, min_runtime_s=8 * H, submit_time=0.0))
    plan = run_epoch(_snap(nodes_of(4, 8), {"A": 1, "B": 1}, jobs,
                           policy=Policy(max_reservations=1)))
    (r,) = plan.reservations
    assert r.nodes == ("n00", "n01", "n03") and r.expected_start == NOW + 2 * H + NOTICE
    assert r.message.endswith("expected start t=43260 (in 2.02h); 2 jobs there end or lose "
                              "protection by then; 1 protected job stays beside it on a node "
                              "it needs only part of")


def test_a_reservation_whose_gang_fits_no_up_nodes_any_more_ends_unplaceable():
    import dataclasses

    from optalloc.types import NodeState

    nodes = [dataclasses.replace(n, state=NodeState.DOWN) if n.name not in ("n00", "n05") else n
             for n in nodes_of(6, 8)]
    jobs = [_b("b0", "n00", H), _b("b5", "n05", 6 * H),
            Job("G", "A", 24, min_runtime_s=8 * H, submit_time=0.0)]
    plan = run_epoch(_snap(nodes, {"A": 1, "B": 1}, jobs,
                           prev=[_prev("G", ("n00", "n01", "n02"), NOW + 3 * H)]))
    (e,) = plan.reservations_ended
    assert (e.job_id, e.outcome) == ("G", "unplaceable")
    assert e.message == ("its shape fits no up nodes of its allowed types any more (it waits "
                         "for nodes to come back)")


def test_a_busy_projects_gang_reserves_within_its_share_counting_what_it_holds_at_the_start():
    # 10 nodes, A and B entitled to 40 GPUs each, both at usage ratio 1.0 (no budget to spare
    # over the window). A runs two 8-GPU jobs past their protection on n03-n04 and waits with a
    # 40-GPU gang; B holds n00-n02 with protected jobs ending in 1-3 h and n05-n09 until 5-9 h.
    # Counting the 16 GPUs A runs now, the gang never fits A's share (its later work would keep
    # it); at the gang's expected start A's jobs past protection, submitted after it (they
    # started because it could not), hold nothing the gang must wait for, so it reserves
    # n00-n04 by the share test
    jobs = [_b(f"b{i}", f"n{i:02d}", (i + 1) * H) for i in range(3)]
    jobs += [_b(f"b{i}", f"n{i:02d}", i * H) for i in range(5, 10)]
    jobs += [running(f"a{i}", "A", "h100", [(f"n{i:02d}", range(8))], start=NOW - 9 * H,
                     min_runtime_s=8 * H, submit_time=0.5) for i in (3, 4)]
    jobs += [Job("G", "A", 40, min_runtime_s=8 * H, submit_time=0.0),
             Job("L", "B", 8, min_runtime_s=8 * H, submit_time=1.0)]
    usage = {"A": 1.0, "B": 1.0}
    plan = run_epoch(_snap(nodes_of(10, 8), {"A": 1, "B": 1}, jobs, usage=usage,
                           policy=Policy(max_reservations=1)))
    (r,) = plan.reservations
    assert (r.job_id, r.expected_start, dict(r.details)["rank_test"]) == (
        "G", NOW + 3 * H + NOTICE, "share")
    assert sorted(r.nodes) == ["n00", "n01", "n02", "n03", "n04"]
    # with A's jobs protected for 7 h more, the gang cannot fit A's share before they end: it
    # reserves nodes that free by then, where A's own jobs run among them
    jobs2 = [running(j.id, "A", "h100", [(f"n0{j.id[1]}", range(8))], start=NOW - H,
                     min_runtime_s=8 * H, submit_time=0.5) if j.id in ("a3", "a4") else j for j in jobs]
    plan2 = run_epoch(_snap(nodes_of(10, 8), {"A": 1, "B": 1}, jobs2, usage=usage,
                            policy=Policy(max_reservations=1)))
    (r2,) = plan2.reservations
    assert (r2.expected_start, dict(r2.details)["rank_test"]) == (NOW + 7 * H + NOTICE, "share")
    assert {"n03", "n04"} <= set(r2.nodes)


def test_a_due_gang_starts_beside_its_reserved_nodes_when_the_plan_keeps_the_work_still_there():
    """The model does not tie a due gang to its reserved nodes: when the solver keeps an
    allocated job past its protection on one of them and free nodes elsewhere hold the gang,
    the placement starts the gang on the free reserved nodes and the next free one and keeps
    the job (it evicted it, and the placed plan fell below the solver's optimum: 26% on a
    gang-heavy run)."""
    from optalloc.model.build import build_model
    from optalloc.plan.place import place
    from optalloc.plan.holdings import as_solution
    from optalloc.solve import solve
    from optalloc.types import SolverSettings

    gang = Job("G", "A", 24, min_runtime_s=8 * H, submit_time=0.0)
    snap = _snap(nodes_of(6, 8), {"A": 1, "B": 1},
                 [_b("b0", "n00", -H), _b("b3", "n03", 3 * H), gang], usage={"B": 0.5},
                 prev=[_prev("G", ("n00", "n01", "n02"), NOW - 10 * M)])
    em = build_model(snap)
    mip = solve(em.lm, SolverSettings())
    keep = dict(zip((snap.jobs[j].id for j in em.req.run_job), mip.x[em.k].round()))
    assert mip.status == "optimal" and keep == {"b0": 1.0, "b3": 1.0}
    placed = place(em, mip.x, backfill=False)
    on = {snap.jobs[j].id: [a.node for a in p.nodes] for j, p in placed.placements.items()}
    assert on == {"G": ["n01", "n02", "n04"]}
    assert placed.kept.all()
    x = as_solution(em, placed)
    assert em.lm.violation(x) <= 1e-6
    assert abs(em.lm.objective(x) - mip.objective) <= 1e-6 * abs(mip.objective)
    plan = run_epoch(snap)
    assert {p.job_id for p in plan.placements} == {"G", "b0", "b3"} and plan.preemptions == ()


def test_a_projects_holdings_in_a_message_say_how_many_are_its_reserved_gang():
    # the share rows count a waiting reservation as held: A runs nothing, and its 24 "held"
    # GPUs are G's reservation; the message says so (it read "24 of 28 GPUs" alone, and on the
    # gang-heavy scenario "holds every allocated h100 GPU (601)" on a 512-GPU cluster)
    jobs = _staggered() + [Job("G", "A", 24, min_runtime_s=8 * H, submit_time=0.0),
                           Job("A2", "A", 24, min_runtime_s=8 * H, submit_time=0.5)]
    plan = run_epoch(_snap(nodes_of(7, 8), {"A": 1, "B": 1}, jobs))
    why = {r.job_id: (r.code.value, r.message) for r in plan.pending}
    assert why["G"][0] == "Reserved"
    assert why["A2"] == ("WaitingForCapacity",
                         "A is below its h100 floor (24 of 28 GPUs, 24 of them for its reserved "
                         "gangs; its target 16, cut below the floor this epoch: protected jobs "
                         "hold more GPUs than their projects' floors (B 40 of floor 28), so the "
                         "floors share what is left in proportion) and this job needs 24 more: "
                         "40 h100 GPUs are protected (the "
                         "first protection ends at t=39600), 16 free")


def test_a_gang_within_its_projects_share_reserves_before_a_higher_ranked_one_that_borrows():
    # 8 nodes of 8 GPUs, A, B and C entitled to a third each. C holds every node with
    # protected jobs ending 1-8 h from now, so no gang can start now. A ranks first (usage
    # ratio 0.1) with a 40-GPU gang: past its fair share (24 GPUs once protections end), it
    # passes only the budget test (unused share over the window). B ranks second (0.8) with a
    # 16-GPU gang that fits its share. Claims within a share come before loans of unused share,
    # as floors and targets come before the rest in the objective: B's gang reserves first
    jobs = [_b(f"c{i}", f"n{i:02d}", (i + 1) * H, project="C") for i in range(8)]
    jobs += [Job("GA", "A", 40, min_runtime_s=8 * H, submit_time=0.0),
             Job("GB", "B", 16, min_runtime_s=8 * H, submit_time=0.0)]
    usage = {"A": 0.1, "B": 0.8, "C": 1.5}
    shares = {"A": 1, "B": 1, "C": 1}

    def plan_of(cap, prev=()):
        return run_epoch(_snap(nodes_of(8, 8), shares, jobs, usage=usage, prev=prev,
                               policy=Policy(max_reservations=cap)))

    def reserved(plan):
        return [(r.job_id, dict(r.details)["rank_test"]) for r in plan.reservations]

    assert reserved(plan_of(1)) == [("GB", "share")]
    both = plan_of(2)
    assert reserved(both) == [("GB", "share"), ("GA", "budget")]
    # the order is for new reservations: one already held keeps its place while it qualifies
    ga = [r for r in both.reservations if r.job_id == "GA"]
    assert reserved(plan_of(1, prev=ga)) == [("GA", "budget")]


def test_a_reservation_ends_and_says_why_when_its_teams_higher_priority_jobs_hold_the_nodes():
    """A runs four priority-1 jobs past their protection on n00-n03 with no expected end; B's
    protected jobs hold n04-n05. A's priority-0 24-GPU gang reserved n00-n02 last epoch: the
    team's order never stops A's jobs for it, and the two other nodes are too few, so the
    reservation ends ("order") and names the cause; nothing is preempted."""
    gang = Job("G", "A", 24, min_runtime_s=8 * H, submit_time=1.0)
    jobs = [_b(f"a{i}", f"n{i:02d}", -H, project="A", priority=1) for i in range(4)]
    jobs += [_b("b4", "n04", 2 * H), _b("b5", "n05", 3 * H), gang]
    plan = run_epoch(_snap(nodes_of(6, 8), {"A": 1, "B": 1}, jobs, usage={"A": 0.2, "B": 1.0},
                           prev=[_prev("G", ("n00", "n01", "n02"), NOW - 10 * M)]))
    assert (plan.preemptions, plan.reservations) == ((), ())
    (e,) = plan.reservations_ended
    assert (e.job_id, e.outcome, e.message) == (
        "G", "order", "running jobs of project A ranked above it hold the h100 nodes it needs "
        "with no known end (they are never stopped for it)")


def test_a_teammate_ranked_above_the_gang_holds_its_node_until_its_expected_end_and_is_named():
    """A's priority-1 job a0 runs past its protection on n00 and is expected to end in 1 h; B's
    protected jobs free n01 and n02 in 2 and 3 h. A's priority-0 gang reserves n00-n02 from
    3 h on: a0 is not preemptible for it (its team ranks it above the gang), it holds its node
    until its expected end, and the reservation's details and `explain` say so."""
    from optalloc.plan.explain import explain, format_explanation

    jobs = [_b("a0", "n00", -H, project="A", priority=1, duration_s=10 * H)]
    jobs += [_b(f"b{i}", f"n{i:02d}", (i + 1) * H) for i in range(1, 6)]
    jobs += [Job("G", "A", 24, min_runtime_s=8 * H, submit_time=1.0)]
    snap = _snap(nodes_of(6, 8), {"A": 1, "B": 1}, jobs, usage={"A": 0.2, "B": 1.0})
    plan = run_epoch(snap)
    # a0 ends on its own (no notice); b2, stopped at its protection end, has its notice
    assert _outcome(plan)[2] == {"G": (("n00", "n01", "n02"), NOW + 3 * H + NOTICE, 0)}
    assert plan.preemptions == ()
    (r,) = plan.reservations
    assert dict(r.details)["blockers"] == [
        {"job": "a0", "until": NOW + H, "holds": True, "protected": False},
        {"job": "b1", "until": NOW + 2 * H, "holds": True, "protected": True},
        {"job": "b2", "until": NOW + 3 * H, "holds": True, "protected": True}]
    assert r.message.endswith("; 3 jobs there end or lose protection by then")
    d = explain(snap, plan, "G")
    assert "    - a0 ends or loses protection at t=39600\n" in format_explanation(d)
    assert d["changes"] == ["the 3 jobs that hold them (protected, or its team's ranked above "
                            "it) on its reserved nodes must end or lose protection (the last "
                            "at t=46800); then the jobs still there get notice and keep their GPUs "
                            "through it: it starts there at t=46860"]


def test_a_teammate_on_a_draining_node_leaves_at_its_protection_end_so_the_gang_may_count_on_it():
    """A's priority-1 job a0 (24 GPUs) runs past its protection on three draining nodes: it
    leaves this epoch (rule 5), so it neither holds its nodes for A's priority-0 gang nor
    counts in A's holdings at the gang's start (a helper's case at stop 41: the gang's
    reservation ended 'outranked', A "has room for 0 more")."""
    from optalloc.types import Node, NodeState

    nodes = nodes_of(4, 8) + [Node(f"n0{i}", "h100", 8, NodeState.DRAIN) for i in (4, 5, 6)]
    a0 = running("a0", "A", "h100", [(f"n0{i}", range(8)) for i in (4, 5, 6)],
                 start=NOW - 9 * H, min_runtime_s=8 * H, priority=1, submit_time=0.0)
    jobs = [a0] + [_b(f"b{i}", f"n0{i}", (i + 1) * H) for i in range(4)]
    jobs += [Job("G", "A", 16, min_runtime_s=8 * H, submit_time=1.0)]
    plan = run_epoch(_snap(nodes, {"A": 1, "B": 1}, jobs, usage={"A": 1.5, "B": 1.0},
                           prev=[_prev("G", ("n00", "n01"), NOW + 2 * H)]))
    assert _outcome(plan)[2] == {"G": (("n00", "n01"), NOW + 2 * H + NOTICE, 0)}
    assert {p.job_id: p.code.value for p in plan.preemptions} == {"a0": "PreemptedNodeDrain"}


def test_a_teammate_started_at_time_zero_has_started_not_started_now():
    """A job that started at t=0 (a simulation's first instant) and has outrun its expected end
    (t=5 h, now 10 h) holds its node for good for a gang its team ranks below it; read as
    started now, it was expected to end in 5 h and the gang reserved its node (a helper's case
    at stop 41)."""
    for start in (0.0, 1.0):
        jobs = [running("a0", "A", "h100", [("n00", range(8))], start=start, min_runtime_s=H,
                        priority=1, submit_time=0.0, duration_s=5 * H),
                _b("b1", "n01", 6 * H), _b("b2", "n02", 7 * H),
                Job("G", "A", 16, min_runtime_s=8 * H, submit_time=1.0)]
        plan = run_epoch(_snap(nodes_of(3, 8), {"A": 1, "B": 1}, jobs,
                               usage={"A": 0.1, "B": 1.0}))
        assert _outcome(plan)[2] == {"G": (("n01", "n02"), NOW + 7 * H + NOTICE, 0)}, start


def _proxy_gang_case():
    """A helper's random cluster (stop 41): B, ranked first, below its floor (24 of 28),
    queues q2 (16 GPUs); A, below its floor without its due gang q1 (16 of 28), has q1's
    reservation due and the only free nodes are h02-h03. The model starts q1 there and sends
    q2 onto h04-h05, stopping A's r5, which A ranks above q1 (its priority, submitted
    earlier): r5 stopped by proxy for its own team's lower-ranked gang."""
    def r(jid, p, node, start, mr, dur, prio, sub):
        return running(jid, p, "h100", [(node, range(8))], start=start, min_runtime_s=mr,
                       duration_s=dur, priority=prio, submit_time=sub)

    now = 20 * H
    jobs = [r("r0", "B", "h00", 17 * H, 8 * H, 20 * H, 0, 0.5),
            r("r1", "A", "h01", 17 * H, 8 * H, 20 * H, 0, 0.5),
            r("r4", "B", "h04", 14 * H, 900, 20 * H, 0, 0.5),
            r("r5", "A", "h05", 14 * H, 900, 9 * H, 1, -200.0),
            r("r6", "B", "h06", 14 * H, 8 * H, 9 * H, 1, 0.5),
            Job("q0", "A", 16, min_runtime_s=900, duration_s=1200, priority=1, submit_time=0.0),
            Job("q1", "A", 16, min_runtime_s=H, duration_s=2 * H, priority=1, submit_time=-99.0),
            Job("q2", "B", 16, min_runtime_s=900, duration_s=2 * H, priority=1, submit_time=2.0),
            Job("q3", "A", 24, min_runtime_s=H, duration_s=1200, priority=0, submit_time=-97.0)]
    cfg = Config((GpuType("h100"),), tuple(nodes_of(7, 8, prefix="h")),
                 flat_org({"A": 1, "B": 1}), Policy(max_reservations=2), tuple(jobs))
    return build_snapshot(cfg, now=now, usage_ratio={"A": 1.957, "B": 0.137},
                          reservations=[Reservation("q1", "h100", ("h05",), now + 3 * H,
                                                    since=now - H)])


def test_a_due_gang_starts_where_it_stops_no_teammate_by_proxy():
    """The epoch's plan (step 4b, optalloc.epoch_kept): with r5 kept, the LP again starts q1
    on the free nodes h02-h03 and q2 waits. That meets 52 floor GPUs (A 28, B 24) where the
    repaired plan below meets 44 (A 16, B 28); r5 runs on, nothing is preempted."""
    from optalloc.sim.invariants import proxy_order_breaks, team_order_breaks

    snap = _proxy_gang_case()
    plan = run_epoch(snap)
    assert (proxy_order_breaks(snap, plan), team_order_breaks(snap, plan)) == ([], [])
    assert plan.preemptions == ()
    assert {p.job_id: tuple(n.node for n in p.nodes) for p in plan.placements
            if not snap.jobs[snap.job_index[p.job_id]].running} == {"q1": ("h02", "h03")}
    assert {r.job_id: r.code.value for r in plan.pending} == {
        "q0": "OverShare", "q2": "WaitingForCapacity", "q3": "LowerPriorityInProject"}
    assert plan.reservations == ()
    assert "then the LP again with the running jobs it keeps fixed" in plan.report.message


def test_a_due_gang_waits_rather_than_stop_by_proxy_a_teammate_ranked_above_it(monkeypatch):
    """Without step 4b, the team's order by proxy repairs the model's plan: q2 takes h02-h03,
    r5 runs on, and q1 waits an epoch on its reservation, which says so; the plan is outside
    the model (its gang's start is forced), so `feasible`."""
    import optalloc.epoch_kept
    from optalloc.sim.invariants import proxy_order_breaks, team_order_breaks

    monkeypatch.setattr(optalloc.epoch_kept, "KEPT_ROUNDS", 0)
    snap = _proxy_gang_case()
    plan = run_epoch(snap)
    assert (proxy_order_breaks(snap, plan), team_order_breaks(snap, plan)) == ([], [])
    assert plan.preemptions == ()
    assert {p.job_id: p.nodes[0].node for p in plan.placements if p.job_id == "q2"} == {
        "q2": "h02"}
    (res,) = plan.reservations
    assert (res.job_id, res.nodes) == ("q1", ("h02", "h03"))
    assert res.message == ("reserved nodes h[02-03] for job q1 (16 h100 GPUs of project A), "
                           "expected start t=72000; nothing protected is left there; it could "
                           "not be placed this epoch and waits for the next")
    # the gang's pending reason says the same (it said "it starts now" while it waited)
    assert {r.job_id: r.message for r in plan.pending}["q1"] == res.message
    assert plan.report.status == "feasible"
    # and the report says why the plan is outside the model (it said only "leaves the model")
    assert plan.report.message.endswith(
        "the placed plan leaves the model: the due reservation's gang q1 waits an epoch rather "
        "than stop, by proxy, a running job of its team ranked above it, where the model starts "
        "it, so its bound counts no such plan")


def test_a_teammate_that_leaves_for_a_due_gang_ranked_above_it_is_told_so():
    """The preemption's reason names the gang, its place in the team's order and the
    reservation (a helper's remark at stop 41: it said the gang "meets more of the project's
    floor or target")."""
    case = next(c for c in cases() if c.name.startswith(
        "a running teammate of the gang's priority submitted after it"))
    plan = run_epoch(case.snap)
    why = {p.job_id: p.message for p in plan.preemptions}
    assert why["a0"] == ("past its protection; job G of project A, ahead of it in the team's "
                         "order (priority 0, submitted before it), starts on the nodes its "
                         "reservation held (nothing protected is left there), where it could "
                         "not start before (G)")
