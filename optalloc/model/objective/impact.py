"""Budget-weighted impact: what running a job is worth this epoch, and what preempting costs.

Fair-share weight (per org node o, computed down the tree; `r_o` = usage ratio of o):

    R_o = R_parent(o) + clip(r_o, 0, R_MAX) / 2**(depth(o) - 1)      (R_root = 0)
    W_o = 2 ** -min(R_o, R_MAX)

i.e. W is a product over the path of Slurm-style 2^(-U/S) factors (U/S = usage ratio), with
the exponent halved at each level down. Why: Fair Tree compares siblings level by level, so an
ancestor's over-use must weigh more than a leaf's; halving makes one unit of ratio at the
program level worth two at the project level while keeping the weight smooth (a sort would be
lexicographic, the ILP needs numbers). Capping R at R_MAX = 8 keeps W >= 2^-8 so the numeric
range stays safe for MIP tolerances.

Value of job j on type t (maximized):

    v[j, t] = gpus_j * speed[j, t] * W_project(j) * f_j * tier[j, t]
    f_j     = (1 + EPS_PRIORITY * rank_j) * a_j

rank_j in (0, 1] orders a project's jobs by (priority desc, submit asc), ties equal: declared
priority only matters inside the project. tier = 1 for allocated jobs of a project with a
positive entitlement on t; tier = eps_u = W_MIN * s_min / (FOOTPRINT * max_node_gpus * s_max *
(1 + EPS_PRIORITY)) (one allocated GPU outweighs a whole node of unallocated GPUs, with margin)
for unallocated jobs and for projects with a zero share on t.

Short jobs and aging (queued allocated jobs; a = 1 otherwise), see aging_boost():

    a_j = s_j * min(1 + wait_j / tau_j, AGING_MAX),   tau_j = max(protection_j, 15 min),
    s_j = clip(sqrt(min_runtime_cap / tau_j), 1, SHORT_MAX)

A short protection is a small commitment, so a debug job is worth more per GPU from the start
and starts ahead of its project's batch backlog; every job's value grows with its wait on its
own time scale, so long-waiting gangs eventually clear whole nodes. A running allocated job gets
the largest f of its project (per_gpu_factor()): no job is preempted to start one of its own
project.

Preemption (churn) cost of running job j, paid when it is not kept (a move is a preemption):

    lost_j  = (now - last_checkpoint_j) + restart_overhead      (resumable)
              (now - start_j) + restart_overhead                 (not resumable)
    churn_j  = EPS_CHURN * v_j * min(lost_j, H) / H,        H = min_runtime_cap (>= 1 h)
    margin_j = HYSTERESIS + min(lost_j, H) / H

churn only breaks ties in the objective (it keeps the LP relaxation tight, so epochs stay fast);
the margin is enforced as a hold rule (optalloc.model.constraints.contract.margin_hold): a
running job past its min_runtime whose project and ancestors are at or below their floors is
kept unless some queued job is worth more than (1 + margin_j) times its value per GPU. Floors dominate impact and churn: each floor
GPU met is worth FLOOR_WEIGHT, FOOTPRINT times the largest per-GPU coefficient of any column.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optalloc.snapshot import Snapshot

R_MAX = 8.0
EPS_PRIORITY = 0.01
HYSTERESIS = 0.5  # a running job past min_runtime is worth 50% more than a newcomer
EPS_CHURN = 1e-3  # churn in the objective: tie-breaking only (the margin is a hold rule)
CHURN_MIN_HORIZON_S = 3600.0
AGING_MIN_TAU_S = 15 * 60.0  # the aging time scale is the job's protection, at least this
SHORT_MAX = 2.0  # short-job factor sqrt(cap / protection), at most this (4 made the LP loose)
AGING_MAX = 4.0  # the aging factor is capped (numeric range; fair share still decides)
W_MIN = 2.0**-R_MAX
FOOTPRINT = 4.0  # safety factor: a gang's node footprint can be ~2x its GPUs; x2 margin


def compound_ratio(snap: Snapshot) -> np.ndarray:
    """(O,) R_o of every org node (root 0)."""
    org = snap.org
    r = np.nan_to_num(np.asarray(snap.usage_ratio, dtype=float), nan=R_MAX, posinf=R_MAX)
    r = np.clip(r, 0.0, R_MAX)
    R = np.zeros(org.n)
    for o in np.argsort(org.depth, kind="stable")[1:]:
        R[o] = R[org.parent[o]] + r[o] / 2.0 ** (org.depth[o] - 1)
    return R


def fairshare_weight(snap: Snapshot) -> np.ndarray:
    """(O,) W_o = 2^-min(R_o, R_MAX) for every org node."""
    return 2.0 ** -np.minimum(compound_ratio(snap), R_MAX)


def project_rank(snap: Snapshot) -> np.ndarray:
    """(J,) rank in (0, 1] within the job's project: 1 - (jobs of the project strictly ahead in
    line) / (jobs of the project), where ahead = higher priority, or equal priority and earlier
    submit. Equal (priority, submit) tie, so churn, not an id, decides between them."""
    J = len(snap.jobs)
    if J == 0:
        return np.zeros(0)
    prio, sub, proj = -snap.job_priority, snap.job_submit, snap.job_project
    order = np.lexsort((sub, prio, proj))
    p, a, b = proj[order], prio[order], sub[order]
    start = np.r_[0, np.flatnonzero(np.diff(p)) + 1]
    sizes = np.diff(np.r_[start, J])
    first_of_project = np.repeat(start, sizes)
    new_key = np.r_[True, (np.diff(p) != 0) | (np.diff(a) != 0) | (np.diff(b) != 0)]
    key_start = np.maximum.accumulate(np.where(new_key, np.arange(J), 0))
    ahead = key_start - first_of_project
    rank = np.empty(J)
    rank[order] = 1.0 - ahead / np.repeat(sizes, sizes)
    return rank


def aging_boost(snap: Snapshot) -> np.ndarray:
    """(J,) factor >= 1 on the value of a queued allocated job: short jobs first, and a job's
    value grows with its wait (see the module docstring); 1 for running and unallocated jobs."""
    J = len(snap.jobs)
    if J == 0:
        return np.ones(0)
    cap = float(snap.policy.min_runtime_cap_s)
    mr = np.fromiter((j.min_runtime_s for j in snap.jobs), dtype=float, count=J)
    protect = np.minimum(mr, cap) if cap > 0 else mr
    tau = np.maximum(protect, AGING_MIN_TAU_S)
    short = np.clip(np.sqrt(np.maximum(cap, tau) / tau), 1.0, SHORT_MAX)
    wait = np.maximum(snap.now - snap.job_submit, 0.0)
    boost = short * np.minimum(1.0 + wait / tau, AGING_MAX)
    return np.where(snap.job_allocated & ~snap.job_running, boost, 1.0)


def per_gpu_factor(snap: Snapshot, rank: np.ndarray, boost: np.ndarray) -> np.ndarray:
    """(J,) the factor (1 + EPS_PRIORITY * rank) * boost of each job; a running allocated job
    gets the largest factor of any allocated job of its project, so no queued job of the same
    project is ever worth more per GPU than a running one (no preemption to start a job of the
    same project; churn keeps the running one)."""
    f = (1.0 + EPS_PRIORITY * rank) * boost
    if not len(f):
        return f
    alloc = snap.job_allocated
    best = np.zeros(snap.org.n)
    np.maximum.at(best, snap.job_project[alloc], f[alloc])
    run = alloc & snap.job_running
    f = f.copy()
    f[run] = best[snap.job_project[run]]
    return f


def keep_low_tier_running(snap: Snapshot, value: np.ndarray, tier: np.ndarray) -> np.ndarray:
    """(J, T) value with every running low-tier job (unallocated, or a zero share on the type)
    worth per GPU at least what the best queued low-tier job allowed on that type is: a queued
    unallocated job never preempts a running one (it only fills idle GPUs, as the published
    system says), whatever their projects' fair-share weights. Only allocated demand displaces
    unallocated work; churn breaks the remaining per-GPU ties in favour of the running job.
    The raised values stay inside the range eps_unallocated was sized for (the best low-tier
    per-GPU value of the epoch), so one allocated GPU still outweighs a node of them."""
    low = tier < 1.0
    if not value.size or not low.any():
        return value
    g = np.maximum(snap.job_gpus, 1).astype(float)[:, None]
    queued = (~snap.job_running)[:, None] & snap.job_allowed & low
    best = np.where(queued, value / g, 0.0).max(axis=0)  # (T,) best queued low-tier per GPU
    run = snap.job_running[:, None] & low
    return np.where(run, np.maximum(value, best[None, :] * g), value)


@dataclass(frozen=True, eq=False)
class Impact:
    weight: np.ndarray  # (O,) fair-share weight per org node
    job_weight: np.ndarray  # (J,) W of the job's project
    rank: np.ndarray  # (J,) within-project rank
    tier: np.ndarray  # (J, T) 1 or eps_unallocated
    value: np.ndarray  # (J, T) v[j, t]
    churn: np.ndarray  # (J,) cost of preempting (0 for queued)
    lost_s: np.ndarray  # (J,) seconds of work a preemption loses (0 for queued)
    eps_unallocated: float
    floor_weight: float
    boost: np.ndarray | None = None  # (J,) aging/short-job factor (1 for running jobs)
    margin: np.ndarray | None = None  # (J,) preemption margin: HYSTERESIS + lost / horizon


def compute_impact(snap: Snapshot) -> Impact:
    J, T = snap.job_allowed.shape
    W = fairshare_weight(snap)
    jw = W[snap.job_project] if J else np.zeros(0)
    rank = project_rank(snap)
    boost = aging_boost(snap)
    factor = per_gpu_factor(snap, rank, boost)
    speed = np.where(snap.job_allowed, snap.job_speed, np.nan)
    s_max = float(np.nanmax(speed)) if J and np.isfinite(speed).any() else 1.0
    s_min = float(np.nanmin(speed)) if J and np.isfinite(speed).any() else 1.0
    s_min = max(s_min, 1e-6)
    prio_max = 1.0 + EPS_PRIORITY
    # one allocated GPU must outweigh a whole node of unallocated GPUs (a 1-GPU job may need a
    # node that unallocated jobs fill), with the gang-footprint margin on top
    node_max = float(snap.node_gpus.max()) if len(snap.nodes) else 1.0
    eps_u = W_MIN * s_min / (FOOTPRINT * node_max * s_max * prio_max)
    leaf_ent = snap.org.entitlement[snap.job_project] if J else np.zeros((0, T))
    tier = np.where(snap.job_allocated[:, None] & (leaf_ent > 0), 1.0, eps_u)
    value = snap.job_gpus[:, None] * snap.job_speed * (jw * factor)[:, None] * tier
    value = keep_low_tier_running(snap, value, tier)
    # work lost by a preemption now
    pol = snap.policy
    start = np.array(
        [j.start_time if (j.running and j.start_time is not None) else snap.now for j in snap.jobs],
        dtype=float,
    )
    interval = np.array(
        [j.checkpoint_interval_s or pol.checkpoint_interval_s for j in snap.jobs], dtype=float
    )
    resumable = np.array([j.resumable for j in snap.jobs], dtype=bool)
    ran = np.maximum(snap.now - start, 0.0)
    since_ckpt = np.where(resumable & (interval > 0), np.mod(ran, np.maximum(interval, 1e-9)), ran)
    lost = np.where(snap.job_running, since_ckpt + pol.restart_overhead_s, 0.0)
    # churn: a margin of the job's own value (hysteresis) plus its lost work amortized over the
    # horizon a replacement would run protected
    horizon = max(float(pol.min_runtime_cap_s), CHURN_MIN_HORIZON_S)
    own = (value.max(axis=1) if T else np.zeros(J)) * snap.job_running
    margin = np.where(snap.job_running, HYSTERESIS + np.minimum(lost, horizon) / horizon, 0.0)
    churn = EPS_CHURN * own * np.minimum(lost, horizon) / horizon
    # floors must outweigh the best per-GPU coefficient of any start or keep
    per_gpu = (own + churn) / np.maximum(snap.job_gpus, 1) if J else np.zeros(0)
    qv = value.max(axis=1) / np.maximum(snap.job_gpus, 1) if J and T else np.zeros(0)
    best = max(s_max * prio_max, float(per_gpu.max(initial=0.0)), float(qv.max(initial=0.0)))
    return Impact(
        weight=W,
        job_weight=jw,
        rank=rank,
        tier=tier,
        value=value,
        churn=churn,
        lost_s=lost,
        eps_unallocated=eps_u,
        floor_weight=FOOTPRINT * best,
        boost=boost,
        margin=margin,
    )
