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

from dataclasses import dataclass, field

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.requirements import PIECES, SMALL, WHOLE
from optalloc.snapshot import Snapshot
from optalloc.types import NodeAlloc, Placement


class NodePool:
    """Which GPU indices of which node are taken. Rows = nodes, columns = GPU index."""

    def __init__(self, snap: Snapshot):
        self.snap = snap
        gmax = int(snap.node_gpus.max()) if len(snap.nodes) else 0
        self.occ = np.arange(gmax)[None, :] >= snap.node_gpus[:, None]  # beyond size: taken
        self.occ[~snap.node_present] = True
        self.free = (~self.occ).sum(axis=1)
        self.accept = snap.node_up.copy()

    def is_free(self, n: int, gpus) -> bool:
        g = np.asarray(gpus, dtype=np.int64)
        return bool(len(g) and (g < self.occ.shape[1]).all() and not self.occ[n, g].any())

    def hold(self, n: int, gpus) -> None:
        g = np.asarray(gpus, dtype=np.int64)
        self.occ[n, g] = True
        self.free[n] -= len(g)

    def take(self, n: int, count: int) -> tuple[int, ...]:
        g = np.flatnonzero(~self.occ[n])[:count]
        self.hold(n, g)
        return tuple(int(i) for i in g)

    def best_fit(self, t: int, size: int, exclude=()) -> int:
        """Up node of type t with the fewest free GPUs >= size (lowest index on ties); -1."""
        ok = self.accept & (self.snap.node_type == t) & (self.free >= size)
        if exclude:
            ok[list(exclude)] = False
        if not ok.any():
            return -1
        cand = np.flatnonzero(ok)
        return int(cand[np.argmin(self.free[cand])])

    def whole_free(self, t: int, size: int) -> np.ndarray:
        """Up nodes of type t, `size` GPUs, entirely free."""
        snap = self.snap
        return np.flatnonzero(
            self.accept & (snap.node_type == t) & (snap.node_gpus == size)
            & (self.free == snap.node_gpus)
        )


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


def _place_whole(pool: NodePool, em: EpochModel, c: int, prefer: list) -> Placement | None:
    req, snap = em.req, em.snap
    j, t = int(req.cand_job[c]), int(req.cand_type[c])
    size, pieces, g = int(req.size[j, t]), int(req.pieces[j, t]), int(snap.job_gpus[j])
    free = pool.whole_free(t, size)
    free_set = set(free.tolist())
    pref = [n for n in prefer if n in free_set]
    rest = [int(n) for n in free if n not in set(pref)]
    nodes = (pref + rest)[:pieces]
    if len(nodes) < pieces:
        return None
    allocs, left = [], g
    for n in nodes:
        take = min(size, left)
        allocs.append(NodeAlloc(snap.nodes[n].name, pool.take(n, take)))
        left -= take
    return Placement(snap.jobs[j].id, snap.type_names[t], tuple(allocs), bool(snap.job_allocated[j]))


def _place_pieces(pool: NodePool, em: EpochModel, c: int, slots: dict) -> Placement | None:
    req, snap = em.req, em.snap
    j, t = int(req.cand_job[c]), int(req.cand_type[c])
    size, pieces, g = int(req.size[j, t]), int(req.pieces[j, t]), int(snap.job_gpus[j])
    chosen: list[int] = []
    for _ in range(pieces):
        n = -1
        for m in slots.get((t, size), []):  # the model's packing first
            if m not in chosen and pool.free[m] >= size and pool.accept[m]:
                n = m
                break
        if n < 0:
            n = pool.best_fit(t, size, exclude=chosen)
        if n < 0:
            return None
        chosen.append(n)
    allocs, left = [], g
    for n in chosen:
        take = min(size, left)
        allocs.append(NodeAlloc(snap.nodes[n].name, pool.take(n, take)))
        left -= take
        _use_slot(slots, (t, size), n)
    return Placement(snap.jobs[j].id, snap.type_names[t], tuple(allocs), bool(snap.job_allocated[j]))


def _use_slot(slots: dict, key, n: int) -> None:
    lst = slots.get(key)
    if lst and n in lst:
        lst.remove(n)


