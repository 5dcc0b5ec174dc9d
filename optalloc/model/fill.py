"""Fill targets: how the GPUs no allocated job wants are shared among the projects' unallocated
work (min_runtime 0, or a type where the project has no share), DESIGN.md section 8, rule 2:
unused capacity is shared, lowest usage ratio first down the tree, near-ties in proportion to
the shares. Without them, the idle GPUs went winner-take-all to the project first in the
Fair-Tree order (two projects of equal shares and ratios, 8 idle GPUs: one got 8, by name).

The same hierarchical water-filling as the fair-share targets (optalloc.model.targets), over
one pooled quantity (unallocated work rarely cares which type it fills):

    capacity  L = the GPUs allocated work leaves. Before any plan is known, what the
                  allocated targets leave: sum_t (capacity_t - target[root, t]), at least 0;
                  the epoch then measures it on the greedy baseline's plan (the capacity less
                  the allocated GPUs that plan runs: targets count allocated work that cannot
                  fit now, e.g. a gang on fragmented nodes, and would leave nothing to share
                  while GPUs sit idle) and sets the fill targets again (`EpochModel.with_fill`)
    demand    U[p] = the GPUs of p's unallocated jobs that may run: running ones not on a drain
                  node, queued ones with no allocated option (a job allocated on some type is
                  the targets' demand there)
    lower     the GPUs p's running unallocated jobs hold (unallocated work never displaces
              unallocated work, so what runs is not up for sharing)
    rho, kappa  the targets' usage ratio and GPUs-per-ratio over the pooled entitlement

Whole GPUs per org node (largest remainder down the tree). The model rewards each project's
unallocated GPUs up to its fill target (optalloc.model.constraints.fill), below every allocated
GPU and above the Fair-Tree order between unallocated jobs, so the split is max-min in the
scheme's order and the rest of the idle GPUs still go in that order.
"""

from __future__ import annotations

import numpy as np

from optalloc.model.order import clipped_ratios
from optalloc.model.requirements import Requirements
from optalloc.model.targets import Targets, _fill_tree, _integerize, horizons
from optalloc.snapshot import Snapshot


def unallocated_jobs(snap: Snapshot, req: Requirements) -> tuple[np.ndarray, np.ndarray]:
    """(running, queued) job indices of unallocated demand: running jobs whose kept type is
    unallocated for them and that may stay (not on a drain node), and queued candidates with
    no allocated option."""
    rj, rt = req.run_job, req.run_type
    run = rj[~snap.job_tier1[rj, rt] & ~snap.job_on_drain[rj]] if len(rj) else rj
    cj, ct = req.cand_job, req.cand_type
    if not len(cj):
        return np.unique(run), cj
    alloc = np.zeros(len(snap.jobs), bool)
    alloc[cj[snap.job_tier1[cj, ct]]] = True
    queued = np.unique(cj[~alloc[cj] & ~snap.job_running[cj]])
    return np.unique(run), queued


def unallocated_want(snap: Snapshot, req: Requirements) -> tuple[np.ndarray, np.ndarray]:
    """((O,) GPUs of unallocated work each project wants (running and queued), (O,) the GPUs
    its running unallocated work holds), at the leaves."""
    O = snap.org.n
    run, queued = unallocated_jobs(snap, req)
    held = np.bincount(snap.job_project[run], weights=snap.job_gpus[run], minlength=O)
    want = held + np.bincount(snap.job_project[queued], weights=snap.job_gpus[queued],
                              minlength=O)
    return want, held


def left_by_targets(tg: Targets) -> float:
    """The GPUs the allocated targets leave: the estimate before any plan is known."""
    return float(max(tg.capacity.sum() - tg.target[0].sum(), 0.0))


def fill_targets(snap: Snapshot, req: Requirements, tg: Targets,
                 left: float | None = None) -> np.ndarray:
    """(O,) whole GPUs of unallocated work each org node's subtree is due of `left` GPUs (by
    default those the allocated targets leave); 0 everywhere when none are left or no project
    has such work."""
    org = snap.org
    O = org.n
    left = left_by_targets(tg) if left is None else float(max(left, 0.0))
    want, held = unallocated_want(snap, req)
    if left < 1.0 or not want.any():
        return np.zeros(O)
    M = org.membership().astype(float)
    U, P = (M @ want)[:, None], (M @ held)[:, None]
    window, horizon = horizons(snap)
    rho = clipped_ratios(snap) * (1.0 - horizon / window)
    cap = tg.capacity.astype(float)
    kappa = (org.entitlement * cap[None, :]).sum(axis=1, keepdims=True) * (window / horizon)
    fill = _fill_tree(snap, np.array([left]), np.zeros_like(U), P, U, rho, kappa)
    return _integerize(snap, np.maximum(fill, 0.0), U)[:, 0]
