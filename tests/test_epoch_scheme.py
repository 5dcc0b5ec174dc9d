"""Epoch decisions that follow the published scheme exactly (DESIGN.md section 8): one table of
hand-written clusters, each with the whole expected plan (GPUs per running job, preemptions
with their codes and takers, pending codes), named like the sentence it checks. The cases are
the eight failures an operator reported (drain, spare sharing, program order, priority inside a
project, zero shares, unallocated swaps, per-node gang pieces, floor shortfalls)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from optalloc.epoch import run_epoch
from optalloc.types import Job, Node, NodeState, OrgNode

from test_epoch_toy import H, flat_org, nodes_of, pending_codes, preempted, queued, running
from test_epoch_toy import snapshot

M = 60.0
NOW = 10 * H


@dataclass
class Case:
    name: str
    snap: object
    placed: dict  # job id -> GPUs, every job running after the epoch (or project -> GPUs)
    preempted: dict = field(default_factory=dict)
    pending: dict | None = None  # job id -> code; None: not checked
    by_project: bool = False


def _placed(snap, plan, by_project: bool) -> dict:
    out: dict = {}
    for p in plan.placements:
        key = snap.jobs[snap.job_index[p.job_id]].project if by_project else p.job_id
        out[key] = out.get(key, 0) + p.gpus
    return out


def _drain_cases() -> list[Case]:
    nodes = nodes_of(1, 8) + nodes_of(1, 8, prefix="d", state=NodeState.DRAIN)
    jobs = [running("P", "A", "h100", [("d00", [0, 1])], start=NOW - 10 * M),
            running("E", "A", "h100", [("d00", [2, 3])], start=NOW - 5 * H),
            running("U", "B", "h100", [("d00", [4, 5])], start=NOW - 10 * M, min_runtime_s=0),
            Job("Q", "B", 4, min_runtime_s=H)]
    return [
        Case("a drain node keeps a protected job, its job past protection and its unallocated "
             "job leave it and restart at once on the free node (Moved), and nothing new "
             "lands there",
             snapshot(nodes, flat_org({"A": 1, "B": 1}), jobs, now=NOW),
             {"P": 2, "Q": 4, "E": 2, "U": 2},
             preempted={"E": ("Moved", ()), "U": ("Moved", ())},
             pending={}),
        Case("a job that leaves a drain node keeps its project's place: it restarts on the free "
             "node before a lower-ranked project's new job",
             snapshot([Node("n00", "h100", 8, NodeState.DRAIN)] + nodes_of(1, 8, prefix="m"),
                      flat_org({"A": 1, "B": 1}),
                      [running("A1", "A", "h100", [("n00", range(8))], start=5 * H,
                               min_runtime_s=2 * H), Job("B8", "B", 8, min_runtime_s=H)],
                      now=NOW, usage={"A": 0.0, "B": 2.0}),
             {"A1": 8}, preempted={"A1": ("Moved", ())}, pending={"B8": "WaitingForCapacity"}),
        Case("a job that leaves a drain node and is not resumable ends there: it does not restart",
             snapshot([Node("n00", "h100", 8, NodeState.DRAIN)] + nodes_of(1, 8, prefix="m"),
                      flat_org({"A": 1, "B": 1}),
                      [replace(running("A1", "A", "h100", [("n00", range(8))], start=5 * H,
                                       min_runtime_s=2 * H), resumable=False),
                       Job("B8", "B", 8, min_runtime_s=H)],
                      now=NOW, usage={"A": 0.0, "B": 2.0}),
             {"B8": 8}, preempted={"A1": ("PreemptedNodeDrain", ())}, pending={}),
    ]


def _share_cases() -> list[Case]:
    org = flat_org({"A": 40, "B": 30, "C": 20, "D": 10})
    jobs = [j for p in "BCD" for j in queued(p, 60, 1)]
    return [
        Case("the spare of an idle project is shared by tied projects in proportion to their "
             "shares, not given to one",
             snapshot(nodes_of(25, 4), org, jobs), {"B": 50, "C": 33, "D": 17}, by_project=True),
        Case("the spare goes to the lowest-ratio project first",
             snapshot(nodes_of(25, 4), org, jobs, usage={"B": 1.2, "C": 1.18, "D": 0.72}),
             {"B": 30, "C": 20, "D": 50}, by_project=True),
    ]


def _program_cases() -> list[Case]:
    org = OrgNode("root", children=(
        OrgNode("A", children=(OrgNode("A1"),)), OrgNode("B", children=(OrgNode("B1"),)),
        OrgNode("C", children=(OrgNode("C1"),))))
    jobs = queued("A1", 100, 1) + queued("B1", 100, 1)
    return [
        Case("a program's order comes before its projects' order: the lower-ratio program's "
             "project gets the spare although its own ratio is higher",
             snapshot(nodes_of(25, 4), org, jobs, usage={"A": 1.0, "A1": 0.0, "B": 0.6,
                                                          "B1": 1.2}),
             {"A1": 33, "B1": 67}, by_project=True),
    ]


def _priority_cases() -> list[Case]:
    jobs = [Job("a-old", "A", 2, min_runtime_s=8 * H, submit_time=NOW - 2 * H),
            Job("a-new", "A", 2, min_runtime_s=8 * H, submit_time=NOW - 5 * M),
            Job("a-short", "A", 2, min_runtime_s=30 * M, submit_time=NOW - 5 * M),
            Job("a-hi", "A", 2, min_runtime_s=8 * H, priority=100, submit_time=NOW)]
    many = [Job(f"lo{i}", "A", 1, min_runtime_s=8 * H, submit_time=NOW - H + i)
            for i in range(6)] + [Job(f"hi{i}", "A", 1, min_runtime_s=8 * H, priority=100,
                                      submit_time=NOW) for i in range(2)]
    lower = [running("A-run", "A", "h100", [("n00", range(8))], start=NOW - 5 * H,
                     min_runtime_s=2 * H),
             Job("A-urgent", "A", 8, min_runtime_s=2 * H, priority=5, submit_time=0.0)]
    equal = [running("A-run", "A", "h100", [("n00", range(8))], start=NOW - 5 * H,
                     min_runtime_s=2 * H),
             Job("A-old", "A", 8, min_runtime_s=2 * H, submit_time=0.0)]
    return [
        Case("a project's priority-100 job starts before its earlier priority-0 jobs, a "
             "30-minute job does not jump the line, and the others say LowerPriorityInProject",
             snapshot(nodes_of(1, 4), flat_org({"A": 1}), jobs, now=NOW),
             {"a-hi": 2, "a-old": 2},
             pending={"a-new": "LowerPriorityInProject", "a-short": "LowerPriorityInProject"}),
        Case("inside its share a project runs its priority-100 jobs, then its oldest",
             snapshot(nodes_of(1, 4), flat_org({"A": 1, "B": 1}),
                      many + queued("B", 4, 1), now=NOW),
             {"hi0": 1, "hi1": 1, "B00": 1, "B01": 1}, pending=None),
        Case("a running job past its protection yields to a higher-priority job of its project",
             snapshot(nodes_of(1, 8), flat_org({"A": 1}), lower, now=NOW),
             {"A-urgent": 8}, preempted={"A-run": ("PreemptedForFairShare", ("A-urgent",))},
             pending={}),
        Case("an equal-priority job submitted earlier never displaces a running one",
             snapshot(nodes_of(1, 8), flat_org({"A": 1}), equal, now=NOW),
             {"A-run": 8}, pending={"A-old": "LowerPriorityInProject"}),
        Case("in a project not ranked first, a running priority-0 job past its protection "
             "yields to its project's waiting priority-1 job that fits in its place",
             snapshot(nodes_of(3, 8), OrgNode("root", children=(
                 OrgNode("P1", share=1, children=(OrgNode("a1", share=3), OrgNode("a2"))),
                 OrgNode("P2", share=1, children=(OrgNode("b1"),)))), [
                 running("R0", "a1", "h100", [("n02", range(8))], start=NOW - 30 * M,
                         min_runtime_s=20 * M),
                 Job("Q1", "a1", 4, min_runtime_s=20 * M, submit_time=1),
                 Job("Q5", "a1", 8, min_runtime_s=2 * H, priority=1, submit_time=5),
                 Job("Q2a2", "a2", 4, min_runtime_s=8 * H, priority=1, submit_time=2),
                 Job("Q3a2", "a2", 2, min_runtime_s=H, priority=1, submit_time=3),
                 Job("Q4b1", "b1", 8, gpus_per_node=4, min_runtime_s=2 * H, submit_time=4)],
                 now=NOW, usage={"P1": 2.0, "a1": 0.3, "a2": 0.0, "P2": 0.0, "b1": 1.0}),
             {"Q5": 8, "Q1": 4, "Q2a2": 4, "Q4b1": 8},
             preempted={"R0": ("PreemptedForFairShare", ("Q5",))},
             pending={"Q3a2": "OverShare"}),
        Case("a priority-1 per-node gang (4 + 4) starts before its project's priority-0 "
             "whole-node gang (8 + 8), which would hold more of the floor",
             snapshot(nodes_of(3, 8), flat_org({"A": 1}),
                      [Job("Hi", "A", 8, gpus_per_node=4, min_runtime_s=H, priority=1,
                           submit_time=0.0),
                       Job("L", "A", 16, min_runtime_s=H, submit_time=1.0)], now=NOW),
             {"Hi": 8}, pending={"L": "GangDoesNotFit"}),
    ]


def _zero_share_cases() -> list[Case]:
    org = OrgNode("root", children=(OrgNode("X", share_by_type={"b200": 0.0}),
                                    OrgNode("Y", share_by_type={"h100": 0.0})))
    nodes = nodes_of(1, 8, gpu_type="b200", prefix="b")
    x_run = running("X-b200", "X", "b200", [("b00", range(8))], start=NOW - H,
                    min_runtime_s=8 * H)
    return [
        Case("a job where its project has no share is never protected and yields to the "
             "entitled project at once",
             snapshot(nodes, org, [x_run, Job("Y-q", "Y", 8, min_runtime_s=H)], now=NOW,
                      types=("h100", "b200")),
             {"Y-q": 8}, preempted={"X-b200": ("PreemptedUnallocated", ("Y-q",))}, pending={}),
    ]


def _unallocated_cases() -> list[Case]:
    org = flat_org({"A": 1, "B": 1})
    base = [running("A-prot", "A", "h100", [("n00", range(4))], start=NOW - 10 * M),
            running("A-unal", "A", "h100", [("n00", range(4, 8))], start=NOW - H,
                    min_runtime_s=0.0)]
    pick = [running("P", "A", "h100", [("n00", [0])], start=NOW - 10 * M),
            running("U4", "A", "h100", [("n00", [1, 2, 3, 4])], start=NOW - H, min_runtime_s=0),
            running("U2", "A", "h100", [("n00", [5, 6])], start=NOW - H, min_runtime_s=0),
            Job("Q", "B", 3, min_runtime_s=H)]
    return [
        Case("a running unallocated job is not preempted to start a queued unallocated job of "
             "the same size, even of a project that used less",
             snapshot(nodes_of(1, 8), org,
                      base + [Job("B-unal", "B", 4, min_runtime_s=0.0, submit_time=NOW - H)],
                      now=NOW, usage={"A": 1.5, "B": 0.0}),
             {"A-prot": 4, "A-unal": 4}, pending={"B-unal": "UnallocatedYields"}),
        Case("allocated demand preempts the smallest unallocated job that makes room and "
             "leaves no GPU idle",
             snapshot(nodes_of(1, 8), org, pick, now=NOW),
             {"P": 1, "U4": 4, "Q": 3}, preempted={"U2": ("PreemptedUnallocated", ("Q",))},
             pending={}),
    ]


def _gang_cases() -> list[Case]:
    held = [running("R", "B", "h100", [("n00", range(4))], start=NOW - 10 * M)]
    return [
        Case("the pieces of a per-node gang start on distinct nodes",
             snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}),
                      held + [Job("G", "A", 8, gpus_per_node=4, min_runtime_s=H)], now=NOW),
             {"R": 4, "G": 8}, pending={}),
        Case("a 20-GPU job on 8-GPU nodes runs as 8 + 8 + 4 and leaves the rest of the third "
             "node to others",
             snapshot(nodes_of(3, 8), flat_org({"A": 1, "B": 1}),
                      [Job("G", "A", 20, min_runtime_s=H), Job("S", "B", 4, min_runtime_s=H)],
                      now=NOW),
             {"G": 20, "S": 4}, pending={}),
    ]


def _floor_cases() -> list[Case]:
    org = flat_org({"A": 1, "B": 1, "C": 1, "D": 1})
    prot = [running(f"A{i}", "A", "h100", [(f"n{i:02d}", range(8))], start=NOW - 10 * M)
            for i in range(5)]
    jobs = prot + [j for p in "BCD" for j in queued(p, 16, 1)]
    return [
        Case("a floor shortfall is shared by the projects below their floors, not dumped on one",
             snapshot(nodes_of(8, 8), org, jobs, now=NOW),
             {"A": 40, "B": 8, "C": 8, "D": 8}, by_project=True),
    ]


CASES = (_drain_cases() + _share_cases() + _program_cases() + _priority_cases()
         + _zero_share_cases() + _unallocated_cases() + _gang_cases() + _floor_cases())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_scheme_case(case: Case):
    plan = run_epoch(case.snap)
    assert plan.degraded is None
    assert _placed(case.snap, plan, case.by_project) == case.placed
    assert preempted(plan) == case.preempted
    if case.pending is not None:
        assert pending_codes(plan) == case.pending


def test_a_drain_node_reports_who_stays_who_leaves_and_when_it_is_empty():
    case = _drain_cases()[0]
    plan = run_epoch(case.snap)
    (d,) = plan.drains
    assert (d.node, d.staying, d.leaving, d.ready) == ("d00", ("P",), ("E", "U"), False)
    assert d.empty_at == pytest.approx(NOW - 10 * M + H + 60)  # P's protection ends, + grace


def test_an_empty_drain_node_is_ready_for_repair():
    nodes = nodes_of(1, 8) + nodes_of(1, 8, prefix="d", state=NodeState.DRAIN)
    plan = run_epoch(snapshot(nodes, flat_org({"A": 1}), queued("A", 2, 4), now=NOW))
    assert [(d.node, d.ready, d.staying, d.leaving) for d in plan.drains] == [
        ("d00", True, (), ())]


def test_a_drain_node_empties_over_epochs_as_protections_end():
    nodes = nodes_of(1, 8) + nodes_of(1, 8, prefix="d", state=NodeState.DRAIN)
    job = running("P", "A", "h100", [("d00", [0, 1])], start=NOW - 10 * M)
    ready = []
    for now in (NOW, NOW + 49 * M, NOW + 51 * M):
        plan = run_epoch(snapshot(nodes, flat_org({"A": 1}), [job], now=now))
        (d,) = plan.drains
        ready.append((d.staying, d.leaving))
    assert ready == [(("P",), ()), (("P",), ()), ((), ("P",))]


def test_a_zero_share_run_is_not_charged():
    org = OrgNode("root", children=(OrgNode("X", share_by_type={"b200": 0.0}),
                                    OrgNode("Y", share_by_type={"h100": 0.0})))
    x_run = running("X-b200", "X", "b200", [("b00", range(8))], start=NOW - H,
                    min_runtime_s=8 * H)
    snap = snapshot(nodes_of(1, 8, gpu_type="b200", prefix="b"), org, [x_run], now=NOW,
                    types=("h100", "b200"))
    assert not snap.job_protected[0]
    plan = run_epoch(snap)
    assert [(p.job_id, p.allocated) for p in plan.placements] == [("X-b200", False)]


def test_an_over_share_message_names_the_target_and_who_gets_the_rest():
    case = _share_cases()[0]
    plan = run_epoch(case.snap)
    msg = {r.job_id: r for r in plan.pending}["B59"]
    assert msg.code.value == "OverShare"
    assert "B holds 50 h100 GPUs, its fair-share target this epoch is 50" in msg.message
    assert "C (usage ratio 0.00, holds 33 of target 33)" in msg.message


def test_the_lp_backend_reports_its_real_gap():
    # two 12-GPU gangs on 3 nodes: the LP starts both by halves, the plan only one
    snap = snapshot(nodes_of(3, 8), flat_org({"A": 1}),
                    [Job("G1", "A", 12, min_runtime_s=H), Job("G2", "A", 12, min_runtime_s=H)])
    from optalloc.types import SolverSettings

    plan = run_epoch(snap, SolverSettings(backend="lp"))
    rep = plan.report
    assert rep.bound >= rep.objective
    if rep.gap > 0.005:
        assert rep.status == "feasible"
    else:
        assert rep.status == "optimal"


def test_a_debug_job_starts_beyond_its_projects_target_on_capacity_no_share_needs():
    # A holds its whole share (8 of 16); B holds 7 protected GPUs and waits with a gang that
    # needs a whole node, so the last GPU runs B's unallocated work. A's 15-minute debug job,
    # submitted last, takes that GPU (the debug allowance: a cheap grant), while A's 8-hour job
    # submitted earlier still waits for its share
    org = flat_org({"A": 1, "B": 1})
    jobs = [running("A-run", "A", "h100", [("n00", range(8))], start=NOW - 10 * M),
            running("B-run", "B", "h100", [("n01", range(7))], start=NOW - 10 * M),
            running("B-unal", "B", "h100", [("n01", [7])], start=NOW - H, min_runtime_s=0.0),
            Job("B-gang", "B", 8, min_runtime_s=H, submit_time=NOW - 2 * H),
            Job("A-long", "A", 1, min_runtime_s=8 * H, submit_time=NOW - H),
            Job("A-debug", "A", 1, min_runtime_s=15 * M, submit_time=NOW)]
    plan = run_epoch(snapshot(nodes_of(2, 8), org, jobs, now=NOW))
    assert {p.job_id: p.gpus for p in plan.placements} == {"A-run": 8, "B-run": 7, "A-debug": 1}
    assert preempted(plan) == {"B-unal": ("PreemptedUnallocated", ("A-debug",))}
    assert pending_codes(plan) == {"A-long": "OverShare", "B-gang": "WaitingForCapacity"}


def test_a_waiting_job_is_not_told_a_restarted_job_is_protected_until_its_old_runs_end():
    """R's node is down; R restarts on the only other node (A's lower usage ratio). B's job
    was told "8 h100 GPUs are protected (the first protection ends at t=41400)": R's old
    run's end. A restart is a new start; no GPU there is held by a protection that ends then."""
    nodes = [replace(n, state=NodeState.DOWN) if n.name == "n00" else n for n in nodes_of(2, 8)]
    r = running("R", "A", "h100", [("n00", range(8))], start=9.5 * H, min_runtime_s=2 * H)
    snap = snapshot(nodes, flat_org({"A": 1, "B": 1}), [r] + queued("B", 1, 8),
                    usage={"A": 0.0, "B": 1.0})
    plan = run_epoch(snap)
    assert preempted(plan) == {"R": ("Moved", ())}
    assert pending_codes(plan) == {"B00": "WaitingForCapacity"}
    msg = plan.pending[0].message
    assert "0 h100 GPUs are protected" in msg and "41400" not in msg


def test_a_running_job_is_never_preempted_for_its_projects_lower_priority_work():
    """A alone: its running priority-2 job R (8 GPUs, past its protection) and its queued
    16-GPU job Q of priority 0, which would meet more of A's floor. The team's order is the
    team's own (DESIGN.md rule 3): R keeps its GPUs and Q waits, as under greedy. Before, R
    was preempted for Q (floors came before the team's order inside a project)."""
    jobs = [running("R", "A", "h100", [("n00", range(8))], start=5 * H, min_runtime_s=H,
                    priority=2),
            Job("Q", "A", 16, min_runtime_s=H, submit_time=0.0)]
    plan = run_epoch(snapshot(nodes_of(2, 8), flat_org({"A": 1}), jobs))
    assert not plan.preemptions
    assert [p.job_id for p in plan.placements] == ["R"]
    assert pending_codes(plan) == {"Q": "LowerPriorityInProject"}
    msg = plan.pending[0].message
    assert "holds 8, 8 of them in 1 of its jobs with a higher priority than 0 (R)" in msg
