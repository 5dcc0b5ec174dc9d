"""Phase 4: turn a solution into exact placements on nodes and GPU indices.

Order (each step only uses GPUs no earlier step took, so the plan never overlaps a GPU):
  1. kept running jobs keep their exact GPUs (drain nodes included);
  2. whole-node gangs take fully free nodes, the model's reserved nodes (z) first;
  3. per-node gang pieces take distinct nodes, then single-node jobs go where the model's
     packing counts (u) put them, falling back to best fit (the node with the least free GPUs
     that fits, so whole nodes stay free for gangs);
  4. repair: a chosen job that cannot be placed is dropped (it gets GangDoesNotFit);
  5. restore + backfill, in descending value: a preempted job whose GPUs nobody took is kept
     after all, and every waiting job that fits the free GPUs starts (work conservation, and a
     guard against a solver stopping inside its gap with idle GPUs).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.requirements import PIECES, SMALL, WHOLE
from optalloc.snapshot import Snapshot
from optalloc.types import NodeAlloc, Placement


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
        """Evict evictable jobs from node n (largest holders first) until `need` GPUs are free;
        returns the evicted job indices."""
        out = []
        while self.free[n] < need:
            owners = self.owner[n][self.owner[n] >= 0]
            owners = owners[self.evictable[owners]]
            if not len(owners):
                break
            vals, cnt = np.unique(owners, return_counts=True)
            j = int(vals[np.argmax(cnt)])
            self.release(j)
            out.append(j)
        return out


@dataclass
class Placed:
    """The outcome of the placement step, in the model's coordinates."""

    started: np.ndarray  # (C,) bool: candidate placed
    kept: np.ndarray  # (K,) bool: running job kept
    failed: np.ndarray  # (J,) bool: chosen by the solver but could not be placed
    placements: dict = field(default_factory=dict)  # job index -> Placement (new starts)
    backfilled: np.ndarray | None = None  # (J,) bool: started by backfill, not the solver
    restored: np.ndarray | None = None  # (K,) bool: preempted by the solver, kept by restore
    free: np.ndarray | None = None  # (N,) free GPUs per node after the plan (0 on drain/down)


def _alloc(pool: NodePool, em: EpochModel, j: int, t: int, nodes: list[int]) -> Placement:
    snap, req = em.snap, em.req
    size, left = int(req.size[j, t]), int(snap.job_gpus[j])
    allocs = []
    for n in nodes:
        take = min(size, left)
        allocs.append(NodeAlloc(snap.nodes[n].name, pool.take(n, take, j)))
        left -= take
    return Placement(snap.jobs[j].id, snap.type_names[t], tuple(allocs),
                     bool(snap.job_allocated[j]))


def _nodes_for(pool: NodePool, em: EpochModel, c: int, prefer: list, slots: dict,
               evict: bool) -> list[int] | None:
    """Nodes for candidate c (whole nodes, distinct pieces, or one node), or None."""
    req = em.req
    j, t = int(req.cand_job[c]), int(req.cand_type[c])
    shape, size, pieces = int(req.shape[j, t]), int(req.size[j, t]), int(req.pieces[j, t])
    if shape == WHOLE:
        free = pool.whole_free(t, size, evict)
        free_set = set(free.tolist())
        pref = [n for n in prefer if n in free_set]
        rest = [int(n) for n in free if n not in set(pref)]
        nodes = (pref + rest)[:pieces]
        return nodes if len(nodes) == pieces else None
    chosen: list[int] = []
    room = pool.room(evict)
    for _ in range(pieces):
        n = -1
        for m in slots.get((t, size), []):  # the model's packing first
            if m not in chosen and room[m] >= size and pool.accept[m]:
                n = m
                break
        if n < 0:
            n = pool.best_fit(t, size, exclude=chosen, evict=evict)
        if n < 0:
            return None
        chosen.append(n)
    for n in chosen:
        lst = slots.get((t, size))
        if lst and n in lst:
            lst.remove(n)
    return chosen


