"""The in-order caps of the fair-share targets (optalloc.model.targets): how many GPUs of a
budget each project's own order realizes (README rule 2: "a project's target is realized in
its own order; when its next jobs do not fit, the rest flows to its siblings rather than to
its lower-priority jobs"; rule 3: the team's order).
"""

from __future__ import annotations

import numpy as np

from optalloc.model.order import project_order
from optalloc.model.requirements import Requirements
from optalloc.shape import SMALL, fits_types
from optalloc.snapshot import Snapshot


def counted_running(snap: Snapshot, req: Requirements) -> np.ndarray:
    """(K,) bool: running tier-1 jobs that may stay on their type this epoch."""
    rj, rt = req.run_job, req.run_type
    if not len(rj):
        return np.zeros(0, dtype=bool)
    return snap.job_tier1[rj, rt] & (~snap.job_on_drain[rj] | snap.job_protected[rj])


def lookahead_on(snap: Snapshot) -> bool:
    """Whether the lookahead runs: only it reads the targets without protections
    (`Targets.unprotected`), so they are not computed otherwise."""
    return int(snap.policy.max_reservations) > 0


# the in-order caps' passes: each caps one leaf per family (most_lost_per_family), the last
# every leaf still short
CAP_PASSES = 8


def cap_in_order(snap: Snapshot, req: Requirements, room: np.ndarray, first, step):
    """The in-order caps (targets' module docstring): `first` (target (O, K), state) the
    water-filling's first answer; each pass a leaf whose own order realizes a whole GPU less
    than its budget (the target's row sum) is capped, one leaf of a family a pass (the one
    losing most), at most CAP_PASSES passes, the last capping every leaf still short, and
    `step(capped, filled, budget, target, state)` fills again with those caps. Per type
    (targets.compute_targets) and pooled (pooled._capped) alike. (target, state) at the end."""
    leaves = snap.org.is_leaf
    target, state = first
    for i in range(CAP_PASSES - 1):
        budget = target.sum(axis=1)
        filled = _inorder_fill(snap, req, budget, room)
        capped = leaves & (filled < budget - 1.0 + 1e-6)  # a whole GPU lost, not rounding
        if not capped.any():
            break
        if i < CAP_PASSES - 2:
            capped = most_lost_per_family(snap.org, capped, budget - filled)
        target, state = step(capped, filled, budget, target, state)
    return target, state


