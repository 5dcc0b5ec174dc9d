"""The gang-shape rule: how a job's GPUs spread over nodes. One rule, used by validation, the
epoch model and the baselines (models/formulation.md, "Shapes").

For a job of `g` GPUs with optional `gpus_per_node` p, on a gpu_type whose largest node has
`S` GPUs:

* **single-node** (SMALL): p >= g, or no p and g <= S. One node holds all g GPUs.
* **whole-node gang** (WHOLE): no p and g > S, or p == S. `g // S` whole nodes of size S,
  plus, when S does not divide g, one more distinct node holding the remainder `g % S` (a
  20-GPU job on 8-GPU nodes is 8 + 8 + 4 on three nodes; the remainder node stays usable by
  others for its other GPUs).
* **per-node gang** (PIECES): p < S and p < g. `g / p` distinct nodes with p GPUs each; p must
  divide g.

A shape is *valid* on a type when every chunk fits a node of that type (size <= S) and, with
p, p divides g. Vectorized over jobs x types; `chunks` is the scalar form.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

SMALL, WHOLE, PIECES = 0, 1, 2
SHAPE_NAMES = ("single-node", "whole-node gang", "per-node gang")


def shapes(gpus, gpus_per_node, node_size) -> tuple[np.ndarray, ...]:
    """(shape, size, pieces, rem, valid), each (J, T).

    gpus (J,) int; gpus_per_node (J,) int, 0 = not given; node_size (T,) largest node per type
    (0: no node). size = GPUs per full piece (SMALL: g), pieces = number of full pieces,
    rem = GPUs of the extra remainder piece of a WHOLE gang (0 if none)."""
    g = np.asarray(gpus, dtype=np.int64)[:, None]
    p = np.asarray(gpus_per_node, dtype=np.int64)[:, None]
    S = np.asarray(node_size, dtype=np.int64)[None, :]
    has_p = p > 0
    single = np.where(has_p, p >= g, g <= S)
    whole = ~single & np.where(has_p, p == S, True)
    shape = np.where(single, SMALL, np.where(whole, WHOLE, PIECES))
    size = np.where(single, g, np.where(whole, S, p))
    safe = np.maximum(size, 1)
    pieces = np.where(single, 1, g // safe)
    rem = np.where(whole, g % safe, 0)
    divides = ~has_p | single | (g % np.maximum(p, 1) == 0)
    valid = (g > 0) & (S > 0) & (size >= 1) & (size <= S) & divides
    return shape, size, pieces, rem, valid


def chunks(gpus: int, gpus_per_node: int | None, node_size: int) -> list[int] | None:
    """GPUs per node for one job on nodes of `node_size` GPUs, largest chunk first; None when
    the shape is not valid there."""
    out = _chunks(int(gpus), int(gpus_per_node or 0), int(node_size))
    return None if out is None else list(out)


@lru_cache(maxsize=4096)
def _chunks(gpus: int, gpus_per_node: int, node_size: int) -> tuple[int, ...] | None:
    # the ranked passes ask this once per job and type each decision: a handful of distinct
    # shapes, so it is remembered (the vectorized rule is built for arrays, not one job)
    shape, size, pieces, rem, valid = shapes([gpus], [gpus_per_node], [node_size])
    if not valid[0, 0]:
        return None
    out = (int(size[0, 0]),) * int(pieces[0, 0])
    return out + ((int(rem[0, 0]),) if rem[0, 0] else ())


def nodes_needed(shape, pieces, rem) -> np.ndarray:
    """Distinct nodes a shape occupies."""
    return np.asarray(pieces) + (np.asarray(rem) > 0)


def job_nodes(gpus: int, gpus_per_node: int | None, node_size: int) -> int:
    """Distinct nodes one job's shape takes on nodes of `node_size` GPUs (`chunks`); 0 where
    there is no such node or the shape is not valid there."""
    return len(chunks(gpus, gpus_per_node, node_size) or ()) if node_size else 0


def fits_nodes(size, pieces, rem, node_gpus) -> np.ndarray:
    """Whether nodes with `node_gpus` GPUs (one gpu_type's nodes, any order) can hold a shape
    at once: `pieces` distinct nodes with at least `size` GPUs each and, when `rem` > 0, one
    more distinct node with at least `rem` (exact: the largest nodes take the full pieces).
    size, pieces, rem: arrays of one shape (e.g. a column of `shapes`); returns that shape."""
    sizes = np.sort(np.asarray(node_gpus, dtype=np.int64))
    size, pieces, rem = (np.asarray(a, dtype=np.int64) for a in (size, pieces, rem))
    n = len(sizes)
    at_least_size = n - np.searchsorted(sizes, size, side="left")
    at_least_rem = n - np.searchsorted(sizes, np.maximum(rem, 1), side="left")
    return (at_least_size >= pieces) & ((rem <= 0) | (at_least_rem >= pieces + 1))


def fits_up(gpus, gpus_per_node, usable: np.ndarray, up_sizes) -> np.ndarray:
    """(K, T) whether each job (gpus, gpus_per_node 0 = not given; usable (K, T) the types it
    may run on) fits at once on the up nodes of each type; `up_sizes`: per type the GPU counts
    of its up nodes. The fit of `Requirements.fits`, for the demand that could
    run (optalloc.demand, optalloc.model.debt) without an epoch's requirements."""
    usable = np.asarray(usable, dtype=bool)
    K, T = usable.shape
    if not K or not T:
        return np.zeros((K, T), dtype=bool)
    max_node = np.array([int(s.max()) if len(s) else 0 for s in up_sizes], dtype=np.int64)
    _, size, pieces, rem, valid = shapes(gpus, gpus_per_node, max_node)
    ok = usable & valid  # valid: the type has an up node (its largest > 0) the chunks fit
    return ok & fits_types(size, pieces, rem, up_sizes, want=ok)


def fits_types(size, pieces, rem, node_gpus_by_type, want=None) -> np.ndarray:
    """(K, T) fits_nodes per type: whether each job's shape (size, pieces, rem: (K, T), from
    `shapes`) fits at once on the nodes of each type (`node_gpus_by_type`: per type the GPU
    counts of its nodes; a type without nodes holds nothing). `want` (K, T): only the types
    where some job asks are tested."""
    K, T = np.shape(size)
    out = np.zeros((K, T), dtype=bool)
    for t, node_gpus in enumerate(node_gpus_by_type):
        if len(node_gpus) and (want is None or want[:, t].any()):
            out[:, t] = fits_nodes(size[:, t], pieces[:, t], rem[:, t], node_gpus)
    return out


def fit_orders(gpus, nodes) -> list[list[int]]:
    """The orders (positions into `gpus`/`nodes`, per job its GPUs and the distinct nodes its
    shape takes) in which the team's order by proxy fits a set of moved starts one by one,
    best fit (optalloc.plan.proxy_order._fit, and its checks: optalloc.plan.proxy_check,
    optalloc.sim.invariants.proxy_order_breaks): largest first, then, where that differs, the
    jobs that need the most distinct nodes first (then largest). Largest first alone put a
    2-GPU single-node start on the last 2 free GPUs of the one node that two 2-GPU per-node
    gangs also needed, while the second order fitted all seven starts: the bench's 1,024-GPU
    seed 122 left j00161 stopped by proxy, and which of the checks saw it depended on the tie
    order of equal sizes. Ties keep the callers' order (stable), so a check is reproducible
    where its caller sorts by job."""
    g = np.asarray(gpus, dtype=np.int64)
    n = np.asarray(nodes, dtype=np.int64)
    first = np.argsort(-g, kind="stable").tolist()
    second = np.lexsort((-g, -n)).tolist()
    return [first] if second == first else [first, second]
