"""Which GPU indices of which node are taken, and by whom, during one placement step."""

from __future__ import annotations

import numpy as np

from optalloc.snapshot import Snapshot


class NodePool:
    """Which GPU indices of which node are taken, and by whom. Rows = nodes, columns = GPU
    index. `ev` counts GPUs per node held by evictable jobs (unallocated / zero-share, not
    protected): an allocated job may take them (unallocated never displaces allocated)."""

    def __init__(self, snap: Snapshot, evictable: np.ndarray):
        self.snap = snap
        gmax = int(snap.node_gpus.max()) if len(snap.nodes) else 0
        self.occ = np.arange(gmax)[None, :] >= snap.node_gpus[:, None]  # beyond size: taken
        self.occ[~snap.node_present] = True
        self.owner = np.full(self.occ.shape, -1, dtype=np.int64)
        self.free = (~self.occ).sum(axis=1)
        self.ev = np.zeros(len(snap.nodes), dtype=np.int64)
        self.accept = snap.node_up.copy()
        self.evictable = evictable  # (J,) bool

    def is_free(self, n: int, gpus) -> bool:
        g = np.asarray(gpus, dtype=np.int64)
        return bool(len(g) and (g < self.occ.shape[1]).all() and not self.occ[n, g].any())

    def hold(self, n: int, gpus, j: int) -> None:
        g = np.asarray(gpus, dtype=np.int64)
        self.occ[n, g] = True
        self.owner[n, g] = j
        self.free[n] -= len(g)
        if self.evictable[j]:
            self.ev[n] += len(g)

    def release(self, j: int) -> None:
        rows, cols = np.nonzero(self.owner == j)
        self.occ[rows, cols] = False
        self.owner[rows, cols] = -1
        np.add.at(self.free, rows, 1)
        if self.evictable[j]:
            np.subtract.at(self.ev, rows, 1)

    def take(self, n: int, count: int, j: int) -> tuple[int, ...]:
        g = np.flatnonzero(~self.occ[n])[:count]
        self.hold(n, g, j)
        return tuple(int(i) for i in g)

    def room(self, evict: bool) -> np.ndarray:
        return self.free + self.ev if evict else self.free

    def best_fit(self, t: int, size: int, exclude=(), evict: bool = False) -> int:
        """Up node of type t with the least room >= size (lowest index on ties); -1."""
        room = self.room(evict)
        ok = self.accept & (self.snap.node_type == t) & (room >= size)
        if exclude:
            ok[list(exclude)] = False
        if not ok.any():
            return -1
        cand = np.flatnonzero(ok)
        return int(cand[np.argmin(room[cand])])

    def whole_free(self, t: int, size: int, evict: bool = False) -> np.ndarray:
        """Up nodes of type t with `size` GPUs, entirely free (or held by evictable jobs)."""
        snap = self.snap
        return np.flatnonzero(
            self.accept & (snap.node_type == t) & (snap.node_gpus == size)
            & (self.room(evict) == snap.node_gpus)
        )

    def make_room(self, n: int, need: int) -> list[int]:
        """Evict evictable jobs from node n until `need` GPUs are free, evicting as few GPUs as
        it can: the smallest job that alone makes enough room, else the largest and repeat.
        Returns the evicted job indices."""
        out = []
        while self.free[n] < need:
            owners = self.owner[n][self.owner[n] >= 0]
            owners = owners[self.evictable[owners]]
            if not len(owners):
                break
            vals, cnt = np.unique(owners, return_counts=True)
            short = need - self.free[n]
            enough = cnt >= short
            if enough.any():
                k = np.flatnonzero(enough)[np.argmin(cnt[enough])]
            else:
                k = int(np.argmax(cnt))
            j = int(vals[k])
            self.release(j)
            out.append(j)
        return out
