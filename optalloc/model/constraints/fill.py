"""Fill shares: idle GPUs shared among the projects' unallocated work (optalloc.model.fill).

For every project p with a fill target FT[p] > 0 (whole GPUs):

Variables  f[p] in [0, FT[p]]   objective W_F per GPU (Impact.fill_weight: below one allocated
                                GPU even summed over a node, above the Fair-Tree order between
                                unallocated jobs)
Family `fill[p]`:  f[p] - sum_{(j, t) of p, unallocated on t} g_j (x or k) <= 0

so a project's unallocated GPUs up to its fill target are worth W_F more each: the idle GPUs
are split max-min in the scheme's order instead of all going to the first project in it.
Running unallocated jobs carry W_F per GPU in their keep value (impact.py), so no fill target
ever displaces running unallocated work.
"""

from __future__ import annotations

import numpy as np

from optalloc.model.context import BuildContext
from optalloc.model.fill import fill_targets, unallocated_want


def _unallocated_terms(snap, jobs: np.ndarray, types: np.ndarray) -> np.ndarray:
    """(n,) bool: (jobs[i], types[i]) runs unallocated work."""
    return ~snap.job_tier1[jobs, types] if len(jobs) else np.zeros(0, bool)


def define_fill(ctx: BuildContext) -> None:
    """An f column for every project with unallocated work (bound FT[p], maybe 0 until the
    epoch sets the fill targets from a plan's idle GPUs, `EpochModel.with_fill`)."""
    snap, req, imp, b = ctx.snap, ctx.req, ctx.imp, ctx.b
    want, _ = unallocated_want(snap, req)
    leaves = np.flatnonzero(snap.org.is_leaf & (want > 0))
    if imp.fill_weight <= 0 or len(leaves) < 2:  # one project has nobody to share them with
        return
    FT = fill_targets(snap, req, ctx.tg)
    ctx.fill = FT
    jobs = np.concatenate([req.cand_job, req.run_job])
    types = np.concatenate([req.cand_type, req.run_type])
    cols = np.concatenate([ctx.x, ctx.k])
    low = _unallocated_terms(snap, jobs, types)
    row_of = np.full(snap.org.n, -1)
    row_of[leaves] = np.arange(len(leaves))
    r = row_of[snap.job_project[jobs]] if len(jobs) else np.zeros(0, np.int64)
    sel = low & (r >= 0)
    n = len(leaves)
    ctx.f = b.add_vars("f", n, 0, FT[leaves], np.full(n, imp.fill_weight), integer=False)
    ctx.f_org = leaves
    rows = np.concatenate([np.arange(n), r[sel]])
    allc = np.concatenate([ctx.f, cols[sel]])
    coef = np.concatenate([np.ones(n), -snap.job_gpus[jobs[sel]].astype(float)])
    b.add_rows("fill", n, rows, allc, coef, -np.inf, 0.0)


def unallocated_held(snap, jobs: np.ndarray, types: np.ndarray) -> np.ndarray:
    """(O,) GPUs of unallocated work each project runs in a plan running jobs[i] on types[i]."""
    low = _unallocated_terms(snap, jobs, types)
    return np.bincount(snap.job_project[jobs[low]], weights=snap.job_gpus[jobs[low]],
                       minlength=snap.org.n)


def fill_held(snap, fill: np.ndarray, jobs: np.ndarray, types: np.ndarray) -> np.ndarray:
    """(O,) GPUs of each project's fill target that a plan running jobs[i] on types[i] meets."""
    if not len(fill):
        return np.zeros(snap.org.n)
    return np.minimum(unallocated_held(snap, jobs, types), fill)


def fill_met(snap, fill: np.ndarray, jobs: np.ndarray, types: np.ndarray) -> float:
    """GPUs of the projects' fill targets (the leaves') a plan running jobs[i] on types[i]
    meets: the scheme's order counts them (optalloc.plan.score), the objective weighs them."""
    if not len(fill):
        return 0.0
    leaf = np.where(snap.org.is_leaf, fill, 0.0)
    return float(fill_held(snap, leaf, jobs, types).sum())


def fill_value(imp, snap, fill: np.ndarray, jobs: np.ndarray, types: np.ndarray) -> float:
    """The fill tier's objective for a plan running jobs[i] on types[i]."""
    return fill_met(snap, fill, jobs, types) * imp.fill_weight
