"""GPU packing for the ranked (list-scheduling) pass: a mutable per-decision free map, best-fit
node choice and static feasibility. Gang shapes follow the one rule of optalloc/shape.py
(`gang_shape` is its chunk list).

Best fit: every chunk goes to the candidate node with the fewest free GPUs that still holds
it (ties: lowest node index), so partly used nodes fill first and whole nodes stay free for
gangs. A job may use any allowed gpu_type; types are tried fastest first (the job's speedup),
ties in config order.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from optalloc.shape import chunks
from optalloc.snapshot import Snapshot
from optalloc.types import Job, NodeAlloc, Placement


def gang_shape(gpus: int, gpus_per_node: int | None, size: int) -> list[int] | None:
    """GPUs per node for a job on nodes of `size` GPUs, largest chunk first; None if the job
    cannot take that shape (optalloc.shape.chunks)."""
    return chunks(gpus, gpus_per_node, size)


_BIG = np.iinfo(np.int64).max


@dataclass
class FreeMap:
    """Which GPUs are taken, for one decision. `used[n, g]` is True when GPU g of node n is
    held by a job; GPUs past a node's size are marked used. `accepts[n]`: node takes new jobs."""

    used: np.ndarray  # (N, G) bool
    free: np.ndarray  # (N,) int free GPUs
    node_type: np.ndarray  # (N,) int
    node_gpus: np.ndarray  # (N,) int
    accepts: np.ndarray  # (N,) bool (state up)
    present: np.ndarray  # (N,) bool (not down)
    node_names: tuple[str, ...]
    type_names: tuple[str, ...]
    node_index: dict
    tier1: np.ndarray | None = None  # (J, T) allocated work per type (snapshot's job_tier1)
    job_index: object = None  # job id -> row of tier1
    _sizes: dict | None = None  # (gpu_type, present) -> largest node size (states are fixed)
    _orders: dict | None = None  # (allowed, speed) bytes -> type order
    _type_free: np.ndarray | None = None  # (T,) free GPUs on accepting nodes, kept up to date

    @classmethod
    def empty(cls, snap: Snapshot) -> "FreeMap":
        N = len(snap.nodes)
        G = int(snap.node_gpus.max()) if N else 0
        used = np.arange(G)[None, :] >= snap.node_gpus[:, None]
        return cls(
            used=used,
            free=snap.node_gpus.astype(np.int64).copy(),
            node_type=snap.node_type,
            node_gpus=snap.node_gpus,
            accepts=snap.node_up.copy(),
            present=snap.node_present.copy(),
            node_names=tuple(n.name for n in snap.nodes),
            type_names=snap.type_names,
            node_index=dict(snap.node_index),
            tier1=snap.job_tier1,
            job_index=snap.job_index,
        )

    # ------------------------------------------------------------------ bookkeeping

    def take(self, placement: Placement) -> None:
        for a in placement.nodes:
            n = self.node_index[a.node]
            idx = np.asarray(a.gpus, dtype=np.int64)
            self.used[n, idx] = True
            self.free[n] -= len(idx)
            if self._type_free is not None and self.accepts[n]:
                self._type_free[self.node_type[n]] -= len(idx)

    def take_many(self, placements) -> None:
        """Take several placements at once (one vectorized update)."""
        ni = self.node_index
        nodes: list[int] = []
        gpus: list[int] = []
        for pl in placements:
            for a in pl.nodes:
                nodes.extend([ni[a.node]] * len(a.gpus))
                gpus.extend(a.gpus)
        if nodes:
            n = np.asarray(nodes, dtype=np.int64)
            self.used[n, np.asarray(gpus, dtype=np.int64)] = True
            self.free -= np.bincount(n, minlength=len(self.free))
            self._type_free = None  # recomputed when next asked

    def release(self, placement: Placement) -> None:
        for a in placement.nodes:
            n = self.node_index[a.node]
            idx = np.asarray(a.gpus, dtype=np.int64)
            self.used[n, idx] = False
            self.free[n] += len(idx)
            if self._type_free is not None and self.accepts[n]:
                self._type_free[self.node_type[n]] += len(idx)

    def free_by_type(self) -> np.ndarray:
        """(T,) free GPUs on nodes that accept new jobs (a copy: take, take_many and release
        keep the counts up to date)."""
        return self.type_free().copy()

    def type_free(self) -> np.ndarray:
        """free_by_type's counts themselves, not a copy: read them, never write them (the
        ranked pass reads them for every job it ranks)."""
        if self._type_free is None:
            self._type_free = np.bincount(
                self.node_type[self.accepts],
                weights=self.free[self.accepts],
                minlength=len(self.type_names),
            ).astype(np.int64)
        return self._type_free

    # ------------------------------------------------------------------ fitting

    def size_of(self, t: int, *, present: bool = False) -> int:
        if self._sizes is None:
            self._sizes = {}
        key = (t, present)
        size = self._sizes.get(key)
        if size is None:
            mask = (self.node_type == t) & (self.present if present else self.accepts)
            size = self._sizes[key] = int(self.node_gpus[mask].max()) if mask.any() else 0
        return size

    def fit_type(self, job: Job, t: int) -> list[tuple[int, int]] | None:
        """Best-fit (node index, gpus) chunks for `job` on gpu_type `t`, or None."""
        shape = gang_shape(job.gpus, job.gpus_per_node, self.size_of(t))
        if shape is None:
            return None
        if self.type_free()[t] < job.gpus:  # most asks on a full cluster end here
            return None
        cand = (self.node_type == t) & self.accepts
        free = np.where(cand, self.free, -1)
        chosen: list[tuple[int, int]] = []
        for c in shape:  # largest chunks first: whole nodes before the remainder
            ok = free >= c
            if not ok.any():
                return None
            key = np.where(ok, free, _BIG)
            n = int(key.argmin())  # the method: np.argmin's dispatch cost more
            chosen.append((n, c))
            free[n] = -1  # one chunk per node
        return chosen

    def fit(self, job: Job, allowed: np.ndarray, speed: np.ndarray) -> tuple[int, list] | None:
        """(gpu_type index, chunks) of the best fit over allowed types, fastest type first."""
        if self._orders is None:
            self._orders = {}
        key = (allowed.tobytes(), speed.tobytes())
        types = self._orders.get(key)
        if types is None:
            types = self._orders[key] = order_types(allowed, speed)
        for t in types:
            chunks = self.fit_type(job, t)
            if chunks is not None:
                return t, chunks
        return None

    def place(self, job: Job, t: int, chunks: list[tuple[int, int]]) -> Placement:
        """Take the lowest free GPU indices of each chosen node and return the placement."""
        allocs = []
        for n, c in chunks:
            idx = (~self.used[n]).nonzero()[0][:c]  # 1-D: np.flatnonzero less its overhead
            allocs.append(NodeAlloc(self.node_names[n], tuple(idx.tolist())))
        k = self.job_index.get(job.id) if self.job_index is not None else None
        alloc = job.allocated if k is None else bool(self.tier1[k, t])
        pl = Placement(job.id, self.type_names[t], tuple(allocs), allocated=alloc)
        self.take(pl)
        return pl


