"""Table-driven epoch scenarios: the published toy and the contract, each asserting the whole
outcome (GPUs per project, preemptions with codes, pending codes per job)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pytest

from optalloc.epoch import run_epoch
from optalloc.snapshot import build_snapshot
from optalloc.types import (
    Config,
    GpuType,
    Job,
    JobState,
    Node,
    NodeAlloc,
    NodeState,
    OrgNode,
    Placement,
    Policy,
    SolverSettings,
)

H = 3600.0


def flat_org(shares: dict[str, float]) -> OrgNode:
    return OrgNode("root", children=tuple(OrgNode(p, share=s) for p, s in shares.items()))


def queued(project: str, n: int, gpus: int, *, prefix: str | None = None, **kw) -> list[Job]:
    prefix = prefix or project
    mr = kw.pop("min_runtime_s", H)
    return [Job(f"{prefix}{i:02d}", project, gpus, min_runtime_s=mr, submit_time=float(i), **kw)
            for i in range(n)]


def running(jid, project, gpu_type, allocs, start, min_runtime_s=H, **kw) -> Job:
    pl = Placement(jid, gpu_type, tuple(NodeAlloc(n, tuple(g)) for n, g in allocs))
    gpus = sum(len(g) for _, g in allocs)
    return Job(jid, project, gpus, min_runtime_s=min_runtime_s, state=JobState.RUNNING,
               start_time=start, placement=pl, **kw)


def snapshot(nodes, org, jobs, now=10 * H, usage=None, types=("h100",), policy=None):
    cfg = Config(tuple(GpuType(t) for t in types), tuple(nodes), org, policy or Policy(),
                 tuple(jobs))
    return build_snapshot(cfg, now=now, usage_ratio=usage or {})


def nodes_of(count, gpus, gpu_type="h100", prefix="n", state=NodeState.UP):
    return [Node(f"{prefix}{i:02d}", gpu_type, gpus, state) for i in range(count)]


def gpus_by_project(snap, plan) -> dict[str, int]:
    c: Counter = Counter()
    for p in plan.placements:
        c[snap.jobs[snap.job_index[p.job_id]].project] += p.gpus
    return dict(c)


def placed_on(plan) -> dict[str, tuple[tuple[str, int], ...]]:
    """Each placement as its (node, GPUs there) pairs: the whole plan's placements, whichever
    GPUs of a node they took."""
    return {p.job_id: tuple((a.node, len(a.gpus)) for a in p.nodes) for p in plan.placements}


def pending_codes(plan) -> dict[str, str]:
    return {r.job_id: r.code.value for r in plan.pending}


def preempted(plan) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {p.job_id: (p.code.value, p.needed_by) for p in plan.preemptions}


def messages(plan) -> dict[str, str]:
    """Each pending and preempted job's message by job id, and each ended reservation's
    under "ended:<job>"."""
    return {**{r.job_id: r.message for r in plan.pending},
            **{p.job_id: p.message for p in plan.preemptions},
            **{f"ended:{e.job_id}": e.message for e in plan.reservations_ended}}


@dataclass
class Case:
    name: str
    snap: object
    gpus: dict
    preempted: dict = field(default_factory=dict)
    pending: dict | None = None  # job id -> code (None: only checked for completeness)


def _case_shares(shares, expect) -> Case:
    jobs = [j for p in shares for j in queued(p, 12, 5)]
    return Case(f"shares {shares} on 100 GPUs give {expect}",
                snapshot(nodes_of(10, 10), flat_org(shares), jobs), expect,
                pending={j.id: "OverShare" for j in jobs
                         if int(j.id[1:]) >= expect[j.project] // 5})


def cases() -> list[Case]:
    out = [
        _case_shares({"A": 40, "B": 30, "C": 20, "D": 10}, {"A": 40, "B": 30, "C": 20, "D": 10}),
        _case_shares({"A": 1, "B": 1, "C": 1, "D": 1}, {"A": 25, "B": 25, "C": 25, "D": 25}),
    ]
    # a zero-share project only gets what nobody with a share wants
    jobs = queued("A", 12, 5) + queued("Z", 12, 5)
    out.append(Case("a zero-share project gets only the leftovers of the others",
                    snapshot(nodes_of(10, 10), flat_org({"A": 1, "Z": 0}), jobs),
                    {"A": 60, "Z": 40},
                    pending={f"Z{i:02d}": "UnallocatedYields" for i in range(8, 12)}))
    jobs = queued("A", 20, 5) + queued("Z", 12, 5)
    out.append(Case("a zero-share project waits while a shared project uses everything",
                    snapshot(nodes_of(10, 10), flat_org({"A": 1, "Z": 0}), jobs),
                    {"A": 100},
                    pending={f"Z{i:02d}": "UnallocatedYields" for i in range(12)}))
    # a project with little demand releases its share to the others, nothing idles
    jobs = queued("A", 2, 5) + [j for p in "BCD" for j in queued(p, 12, 5)]
    out.append(Case("a project with little demand releases its unused share",
                    snapshot(nodes_of(10, 10), flat_org({"A": 40, "B": 30, "C": 20, "D": 10}),
                             jobs, usage={"B": 0.0, "C": 0.5, "D": 1.0}),
                    # floors 10/30/20/10; the 30 spare GPUs go by fair share: B (ratio 0) first
                    {"A": 10, "B": 60, "C": 20, "D": 10}))
    # protected jobs stay; expired ones are preempted when a higher-ranked project needs them
    b_run = running("B-run", "B", "h100", [("n00", range(8)), ("n01", range(8))], start=9.5 * H,
                    min_runtime_s=2 * H)
    jobs = [b_run] + queued("A", 4, 8)
    out.append(Case("a protected job keeps its GPUs even when a higher-ranked project waits",
                    snapshot(nodes_of(4, 8), flat_org({"A": 9, "B": 1}), jobs,
                             usage={"B": 3.0}),
                    {"A": 16, "B": 16},
                    pending={"A02": "WaitingForCapacity", "A03": "WaitingForCapacity"}))
    # two floors that cannot both be met: the lower usage ratio wins (the scheme's order)
    b_gang = running("B-gang", "B", "h100", [("n00", range(8)), ("n01", range(8))],
                     start=1 * H, min_runtime_s=8 * H)
    for ratio_a, ratio_b, want, pre, pend in [
            (0.0, 1.0, {"A": 8}, {"B-gang": ("PreemptedForFairShare", ("A00",))}, {}),
            (1.0, 0.0, {"B": 16}, {}, {"A00": "WaitingForCapacity"})]:
        out.append(Case(
            f"an over-share gang past its protection on another project's floor yields to it "
            f"when that project's usage ratio is lower (A {ratio_a}, B {ratio_b})",
            snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}),
                     [b_gang, Job("A00", "A", 8, min_runtime_s=H, submit_time=0.0)],
                     usage={"A": ratio_a, "B": ratio_b}),
            want, preempted=pre, pending=pend))
    b_old = running("B-run", "B", "h100", [("n00", range(8)), ("n01", range(8))], start=5 * H,
                    min_runtime_s=2 * H)
    jobs = [b_old] + queued("A", 4, 8)
    out.append(Case("an expired job is preempted when a higher-ranked project needs its GPUs",
                    snapshot(nodes_of(4, 8), flat_org({"A": 9, "B": 1}), jobs,
                             usage={"B": 3.0}),
                    {"A": 32},
                    preempted={"B-run": ("PreemptedForFairShare", ("A02", "A03"))},
                    pending={}))
    # gang all-or-nothing: 20 GPUs free but only one whole node
    r1 = running("R1", "B", "h100", [("n00", [0, 1])], start=9.9 * H)
    r2 = running("R2", "B", "h100", [("n01", [0, 1])], start=9.9 * H)
    jobs = [r1, r2, Job("G", "A", 16, min_runtime_s=H), Job("S", "A", 4, min_runtime_s=H)]
    out.append(Case("a gang that has the GPUs but not the whole nodes waits, whole "
                    "(no lookahead)",
                    snapshot(nodes_of(3, 8), flat_org({"A": 1, "B": 1}), jobs,
                             policy=Policy(max_reservations=0)),
                    {"A": 4, "B": 4}, pending={"G": "GangDoesNotFit"}))
    out.append(Case("with lookahead the same gang waits on reserved nodes (the free one and "
                    "the first whose protected job ends) and the small job takes the third",
                    snapshot(nodes_of(3, 8), flat_org({"A": 1, "B": 1}), jobs,
                             policy=Policy(max_reservations=2)),
                    {"A": 4, "B": 4}, pending={"G": "Reserved"}))
    # drain: a protected job stays until its protection ends, nothing new lands there
    d_run = running("D1", "A", "h100", [("d00", range(4))], start=9.5 * H)
    nodes = nodes_of(1, 8) + nodes_of(1, 8, prefix="d", state=NodeState.DRAIN)
    jobs = [d_run] + queued("A", 3, 4, prefix="Q")
    out.append(Case("a drained node keeps its protected job and gets nothing new",
                    snapshot(nodes, flat_org({"A": 1}), jobs),
                    {"A": 12}, pending={"Q02": "WaitingForCapacity"}))
    d_old = running("D1", "A", "h100", [("d00", range(4))], start=9 * H)
    out.append(Case("a drained node's job leaves once its protection has ended and restarts "
                    "at once on the up node, ahead of its project's queued jobs",
                    snapshot(nodes, flat_org({"A": 1}), [d_old] + queued("A", 3, 4, prefix="Q")),
                    {"A": 8}, preempted={"D1": ("Moved", ())},
                    pending={"Q01": "WaitingForCapacity", "Q02": "WaitingForCapacity"}))
    nodes = nodes_of(1, 8) + nodes_of(1, 8, gpu_type="b200", prefix="d", state=NodeState.DRAIN)
    jobs = [Job("B1", "A", 4, gpu_types=("b200",), min_runtime_s=H)]
    out.append(Case("a job whose only type is draining says so",
                    snapshot(nodes, flat_org({"A": 1}), jobs, types=("h100", "b200")),
                    {}, pending={"B1": "NodeDraining"}))
    # down node: the job is gone; restarted elsewhere when it fits
    nodes = nodes_of(1, 8) + nodes_of(1, 8, prefix="x", state=NodeState.DOWN)
    jobs = [running("X1", "A", "h100", [("x00", range(4))], start=9.9 * H)]
    out.append(Case("a job on a down node is moved when another node has room",
                    snapshot(nodes, flat_org({"A": 1}), jobs), {"A": 4},
                    preempted={"X1": ("Moved", ())}, pending={}))
    jobs = [running("X1", "A", "h100", [("x00", range(4))], start=9.9 * H),
            running("F1", "A", "h100", [("n00", range(8))], start=9.9 * H)]
    out.append(Case("a job on a down node is requeued when nothing has room",
                    snapshot(nodes, flat_org({"A": 1}), jobs), {"A": 8},
                    preempted={"X1": ("PreemptedNodeDrain", ())}, pending={}))
    # unallocated jobs fill idle GPUs and yield to allocated demand
    u_run = running("U1", "A", "h100", [("n00", range(8))], start=9.9 * H, min_runtime_s=0)
    jobs = [u_run, Job("Q1", "B", 8, min_runtime_s=H)]
    out.append(Case("an unallocated job yields its GPUs to allocated demand",
                    snapshot(nodes_of(1, 8), flat_org({"A": 1, "B": 1}), jobs),
                    {"B": 8}, preempted={"U1": ("PreemptedUnallocated", ("Q1",))}, pending={}))
    jobs = [Job("U2", "A", 4, min_runtime_s=0)] + queued("B", 1, 4)
    out.append(Case("an unallocated job runs on GPUs nobody else wants",
                    snapshot(nodes_of(1, 8), flat_org({"A": 1, "B": 1}), jobs),
                    {"A": 4, "B": 4}, pending={}))
    return out


@pytest.mark.parametrize("case", cases(), ids=lambda c: c.name)
def test_epoch_scenario(case: Case):
    plan = run_epoch(case.snap)
    assert plan.degraded is None
    assert gpus_by_project(case.snap, plan) == case.gpus
    assert preempted(plan) == case.preempted
    if case.pending is not None:
        assert pending_codes(plan) == case.pending


# ---------------------------------------------------------------------------- order of goals


def test_floors_come_before_impact():
    # B used far more than its share (low weight), yet its floor of 50 GPUs is met first
    jobs = queued("A", 20, 5) + queued("B", 20, 5)
    snap = snapshot(nodes_of(10, 10), flat_org({"A": 1, "B": 1}), jobs, usage={"B": 6.0})
    plan = run_epoch(snap)
    assert gpus_by_project(snap, plan) == {"A": 50, "B": 50}
    assert plan.floor_violations == ()


def test_impact_comes_before_churn():
    # floors (4 GPUs each) are met by protected jobs; above them a queued job of a project with
    # a lower usage ratio displaces an expired job of a project with a higher one, although
    # that costs churn
    jobs = [running("A-prot", "A", "h100", [("n00", range(4))], start=9.5 * H),
            running("B-prot", "B", "h100", [("n00", range(4, 8))], start=9.5 * H),
            running("A-run", "A", "h100", [("n01", range(8))], start=5 * H),
            Job("B-q", "B", 8, min_runtime_s=H)]
    org = flat_org({"A": 1, "B": 1, "C": 2})  # C has no demand
    snap = snapshot(nodes_of(2, 8), org, jobs, usage={"A": 2.0, "B": 0.1})
    plan = run_epoch(snap)
    assert preempted(plan) == {"A-run": ("PreemptedForFairShare", ("B-q",))}


def test_churn_breaks_ties_between_equal_jobs():
    # same project, same size, same priority: the running job keeps its GPUs
    jobs = [running("A-run", "A", "h100", [("n00", range(8))], start=5 * H),
            Job("A-q", "A", 8, min_runtime_s=H, submit_time=0.0)]
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1}), jobs)
    plan = run_epoch(snap)
    assert preempted(plan) == {}
    assert [p.job_id for p in plan.placements] == ["A-run"]


def test_churn_preempts_the_job_that_loses_least_work():
    # two expired jobs of an over-share project; the one 10 min past its checkpoint goes
    pol = Policy(checkpoint_interval_s=H)
    jobs = [running("old", "B", "h100", [("n00", range(8))], start=10 * H - 50 * 60,
                    min_runtime_s=600.0),
            running("new", "B", "h100", [("n01", range(8))], start=10 * H - 70 * 60,
                    min_runtime_s=600.0),
            Job("A-q", "A", 8, min_runtime_s=H)]
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), jobs, usage={"B": 4.0},
                    policy=pol)
    plan = run_epoch(snap)
    assert preempted(plan) == {"new": ("PreemptedForFairShare", ("A-q",))}


def test_solver_trouble_degrades_to_keeping_running_jobs():
    jobs = [running("R", "A", "h100", [("n00", range(4))], start=9 * H)] + queued("A", 2, 4)
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1}), jobs)
    plan = run_epoch(snap, SolverSettings(backend="no-such-solver"))
    assert plan.degraded is not None and "no-such-solver" in plan.degraded
    assert [p.job_id for p in plan.placements] == ["R"]
    assert {r.code.value for r in plan.pending} == {"SolverDegraded"}
    assert plan.report.status == "error"
