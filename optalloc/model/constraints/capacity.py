"""Per-node capacity with exact bin packing of single-node jobs (fragmentation-aware).

Single-node jobs of the same size are interchangeable when packing, so instead of a job x node
assignment (J x N binaries) the model counts how many jobs of each size go on each node:

Variables  u[n, s] in {0..floor(G_n / s)}: single-node jobs (and remainder nodes of whole-node
           gangs, e.g. the 4 of an 8+8+4 job) of size s packed on up node n.
           y[c, n] in {0,1}: one piece of per-node gang candidate c sits on up node n (pieces of
           a per-node gang must be on distinct nodes, so they are not counted by size).

Family `pack[t,s]`:  sum_n u[n,s] - sum_{c on t, single-node of size s or remainder s} x[c] = 0
Family `pieces`   :  sum_n y[c,n] - pieces[c] x[c] = 0                  (one row per candidate)
Family `capacity[t]` (one row per up node n of type t):
           sum_s s u[n,s] + G_n z[n] + sum_c size[c] y[c,n] + sum_{i kept on n} g[i,n] k[i] <= G_n

Together these are exact: any integer solution packs onto the nodes (kept jobs keep their
GPUs, so the free space per node depends on which running jobs stay; a remainder never shares
a node with its own gang's whole nodes, which z reserves entirely).
"""

from __future__ import annotations

import numpy as np

from optalloc.model.context import BuildContext
from optalloc.model.requirements import PIECES, SMALL, WHOLE


def _packed(ctx: BuildContext) -> tuple[np.ndarray, np.ndarray]:
    """(candidate indices counted by size, their packed size)."""
    req = ctx.req
    cj, ct = req.cand_job, req.cand_type
    shape = req.shape[cj, ct]
    rem = req.rem[cj, ct]
    small = shape == SMALL
    tail = (shape == WHOLE) & (rem > 0)
    sel = np.flatnonzero(small | tail)
    return sel, np.where(small[sel], req.size[cj[sel], ct[sel]], rem[sel])


def define_packing(ctx: BuildContext) -> None:
    snap, req, b = ctx.snap, ctx.req, ctx.b
    ct = req.cand_type
    pc, csize = _packed(ctx)
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


def define_pieces(ctx: BuildContext) -> None:
    """y[c, n] for per-node gangs: distinct nodes by construction (binary per node)."""
    snap, req, b = ctx.snap, ctx.req, ctx.b
    cj, ct = req.cand_job, req.cand_type
    pcs = np.flatnonzero(req.shape[cj, ct] == PIECES)
    if not len(pcs):
        return
    c_of, n_of = [], []
    for c in pcs:
        t, s = int(ct[c]), int(req.size[cj[c], ct[c]])
        nodes = np.flatnonzero(snap.node_up & (snap.node_type == t) & (snap.node_gpus >= s))
        c_of.append(np.full(len(nodes), c))
        n_of.append(nodes)
    ctx.y_cand = np.concatenate(c_of)
    ctx.y_node = np.concatenate(n_of)
    ctx.y = b.add_vars("y", len(ctx.y_cand), 0, 1, 0.0)
    row_of = np.full(len(cj), -1)
    row_of[pcs] = np.arange(len(pcs))
    rows = np.concatenate([row_of[ctx.y_cand], np.arange(len(pcs))])
    cols = np.concatenate([ctx.y, ctx.x[pcs]])
    vals = np.concatenate([np.ones(len(ctx.y)), -req.pieces[cj[pcs], ct[pcs]].astype(float)])
    b.add_rows("pieces", len(pcs), rows, cols, vals, 0.0, 0.0)


def define_node_capacity(ctx: BuildContext) -> None:
    snap, req, b = ctx.snap, ctx.req, ctx.b
    nodes = np.unique(np.concatenate([ctx.u_node, ctx.z_node, ctx.y_node]))
    if not len(nodes):
        return
    row_of = np.full(len(snap.nodes), -1)
    pk = req.run_pair_node
    on = np.isin(pk, nodes)
    y_size = req.size[req.cand_job[ctx.y_cand], req.cand_type[ctx.y_cand]]
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
