"""Per-node capacity with exact bin packing of single-node jobs (fragmentation-aware).

Single-node jobs of the same size are interchangeable when packing, so instead of a job x node
assignment (J x N binaries) the model counts how many jobs of each size go on each node:

Variables  u[n, s] in {0..floor(G_n / s)}: single-node jobs (or per-node gang pieces) of size s
           packed on up node n, for every size s that some candidate on n's type has.

Family `pack[t,s]`:  sum_n u[n,s] - sum_{c on t, size s} pieces[c] x[c] = 0
Family `capacity[t]` (one row per up node n of type t):
           sum_s s u[n,s] + G_n z[n] + sum_{i kept on n} g[i,n] k[i] <= G_n

Together these are exact for single-node jobs: any integer solution packs onto the nodes (and
kept jobs keep their GPUs, so the free space per node depends on which running jobs stay).
Pieces of a gang with gpus_per_node < node size are counted per node too; that they land on
distinct nodes is checked by the placement step (repair if not).
"""

from __future__ import annotations

import numpy as np

from optalloc.model.context import BuildContext
from optalloc.model.requirements import WHOLE


def define_packing(ctx: BuildContext) -> None:
    snap, req, b = ctx.snap, ctx.req, ctx.b
    cj, ct = req.cand_job, req.cand_type
    packed = req.shape[cj, ct] != WHOLE
    csize = req.size[cj, ct]
    cnt = req.pieces[cj, ct]
    u_node, u_size = [], []
    for t in np.unique(ct[packed]):
        sizes = np.unique(csize[packed & (ct == t)])
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
    # pack[t,s]: rows keyed by (type, size)
    key_u = snap.node_type[ctx.u_node] * 10**6 + ctx.u_size
    pc = np.flatnonzero(packed)
    key_c = ct[pc] * 10**6 + csize[pc]
    keys = np.unique(key_u)
    ru = np.searchsorted(keys, key_u)
    rc = np.searchsorted(keys, key_c)
    rows = np.concatenate([ru, rc])
    cols = np.concatenate([ctx.u, ctx.x[pc]])
    vals = np.concatenate([np.ones(len(ctx.u)), -cnt[pc].astype(float)])
    order = np.argsort(rows, kind="stable")
    rows, cols, vals = rows[order], cols[order], vals[order]
    bounds = np.searchsorted(rows, np.arange(len(keys) + 1))
    for r, key in enumerate(keys):
        a, z = bounds[r], bounds[r + 1]
        t, s = divmod(int(key), 10**6)
        b.add_rows(f"pack[{snap.type_names[t]},{s}]", 1, np.zeros(z - a), cols[a:z], vals[a:z],
                   0.0, 0.0)


def define_node_capacity(ctx: BuildContext) -> None:
    snap, req, b = ctx.snap, ctx.req, ctx.b
    nodes = np.unique(np.concatenate([ctx.u_node, ctx.z_node]))
    if not len(nodes):
        return
    row_of = np.full(len(snap.nodes), -1)
    pk = req.run_pair_node
    on = np.isin(pk, nodes)
    for t in np.unique(snap.node_type[nodes]):
        nt = nodes[snap.node_type[nodes] == t]
        row_of[nt] = np.arange(len(nt))
        su = snap.node_type[ctx.u_node] == t
        sz = snap.node_type[ctx.z_node] == t
        sk = on & (snap.node_type[pk] == t)
        rows = np.concatenate([row_of[ctx.u_node[su]], row_of[ctx.z_node[sz]], row_of[pk[sk]]])
        cols = np.concatenate([ctx.u[su], ctx.z[sz], ctx.k[req.run_pair_k[sk]]])
        vals = np.concatenate(
            [ctx.u_size[su], snap.node_gpus[ctx.z_node[sz]], req.run_pair_gpus[sk]]
        ).astype(float)
        b.add_rows(f"capacity[{snap.type_names[t]}]", len(nt), rows, cols, vals, -np.inf,
                   snap.node_gpus[nt])
