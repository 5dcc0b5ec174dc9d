"""Placement: a running job is never stopped for its own team's queued jobs that it ranks
above (DESIGN.md section 8, rule 3: a team's order is declared priority, then jobs already
running, then submit time; the holding rule: only a strictly higher priority of its own
project, or another project, displaces a running job).

The model keeps this for strictly lower priorities with its `keep_order` rows. For the
queued jobs of a running job's own priority it has none: a pairwise row (the start only while
the running job runs) also forbids the start where another project takes the running job's
GPUs and the start would only fill what is left, and as rows those links took the
16,384-GPU bench epoch from 2.9 s to its 13 s limit at a 2.4% gap. The work and target
tiers value GPUs, so a larger queued job of the same priority could take a running job's
place (a helper's search, stop 37: A's running non-resumable priority-2 6-GPU job stopped,
48.5 GPU-hours lost, for A's queued priority-2 8-GPU gang; greedy kept it).

So the placement checks who took the GPUs: a running job the plan stops (past its
protection, allocated where it runs, free to stay, not moved) whose GPUs are held after the
plan only by starts of this epoch of its own project's queued jobs ranked below it (same or
lower priority, not a due reservation's gang) keeps them after all; those starts give them
back and wait (or start elsewhere in the backfill). Where another project, or a higher
priority of its own, takes any of its GPUs, the stop stands and its teammates may fill what
is left (greedy's order: the displacer ranks above it)."""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.plan.nodepool import NodePool


def restore_over_teammates(em: EpochModel, pool: NodePool, run_gpus, kept: np.ndarray,
                           placements: dict, started: np.ndarray, cand_of: dict,
                           restorable: np.ndarray) -> np.ndarray:
    """Running jobs (positions in req.run_job) stopped only for their own team's queued jobs
    ranked below them get their GPUs back (kept[i] set), those starts undone (they wait).
    `run_gpus`: (node, GPU index, position) of every GPU running jobs hold
    (optalloc.plan.place._running_gpus). Returns the (position, job) pairs: each running job
    kept and a job whose start on its GPUs was undone ((0, 2) when none)."""
    snap, req = em.snap, em.req
    rn, rg, ri = run_gpus
    none = np.zeros((0, 2), np.int64)
    if not len(ri) or not placements:
        return none
    rj, rt = req.run_job, req.run_type
    stopped = ~kept & restorable & snap.job_tier1[rj, rt]
    if not stopped.any():
        return none
    moved = np.zeros(len(snap.jobs), bool)
    moved[list(placements)] = True
    stopped &= ~moved[rj]
    on = stopped[ri]
    if not on.any():
        return none
    n, g, i = rn[on], rg[on], ri[on]
    o = pool.owner[n, g]
    held = o >= 0
    oo = np.maximum(o, 0)
    j = rj[i]
    forced = np.zeros(len(snap.jobs), bool)
    if em.res is not None and len(em.res.forced):
        cf = np.flatnonzero(np.asarray(em.res.forced) > 0)
        forced[req.cand_job[cf]] = True
    below = (held & ~snap.job_running[oo] & ~forced[oo]
             & (snap.job_project[oo] == snap.job_project[j])
             & (snap.job_priority[oo] <= snap.job_priority[j]))
    K = len(rj)
    # per stopped job: any GPU of it held, and none held by anyone but a teammate below it
    any_held = np.bincount(i, weights=held, minlength=K) > 0
    other = np.bincount(i, weights=held & ~below, minlength=K) > 0
    back = np.flatnonzero(any_held & ~other)
    if not len(back):
        return none
    take = np.isin(i, back) & held
    pairs = np.unique(np.stack([i[take], o[take]], axis=1), axis=0)
    for e in np.unique(pairs[:, 1]).tolist():
        pool.release(e)
        del placements[e]
        started[cand_of.pop(e)] = False
    for k in back.tolist():
        sel = ri == k
        pool.hold_many(rn[sel], rg[sel], np.full(int(sel.sum()), rj[k]))
        kept[k] = True
    return pairs


def given_back(em: EpochModel, x: np.ndarray | None, kept: np.ndarray,
               started: np.ndarray, restorable: np.ndarray) -> np.ndarray:
    """(P, 2) (running job's position, job) pairs where solution x stops a running allocated
    job that the plan keeps after all and starts a queued job of its project on its type,
    ranked below it in the team's order (its priority or lower), that the plan does not start
    there: the solution counted a start in that job's place that the team's order (or the
    placement's restore) did not make, so its bound may count it too (optalloc.model.
    team_rows: the row for such a pair)."""
    none = np.zeros((0, 2), np.int64)
    if x is None:
        return none
    snap, req = em.snap, em.req
    rj, rt = req.run_job, req.run_type
    xk = np.asarray(x)[em.k]
    back = np.flatnonzero((xk < 0.5) & kept & restorable & ~req.run_fixed
                          & snap.job_tier1[rj, rt])
    if not len(back):
        return none
    xs = np.asarray(x)[em.x]
    cj, ct = req.cand_job, req.cand_type
    c = np.flatnonzero((xs > 0.5) & ~started & ~(req.cand_move | req.cand_restart)
                       & ~snap.job_running[cj])
    if not len(c):
        return none
    proj, prio = snap.job_project, snap.job_priority
    out = []
    for i in back.tolist():
        j = int(rj[i])
        hit = c[(ct[c] == rt[i]) & (proj[cj[c]] == proj[j]) & (prio[cj[c]] <= prio[j])]
        out += [(i, int(e)) for e in cj[hit].tolist()]
    return np.array(out, np.int64).reshape(-1, 2)
