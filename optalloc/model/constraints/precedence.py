"""A team's own order as a hard rule: a queued job never starts while a job of its own project
ahead of it in line, that could take its place, waits (DESIGN.md section 8, rule 3).

For queued allocated jobs a and b of one project with the same candidate gpu_types, the same
shape on each (single-node, whole-node gang, per-node gang of the same gpus_per_node) and
g_a <= g_b, where a is ahead of b in the project's order (priority, then submit): a fits
wherever b would go, so

Family `order[project]`:  sum_t x[b,t] - sum_t x[a,t] <= 0

Rows link each b to the latest such a of every distinct size <= g_b; the rest follows by
transitivity. A bigger job ahead (a gang that does not fit) does not block smaller ones behind
it (backfill); running jobs are ordered by the objective instead (a strictly higher priority of
their project may displace them, equal priority never does).
"""

from __future__ import annotations

import numpy as np

from optalloc.model.context import BuildContext
from optalloc.model.order import project_order
from optalloc.model.requirements import PIECES


def precedence_pairs(ctx_snap, req) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) job index pairs: a ahead of b, a must start if b does."""
    snap = ctx_snap
    cj, ct = req.cand_job, req.cand_type
    if not len(cj):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ok = snap.job_tier1[cj, ct] & ~snap.job_running[cj]
    J, T = snap.job_allowed.shape
    mask = np.zeros((J, T), dtype=bool)
    mask[cj[ok], ct[ok]] = True
    jobs = np.flatnonzero(mask.any(axis=1))
    if len(jobs) < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    shape_sig = np.where(mask[jobs], req.shape[jobs], -1)
    gpn = np.where((req.shape[jobs] == PIECES).any(axis=1), snap.job_gpn[jobs], 0)
    sig = np.concatenate([snap.job_project[jobs][:, None], mask[jobs].astype(np.int64),
                          shape_sig, gpn[:, None]], axis=1)
    _, group = np.unique(sig, axis=0, return_inverse=True)
    group = np.asarray(group).reshape(-1)
    pos = project_order(snap)[jobs]
    g = snap.job_gpus[jobs]
    A, B = [], []
    order = np.lexsort((pos, group))
    cut = np.r_[0, np.flatnonzero(np.diff(group[order])) + 1, len(order)]
    for lo, hi in zip(cut[:-1], cut[1:]):
        if hi - lo < 2:
            continue
        idx = order[lo:hi]  # one group, in project order
        gi, pi = g[idx], pos[idx]
        for s in np.unique(gi):
            have = np.flatnonzero(gi == s)  # members of size s, in order
            cand = np.flatnonzero(gi >= s)
            k = np.searchsorted(pi[have], pi[cand], side="left") - 1  # latest a of size s ahead
            sel = k >= 0
            A.append(jobs[idx[have[k[sel]]]])
            B.append(jobs[idx[cand[sel]]])
    if not A:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(A), np.concatenate(B)


def define_precedence(ctx: BuildContext) -> None:
    snap, req, b = ctx.snap, ctx.req, ctx.b
    a, bb = precedence_pairs(snap, req)
    ctx.prec_a, ctx.prec_b = a, bb
    if not len(a):
        return
    cj = req.cand_job
    ok = snap.job_tier1[cj, req.cand_type] & ~snap.job_running[cj]
    by_job: dict[int, np.ndarray] = {}
    sel = np.flatnonzero(ok)
    order = np.argsort(cj[sel], kind="stable")
    sj = cj[sel][order]
    cut = np.r_[0, np.flatnonzero(np.diff(sj)) + 1, len(sj)]
    for lo, hi in zip(cut[:-1], cut[1:]):
        by_job[int(sj[lo])] = ctx.x[sel[order[lo:hi]]]
    rows, cols, vals = [], [], []
    for r, (ja, jb) in enumerate(zip(a.tolist(), bb.tolist())):
        xb, xa = by_job[jb], by_job[ja]
        rows += [r] * (len(xb) + len(xa))
        cols += xb.tolist() + xa.tolist()
        vals += [1.0] * len(xb) + [-1.0] * len(xa)
    b.add_rows("order", len(a), np.asarray(rows), np.asarray(cols), np.asarray(vals), -np.inf,
               0.0)
