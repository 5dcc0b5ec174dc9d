"""Per-node capacity with exact bin packing of single-node jobs (fragmentation-aware).

Single-node jobs of the same size are interchangeable when packing, so instead of a job x node
assignment (J x N binaries) the model counts how many jobs of each size go on each node:

Variables  u[n, s] in {0..floor(G_n / s)}: single-node jobs (and remainder nodes of whole-node
           gangs, e.g. the 4 of an 8+8+4 job) of size s packed on up node n.
           Per-node gangs (gpus_per_node p < node size) are grouped in classes kappa =
           (type, p, pieces q) of interchangeable candidates:
           n_kappa = sum_{c in kappa} x[c]   gangs of the class started, and
           y[n, kappa] in {0..min(G_n / p, |kappa|)}: their pieces on up node n.

Family `pack[t,s]`:  sum_n u[n,s] - sum_{c on t, single-node of size s or remainder s} x[c] = 0
Family `pieces[t,p,q]`:  sum_n y[n,kappa] - q n_kappa = 0, n_kappa - sum_{c in kappa} x[c] = 0
Family `spread[t,p,q]` (one row per node):  y[n,kappa] - n_kappa <= 0
Family `capacity[t]` (one row per up node n of type t):
           sum_s s u[n,s] + G_n z[n] + sum_kappa p y[n,kappa] + sum_{i kept on n} g[i,n] k[i] <= G_n

Together these are exact: any integer solution packs onto the nodes (kept jobs keep their
GPUs, so the free space per node depends on which running jobs stay; a remainder never shares
a node with its own gang's whole nodes, which z reserves entirely). For the per-node gangs:
k gangs of q pieces whose pieces sit y[n] <= k on each node always split into k sets of q
distinct nodes (deal the pieces node by node round-robin to the k gangs), so counting per
class is exact without a (candidate, node) binary each; the placement deals them that way.
"""

from __future__ import annotations

import numpy as np

from optalloc.model.context import BuildContext
from optalloc.model.requirements import PIECES, packed
from optalloc.uniq import unique_rows


