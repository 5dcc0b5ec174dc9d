"""The published greedy system's order and pass (models/greedy.md): the baseline policy
(optalloc.sim.policies.greedy) and the incumbent the epoch optimizer must never lose to
(optalloc.plan.incumbent). The pass itself is the list schedulers' shared `rank_pass`."""

from __future__ import annotations

import numpy as np

from optalloc.plan.ranked import PassResult, down_resumable, rank_pass
from optalloc.snapshot import Snapshot
from optalloc.types import ReasonCode


def greedy_order(snap: Snapshot) -> np.ndarray:
    """Job indices best first, as the published greedy system sorts them: allocated work
    before unallocated, projects in Fair-Tree order (optalloc.model.order), then each
    project's own order (priority, running before queued, submit, id). A running job is
    allocated work where its project has a share of the type it runs on, a queued one where
    its project has a share of a type it may use (models/greedy.md section 1)."""
    walk, _, once = _greedy_entries(snap)
    return walk[once]


def greedy_walk(snap: Snapshot) -> tuple[np.ndarray, np.ndarray]:
    """(order, shared) for rank_pass: greedy_order, where a queued job that may also use a
    type without its project's share is listed a second time, among the unallocated work
    (its project's Fair-Tree place, its own place in its team's order): rule 4, such a type
    takes it only as unallocated work, on GPUs nobody ranked above wants (before, it was
    placed there at its allocated rank, and a job of a project without b200 share took b200
    GPUs that allocated jobs ranked below it waited for: an outside judge, stop 53)."""
    return _greedy_entries(snap)[:2]


def _greedy_entries(snap: Snapshot) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """greedy_walk's (order, shared), and per entry whether it is its job's first (a job's
    second entry, among the unallocated work, always sorts after its first)."""
    from optalloc.model.order import fair_tree_rank, project_order

    J = len(snap.jobs)
    if not J:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool), np.zeros(0, dtype=bool)
    prank = fair_tree_rank(snap)[snap.job_project]
    tier1 = np.asarray(snap.job_tier1, dtype=bool)
    allowed = np.asarray(snap.job_allowed, dtype=bool)
    run_t = snap.job_run_type
    running = (run_t >= 0) & ~down_resumable(snap)  # one of a down node walks as queued
    on_run = tier1[np.arange(J), np.maximum(run_t, 0)]
    alloc = np.where(running, on_run, tier1.any(axis=1))
    # queued allocated jobs that may also use a type without a share: a second entry
    twice = np.flatnonzero(~running & alloc & (allowed & ~tier1).any(axis=1))
    jobs = np.concatenate([np.arange(J), twice])
    first = np.concatenate([alloc, np.zeros(len(twice), bool)])
    porder = project_order(snap)
    order = np.lexsort((porder[jobs], prank[jobs], ~first))
    return jobs[order], first[order], order < J


def greedy_pass(snap: Snapshot) -> PassResult:
    """The greedy baseline's ranked pass: protected runs are fixed; a queued allocated job may
    preempt lower-ranked unprotected runs; unallocated work only fills (models/greedy.md)."""
    rt = np.maximum(snap.job_run_type, 0)
    J = len(snap.jobs)
    run_tier1 = snap.job_tier1[np.arange(J), rt] & (snap.job_run_type >= 0)
    walk, shared = greedy_walk(snap)
    return rank_pass(
        snap,
        walk,
        fixed=snap.job_protected,
        may_preempt=snap.job_tier1.any(axis=1),  # a running job never reaches it, but one
        # whose node is down is walked as a queued job (rank_pass, step 1)
        victim_code=lambda v: (
            ReasonCode.PREEMPTED_FAIR_SHARE if run_tier1[v] else ReasonCode.PREEMPTED_UNALLOCATED
        ),
        shared=shared,
    )
