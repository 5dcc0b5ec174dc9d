"""Table-driven epoch cases for the time-aware terms of the objective (models/formulation.md,
"Short jobs, aging and preemption margin"): a waiting short job outranks its project's batch
backlog, value grows with the wait, a running job past its min_runtime is preempted only for a
gain larger than the margin plus its lost work, and never to start a job of its own project.
Each case asserts the whole plan: GPUs per job, preemptions with codes, pending codes."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from optalloc.epoch import run_epoch
from optalloc.model.objective.impact import aging_boost, compute_impact
from optalloc.types import Job

from tests.test_epoch_toy import H, flat_org, nodes_of, pending_codes, preempted, running, snapshot

M = 60.0
NOW = 10 * H


@dataclass
class Case:
    name: str
    snap: object
    placed: dict  # job id -> GPUs, every job running after the epoch
    preempted: dict = field(default_factory=dict)
    pending: dict = field(default_factory=dict)


def _placed(plan) -> dict[str, int]:
    return {p.job_id: p.gpus for p in plan.placements}


def cases() -> list[Case]:
    out = []
    # one free GPU; A's batch job was submitted first, its debug job (min_runtime 15 min) later
    jobs = [running("A-prot", "A", "h100", [("n00", range(7))], start=NOW - 10 * M),
            Job("A-batch", "A", 1, min_runtime_s=8 * H, submit_time=NOW - 2 * H),
            Job("A-debug", "A", 1, min_runtime_s=15 * M, submit_time=NOW - 5 * M)]
    out.append(Case("a debug job that waited starts before a same-project batch job",
                    snapshot(nodes_of(1, 8), flat_org({"A": 1}), jobs, now=NOW),
                    {"A-prot": 7, "A-debug": 1}, pending={"A-batch": "WaitingForCapacity"}))
    # same shape, both batch: the older one goes first (no short-job factor between equals)
    jobs = [running("A-prot", "A", "h100", [("n00", range(7))], start=NOW - 10 * M),
            Job("A-old", "A", 1, min_runtime_s=8 * H, submit_time=NOW - 2 * H),
            Job("A-new", "A", 1, min_runtime_s=8 * H, submit_time=NOW - 5 * M)]
    out.append(Case("between two batch jobs of a project the one that waited longer starts",
                    snapshot(nodes_of(1, 8), flat_org({"A": 1}), jobs, now=NOW),
                    {"A-prot": 7, "A-old": 1}, pending={"A-new": "WaitingForCapacity"}))
    # floors are met by protected jobs; above them B (slightly lower usage) wants A's expired
    # job: a 15% gain is inside the 25% margin, so A keeps its GPUs
    base = [running("A-prot", "A", "h100", [("n01", range(4))], start=NOW - 10 * M),
            running("B-prot", "B", "h100", [("n01", range(4, 8))], start=NOW - 10 * M),
            running("A-run", "A", "h100", [("n00", range(8))], start=NOW - 5 * H,
                    min_runtime_s=2 * H)]
    org = flat_org({"A": 1, "B": 1, "C": 2})  # C has no demand
    jobs = base + [Job("B-q", "B", 8, min_runtime_s=8 * H, submit_time=NOW)]
    out.append(Case("a job past its min_runtime is not preempted for a small gain",
                    snapshot(nodes_of(2, 8), org, jobs, now=NOW, usage={"A": 0.3, "B": 0.1}),
                    {"A-prot": 4, "B-prot": 4, "A-run": 8}, pending={"B-q": "OverShare"}))
    out.append(Case("a job past its min_runtime is preempted when the gain exceeds the margin",
                    snapshot(nodes_of(2, 8), org, jobs, now=NOW, usage={"A": 1.5, "B": 0.1}),
                    {"A-prot": 4, "B-prot": 4, "B-q": 8},
                    preempted={"A-run": ("PreemptedForFairShare", ("B-q",))}))
    # B has a lower weight than A, so no impact gain, but B is below its floor (4 of 8 GPUs)
    jobs = [running("A-prot", "A", "h100", [("n00", range(4))], start=NOW - 10 * M),
            running("A-run", "A", "h100", [("n00", range(4, 8))], start=NOW - 5 * H,
                    min_runtime_s=2 * H),
            Job("B-q", "B", 4, min_runtime_s=8 * H, submit_time=NOW)]
    out.append(Case("a job past its min_runtime above its floor is preempted for a project "
                    "below its floor even without an impact gain",
                    snapshot(nodes_of(1, 8), flat_org({"A": 1, "B": 1}), jobs, now=NOW,
                             usage={"A": 0.5, "B": 2.0}),
                    {"A-prot": 4, "B-q": 4},
                    preempted={"A-run": ("PreemptedForFairShare", ("B-q",))}))
    # A's own queued job has a higher priority and waited long; A-run is past min_runtime
    jobs = [running("A-run", "A", "h100", [("n00", range(8))], start=NOW - 5 * H,
                    min_runtime_s=2 * H),
            Job("A-urgent", "A", 8, min_runtime_s=2 * H, priority=5, submit_time=0.0)]
    out.append(Case("a running job is never preempted to start a job of its own project",
                    snapshot(nodes_of(1, 8), flat_org({"A": 1}), jobs, now=NOW),
                    {"A-run": 8}, pending={"A-urgent": "WaitingForCapacity"}))
    # unallocated work (min_runtime 0): A used far more than B, so B's jobs weigh more
    org = flat_org({"A": 1, "B": 1})
    usage = {"A": 1.5, "B": 0.0}
    base = [running("A-prot", "A", "h100", [("n00", range(4))], start=NOW - 10 * M),
            running("A-unalloc", "A", "h100", [("n00", range(4, 8))], start=NOW - H,
                    min_runtime_s=0.0)]
    jobs = base + [Job("B-unalloc", "B", 4, min_runtime_s=0.0, submit_time=NOW - H)]
    out.append(Case("a queued unallocated job never preempts a running unallocated one, "
                    "even of a project that used more",
                    snapshot(nodes_of(1, 8), org, jobs, now=NOW, usage=usage),
                    {"A-prot": 4, "A-unalloc": 4}, pending={"B-unalloc": "UnallocatedYields"}))
    jobs = base + [Job("B-unalloc", "B", 2, min_runtime_s=0.0, submit_time=NOW - H),
                   Job("B-q", "B", 4, min_runtime_s=8 * H, submit_time=NOW)]
    out.append(Case("a running unallocated job yields its GPUs to a queued allocated job",
                    snapshot(nodes_of(1, 8), org, jobs, now=NOW, usage=usage),
                    {"A-prot": 4, "B-q": 4},
                    preempted={"A-unalloc": ("PreemptedUnallocated", ("B-q",))},
                    pending={"B-unalloc": "UnallocatedYields"}))
    return out


@pytest.mark.parametrize("case", cases(), ids=lambda c: c.name)
def test_time_slicing_case(case: Case):
    plan = run_epoch(case.snap)
    assert plan.degraded is None
    assert _placed(plan) == case.placed
    assert preempted(plan) == case.preempted
    assert pending_codes(plan) == case.pending


BOOSTS = [
    # (name, job kwargs, expected factor)
    ("a batch job just submitted has factor 1",
     dict(min_runtime_s=8 * H, submit_time=NOW), 1.0),
    ("a batch job that waited one protection period has factor 2",
     dict(min_runtime_s=8 * H, submit_time=NOW - 8 * H), 2.0),
    ("a debug job just submitted gets the short-job factor 2",
     dict(min_runtime_s=15 * M, submit_time=NOW), 2.0),
    ("a debug job that waited 15 minutes doubles to 4",
     dict(min_runtime_s=15 * M, submit_time=NOW - 15 * M), 4.0),
    ("a debug job that waited an hour stops at 2 x the aging cap 4",
     dict(min_runtime_s=15 * M, submit_time=NOW - H), 8.0),
    ("a batch job that waited three days stops at the aging cap 4",
     dict(min_runtime_s=8 * H, submit_time=NOW - 72 * H), 4.0),
    ("a 4 h job just submitted gets sqrt(8 h / 4 h)",
     dict(min_runtime_s=4 * H, submit_time=NOW), 2.0**0.5),
    ("an unallocated job never ages", dict(min_runtime_s=0.0, submit_time=0.0), 1.0),
]


@pytest.mark.parametrize("name,kw,expect", BOOSTS, ids=[b[0] for b in BOOSTS])
def test_aging_factor(name, kw, expect):
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1}), [Job("j", "A", 1, **kw)], now=NOW)
    assert aging_boost(snap).tolist() == pytest.approx([expect])


def test_a_running_job_is_worth_per_gpu_what_the_best_job_of_its_project_is():
    jobs = [running("A-run", "A", "h100", [("n00", range(4))], start=NOW - 5 * H),
            Job("A-debug", "A", 2, min_runtime_s=15 * M, submit_time=NOW),
            running("B-run", "B", "h100", [("n00", range(4, 8))], start=NOW - 5 * H)]
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1, "B": 1}), jobs, now=NOW)
    imp = compute_impact(snap)
    per_gpu = imp.value[:, 0] / snap.job_gpus
    assert per_gpu[0] == pytest.approx(per_gpu[1])
    assert per_gpu[0] > 1.9 * per_gpu[2]