def place(em: EpochModel, x: np.ndarray | None, *, backfill: bool = True) -> Placed:
    """Placements for solution `x` of em.lm (None: start nothing new, keep every running job
    that may stay)."""
    snap, req, imp = em.snap, em.req, em.imp
    J, C, K = len(snap.jobs), len(req.cand_job), len(req.run_job)
    if x is None:
        chosen = np.zeros(C, bool)
        kept = np.ones(K, bool)
        reserved: list[int] = []
        slots: dict = {}
    else:
        chosen = x[em.x] > 1.0 - 1e-6  # a fractional (LP) start is left to the backfill
        kept = (x[em.k] > 1.0 - 1e-6) | req.run_fixed
        reserved = [int(n) for n in em.z_node[x[em.z] > 0.5]] if len(em.z) else []
        counts = np.rint(x[em.u]).astype(np.int64) if len(em.u) else np.zeros(0, np.int64)
        slots = {}
        for n, s, cnt in zip(em.u_node, em.u_size, counts):
            if cnt > 0:
                slots.setdefault((int(snap.node_type[n]), int(s)), []).extend([int(n)] * int(cnt))
    # evictable: tier < 1 on every type (unallocated or zero-share) and not protected
    evictable = (imp.tier.max(axis=1) < 1.0 if J else np.zeros(0, bool)) & ~snap.job_protected
    pool = NodePool(snap, evictable)
    run_nodes = _running_holds(snap, req)
    run_of_job = {int(j): i for i, j in enumerate(req.run_job)}
    kept = kept.copy()
    for i in np.flatnonzero(kept):
        for n, gpus in run_nodes[i]:
            pool.hold(n, gpus, int(req.run_job[i]))

    started = np.zeros(C, bool)
    failed = np.zeros(J, bool)
    placements: dict[int, Placement] = {}
    cand_of: dict[int, int] = {}
    shape = req.shape[req.cand_job, req.cand_type] if C else np.zeros(0, np.int64)
    value = imp.value[req.cand_job, req.cand_type] if C else np.zeros(0)
    ch = np.flatnonzero(chosen)
    # whole-node gangs (largest first), then pieces, then single-node jobs (largest first)
    order = sorted(
        ch.tolist(),
        key=lambda c: (
            {WHOLE: 0, PIECES: 1, SMALL: 2}[int(shape[c])],
            -int(snap.job_gpus[req.cand_job[c]]),
            -value[c],
        ),
    )
    for c in order:
        j = int(req.cand_job[c])
        if j in placements:  # the one-choice row makes this impossible for integral x
            continue
        nodes = _nodes_for(pool, em, c, reserved, slots, evict=False)
        if nodes is None:
            failed[j] = True
        else:
            placements[j] = _alloc(pool, em, j, int(req.cand_type[c]), nodes)
            started[c] = True
            cand_of[j] = c

    backfilled = np.zeros(J, bool)
    restored = np.zeros(K, bool)
    if backfill:
        _restore_and_backfill(em, pool, run_nodes, run_of_job, kept, restored, started,
                              placements, cand_of, backfilled, value)
    failed &= ~np.isin(np.arange(J), list(placements))
    free = np.where(pool.accept, pool.free, 0)
    return Placed(started, kept | restored, failed, placements, backfilled, restored, free)


def _running_holds(snap: Snapshot, req) -> list[list[tuple[int, tuple[int, ...]]]]:
    out = []
    for j in req.run_job:
        pl = snap.jobs[j].placement
        out.append([(snap.node_index[a.node], tuple(a.gpus)) for a in pl.nodes])
    return out


