"""Table-driven cases: when a project ends below its share floor, the plan says why its running
job was preempted or its queued job waits (goals come in the order floors, impact, churn, so a
floor left unmet needs a reason: the job's gang shape, or other floors that count as much)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from optalloc.epoch import run_epoch
from optalloc.snapshot import build_snapshot
from optalloc.types import (
    Config, FloorViolation, GpuType, Job, JobState, Node, NodeAlloc, OrgNode, Placement, Policy,
    ReasonCode,
)

H = 3600.0


def _gang(jid, project, nodes):
    pl = Placement(jid, "h100", tuple(NodeAlloc(n, tuple(range(8))) for n in nodes))
    return Job(jid, project, 8 * len(nodes), gpus_per_node=8, min_runtime_s=H,
               state=JobState.RUNNING, start_time=0.0, placement=pl)


def _single(jid, node):
    pl = Placement(jid, "h100", (NodeAlloc(node, tuple(range(8))),))
    return Job(jid, "A", 8, min_runtime_s=H, state=JobState.RUNNING, start_time=0.0,
               placement=pl)


def _snap(jobs, usage):
    nodes = tuple(Node(f"n{i}", "h100", 8) for i in range(3))
    org = OrgNode("root", children=(OrgNode("A", share=1), OrgNode("B", share=1)))
    cfg = Config((GpuType("h100"),), nodes, org, Policy(), tuple(jobs))
    return build_snapshot(cfg, now=10 * H, usage_ratio=usage)


SMALL_A = tuple(Job(f"a-small-{i}", "A", 1, min_runtime_s=H, submit_time=float(i))
                for i in range(8))


@dataclass(frozen=True)
class Case:
    name: str
    jobs: tuple
    usage: dict
    preempted: dict  # job -> message
    started: set
    violations: tuple
    pending: dict  # job -> (code, message)


CASES = [
    Case(
        name="a gang whose nodes meet more floor as other jobs is preempted and the message "
             "says its project stays below its floor because of the gang's shape",
        jobs=(_gang("a-gang", "A", ["n0", "n1"]), *SMALL_A,
              Job("b-gang", "B", 16, gpus_per_node=8, min_runtime_s=H, submit_time=1.0)),
        usage={"A": 1.0, "B": 0.5},
        preempted={"a-gang": (
            "past its protection; project A holds 8 of its 12-GPU target; it stays below its "
            "floor (8 of 12) because this 16-GPU whole-node gang cannot shrink and its GPUs meet "
            "more of the other projects' floors; its GPUs go to B (16 GPUs after this, floor 12, "
            "target 12) (b-gang)")},
        started={f"a-small-{i}" for i in range(8)} | {"b-gang"},
        violations=(FloorViolation("A", "h100", 12.0, 8.0),),
        pending={},
    ),
    Case(
        name="a single-node job whose node meets more floor as another project's gang is "
             "preempted and the message names it a single-node job",
        jobs=(_single("a-one", "n0"), _single("a-two", "n1"), *SMALL_A,
              Job("b-gang", "B", 16, gpus_per_node=8, min_runtime_s=H, submit_time=1.0)),
        usage={"A": 1.0, "B": 0.5},
        preempted={"a-two": (
            "past its protection; project A holds 8 of its 12-GPU target; it stays below its "
            "floor (8 of 12) because this 8-GPU single-node job cannot shrink and its GPUs "
            "meet more of the other projects' floors; its GPUs go to B (16 GPUs after this, "
            "floor 12, target 12) (b-gang)")},
        started={"b-gang"},
        violations=(FloorViolation("A", "h100", 12.0, 8.0),),
        pending={f"a-small-{i}": (
            ReasonCode.LOWER_PRIORITY_IN_PROJECT,
            "8 h100 GPUs are held by running jobs of project A ranked above it in the team's "
            "order (priority, then running jobs, then submit time): a-one; the team's order "
            "never stops a running job for a job it ranks above, and this 1-GPU job would fit "
            "in their place (0 h100 GPUs are free)") for i in range(8)},
    ),
    Case(
        name="a queued gang of a project below its floor waits and says only part of it "
             "would count toward the floor",
        jobs=(_gang("b-gang", "B", ["n0", "n1"]), *SMALL_A,
              Job("a-gang", "A", 16, gpus_per_node=8, min_runtime_s=H, submit_time=9.0)),
        usage={"A": 0.5, "B": 1.0},
        preempted={},
        started={f"a-small-{i}" for i in range(8)},
        violations=(FloorViolation("A", "h100", 12.0, 8.0),),
        pending={"a-gang": (
            ReasonCode.WAITING_FOR_CAPACITY,
            "A is below its h100 floor (8 of 12 GPUs; its target 8, cut below the floor this "
            "epoch: its jobs, whole and in its team's order, fill only 8 GPUs of it) and this "
            "job needs 16 more: 0 h100 GPUs are protected, 0 free; the rest hold their own "
            "floors and targets: B (16 of target 16)")},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_floor_aware_explanations(case: Case):
    plan = run_epoch(_snap(case.jobs, case.usage))
    assert {p.job_id: p.message for p in plan.preemptions} == case.preempted
    assert all(p.code is ReasonCode.PREEMPTED_FAIR_SHARE for p in plan.preemptions)
    started = {p.job_id for p in plan.placements} - {j.id for j in case.jobs if j.running}
    assert started == case.started
    assert plan.floor_violations == case.violations
    assert {r.job_id: (r.code, r.message) for r in plan.pending} == case.pending


def test_a_job_below_its_floor_behind_a_whole_job_past_its_target_says_which():
    """One 8-GPU node, floors 4 and 4, two 8-GPU jobs: only one fits, the lower usage ratio
    (B) wins the floors' tie, and B then holds 8 of a 4-GPU target. The waiting job must not
    be told that B holds only its own floor and target."""
    from test_epoch_toy import flat_org, nodes_of, snapshot

    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1, "B": 1}), [
        Job("a-hi", "A", 8, min_runtime_s=H, submit_time=0.0, priority=100),
        Job("b-lo", "B", 8, min_runtime_s=H, submit_time=1.0)], usage={"A": 1.0, "B": 0.2})
    plan = run_epoch(snap)
    assert [p.job_id for p in plan.placements] == ["b-lo"]
    assert {r.job_id: (r.code, r.message) for r in plan.pending} == {"a-hi": (
        ReasonCode.WAITING_FOR_CAPACITY,
        "A is below its h100 floor (0 of 4 GPUs) and this job needs 8 more: 0 h100 GPUs are "
        "protected, 0 free; the rest are held by B (8 of target 4): past a target with whole "
        "jobs, which cannot shrink to it")}


def test_a_small_job_waiting_beside_a_gang_past_its_target_says_which():
    """Equal shares and ratios on 16 GPUs: B's 16-GPU gang meets B's floor of 8, A's eight
    1-GPU jobs would meet A's; only one fits, the floors tie and the work tier starts the gang.
    A's jobs must be told B holds 16 of a target of 8, not that the rest hold targets."""
    from test_epoch_toy import flat_org, nodes_of, queued, snapshot

    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}),
                    [Job("bg", "B", 16, min_runtime_s=H, submit_time=0.0)] + queued("A", 8, 1))
    plan = run_epoch(snap)
    assert [p.job_id for p in plan.placements] == ["bg"]
    want = ("project A is below its floor (0 of 8 h100 GPUs; its target 8), but 1 GPUs of "
            "h100 are not free, and the plan preempts none for it: 0 h100 GPUs are protected, "
            "the rest are held by "
            "B (16 of target 8): past a target with whole jobs, which cannot shrink to it (0 "
            "free)")
    assert {r.job_id: (r.code, r.message) for r in plan.pending} == {
        f"A{i:02d}": (ReasonCode.WAITING_FOR_CAPACITY, want) for i in range(8)}


