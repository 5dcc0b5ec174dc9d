"""Of two interchangeable running jobs (one project, priority, type and size, both past their
protection), a plan preempts the one that loses less work (optalloc.plan.victims): the churn
term that says so is a tie-breaker a solution within its gap need not honour, so the epoch
places the solution with the keeps exchanged too and keeps the better by the scheme's order."""

from __future__ import annotations

import numpy as np

import optalloc.epoch as epoch
from optalloc.model.build import build_model
from optalloc.plan.victims import swapped_keeps
from optalloc.types import Job, Policy

from test_epoch_toy import H, flat_org, nodes_of, running, snapshot


def _snap():
    # B holds both nodes with two 8-GPU jobs past protection; checkpoints every hour: "fresh"
    # checkpointed 5 minutes ago, "stale" 55 minutes ago. A (under its share) needs 8 GPUs.
    pol = Policy(checkpoint_interval_s=H)
    jobs = [running("fresh", "B", "h100", [("n00", range(8))], start=10 * H - 3 * H - 5 * 60),
            running("stale", "B", "h100", [("n01", range(8))], start=10 * H - 3 * H - 55 * 60),
            Job("A0", "A", 8, min_runtime_s=H)]
    return snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), jobs, usage={"B": 3.0},
                    policy=pol)


def _solution(em, keep: str) -> np.ndarray:
    x = np.zeros(em.lm.n_vars)
    for c, j in enumerate(em.req.cand_job):
        x[em.x[c]] = 1.0 if em.snap.jobs[j].id == "A0" else 0.0
    for i, j in enumerate(em.req.run_job):
        x[em.k[i]] = 1.0 if em.snap.jobs[j].id == keep else 0.0
    return x


def test_the_keeps_of_a_preempted_job_and_its_twin_that_lost_less_are_exchanged():
    em = build_model(_snap())
    x = _solution(em, keep="fresh")  # preempts "stale", 55 minutes of work lost
    kept = np.array([em.snap.jobs[j].id == "fresh" for j in em.req.run_job])
    y = swapped_keeps(em, x, kept)
    assert y is not None
    ids = [em.snap.jobs[j].id for j in em.req.run_job]
    assert {i: y[em.k[k]] for k, i in enumerate(ids)} == {"fresh": 0.0, "stale": 1.0}
    assert swapped_keeps(em, y, ~kept) is None  # already the least-loss choice


def test_the_epoch_preempts_the_job_that_loses_least_whichever_the_solution_named():
    em = build_model(_snap())
    out = epoch.placed_outcome(em, _solution(em, keep="fresh"), "test", backend="highs",
                                status="feasible", message="")
    pre = {em.snap.jobs[j].id for j, k in zip(em.req.run_job, out.placed.kept) if not k}
    assert pre == {"fresh"}
    assert out.model_point and "losing less work" in out.message
    plan = epoch.run_epoch(_snap())
    assert {p.job_id for p in plan.preemptions} == {"fresh"}


def _mixed_snap():
    # as _snap, on a cluster with a faster type: "slow" runs on h100 at half the speed it has
    # on b200 (its best type), "fast" at its best; "slow" lost more work (55 minutes against
    # 5). The b200 node is held by a protected job of C. A needs 8 GPUs of h100
    pol = Policy(checkpoint_interval_s=H)
    jobs = [running("fast", "B", "h100", [("n00", range(8))], start=10 * H - 3 * H - 5 * 60),
            running("slow", "B", "h100", [("n01", range(8))], start=10 * H - 3 * H - 55 * 60,
                    speedup={"b200": 2.0}),
            running("held", "C", "b200", [("b00", range(8))], start=10 * H - 600,
                    min_runtime_s=3 * H),
            Job("A0", "A", 8, min_runtime_s=H, gpu_types=("h100",))]
    nodes = nodes_of(2, 8) + nodes_of(1, 8, gpu_type="b200", prefix="b")
    return snapshot(nodes, flat_org({"A": 1, "B": 1, "C": 1}), jobs,
                    usage={"B": 3.0, "C": 0.1}, types=("h100", "b200"), policy=pol)


def test_a_job_running_at_half_its_best_speed_is_no_twin_of_one_running_at_its_best():
    """The model values a GPU of running work by the job's speed there over its best type's:
    "slow" is worth half of "fast" on h100, so preempting it is the model's choice, not a
    tie the churn term breaks; exchanging the keeps would preempt the job at full speed to
    keep the one at half (whose 55 lost minutes are 27.5 minutes of its best progress)."""
    snap = _mixed_snap()
    em = build_model(snap)
    x = _solution(em, keep="fast")
    kept = np.array([em.snap.jobs[j].id in ("fast", "held") for j in em.req.run_job])
    assert swapped_keeps(em, x, kept) is None
    plan = epoch.run_epoch(snap)
    assert {p.job_id for p in plan.preemptions} == {"slow"}
    assert {p.job_id for p in plan.placements} == {"fast", "held", "A0"}
