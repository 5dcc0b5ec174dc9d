"""A plan scored on the scheme's own order of goals, lexicographically (DESIGN.md section 8):

    (floors met, fair-share targets met, GPUs busy, -work lost to preemption)

floors met = sum over org nodes and types of the floor GPUs met, each of the K segments of a
floor weighted omega_k (halving: a project's first quarter counts more than anyone's last, so
a shared shortfall beats one dumped on a single project); targets met = GPUs above the floor up
to the target, weighted by level (an ancestor's target first); GPUs busy counts allocated and
unallocated work; work lost = GPU-seconds since the last checkpoint of every preempted job.
Used by the dominance property (the optimizer never loses to the greedy baseline) and by
benchmarks; it reads any policy's Plan.
"""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel, build_model
from optalloc.model.constraints.fairshare import tier_bounds
from optalloc.model.objective.impact import K_SEGMENTS
from optalloc.snapshot import Snapshot
from optalloc.types import Plan


def plan_got(snap: Snapshot, plan: Plan) -> np.ndarray:
    """(O, T) allocated (tier-1) GPUs per org node and type that the plan runs."""
    O, T = snap.org.n, len(snap.gpu_types)
    leaf = np.zeros((O, T))
    tidx = {n: i for i, n in enumerate(snap.type_names)}
    for pl in plan.placements:
        j, t = snap.job_index[pl.job_id], tidx[pl.gpu_type]
        if snap.job_tier1[j, t]:
            leaf[snap.job_project[j], t] += pl.gpus
    return snap.org.membership().astype(float) @ leaf


def plan_score(snap: Snapshot, plan: Plan, em: EpochModel | None = None) -> tuple:
    em = build_model(snap) if em is None else em
    got = plan_got(snap, plan)
    b = tier_bounds(em.floor, em.target)  # (O, T, K+1)
    lo = np.concatenate([np.zeros(b.shape[:-1] + (1,)), np.cumsum(b, -1)[..., :-1]], -1)
    met = np.clip(got[:, :, None] - lo, 0, b)[1:]  # the root has no share tiers
    floors = float((met[..., :K_SEGMENTS] * em.imp.floor_weight).sum())
    targets = float((met[..., K_SEGMENTS] * em.imp.target_weight[1:, None]).sum())
    busy = int(sum(pl.gpus for pl in plan.placements))
    lost = em.imp.lost_s
    churn = float(sum(lost[snap.job_index[p.job_id]] * snap.job_gpus[snap.job_index[p.job_id]]
                      for p in plan.preemptions))
    return (round(floors, 6), round(targets, 6), busy, -round(churn, 3))