def test_a_job_below_its_floor_is_not_told_its_protected_teammate_holds_it():
    """A helper's case (stop 37): the only 8-GPU node holds C's protected 1-GPU job and A's
    protected priority-1 job fills the 4-GPU node; A's 8-GPU job (A below its floor) was told
    its teammate holds it by the team's order, which decides nothing here: no node can take
    it. Below its floor, the team's order is not the reason."""
    from test_epoch_toy import flat_org, running, snapshot

    from optalloc.types import Node

    nodes = [Node("n00", "h100", 8), Node("n01", "h100", 4)]
    jobs = [running("C_run", "C", "h100", [("n00", [0])], start=9.9 * H, min_runtime_s=4 * H),
            Job("A_big", "A", 8, min_runtime_s=H, submit_time=1.0),
            running("A_run", "A", "h100", [("n01", range(4))], start=9.9 * H,
                    min_runtime_s=4 * H, priority=1)]
    snap = snapshot(nodes, flat_org({"A": 2, "B": 1, "C": 0.1}), jobs,
                    usage={"A": 0.1, "B": 0.5, "C": 3.0})
    plan = run_epoch(snap)
    assert sorted(p.job_id for p in plan.placements) == ["A_run", "C_run"]
    (r,) = plan.pending
    assert r.code is ReasonCode.WAITING_FOR_CAPACITY
    assert r.message.startswith("A is below its h100 floor")
    assert "A_run" not in r.message