def _restore_and_backfill(em, pool, run_nodes, run_of_job, kept, restored, started, placements,
                          cand_of, backfilled, value) -> None:
    """Lazy greedy in descending marginal objective over (a) preempted running jobs whose GPUs
    are still free and (b) waiting jobs that fit. The marginal objective of a job is its impact
    plus FLOOR_WEIGHT per GPU that still counts toward an unmet floor on its path, re-evaluated
    when popped (floors fill as jobs start). A tier-1 (allocated) job may evict unallocated
    holders; evicted jobs go back into the queue (they are worth less, so they come later)."""
    snap, req, imp = em.snap, em.req, em.imp
    M = snap.org.membership()
    anc = [np.flatnonzero(M[:, p]) for p in range(snap.org.n)]
    got = np.zeros((snap.org.n, len(snap.gpu_types)))
    tier1 = imp.tier >= 1.0

    def add_got(j: int, t: int, sign: float = 1.0) -> None:
        if tier1[j, t]:
            got[anc[snap.job_project[j]], t] += sign * snap.job_gpus[j]

    for i in np.flatnonzero(kept):
        add_got(int(req.run_job[i]), int(req.run_type[i]))
    for j, c in cand_of.items():
        add_got(j, int(req.cand_type[c]))

    def gain(j: int, t: int) -> float:
        if not tier1[j, t]:
            return 0.0
        a = anc[snap.job_project[j]]
        need = np.clip(em.floor[a, t] - got[a, t], 0, snap.job_gpus[j])
        return float(imp.floor_weight * need.sum())

    by_job: dict[int, list[int]] = {}
    for c in np.argsort(-value, kind="stable"):
        by_job.setdefault(int(req.cand_job[c]), []).append(int(c))

    def prio(kind: int, idx: int) -> float:  # marginal objective per GPU (knapsack density)
        if kind == 0:
            j, t = int(req.run_job[idx]), int(req.run_type[idx])
            return (float(imp.value[j, t] + imp.churn[j]) + gain(j, t)) / snap.job_gpus[j]
        g = snap.job_gpus[idx]
        return max(float(value[c]) + gain(idx, int(req.cand_type[c])) for c in by_job[idx]) / g

    heap: list[tuple[float, int, int]] = []  # (-priority, kind 0=restore 1=start, index)
    for i in np.flatnonzero(~kept):
        heap.append((-prio(0, int(i)), 0, int(i)))
    for j in by_job:
        if j not in placements:
            heap.append((-prio(1, j), 1, j))
    heapq.heapify(heap)

    def evicted_back(jobs: list[int]) -> None:
        for e in jobs:
            if e in placements:  # a start of this epoch: undo it, it may start elsewhere
                del placements[e]
                c = cand_of.pop(e)
                started[c] = False
                backfilled[e] = False
                add_got(e, int(req.cand_type[c]), -1.0)
                heapq.heappush(heap, (-prio(1, e), 1, e))
            else:  # a running job: preempted after all
                i = run_of_job[e]
                kept[i] = False
                restored[i] = False
                add_got(e, int(req.run_type[i]), -1.0)

    while heap:
        neg, kind, idx = heapq.heappop(heap)
        if kind == 1 and idx in placements:
            continue
        cur = prio(kind, idx)
        if heap and cur < -neg - 1e-9 and -cur > heap[0][0]:  # stale: floors filled since
            heapq.heappush(heap, (-cur, kind, idx))
            continue
        if kind == 0:
            holds = run_nodes[idx]
            if all(pool.is_free(n, g) for n, g in holds):
                for n, g in holds:
                    pool.hold(n, g, int(req.run_job[idx]))
                restored[idx] = True
                add_got(int(req.run_job[idx]), int(req.run_type[idx]))
            continue
        j = idx
        may_evict = not pool.evictable[j]
        cands = sorted(by_job[j], key=lambda c: -(value[c] + gain(j, int(req.cand_type[c]))))
        for c in cands:
            t = int(req.cand_type[c])
            sel = pool.accept & (snap.node_type == t)
            if int(pool.room(may_evict)[sel].sum()) < snap.job_gpus[j]:
                continue
            nodes = _nodes_for(pool, em, c, [], {}, evict=False)
            if nodes is None and may_evict:
                nodes = _nodes_for(pool, em, c, [], {}, evict=True)
                if nodes is not None:
                    size, left, out = int(req.size[j, t]), int(snap.job_gpus[j]), []
                    for n in nodes:
                        out += pool.make_room(n, min(size, left))
                        left -= size
                    evicted_back(out)
            if nodes is not None:
                placements[j] = _alloc(pool, em, j, t, nodes)
                started[c] = True
                cand_of[j] = c
                backfilled[j] = True
                add_got(j, t)
                break


def as_solution(em: EpochModel, placed: Placed) -> np.ndarray:
    """The placed plan as a point of em.lm (x, k from the plan; z = nodes whole-node gangs
    took; u = single-node jobs / pieces per (node, size); m = min(floor, got)), so a MIP
    solver can start from it as its incumbent. Callers check `em.lm.violation` before use:
    a per-node gang whose last piece is smaller than gpus_per_node uses fewer GPUs than the
    model counts, which can make this point infeasible."""
    from optalloc.plan.reasons import got_by_org  # reasons imports this module

    snap, req = em.snap, em.req
    sol = np.zeros(em.lm.n_vars)
    sol[em.x] = placed.started
    sol[em.k] = placed.kept
    used_whole = np.zeros(len(snap.nodes), bool)
    count = np.zeros((len(snap.nodes), int(req.type_max_node.max(initial=0)) + 1), np.int64)
    for c in np.flatnonzero(placed.started):
        j, t = int(req.cand_job[c]), int(req.cand_type[c])
        nodes = [snap.node_index[a.node] for a in placed.placements[j].nodes]
        if req.shape[j, t] == WHOLE:
            used_whole[nodes] = True
        else:
            np.add.at(count, (nodes, int(req.size[j, t])), 1)
    if len(em.z):
        sol[em.z] = used_whole[em.z_node]
    if len(em.u):
        sol[em.u] = count[em.u_node, em.u_size]
    if len(em.m):
        got = got_by_org(em, placed)
        sol[em.m] = np.minimum(em.floor[em.m_org, em.m_type], got[em.m_org, em.m_type])
    return sol
