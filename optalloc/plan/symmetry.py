"""Placement step 0: the model's choice among interchangeable empty nodes made canonical.

Up nodes of one type and size that nothing runs on and that share a reservation deadline are
interchangeable in the epoch model: any permutation of what a solution puts on them (its z, u
and y columns there) is a solution of the same objective. Which of them the solver fills is
then an accident of its path (HiGHS's presolve, the LP's vertex), and a placement that follows
it would change with them. So, before placing, the loads the solution gives such a class are
dealt to its nodes in node order, the heaviest first (ties: by the load itself): the same rule
as the baselines' best fit (lowest index on ties), whatever vertex the solver returned.
"""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel


def canonical_empty_nodes(em: EpochModel, x: np.ndarray) -> np.ndarray:
    """x with the z, u and y columns of every class of interchangeable empty nodes dealt in
    node order, heaviest load first (module doc); x itself when nothing moves."""
    snap, req = em.snap, em.req
    N = len(snap.nodes)
    if N < 2:
        return x
    occupied = np.zeros(N, bool)
    occupied[req.run_pair_node] = True
    # columns of each node: (kind, key, GPUs per unit, column)
    cols: dict[int, list[tuple]] = {}
    for n, col in zip(em.z_node.tolist(), em.z.tolist()):
        cols.setdefault(n, []).append((0, 0, int(snap.node_gpus[n]), col))
    for n, s, col in zip(em.u_node.tolist(), em.u_size.tolist(), em.u.tolist()):
        cols.setdefault(n, []).append((1, s, s, col))
    piece = [int(c[1]) for c in em.classes]
    for n, k, col in zip(em.y_node.tolist(), em.y_class.tolist(), em.y.tolist()):
        cols.setdefault(n, []).append((2, k, piece[k], col))
    deadline = em.res.deadline if len(em.res.deadline) else np.full(N, np.inf)
    classes: dict[tuple, list[int]] = {}
    for n in sorted(cols):
        if occupied[n]:
            continue
        cols[n].sort()
        shape = tuple(c[:3] for c in cols[n])
        key = (int(snap.node_type[n]), int(snap.node_gpus[n]), float(deadline[n]), shape)
        classes.setdefault(key, []).append(n)
    out = x
    for nodes in classes.values():
        if len(nodes) < 2:
            continue
        idx = np.array([[c[3] for c in cols[n]] for n in nodes])  # (nodes, columns)
        gpus = np.array([c[2] for c in cols[nodes[0]]], dtype=float)
        load = x[idx]
        total = load @ gpus
        order = sorted(range(len(nodes)), key=lambda i: (-round(total[i], 9),
                                                         tuple(-np.round(load[i], 9))))
        if order == list(range(len(nodes))):
            continue
        if out is x:
            out = x.copy()
        out[idx] = load[order]
    return out


__all__ = ["canonical_empty_nodes"]
