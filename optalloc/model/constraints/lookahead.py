"""Reserved nodes in the model (the lookahead; optalloc.model.reservations chooses them).

A node n reserved for a gang that starts at S_n (deadline; inf: not reserved) takes only new
work whose hold h_c (when it would stop holding its GPUs: its protection, or its expected end
if sooner; now for unallocated work) is <= S_n. Running jobs there keep their protection
(nothing here touches k). Only types with reserved nodes get rows; elsewhere the model is
unchanged.

Single-node jobs and remainder nodes, per type t, packed size s and deadline D of t:
  Family `reserve[t,s]`:  sum_{n of t, S_n <= D} u[n,s] - sum_{c on t, size s, h_c <= D} x[c] <= 0
Whole-node gangs, per type t and deadline D:
  Family `reserve[t,whole]`:  sum_{n of t, S_n <= D} z[n] - sum_{c whole on t, h_c <= D} pieces_c x[c] <= 0

Exact (Hall's condition for a threshold structure): jobs of one size are interchangeable
except for their hold, a job may take a slot on node n iff h_c <= S_n, and the slots on nodes
reserved until D or sooner can be filled iff at least as many jobs of that size hold no
longer than D; with the pack rows' equality the rest go anywhere. Per-node gang pieces are
split into classes by hold bucket instead (`piece_buckets`): a class of bucket b uses only
nodes whose deadline is past its jobs' holds, so the class stays interchangeable and the
round-robin dealing stays exact.

Share rows: a reservation counts as held by its project's subtree while its gang waits,
sum_s m[o,t,s] <= got + g (1 - sum_t' x[gang,t']) on every org node o of its path and its
type t (`share_holding_terms`), so the project's other jobs do not also take that share.
"""

from __future__ import annotations

import numpy as np

from optalloc.model.context import BuildContext
from optalloc.model.requirements import WHOLE, packed


def _deadlines_by_type(ctx: BuildContext) -> dict[int, np.ndarray]:
    res, snap = ctx.res, ctx.snap
    if res is None or not res.blocking:
        return {}
    dl = res.deadline
    fin = np.isfinite(dl)
    return {int(t): np.unique(dl[fin & (snap.node_type == t)])
            for t in np.unique(snap.node_type[fin])}


def piece_buckets(ctx: BuildContext) -> np.ndarray:
    """(C,) hold bucket of each candidate: how many deadlines of its type's reserved nodes
    come before its hold (0: it may use every node)."""
    C = len(ctx.req.cand_job)
    out = np.zeros(C, dtype=np.int64)
    for t, Ds in _deadlines_by_type(ctx).items():
        sel = ctx.req.cand_type == t
        out[sel] = np.searchsorted(Ds, ctx.res.hold[sel], side="left")
    return out


def bucket_nodes(ctx: BuildContext, t: int, bucket: int) -> np.ndarray:
    """(N,) bool: nodes a class of hold bucket `bucket` on type t may use (their deadline is
    past the bucket's holds)."""
    N = len(ctx.snap.nodes)
    if bucket <= 0:
        return np.ones(N, bool)
    Ds = _deadlines_by_type(ctx)[t]
    return ctx.res.deadline > Ds[bucket - 1]


def define_lookahead(ctx: BuildContext) -> None:

    by_type = _deadlines_by_type(ctx)
    if not by_type:
        return
    snap, req, b = ctx.snap, ctx.req, ctx.b
    dl, hold = ctx.res.deadline, ctx.res.hold
    ct = req.cand_type
    pc, csize = packed(ctx.req)
    names = snap.type_names
    for t, Ds in by_type.items():
        if len(ctx.u):
            ut = (snap.node_type[ctx.u_node] == t) & np.isfinite(dl[ctx.u_node])
            for s in np.unique(ctx.u_size[ut]):
                rows, cols, vals = [], [], []
                for r, D in enumerate(Ds):
                    uu = ctx.u[ut & (ctx.u_size == s) & (dl[ctx.u_node] <= D)]
                    xs = ctx.x[pc[(ct[pc] == t) & (csize == s) & (hold[pc] <= D)]]
                    rows += [np.full(len(uu) + len(xs), r)]
                    cols += [uu, xs]
                    vals += [np.ones(len(uu)), -np.ones(len(xs))]
                b.add_rows(f"reserve[{names[t]},{int(s)}]", len(Ds), np.concatenate(rows),
                           np.concatenate(cols), np.concatenate(vals), -np.inf, 0.0)
        if len(ctx.z):
            zt = (snap.node_type[ctx.z_node] == t) & np.isfinite(dl[ctx.z_node])
            if not zt.any():
                continue
            whole = np.flatnonzero((ct == t) & (req.shape[req.cand_job, ct] == WHOLE))
            rows, cols, vals = [], [], []
            for r, D in enumerate(Ds):
                zz = ctx.z[zt & (dl[ctx.z_node] <= D)]
                xs = whole[hold[whole] <= D]
                rows += [np.full(len(zz) + len(xs), r)]
                cols += [zz, ctx.x[xs]]
                vals += [np.ones(len(zz)),
                         -req.pieces[req.cand_job[xs], ct[xs]].astype(float)]
            b.add_rows(f"reserve[{names[t]},whole]", len(Ds), np.concatenate(rows),
                       np.concatenate(cols), np.concatenate(vals), -np.inf, 0.0)


def share_holding_terms(ctx: BuildContext, row_of: np.ndarray):
    """Extra (rows, cols, coefs) and per-row additions to row_hi for the share rows (row_of:
    (O, T) row index, -1 where none): each waiting reservation's GPUs g count as held on every
    org node of its project's path, on its type, unless its gang starts on some type."""
    res, snap, req = ctx.res, ctx.snap, ctx.req
    hi = np.zeros(int(row_of.max(initial=-1)) + 1)
    rows, cols, coef = [], [], []
    if res is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), hi
    M = snap.org.membership()
    for h in res.held:
        if h.due:
            continue  # it starts this epoch (x forced to 1): the holding is 0
        g = float(snap.job_gpus[h.job])
        xs = ctx.x[req.cand_job == h.job]
        for o in np.flatnonzero(M[:, snap.job_project[h.job]]):
            r = row_of[o, h.type]
            if o == 0 or r < 0:
                continue
            hi[r] += g
            rows.append(np.full(len(xs), r))
            cols.append(xs)
            coef.append(np.full(len(xs), g))
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), hi
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(coef), hi
