"""Which GPU indices of which node are taken, and by whom, during one placement step: the
ranked passes' occupancy map (optalloc.plan.freemap.FreeMap, one grid for both) plus owners,
evictable GPUs and reservation deadlines."""

from __future__ import annotations

import numpy as np

from optalloc.plan.freemap import FreeMap
from optalloc.snapshot import Snapshot

#: hold() sets at most this many GPUs one by one, more with one fancy index
_SCALAR = 8


class NodePool:
    """FreeMap's grid (`occ` is its `used[n, g]`, `free[n]`, `accept` its `accepts[n]`: the same
    arrays) with, per GPU, the job holding it (`owner`, -1 free). Nodes that are not present
    are taken whole. `ev` counts GPUs per node held by evictable jobs (unallocated /
    zero-share, not protected): an allocated job may take them (unallocated never displaces
    allocated). `deadline[n]`: the expected start of the gang node n is reserved for (inf:
    none); a new job whose hold (optalloc.model.free_times.candidate_hold) is later may not
    start there, and a job that may prefers reserved nodes (soonest deadline first), so the
    rest stays free for long work."""

    def __init__(self, snap: Snapshot, evictable: np.ndarray, deadline: np.ndarray | None = None):
        self.snap = snap
        grid = FreeMap.empty(snap)
        grid.used[~snap.node_present] = True
        grid.free[:] = (~grid.used).sum(axis=1)
        self.occ, self.free, self.accept = grid.used, grid.free, grid.accepts
        self.owner = np.full(self.occ.shape, -1, dtype=np.int64)
        self.ev = np.zeros(len(snap.nodes), dtype=np.int64)
        self.evictable = evictable  # (J,) bool
        N = len(snap.nodes)
        self.deadline = np.full(N, np.inf) if deadline is None or not len(deadline) else deadline
        self.reserved = bool(np.isfinite(self.deadline).any())
        # nodes where the plan preempts a running job: a start there waits for its grace
        self.freed = np.zeros(N, bool)
        self._yields: np.ndarray | None = None

    def yield_order(self) -> np.ndarray:
        """(J,) int: how late each job comes in the scheme's order (larger: it yields first):
        its project's Fair-Tree rank (rule 1), then its place in its team's own order (rule
        3), as greedy releases its victims (lowest-ranked first)."""
        if self._yields is None:
            from optalloc.model.order import fair_tree_rank, project_order

            snap = self.snap
            rank = np.maximum(fair_tree_rank(snap)[snap.job_project], 0)
            self._yields = rank * (len(snap.jobs) + 1) + project_order(snap)
        return self._yields

    def evict_rank(self, nodes: np.ndarray) -> np.ndarray:
        """(len(nodes),) the latest `yield_order` of the evictable jobs on each node (-1:
        none): where an eviction there starts."""
        own = self.owner[nodes]
        ok = own >= 0
        ok[ok] = self.evictable[own[ok]]
        return np.where(ok, self.yield_order()[np.maximum(own, 0)], -1).max(axis=1, initial=-1)

    def evict_twin(self, n: int, ok: np.ndarray, exclude=()) -> int:
        """Of node n and the nodes interchangeable with it for a start that evicts (`ok`, of
        its type, the same free and evictable GPUs, preemption and reservation state), the
        one whose evictable work yields first in the scheme's order (n on ties). The model's
        packing names a node per chunk, indifferent between such twins: by index, A's start
        evicted U's second-ranked unallocated job from n1 while U's last ran on n2 (an
        outside judge, stop 55)."""
        snap = self.snap
        twin = (ok & (snap.node_type == snap.node_type[n]) & (self.free == self.free[n])
                & (self.ev == self.ev[n]) & (self.freed == self.freed[n])
                & (self.deadline == self.deadline[n]))
        if exclude:
            twin[list(exclude)] = False
        twin[n] = True
        cand = np.flatnonzero(twin)
        if len(cand) == 1:
            return n
        r = self.evict_rank(cand)
        return n if r[cand == n][0] >= r.max() else int(cand[np.argmax(r)])

    def allowed(self, hold: float) -> np.ndarray:
        """(N,) bool: up nodes a job holding its GPUs until `hold` may start on."""
        return self.accept & (self.deadline >= hold) if self.reserved else self.accept

    def is_free(self, n: int, gpus) -> bool:
        # element by element: a job holds a few GPUs of a node, and numpy's fancy indexing
        # cost ~15x a Python loop over them (the backfill asks for every preempted job)
        if not len(gpus):
            return False
        row, G = self.occ[n], self.occ.shape[1]
        for g in gpus:
            if g >= G or row[g]:
                return False
        return True

    def hold(self, n: int, gpus, j: int) -> None:
        k = len(gpus)
        if k <= _SCALAR:  # a few GPUs: item by item (fancy indexing costs ~5 us a call)
            occ, own = self.occ[n], self.owner[n]
            for g in gpus:
                occ[g] = True
                own[g] = j
        else:
            g = gpus if isinstance(gpus, np.ndarray) else np.asarray(gpus, dtype=np.int64)
            self.occ[n, g] = True
            self.owner[n, g] = j
        self.free[n] -= k
        if self.evictable[j]:
            self.ev[n] += k

    def hold_many(self, nodes: np.ndarray, gpus: np.ndarray, jobs: np.ndarray) -> None:
        """hold() for many (node, GPU index, job) at once (distinct, currently free GPUs)."""
        self.occ[nodes, gpus] = True
        self.owner[nodes, gpus] = jobs
        N = len(self.free)
        self.free -= np.bincount(nodes, minlength=N).astype(self.free.dtype)
        ev = self.evictable[jobs]
        self.ev += np.bincount(nodes[ev], minlength=N).astype(self.ev.dtype)

    def release(self, j: int) -> None:
        rows, cols = np.nonzero(self.owner == j)
        self.occ[rows, cols] = False
        self.owner[rows, cols] = -1
        np.add.at(self.free, rows, 1)
        if self.evictable[j]:
            np.subtract.at(self.ev, rows, 1)

    def release_gpus(self, nodes: np.ndarray, gpus: np.ndarray, j: int) -> None:
        """release() of job j's GPUs at (nodes[i], gpus[i]), known: no search of the grid."""
        self.occ[nodes, gpus] = False
        self.owner[nodes, gpus] = -1
        np.add.at(self.free, nodes, 1)
        if self.evictable[j]:
            np.subtract.at(self.ev, nodes, 1)

    def hold_placement(self, pl, j: int) -> None:
        """hold() of every GPU of placement `pl` (a types.Placement) for job j."""
        for a in pl.nodes:
            self.hold(self.snap.node_index[a.node], a.gpus, j)

    def release_placement(self, pl, j: int) -> None:
        """release() of job j, whose placement `pl` is known."""
        ev = self.evictable[j]
        for a in pl.nodes:
            n, k = self.snap.node_index[a.node], len(a.gpus)
            occ, own = self.occ[n], self.owner[n]
            for g in a.gpus:
                occ[g] = False
                own[g] = -1
            self.free[n] += k
            if ev:
                self.ev[n] -= k

    def take(self, n: int, count: int, j: int) -> tuple[int, ...]:
        g = tuple((~self.occ[n]).nonzero()[0][:count].tolist())
        self.hold(n, g, j)
        return g

    def room(self, evict: bool) -> np.ndarray:
        return self.free + self.ev if evict else self.free

    def best_fit(self, t: int, size: int, exclude=(), evict: bool = False,
                 hold: float = -np.inf) -> int:
        """Up node of type t with the least room >= size (lowest index on ties), nodes where
        the plan preempts nothing before the others, reserved nodes the job may use first
        (soonest deadline first) before all; -1. With `evict`, of those the node where the
        fewest GPUs of evictable work must go comes before tightness (README item 8: an
        8-GPU start beside 1 unallocated GPU on one node and 4 on another evicted the 4,
        the lower index, and lost four times the work)."""
        room = self.room(evict)
        ok = self.on_type(t) & (room >= size)
        if self.reserved:
            ok &= self.deadline >= hold
        if exclude:
            ok[list(exclude)] = False
        # (ndarray methods, not numpy's functions: their dispatch cost more than the work
        # on a cluster's few hundred nodes)
        cand = ok.nonzero()[0]
        if len(cand) <= 1:
            return int(cand[0]) if len(cand) else -1
        # a node where nothing is preempted first: GPUs a preemption frees are used last, so
        # the preempted job stays (restore) wherever a start fits elsewhere
        if not self.reserved:  # the lexsort's order below: not freed, fewest evicted GPUs,
            fr = self.freed[cand]  # tightest, lowest index (argmin: its first minimum)
            if fr.any() and not fr.all():
                cand = cand[~fr]
            key = room[cand]
            if evict:  # room <= GPUs per node: one key, evicted GPUs first
                key = np.maximum(size - self.free[cand], 0) * (self.occ.shape[1] + 1) + key
            return int(cand[key.argmin()])
        keys = (cand, room[cand])
        if evict:
            keys += (np.maximum(size - self.free[cand], 0),)
        keys += (self.freed[cand],)
        if self.reserved:
            keys += (self.deadline[cand],)
        return int(cand[np.lexsort(keys)[0]])

    def on_type(self, t: int) -> np.ndarray:
        """(N,) bool: up nodes of type t (read-only; node states and types do not change
        while the pool lives), once per pool and type: best_fit asks ~1,000 times a
        placement."""
        masks = self.__dict__.setdefault("_on_type", {})
        out = masks.get(t)
        if out is None:
            out = masks[t] = self.accept & (self.snap.node_type == t)
        return out

    def whole_free(self, t: int, size: int, evict: bool = False,
                   hold: float = -np.inf) -> np.ndarray:
        """Up nodes of type t with `size` GPUs, entirely free (or held by evictable jobs),
        reserved nodes the job may use first (soonest deadline first)."""
        snap = self.snap
        out = np.flatnonzero(
            self.allowed(hold) & (snap.node_type == t) & (snap.node_gpus == size)
            & (self.room(evict) == snap.node_gpus)
        )
        if self.reserved and len(out):
            out = out[np.argsort(self.deadline[out], kind="stable")]
        return out

    def make_room(self, n: int, need: int) -> list[int]:
        """Evict evictable jobs from node n until `need` GPUs are free (`eviction`'s choice).
        Returns the evicted job indices."""
        out = self.eviction(n, need)
        for j in out:
            self.release(j)
        return out

    def eviction(self, n: int, need: int) -> list[int]:
        """The evictable jobs make_room(n, need) evicts, changing nothing: as few GPUs as it
        can, the smallest job that alone makes enough room, else the largest and repeat; of
        jobs of one size, the one ranked last in the scheme's order (`yield_order`: the
        worse-ranked project's, then its team's last; DESIGN.md rules 1 and 3: by index it
        had evicted a team's earliest job, a b200-only one, while two later ones stayed on
        b200 beside 16 free h100 GPUs: fresh draws at stop 43)."""
        pos = self.yield_order()
        owners = self.owner[n][self.owner[n] >= 0]
        owners = owners[self.evictable[owners]]
        vals, cnt = np.unique(owners, return_counts=True)
        free, out = int(self.free[n]), []
        while free < need and len(vals):
            last = -pos[vals]  # the team's last first
            enough = cnt >= need - free
            if enough.any():
                idx = np.flatnonzero(enough)
                k = int(idx[np.lexsort((last[idx], cnt[idx]))[0]])
            else:
                k = int(np.lexsort((last, -cnt))[0])
            out.append(int(vals[k]))
            free += int(cnt[k])
            vals, cnt = np.delete(vals, k), np.delete(cnt, k)
        return out

    def eviction_cost(self, n: int, need: int) -> int:
        """GPUs of work lost (whole jobs, every node of theirs) if a start of `need` GPUs on
        node n evicts (`eviction`)."""
        return int(self.snap.job_gpus[self.eviction(n, need)].sum()) if self.free[n] < need \
            else 0