def define_packing(ctx: BuildContext) -> None:
    snap, req, b = ctx.snap, ctx.req, ctx.b
    ct = req.cand_type
    pc, csize = packed(ctx.req)
    u_node, u_size = [], []
    for t in np.unique(ct[pc]):
        sizes = np.unique(csize[ct[pc] == t])
        nodes = np.flatnonzero(snap.node_up & (snap.node_type == t))
        nn, ss = np.meshgrid(nodes, sizes, indexing="ij")
        ok = ss <= snap.node_gpus[nn]
        u_node.append(nn[ok])
        u_size.append(ss[ok])
    if not u_node:
        return
    ctx.u_node = np.concatenate(u_node)
    ctx.u_size = np.concatenate(u_size)
    ctx.u = b.add_vars("u", len(ctx.u_node), 0, snap.node_gpus[ctx.u_node] // ctx.u_size, 0.0)
    key_u = snap.node_type[ctx.u_node] * 10**6 + ctx.u_size
    key_c = ct[pc] * 10**6 + csize
    keys = np.unique(key_u)
    rows = np.concatenate([np.searchsorted(keys, key_u), np.searchsorted(keys, key_c)])
    cols = np.concatenate([ctx.u, ctx.x[pc]])
    vals = np.concatenate([np.ones(len(ctx.u)), -np.ones(len(pc))])
    order = np.argsort(rows, kind="stable")
    rows, cols, vals = rows[order], cols[order], vals[order]
    bounds = np.searchsorted(rows, np.arange(len(keys) + 1))
    for r, key in enumerate(keys):
        a, z = bounds[r], bounds[r + 1]
        t, s = divmod(int(key), 10**6)
        b.add_rows(f"pack[{snap.type_names[t]},{s}]", 1, np.zeros(z - a), cols[a:z], vals[a:z],
                   0.0, 0.0)


def piece_classes(ctx_req, bucket: np.ndarray | None = None) -> tuple[np.ndarray, list]:
    """(C,) class index of each per-node gang candidate (-1: not one), and the classes
    [(type, size p, pieces q, hold bucket b), ...] (b: the lookahead's bucket, 0 where no node
    is reserved; optalloc.model.constraints.lookahead.piece_buckets)."""
    req = ctx_req
    cj, ct = req.cand_job, req.cand_type
    cls = np.full(len(cj), -1, dtype=np.int64)
    pcs = np.flatnonzero(req.shape[cj, ct] == PIECES) if len(cj) else np.zeros(0, np.int64)
    if not len(pcs):
        return cls, []
    bk = np.zeros(len(pcs), np.int64) if bucket is None else bucket[pcs]
    keys = np.stack([ct[pcs], req.size[cj[pcs], ct[pcs]], req.pieces[cj[pcs], ct[pcs]], bk],
                    axis=1)
    uniq, inv = unique_rows(keys)  # np.unique(axis=0) less its per-call cost (optalloc.uniq)
    cls[pcs] = inv
    return cls, [tuple(int(v) for v in row) for row in uniq]


def define_pieces(ctx: BuildContext) -> None:
    """n_kappa and y[n, kappa] for per-node gangs, counted per class (see the module)."""
    from optalloc.model.constraints.lookahead import bucket_nodes, piece_buckets

    snap, req, b = ctx.snap, ctx.req, ctx.b
    cls, classes = piece_classes(req, piece_buckets(ctx))
    ctx.cand_class, ctx.classes = cls, classes
    if not classes:
        return
    size = np.bincount(cls[cls >= 0], minlength=len(classes))
    ctx.y_count = b.add_vars("n", len(classes), 0, size, 0.0)
    y_node, y_class = [], []
    for k, (t, p, q, bk) in enumerate(classes):
        nodes = np.flatnonzero(snap.node_up & (snap.node_type == t) & (snap.node_gpus >= p)
                               & bucket_nodes(ctx, t, bk))
        y_node.append(nodes)
        y_class.append(np.full(len(nodes), k))
    ctx.y_node, ctx.y_class = np.concatenate(y_node), np.concatenate(y_class)
    ub = np.minimum(snap.node_gpus[ctx.y_node] // np.array([c[1] for c in classes])[ctx.y_class],
                    size[ctx.y_class])
    ctx.y = b.add_vars("y", len(ctx.y_node), 0, ub, 0.0)
    sel = np.flatnonzero(cls >= 0)
    for k, (t, p, q, bk) in enumerate(classes):
        name = f"{snap.type_names[t]},{p},{q}" + (f",hold{bk}" if bk else "")
        mine = ctx.y[ctx.y_class == k]
        members = ctx.x[sel[cls[sel] == k]]
        # sum_n y - q n = 0 ;  n - sum_c x = 0
        rows = np.concatenate([np.zeros(len(mine) + 1), np.ones(1 + len(members))])
        cols = np.concatenate([mine, [ctx.y_count[k]], [ctx.y_count[k]], members])
        vals = np.concatenate([np.ones(len(mine)), [-float(q)], [1.0], -np.ones(len(members))])
        b.add_rows(f"pieces[{name}]", 2, rows, cols, vals, 0.0, 0.0)
        # spread: y[n] - n <= 0, one row per node
        r = np.arange(len(mine))
        b.add_rows(f"spread[{name}]", len(mine), np.concatenate([r, r]),
                   np.concatenate([mine, np.full(len(mine), ctx.y_count[k])]),
                   np.concatenate([np.ones(len(mine)), -np.ones(len(mine))]), -np.inf, 0.0)


def define_node_capacity(ctx: BuildContext) -> None:
    snap, req, b = ctx.snap, ctx.req, ctx.b
    nodes = np.unique(np.concatenate([ctx.u_node, ctx.z_node, ctx.y_node]))
    if not len(nodes):
        return
    row_of = np.full(len(snap.nodes), -1)
    pk = req.run_pair_node
    on = np.isin(pk, nodes)
    y_size = np.array([c[1] for c in ctx.classes], dtype=np.int64)[ctx.y_class] \
        if len(ctx.y) else np.zeros(0, np.int64)
    for t in np.unique(snap.node_type[nodes]):
        nt = nodes[snap.node_type[nodes] == t]
        row_of[nt] = np.arange(len(nt))
        su = snap.node_type[ctx.u_node] == t
        sz = snap.node_type[ctx.z_node] == t
        sy = snap.node_type[ctx.y_node] == t
        sk = on & (snap.node_type[pk] == t)
        rows = np.concatenate([row_of[ctx.u_node[su]], row_of[ctx.z_node[sz]],
                               row_of[ctx.y_node[sy]], row_of[pk[sk]]])
        cols = np.concatenate([ctx.u[su], ctx.z[sz], ctx.y[sy], ctx.k[req.run_pair_k[sk]]])
        vals = np.concatenate(
            [ctx.u_size[su], snap.node_gpus[ctx.z_node[sz]], y_size[sy], req.run_pair_gpus[sk]]
        ).astype(float)
        b.add_rows(f"capacity[{snap.type_names[t]}]", len(nt), rows, cols, vals, -np.inf,
                   snap.node_gpus[nt])
