"""A team's own order as a hard rule: a queued job never starts while a job of its own project
ahead of it in line, that could take its place, waits (DESIGN.md section 8, rule 3).

For queued allocated jobs a and b of one project with the same candidate gpu_types, where a
is ahead of b in the project's order (priority, then submit) and a fits in b's place (a
single-node job no larger than b's per-node chunk, a whole-node gang no larger than b's, a
per-node gang of b's gpus_per_node with no more pieces): a fits wherever b would go, so

Family `order[project]`:  sum_t x[b,t] - sum_t x[a,t] <= 0

Rows link each b to the latest such a of every distinct size <= g_b; the rest follows by
transitivity. A bigger job ahead (a gang that does not fit) does not block smaller ones behind
it (backfill). Running jobs are ordered by the objective instead: a running job is worth its
project's best submit score in its priority, so an equal-priority job displaces it only where
that runs more of the project's higher-priority work (a strictly higher priority may).
"""

from __future__ import annotations

import numpy as np

from optalloc.model.context import BuildContext
from optalloc.model.order import project_order
from optalloc.model.requirements import PIECES, SMALL, WHOLE


def precedence_pairs(ctx_snap, req) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) job index pairs: a ahead of b in its project's order, a must start if b does.

    a "fits in b's place" on every candidate type of the pair (the same type set): a
    single-node a no larger than b's per-node chunk (b's GPUs on one node, a whole node, or
    its gpus_per_node), a whole-node gang a no larger than a whole-node gang b, a per-node
    gang a of b's gpus_per_node with no more pieces."""
    snap = ctx_snap
    cj, ct = req.cand_job, req.cand_type
    empty = np.zeros(0, np.int64)
    if not len(cj):
        return empty, empty
    ok = snap.job_tier1[cj, ct]  # queued, or displaced from a down node (queued again)
    J, T = snap.job_allowed.shape
    mask = np.zeros((J, T), dtype=bool)
    mask[cj[ok], ct[ok]] = True
    jobs = np.flatnonzero(mask.any(axis=1))
    if len(jobs) < 2:
        return empty, empty
    m = mask[jobs]
    big = np.iinfo(np.int64).max
    shape = np.where(m, req.shape[jobs], -1)
    # the job's shape class if it is the same on all its types, else -1 (no pairs)
    lo = np.where(m, shape, big).min(axis=1)
    hi = np.where(m, shape, -1).max(axis=1)
    cls = np.where(lo == hi, lo, -1)
    chunk = np.where(m, req.size[jobs], big).min(axis=1)  # smallest per-node chunk
    gpn = snap.job_gpn[jobs]
    g = snap.job_gpus[jobs]
    pos = project_order(snap)[jobs]
    key = np.concatenate([snap.job_project[jobs][:, None], m.astype(np.int64)], axis=1)
    _, group = np.unique(key, axis=0, return_inverse=True)
    group = np.asarray(group).reshape(-1)
    A, B = [], []
    order = np.lexsort((pos, group))
    cut = np.r_[0, np.flatnonzero(np.diff(group[order])) + 1, len(order)]
    for lo_, hi_ in zip(cut[:-1], cut[1:]):
        if hi_ - lo_ < 2:
            continue
        idx = order[lo_:hi_]  # one group, in project order
        ci, gi, pi, ki, ni = cls[idx], g[idx], pos[idx], chunk[idx], gpn[idx]
        for s in np.unique(gi[ci == SMALL]):  # single-node a of size s
            have = np.flatnonzero((ci == SMALL) & (gi == s))
            fits = np.flatnonzero((ci >= 0) & (gi >= s) & (ki >= s))
            _link(A, B, jobs, idx, pi, have, fits)
        for s in np.unique(gi[ci == WHOLE]):  # whole-node gang a of s GPUs
            have = np.flatnonzero((ci == WHOLE) & (gi == s))
            _link(A, B, jobs, idx, pi, have, np.flatnonzero((ci == WHOLE) & (gi >= s)))
        for s, q in set(zip(gi[ci == PIECES].tolist(), ni[ci == PIECES].tolist())):
            have = np.flatnonzero((ci == PIECES) & (gi == s) & (ni == q))
            _link(A, B, jobs, idx, pi, have, np.flatnonzero((ci == PIECES) & (gi >= s) & (ni == q)))
    if not A:
        return empty, empty
    a, b = np.concatenate(A), np.concatenate(B)
    from optalloc.model.constraints.fairshare import short_jobs

    short = short_jobs(snap)
    # a debug job may start while a longer job ahead of it waits (the debug allowance): the
    # contract's cheap grant; inside the target it is still worth less than the jobs ahead
    keep = (a != b) & ~(short[b] & ~short[a])
    pairs = np.unique(np.stack([a[keep], b[keep]], axis=1), axis=0)
    return pairs[:, 0], pairs[:, 1]


def _link(A: list, B: list, jobs, idx, pi, have, cand) -> None:
    """Link each job in `cand` to the latest job of `have` ahead of it."""
    k = np.searchsorted(pi[have], pi[cand], side="left") - 1
    sel = k >= 0
    A.append(jobs[idx[have[k[sel]]]])
    B.append(jobs[idx[cand[sel]]])


def define_precedence(ctx: BuildContext) -> None:
    snap, req, b = ctx.snap, ctx.req, ctx.b
    pairs = ctx.res.prec if ctx.res is not None and ctx.res.prec is not None else None
    a, bb = precedence_pairs(snap, req) if pairs is None else pairs
    ctx.prec_a, ctx.prec_b = a, bb
    if not len(a):
        return
    cj = req.cand_job
    ok = snap.job_tier1[cj, req.cand_type]
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