class FitCounter:
    """Whether one job fits a map's free GPUs (as `fm.fit(...) is not None` would on them),
    without a best-fit search (the ranked pass's room-making asks after every victim).

    Per allowed type t the job's chunk list (largest first) has levels s_1 > s_2 > ... with
    cumulative counts k_1 < k_2 < ...; count_i = accepting nodes of t with at least s_i free.
    The node sets {free >= s_i} are nested, so best fit (one chunk per node, largest first)
    places the job on t exactly when count_i >= k_i for every level (Hall's condition)."""

    def __init__(self, fm: FreeMap, job: Job, allowed: np.ndarray):
        self.fm = fm
        self.levels: dict[int, tuple[list[int], list[int]]] = {}
        self.mask: dict[int, np.ndarray] = {}  # accepting nodes of each type
        for t in allowed.nonzero()[0].tolist():
            shape = gang_shape(job.gpus, job.gpus_per_node, fm.size_of(t))
            if shape is None:
                continue
            # the distinct chunk sizes, largest first, and how many chunks are at least each,
            # in plain Python (a few chunks: np.unique cost ~10x; made ~80 times an epoch)
            sizes = sorted(set(shape), reverse=True)
            self.levels[t] = (sizes, list(accumulate(shape.count(x) for x in sizes)))
            self.mask[t] = (fm.node_type == t) & fm.accepts

    def _counts(self, free: np.ndarray, t: int) -> list[int]:
        """Per level of type t: accepting nodes of t with at least that many of `free`."""
        f = free[self.mask[t]]
        return [int((f >= x).sum()) for x in self.levels[t][0]]

    def _fits(self, count: dict) -> bool:
        return any(all(c >= k for c, k in zip(count[t], lv[1])) for t, lv in self.levels.items())

    def fits_free(self, free: np.ndarray) -> bool:
        """Whether the job would fit with `free` (N,) GPUs free per node (the map's nodes,
        types and states): vectorized over the nodes."""
        return self._fits({t: self._counts(free, t) for t in self.levels})

    def needed(self, free: np.ndarray, allocs: list[list[tuple[int, int]]]) -> list[bool]:
        """Victims released in `allocs` order ((node, GPUs) per victim; `free`: (N,) GPUs free
        per node with all of them released) are taken back latest first, all but the last,
        each while the job still fits without it: per victim, whether it stays released. The
        counts per level follow each victim's nodes, on plain integers; the map is not
        touched."""
        fm, levels = self.fm, self.levels
        count = {t: self._counts(free, t) for t in levels}
        free = free.tolist()
        ntype, accepts = fm.node_type, fm.accepts

        def move(alloc, sign: int) -> None:
            for n, c in alloc:
                old = free[n]
                new = free[n] = old + sign * c
                lv = levels.get(int(ntype[n]))
                if lv is not None and accepts[n]:
                    cnt = count[int(ntype[n])]
                    for i, x in enumerate(lv[0]):
                        cnt[i] += (new >= x) - (old >= x)

        keep = [True] * len(allocs)
        for i in range(len(allocs) - 2, -1, -1):
            move(allocs[i], -1)
            if self._fits(count):
                keep[i] = False
            else:
                move(allocs[i], 1)
        return keep


