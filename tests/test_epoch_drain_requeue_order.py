"""A job that must leave a drain node (past its protection) is requeued (DESIGN.md rule 5), so
in its team's order it ranks as a queued job would, by priority and submit time, not first as
a running job of its priority does. Before stop 43 it ranked as running: restarted at once on
the up node, it kept its project's earlier-submitted 7-GPU job waiting below the project's
floor with 5 GPUs idle, called optimal, where greedy ran the 7-GPU job (a helper's random
search, seed 1411). Each case asserts the whole plan."""

from __future__ import annotations

import pytest

from optalloc.epoch import run_epoch
from optalloc.types import Job, NodeState

from test_epoch_toy import H, flat_org, nodes_of, pending_codes, preempted, running, snapshot


def _snap(r_submit: float, shares: dict):
    nodes = nodes_of(1, 8, prefix="d", state=NodeState.DRAIN) + nodes_of(1, 8)
    jobs = [running("r", "D", "h100", [("d00", (2, 3, 4))], start=5 * H, min_runtime_s=H,
                    submit_time=r_submit),
            Job("q", "D", 7, min_runtime_s=H, submit_time=6.0)]
    return snapshot(nodes, flat_org(shares), jobs)


def _where(plan) -> dict:
    return {p.job_id: tuple((a.node, a.gpus) for a in p.nodes) for p in plan.placements}


@pytest.mark.parametrize("shares", [{"B": 1, "D": 2}, {"D": 1}], ids=["two projects", "one"])
def test_the_earlier_queued_teammate_starts_and_the_drained_job_is_requeued(shares):
    plan = run_epoch(_snap(10.0, shares))
    assert _where(plan) == {"q": (("n00", tuple(range(7))),)}
    assert preempted(plan) == {"r": ("PreemptedNodeDrain", ())}
    assert pending_codes(plan) == {}
    assert plan.report.status == "optimal"


@pytest.mark.parametrize("shares", [{"B": 1, "D": 2}, {"D": 1}], ids=["two projects", "one"])
def test_a_drained_job_submitted_first_still_restarts_first_in_its_teams_order(shares):
    plan = run_epoch(_snap(0.0, shares))
    assert _where(plan) == {"r": (("n00", (0, 1, 2)),)}
    assert preempted(plan) == {"r": ("Moved", ())}
    assert pending_codes(plan) == {"q": "WaitingForCapacity"}
    assert plan.report.status == "optimal"
