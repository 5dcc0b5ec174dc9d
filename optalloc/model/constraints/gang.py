"""Multi-node gangs that take whole nodes.

Variables  z[n] in {0,1}: up node n (of its type's largest node size) is reserved whole for
           multi-node gangs this epoch. A reserved node holds nothing else (see capacity).

Family `gang[t]`:  sum_{c on t, shape WHOLE} pieces[c] x[c] - sum_{n of t} z[n] <= 0
i.e. the gangs started on t need as many whole nodes as are reserved. Gangs with an explicit
gpus_per_node smaller than the node are packed as pieces by the capacity family instead.
"""

from __future__ import annotations

import numpy as np

from optalloc.model.context import BuildContext
from optalloc.model.requirements import WHOLE


def define_whole_node_gangs(ctx: BuildContext) -> None:
    snap, req, b = ctx.snap, ctx.req, ctx.b
    cj, ct = req.cand_job, req.cand_type
    is_whole = req.shape[cj, ct] == WHOLE
    types = np.unique(ct[is_whole])
    if not len(types):
        return
    node_sel = (
        snap.node_up
        & np.isin(snap.node_type, types)
        & (snap.node_gpus == req.type_max_node[snap.node_type])
    )
    ctx.z_node = np.flatnonzero(node_sel)
    ctx.z = b.add_vars("z", len(ctx.z_node), 0, 1, 0.0)
    row_of_type = np.full(len(snap.gpu_types), -1)
    row_of_type[types] = np.arange(len(types))
    cand = np.flatnonzero(is_whole)
    rows = np.concatenate([row_of_type[ct[cand]], row_of_type[snap.node_type[ctx.z_node]]])
    cols = np.concatenate([ctx.x[cand], ctx.z])
    vals = np.concatenate([req.pieces[cj[cand], ct[cand]], -np.ones(len(ctx.z))])
    for t in types:  # one named family per type (a handful of rows)
        sel = rows == row_of_type[t]
        b.add_rows(f"gang[{snap.type_names[t]}]", 1, np.zeros(sel.sum()), cols[sel], vals[sel],
                   -np.inf, 0.0)
