"""Invariant checks for benchmark rows: every plan a row produces is checked against its
snapshot with the simulator's rules (optalloc.sim.invariants.check_plan: capacity, whole gangs,
protection, every job accounted for).

Rows that bypass run_epoch (a MIP backend alone, the naive PuLP model) have starts and keeps
but no reasons; `plan_of` turns them into a Plan with the minimal reasons check_plan needs
(a running job not kept is preempted, Moved when it starts again elsewhere; a queued job not
started is pending; a kept job keeps its placement exactly as the snapshot has it).
"""

from __future__ import annotations

from optalloc.sim.invariants import SimulationInvariantError, check_plan
from optalloc.snapshot import Snapshot
from optalloc.types import PendingReason, Placement, Plan, Preemption, ReasonCode


def plan_of(snap: Snapshot, kept_jobs, starts: dict[int, Placement]) -> Plan:
    """`kept_jobs`: job indices of running jobs that keep their GPUs; `starts`: job index ->
    new Placement."""
    kept = {int(j) for j in kept_jobs}
    placements = [snap.jobs[j].placement for j in sorted(kept)]  # kept as they are
    placements += [starts[j] for j in sorted(starts)]
    pre, pending = [], []
    for j, job in enumerate(snap.jobs):
        if job.running and j not in kept:
            code = ReasonCode.MOVED if j in starts else ReasonCode.PREEMPTED_FAIR_SHARE
            pre.append(Preemption(job.id, code, "benchmark row", snap.policy.grace_s))
        elif not job.running and j not in starts:
            pending.append(PendingReason(job.id, ReasonCode.WAITING_FOR_CAPACITY, "benchmark row"))
    return Plan(now=snap.now, placements=tuple(placements), preemptions=tuple(pre),
                pending=tuple(pending))


def invariants(snap: Snapshot, plan: Plan) -> str:
    """'ok', or the first broken rule."""
    try:
        check_plan(snap, plan)
    except SimulationInvariantError as err:
        return str(err)
    return "ok"