def overshoot_room(cap: np.ndarray, prot: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """(O,) the most GPUs each leaf could hold this epoch: on the types its jobs may use
    (`usable` (O, T) > 0), the capacity `cap` (T,) less what the other projects' protected
    jobs hold there (`prot` (O, T), leaves' rows), which stay whatever the targets say."""
    others = prot.sum(axis=0)[None, :] - prot
    return np.where(usable > 0, cap[None, :] - others, 0.0).sum(axis=1)


def _inorder_fill(snap: Snapshot, req: Requirements, budget: np.ndarray,
                  room: np.ndarray | None = None) -> np.ndarray:
    """(O,) GPUs each project's own order realizes of `budget` (O,) GPUs (leaves only), or the
    whole budget where the project's first job in line beyond its protected ones does not fit
    the budget at all (a head-of-line gang needs more than the budget: floors and targets
    decide in the model whether it is worth the overshoot, so the budget is not given away).
    A job that does not fit what is left is taken where overshooting by it realizes the budget
    at least as nearly as skipping (a tie is taken: the GPUs over the target one epoch are
    under it the next, so a project of lumpy jobs gets its share over time, as greedy's order
    gives it), but a single-node job never beyond `room` (O,) (overshoot_room): the GPUs the
    other projects' protected jobs hold cannot take that overshoot, so the job is skipped and
    the project capped at what its order realizes. A multi-node gang keeps its claim (its
    nodes free at different times, as blocked_jobs says: the lookahead reserves them)."""
    rj = req.run_job[counted_running(snap, req)]
    cj = np.unique(req.cand_job[snap.job_tier1[req.cand_job, req.cand_type]]) \
        if len(req.cand_job) else np.zeros(0, np.int64)
    jobs = np.unique(np.concatenate([rj, cj])).astype(np.int64)
    out = np.zeros(snap.org.n)
    if not len(jobs):
        return out
    proj = snap.job_project[jobs]
    g = snap.job_gpus[jobs].astype(float)
    total = np.bincount(proj, weights=g, minlength=snap.org.n)
    need = np.flatnonzero(total > budget + 1e-9)
    out[:] = np.minimum(total, budget)
    if not len(need):
        return out
    pos = project_order(snap)[jobs]
    prot = snap.job_protected[jobs]
    order = np.lexsort((pos, ~prot, proj))
    sel = np.isin(proj[order], need)
    top = np.full(snap.org.n, np.inf) if room is None else room + 1e-9
    gang = ((req.shape[jobs] != SMALL) & req.fits[jobs]).any(axis=1)[order][sel]
    for p, gpus, fixed, multi in _groups(proj[order][sel], g[order][sel], prot[order][sel],
                                         gang):
        used, b, taken = 0.0, budget[p] + 1e-9, False
        for x, f, m in zip(gpus, fixed, multi):
            if f or used + x <= b:
                used += x
                taken |= not f
            elif used + x - b < b - used and (m or used + x <= top[p]):  # as nearly; can run
                used += x
                taken = True
                break
        if taken:
            out[p] = used
    return out


def blocked_jobs(snap: Snapshot, req: Requirements) -> np.ndarray:
    """(J,) bool: waiting single-node candidates whose shape fits no up node, of a type where
    they are allocated work, beside the protected jobs (whose GPUs stay held this epoch): they
    cannot run this epoch (targets._runnable_floors). Never a multi-node gang: its nodes free
    at different times, and its project's claim is what keeps other projects' new work off
    them as they free (and what the lookahead's reservations count against its share,
    optalloc.model.reservations); a single-node job needs only one node to free."""
    out = np.zeros(len(snap.jobs), bool)
    if not len(req.cand_job):
        return out
    jobs = np.unique(req.cand_job)
    jobs = jobs[~snap.job_running[jobs]]
    if not len(jobs):
        return out
    fixed = req.run_fixed[req.run_pair_k]
    held = np.bincount(req.run_pair_node[fixed], weights=req.run_pair_gpus[fixed],
                       minlength=len(snap.node_gpus))
    free = snap.node_gpus - held
    up = snap.node_up
    by_type = [free[up & (snap.node_type == t)] for t in range(len(snap.gpu_types))]
    want = req.fits[jobs] & snap.job_tier1[jobs]
    ok = want & fits_types(req.size[jobs], req.pieces[jobs], req.rem[jobs], by_type, want)
    stuck = ~ok.any(axis=1) & ~(want & (req.shape[jobs] != SMALL)).any(axis=1)
    out[jobs[stuck]] = True
    return out


def most_lost_per_family(org, capped: np.ndarray, lost: np.ndarray) -> np.ndarray:
    """(O,) bool: of the `capped` leaves, in each family (children of one parent) the one
    that loses most `lost` of its budget (ties: the first in org order). The in-order caps
    take one leaf of a family per pass, the others' fill tried again on their new budgets: a
    sibling capped in the same pass was offered none of the share the other could not use
    (rule 2: that flows to the siblings first), though on a larger budget its own order may
    realize it (P0 {A1, A2}: A1 on 2 realized 1 (a 4-GPU job overshoots by 3), A2 on 4
    realized 2; both capped, P0 held 3 of its 6; A2 alone capped, A1 on 4 realizes 5)."""
    c = np.flatnonzero(capped)
    par = org.parent[c]
    order = np.lexsort((c, -lost[c], par))
    first = np.r_[True, par[order][1:] != par[order][:-1]]
    out = np.zeros_like(capped)
    out[c[order][first]] = True
    return out


def _groups(keys: np.ndarray, *cols: np.ndarray):
    if not len(keys):
        return
    cut = np.r_[0, np.flatnonzero(np.diff(keys)) + 1, len(keys)]
    for a, b in zip(cut[:-1], cut[1:]):
        yield (int(keys[a]), *(c[a:b].tolist() for c in cols))
