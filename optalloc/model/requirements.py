"""Phase 1 of an epoch: what each job needs, as arrays (no solver involved).

From a Snapshot this computes
  * the *shape* of every job on every gpu_type (Kueue's "flavor assignment" step), by the one
    rule in optalloc/shape.py:
      - SMALL  : fits in one node -> never split, `size` GPUs on one node;
      - WHOLE  : `pieces` whole nodes of the type's largest node size, plus one more distinct
                 node holding `rem` GPUs when the node size does not divide the job (8+8+4);
      - PIECES : `pieces` nodes with `size` (= gpus_per_node) GPUs each, on distinct nodes;
  * the candidate (job, gpu_type) pairs a new placement may use (queued jobs, and running jobs
    whose node went down: they are gone and may start again elsewhere), then the *moves*: a
    resumable allocated running job past its protection may restart on another gpu_type where it is
    allocated and fits, in place of being preempted (its keep and its moves share one
    one-choice row; a move is worth no more than the keep, optalloc.model.objective.impact);
  * the running jobs that may be kept, what they hold on which node, and which are protected;
  * per job the reason it has no candidate at all (NoMatchingGpuType / NodeDraining).

Everything is vectorized over jobs x gpu_types; the only Python loops run over running jobs'
node lists (their placements are Python objects) and over gpu_types.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optalloc.shape import PIECES, SHAPE_NAMES, SMALL, WHOLE, fits_types, shapes
from optalloc.snapshot import Snapshot, job_resumable
from optalloc.types import ReasonCode

__all__ = ["PIECES", "SHAPE_NAMES", "SMALL", "WHOLE", "Requirements", "compute_requirements"]


@dataclass(frozen=True, eq=False)
class Requirements:
    # ---- per gpu_type
    type_max_node: np.ndarray  # (T,) largest up node size (0: no up node)
    type_whole_nodes: np.ndarray  # (T,) up nodes of the largest size
    # ---- per job x type: shape and feasibility
    shape: np.ndarray  # (J, T) SMALL / WHOLE / PIECES
    size: np.ndarray  # (J, T) GPUs per node (SMALL: the job's GPUs; WHOLE: node size)
    pieces: np.ndarray  # (J, T) full pieces (SMALL: 1; WHOLE: whole nodes)
    rem: np.ndarray  # (J, T) GPUs of a WHOLE gang's remainder node (0: none)
    fits: np.ndarray  # (J, T) allowed and the shape fits the up nodes of that type
    # ---- candidates for a new placement
    cand_job: np.ndarray  # (C,) job index
    cand_type: np.ndarray  # (C,) type index
    cand_move: np.ndarray  # (C,) bool: a running job's restart on another type (after the rest)
    cand_restart: np.ndarray  # (C,) bool: a running job's restart on other GPUs of its own type
    # ---- running jobs
    run_job: np.ndarray  # (K,) job index of running jobs that may be kept
    run_type: np.ndarray  # (K,) their current type
    run_fixed: np.ndarray  # (K,) bool: protected -> must be kept
    run_pair_k: np.ndarray  # (P,) index into run_* of each (job, node) hold
    run_pair_node: np.ndarray  # (P,) node index
    run_pair_gpus: np.ndarray  # (P,) GPUs held on that node
    displaced: np.ndarray  # (J,) bool: running, but a node of its placement is down/unknown
    # ---- why a job cannot run anywhere (None: it has a candidate)
    no_fit_code: tuple  # (J,) ReasonCode | None


def _shapes(snap: Snapshot, max_node: np.ndarray, up_by_size) -> tuple[np.ndarray, ...]:
    shape, size, pieces, rem, valid = shapes(snap.job_gpus, snap.job_gpn, max_node)
    # the type's up nodes hold the shape at once: `pieces` nodes with >= `size` GPUs and, for a
    # remainder, one more with >= `rem` (the one rule, optalloc.shape.fits_nodes)
    room = fits_types(size, pieces, rem, [np.repeat(s, c) for s, c in up_by_size])
    fits = snap.job_allowed & valid & room
    return shape, size, pieces, rem, fits


def _up_by_size(snap: Snapshot, mask: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for t in range(len(snap.gpu_types)):
        sel = mask & (snap.node_type == t)
        sizes, counts = np.unique(snap.node_gpus[sel], return_counts=True)
        out.append((sizes, counts))
    return out


def compute_requirements(snap: Snapshot) -> Requirements:
    J, T = snap.job_allowed.shape
    up_sizes = _up_by_size(snap, snap.node_up)
    max_node = np.array([s[-1] if len(s) else 0 for s, _ in up_sizes], dtype=np.int64)
    whole_nodes = np.array([c[-1] if len(c) else 0 for _, c in up_sizes], dtype=np.int64)
    shape, size, pieces, rem, fits = _shapes(snap, max_node, up_sizes)

    # running jobs: keepable unless a node of their placement is down or unknown
    displaced = np.zeros(J, dtype=bool)
    run_job, run_type, pair_k, pair_node, pair_gpus = [], [], [], [], []
    tidx = {n: i for i, n in enumerate(snap.type_names)}
    for j in np.flatnonzero(snap.job_running):
        pl = snap.jobs[j].placement
        nodes = [] if pl is None else [snap.node_index.get(a.node, -1) for a in pl.nodes]
        if pl is None or pl.gpu_type not in tidx or any(
            n < 0 or not snap.node_present[n] for n in nodes
        ):
            displaced[j] = True
            continue
        k = len(run_job)
        run_job.append(j)
        run_type.append(tidx[pl.gpu_type])
        for n, a in zip(nodes, pl.nodes):
            pair_k.append(k)
            pair_node.append(n)
            pair_gpus.append(len(a.gpus))
    run_job_a = np.asarray(run_job, dtype=np.int64)

    # candidates for a new placement: queued jobs, resumable displaced running jobs (one that
    # is not resumable ends when its node goes, as off a drain node: it restarts nowhere;
    # until stop 55 the model "moved" it and the GPUs it got idled an epoch) and resumable jobs
    # that leave a drain node (past their protection: they cannot stay), which may restart on
    # any up node at once as a queued job would (rule 5 empties the node; it gives their
    # project's place to no one: before, a project below its floor was requeued while the
    # only free node went, in the same plan, to a lower-ranked project's new job)
    resumable = job_resumable(snap)
    leaving = snap.job_running & snap.job_on_drain & ~snap.job_protected & resumable
    startable = ~snap.job_running | (displaced & resumable) | leaving
    cj, ct = np.nonzero(fits & startable[:, None])
    # moves: allocated running jobs past their protection, on their other allocated types
    run_type_a = np.asarray(run_type, dtype=np.int64)
    mj, mt = _moves(snap, fits, run_job_a, run_type_a, resumable & ~leaving)
    # restarts: the same jobs on other GPUs of their own type (rule 6: a job its GPUs are
    # taken from restarts at once where GPUs of its type are left, as a queued job would)
    rs = (_movable(snap, run_job_a, run_type_a, resumable & ~leaving)
          & fits[run_job_a, run_type_a]) if len(run_job_a) else np.zeros(0, bool)
    sj, st = run_job_a[rs], run_type_a[rs]
    move = np.r_[np.zeros(len(cj), bool), np.ones(len(mj), bool), np.zeros(len(sj), bool)]
    restart = np.r_[np.zeros(len(cj) + len(mj), bool), np.ones(len(sj), bool)]
    cj, ct = np.r_[cj, mj, sj], np.r_[ct, mt, st]

    # why a job has no candidate: an allowed type has capacity only on drain/down nodes (a
    # down node comes back: the job is not impossible, it waits for it)
    present_sizes = _up_by_size(snap, np.ones_like(snap.node_present))
    max_present = np.array([s[-1] if len(s) else 0 for s, _ in present_sizes], dtype=np.int64)
    _, _, _, _, fits_present = _shapes(snap, np.maximum(max_present, max_node), present_sizes)
    any_fit = fits.any(axis=1)
    draining = ~any_fit & fits_present.any(axis=1)
    codes = tuple(
        None
        if any_fit[j]
        else (ReasonCode.NODE_DRAINING if draining[j] else ReasonCode.NO_MATCHING_GPU_TYPE)
        for j in range(J)
    )
    return Requirements(
        type_max_node=max_node,
        type_whole_nodes=whole_nodes,
        shape=shape,
        size=size,
        pieces=pieces,
        rem=rem,
        fits=fits,
        cand_job=cj.astype(np.int64),
        cand_type=ct.astype(np.int64),
        cand_move=move,
        cand_restart=restart,
        run_job=run_job_a,
        run_type=np.asarray(run_type, dtype=np.int64),
        run_fixed=snap.job_protected[run_job_a] if len(run_job_a) else np.zeros(0, bool),
        run_pair_k=np.asarray(pair_k, dtype=np.int64),
        run_pair_node=np.asarray(pair_node, dtype=np.int64),
        run_pair_gpus=np.asarray(pair_gpus, dtype=np.int64),
        displaced=displaced,
        no_fit_code=codes,
    )


def _moves(snap: Snapshot, fits: np.ndarray, rj: np.ndarray, rt: np.ndarray,
           movable: np.ndarray):
    """(jobs, types) of the moves: each running job allocated on its type, past its protection
    and `movable` (J,: resumable, and not leaving a drain node, where it restarts as a queued
    job would), on every other type where it is allowed, fits the up nodes and is allocated.
    (A job that is not resumable ends when it is stopped: it cannot move.)"""
    if not len(rj):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    m = fits[rj] & snap.job_tier1[rj] & _movable(snap, rj, rt, movable)[:, None]
    m[np.arange(len(rj)), rt] = False
    k, t = np.nonzero(m)
    return rj[k].astype(np.int64), t.astype(np.int64)


def _movable(snap: Snapshot, rj: np.ndarray, rt: np.ndarray, movable: np.ndarray) -> np.ndarray:
    """(K,) running jobs that may restart elsewhere: allocated on their type, past their
    protection and `movable` (J,)."""
    return snap.job_tier1[rj, rt] & ~snap.job_protected[rj] & movable[rj]


def spans(start: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The indices start[0] .. start[0]+n[0]-1, start[1] .. start[1]+n[1]-1, ... in one array
    (each row's slice of a sorted array, without a Python loop)."""
    return np.repeat(start - np.cumsum(n) + n, n) + np.arange(int(n.sum()))


