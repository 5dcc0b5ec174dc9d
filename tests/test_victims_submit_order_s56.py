"""Which of a team's interchangeable running jobs yields (one project, priority, type and size,
all past their protection): the latest submitted, whatever the work each would lose (DESIGN.md
rule 3: declared priority, then submit time); the work lost decides only between jobs
submitted at the same time (a job array), as before (tests/test_epoch_victims.py). Whole
plans, ilp and greedy side by side: greedy stops the job it ranks last, and the optimizer's
freedom over churn comes after the scheme's order, never before it."""

from __future__ import annotations

import pytest

import optalloc.epoch as epoch
from optalloc.sim.policies.greedy import GreedyScheduler
from optalloc.types import Job, Policy

from test_epoch_toy import H, flat_org, nodes_of, running, snapshot

NOW = 10 * H


def _snap(twins, wanted=8):
    """B runs 8-GPU twins on nodes n00.. (checkpoints hourly: `lost` minutes since the last
    one each, submitted at `submit`); A (ranked first, usage 0) wants `wanted` GPUs."""
    pol = Policy(checkpoint_interval_s=H)
    jobs = [running(j, "B", "h100", [(f"n{k:02d}", range(8))],
                    start=NOW - 3 * H - lost * 60, submit_time=sub)
            for k, (j, sub, lost) in enumerate(twins)]
    jobs.append(Job("A0", "A", wanted, min_runtime_s=H))
    return snapshot(nodes_of(len(twins), 8), flat_org({"A": 1, "B": 1}), jobs,
                    usage={"B": 3.0}, policy=pol)


CASES = [
    # (name, B's twins (id, submit s, minutes lost if stopped now), A wants, preempted)
    ("a-team-stops-its-later-submitted-job-though-the-earlier-one-is-at-its-checkpoint",
     [("early", 0, 55), ("late", 600, 5)], 8, {"late"}),
    ("a-team-stops-its-later-submitted-job-whichever-node-it-holds",
     [("late", 600, 5), ("early", 0, 55)], 8, {"late"}),
    ("of-three-twins-the-latest-submitted-yields-though-it-lost-the-most",
     [("first", 0, 1), ("second", 300, 2), ("third", 900, 50)], 8, {"third"}),
    ("two-must-go-the-two-latest-submitted-yield",
     [("first", 0, 50), ("second", 300, 2), ("third", 900, 1)], 16, {"second", "third"}),
    ("twins-submitted-together-the-one-that-lost-less-yields",
     [("arr0", 0, 55), ("arr1", 0, 5)], 8, {"arr1"}),
]


@pytest.mark.parametrize("twins,wanted,preempted", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_which_twin_yields(twins, wanted, preempted):
    snap = _snap(twins, wanted)
    plan = epoch.run_epoch(snap)
    assert {p.job_id for p in plan.preemptions} == preempted
    kept = {p.job_id for p in plan.placements} - {"A0"}
    assert kept == {j for j, _, _ in twins} - preempted
    assert "A0" in {p.job_id for p in plan.placements}
    assert plan.report.status == "optimal"
    if len({sub for _, sub, _ in twins}) == len(twins):  # greedy's order is the same
        greedy = GreedyScheduler().decide(snap)
        assert {p.job_id for p in greedy.preemptions} == preempted


def test_a_solution_that_stops_the_earlier_twin_is_placed_again_with_the_later_one_stopped():
    """The model's churn term prefers the earlier twin (at its checkpoint); the epoch places
    the exchange beside it and the scheme's order (the team's order inside a priority before
    the work lost) keeps the exchange."""
    import numpy as np

    from optalloc.model.build import build_model

    em = build_model(_snap([("early", 0, 1), ("late", 600, 50)]))
    x = np.zeros(em.lm.n_vars)
    for c, j in enumerate(em.req.cand_job):
        x[em.x[c]] = float(em.snap.jobs[j].id == "A0")
    for i, j in enumerate(em.req.run_job):
        x[em.k[i]] = float(em.snap.jobs[j].id == "late")
    out = epoch.placed_outcome(em, x, "test", backend="highs", status="feasible", message="")
    stopped = {em.snap.jobs[j].id for j, k in zip(em.req.run_job, out.placed.kept) if not k}
    assert stopped == {"late"}
    assert "submitted later" in out.message