def order_types(allowed: np.ndarray, speed: np.ndarray) -> list[int]:
    """Allowed gpu_type indices, fastest first (stable: config order on ties)."""
    idx = allowed.nonzero()[0]
    return [int(i) for i in idx[(-speed[idx]).argsort(kind="stable")]]


def static_fit(fm: FreeMap, job: Job, allowed: np.ndarray) -> str:
    """Could the job's gang ever fit? 'ok' (on up nodes of an allowed type when empty),
    'draining' (only on nodes that are drained or down: a down node comes back, as the epoch's
    requirements read it), or 'never' (no node of an allowed type holds its shape)."""
    best = "never"
    for t in np.flatnonzero(allowed):
        for present in (False, True, None):  # up; not down; any node (a down one comes back)
            on = fm.node_type == t
            if present is None:
                mask = on
                size = int(fm.node_gpus[on].max()) if on.any() else 0
            else:
                mask = on & (fm.present if present else fm.accepts)
                size = fm.size_of(int(t), present=present)
            shape = gang_shape(job.gpus, job.gpus_per_node, size)
            if shape is None:
                continue
            sizes = np.sort(fm.node_gpus[mask])[::-1]
            if len(sizes) >= len(shape) and np.all(sizes[: len(shape)] >= shape):
                if present is False:
                    return "ok"
                best = "draining"
    return best