def columns_by_job(req: Requirements, x: np.ndarray, ok: np.ndarray):
    """A function of jobs (n,) giving (row r, column) for every x column of jobs[r] among the
    candidates `ok` (C,) bool: the columns grouped by job once, sliced per call (x the
    identity: the candidates themselves)."""
    cj = req.cand_job
    sel = np.flatnonzero(ok)
    order = np.argsort(cj[sel], kind="stable")
    sj, xs = cj[sel][order], x[sel[order]]

    def columns(jobs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        start = np.searchsorted(sj, jobs, "left")
        n = np.searchsorted(sj, jobs, "right") - start
        return np.repeat(np.arange(len(jobs)), n), xs[spans(start, n)]

    return columns


def runs_elsewhere(req: Requirements) -> np.ndarray:
    """(C,) the candidates that restart a running job (a move or a restart): the job runs,
    it is not queued, and it never also stays."""
    return req.cand_move | req.cand_restart


def cand_counted(snap: Snapshot, req: Requirements, pooled: bool = False) -> np.ndarray:
    """(C,) the candidates the share rows count (`pooled`: those of one budget over every
    type), and, without `pooled`, the debug rows: share_tier1 of each candidate's pair, not
    a restart on its own type. A restart is a preemption whose job starts again at once on
    GPUs of its type that nobody else takes: counted, its project would lose nothing by it,
    and the model would restart allocated work to pack unallocated work, which yields to it
    (DESIGN.md rule 4); uncounted, a job restarts only where it would be preempted anyway."""
    if not len(req.cand_job):
        return np.zeros(0, bool)
    return share_tier1(snap, req, pooled)[req.cand_job, req.cand_type] & ~req.cand_restart


def share_tier1(snap: Snapshot, req: Requirements, pooled: bool = False) -> np.ndarray:
    """(J, T) the (job, type) pairs the share and debug rows count as allocated work:
    snap.job_tier1 without the moves. A move counts in no such row: it is a preemption that
    restarts where GPUs are left, so its own project's tiers never pull a job off its type
    (only another's need displaces it). A pair is a move whatever its column (a keep is on its
    job's own type, a move never is), so one mask serves starts and keeps. Once per
    Requirements. `pooled`: the share rows of one budget over every type
    (optalloc.model.pooled), which count a job on whichever type it runs: a move changes
    nothing there, so it counts (its project keeps what it held; not counted, the move looked
    like a lost floor and the keep won where the job should restart elsewhere). A restart on
    its own type is the keep's pair: the rows leave it out by column (cand_counted)."""
    if pooled:
        return snap.job_tier1
    out = req.__dict__.get("_share_tier1")
    if out is None:
        out = snap.job_tier1
        if req.cand_move.any():
            out = out.copy()
            out[req.cand_job[req.cand_move], req.cand_type[req.cand_move]] = False
        req.__dict__["_share_tier1"] = out
    return out


def packed(req: Requirements) -> tuple[np.ndarray, np.ndarray]:
    """(candidate indices counted by size in the packing rows, their packed size): single-node
    jobs at their size, whole-node gangs' remainder node at the remainder."""
    cj, ct = req.cand_job, req.cand_type
    shape = req.shape[cj, ct]
    rem = req.rem[cj, ct]
    small = shape == SMALL
    tail = (shape == WHOLE) & (rem > 0)
    sel = np.flatnonzero(small | tail)
    return sel, np.where(small[sel], req.size[cj[sel], ct[sel]], rem[sel])