def _place_small(pool: NodePool, em: EpochModel, c: int, slots: dict) -> Placement | None:
    req, snap = em.req, em.snap
    j, t = int(req.cand_job[c]), int(req.cand_type[c])
    g = int(snap.job_gpus[j])
    n = -1
    for m in slots.get((t, g), []):
        if pool.free[m] >= g and pool.accept[m]:
            n = m
            break
    if n < 0:
        n = pool.best_fit(t, g)
    if n < 0:
        return None
    _use_slot(slots, (t, g), n)
    return Placement(
        snap.jobs[j].id, snap.type_names[t], (NodeAlloc(snap.nodes[n].name, pool.take(n, g)),),
        bool(snap.job_allocated[j]),
    )


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
        chosen = x[em.x] > 0.5
        kept = (x[em.k] > 0.5) | req.run_fixed
        reserved = [int(n) for n in em.z_node[x[em.z] > 0.5]] if len(em.z) else []
        counts = np.rint(x[em.u]).astype(np.int64) if len(em.u) else np.zeros(0, np.int64)
        slots = {}
        for n, s, cnt in zip(em.u_node, em.u_size, counts):
            if cnt > 0:
                slots.setdefault((int(snap.node_type[n]), int(s)), []).extend([int(n)] * int(cnt))

    pool = NodePool(snap)
    run_nodes = _running_holds(snap, req)
    for i in np.flatnonzero(kept):
        for n, gpus in run_nodes[i]:
            pool.hold(n, gpus)

    started = np.zeros(C, bool)
    failed = np.zeros(J, bool)
    placements: dict[int, Placement] = {}
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
        if shape[c] == WHOLE:
            p = _place_whole(pool, em, c, reserved)
        elif shape[c] == PIECES:
            p = _place_pieces(pool, em, c, slots)
        else:
            p = _place_small(pool, em, c, slots)
        if p is None:
            failed[j] = True
        else:
            placements[j] = p
            started[c] = True

    backfilled = np.zeros(J, bool)
    restored = np.zeros(K, bool)
    if backfill:
        _restore_and_backfill(em, pool, run_nodes, kept, restored, started, placements,
                              backfilled, shape, value)
    failed &= ~np.isin(np.arange(J), list(placements))
    free = np.where(pool.accept, pool.free, 0)
    return Placed(started, kept | restored, failed, placements, backfilled, restored, free)


def _running_holds(snap: Snapshot, req) -> list[list[tuple[int, tuple[int, ...]]]]:
    out = []
    for j in req.run_job:
        pl = snap.jobs[j].placement
        out.append([(snap.node_index[a.node], tuple(a.gpus)) for a in pl.nodes])
    return out


def _restore_and_backfill(em, pool, run_nodes, kept, restored, started, placements, backfilled,
                          shape, value) -> None:
    snap, req, imp = em.snap, em.req, em.imp
    items: list[tuple[float, int, int]] = []  # (-value, kind 0=restore 1=start, index)
    for i in np.flatnonzero(~kept):
        j = int(req.run_job[i])
        items.append((-float(imp.value[j, req.run_type[i]] + imp.churn[j]), 0, int(i)))
    waiting = np.ones(len(snap.jobs), bool)
    waiting[list(placements)] = False
    if len(req.cand_job):
        cand_ok = waiting[req.cand_job]
        best = np.full(len(snap.jobs), -np.inf)
        np.maximum.at(best, req.cand_job[cand_ok], value[cand_ok])
        for j in np.flatnonzero(np.isfinite(best)):
            items.append((-float(best[j]), 1, int(j)))
    items.sort()
    by_job: dict[int, list[int]] = {}
    for c in np.argsort(-value, kind="stable"):
        by_job.setdefault(int(req.cand_job[c]), []).append(int(c))
    type_free = lambda t: int(pool.free[pool.accept & (snap.node_type == t)].sum())  # noqa: E731
    for _, kind, idx in items:
        if kind == 0:
            holds = run_nodes[idx]
            if all(pool.is_free(n, g) for n, g in holds):
                for n, g in holds:
                    pool.hold(n, g)
                restored[idx] = True
            continue
        j = idx
        for c in by_job.get(j, []):
            t = int(req.cand_type[c])
            if type_free(t) < snap.job_gpus[j]:
                continue
            if shape[c] == WHOLE:
                p = _place_whole(pool, em, c, [])
            elif shape[c] == PIECES:
                p = _place_pieces(pool, em, c, {})
            else:
                p = _place_small(pool, em, c, {})
            if p is not None:
                placements[j] = p
                started[c] = True
                backfilled[j] = True
                break
