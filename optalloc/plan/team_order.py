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

So the placement checks who took the GPUs: a running job the plan stops or moves to another
type (past its protection, allocated where it runs, free to stay) whose GPUs are held
after the plan only by starts of this epoch of jobs its team ranks below it (queued jobs of
its priority or lower, or running ones' moves; not a due reservation's gang) keeps them
after all; those starts give them back and wait (or start elsewhere in the backfill), and a
moved job's new place is given back too (README rule 8: a job leaves its type only where it
would be displaced anyway; a helper's search of stop 38 found a job moved to an idle a100
node for its own queued teammate). A restart on its own type, beside another job so that its
project's gang takes its node whole, stays the model's packing choice. Where another project, or a higher
priority of its own, takes any of its GPUs, the stop stands and its teammates may fill what
is left (greedy's order: the displacer ranks above it)."""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.order import project_order, scheme_above
from optalloc.plan.nodepool import NodePool


def forced_jobs(em: EpochModel) -> np.ndarray:
    """(J,) bool: the jobs of a due reservation's gang (`em.res.forced`: the lookahead's
    call), whose starts no team-order rule undoes over a teammate the gang ranks above by the
    scheme's order (order.scheme_above); over one ranked above it, they are undone. Made
    once per model (read-only): the placement's passes and every preemption's message ask."""
    forced = em.__dict__.get("_forced_jobs")
    if forced is None:
        forced = np.zeros(len(em.snap.jobs), bool)
        if em.res is not None and len(em.res.forced):
            forced[em.req.cand_job[np.flatnonzero(np.asarray(em.res.forced) > 0)]] = True
        forced.setflags(write=False)
        em.__dict__["_forced_jobs"] = forced
    return forced


def restore_over_teammates(em: EpochModel, pool: NodePool, run_gpus, kept: np.ndarray,
                           placements: dict, started: np.ndarray, cand_of: dict,
                           restorable: np.ndarray) -> np.ndarray:
    """Running jobs (positions in req.run_job) stopped, or moved to another type, only for
    jobs of their own team ranked below them get their GPUs back (kept[i] set): the
    starts of this epoch on them are undone (a queued job waits; a running one's move or
    restart is undone, and it is checked in turn), and so is the moved job's new place.
    Repeated while a pass restores one; then a restart on its own type whose GPUs that frees
    stays (`restarts_stay`). `run_gpus`: (node, GPU index, position) of every GPU running
    jobs hold (optalloc.plan.place._running_gpus). Returns (P, 3) rows (position, job whose
    start on its GPUs was undone, 1 when the running job had been moved else 0)."""
    out = []
    for _ in range(4):
        pairs = _restore_once(em, pool, run_gpus, kept, placements, started, cand_of,
                              restorable)
        if not len(pairs):
            break
        out.append(pairs)
    if out:
        restarts_stay(em, pool, run_gpus, kept, placements, started, cand_of, restorable)
    return np.concatenate(out) if out else np.zeros((0, 3), np.int64)


def restarts_stay(em: EpochModel, pool: NodePool, run_gpus, kept: np.ndarray,
                  placements: dict, started: np.ndarray, cand_of: dict,
                  restorable: np.ndarray) -> None:
    """A running job restarted on its own type (packing: its GPUs go to a start that needs
    them) whose GPUs are all free again, the start that took them undone for its team's
    order, stays where it is instead (kept; the restart undone): a restart no start needs
    loses its work for nothing (fresh draws at stop 44: p0's queued 2-GPU job took two
    running teammates' GPUs, one restarted on the other node; the start was undone for the
    team's order, the other teammate restored, and the restarted one ran elsewhere beside its
    own free GPU, told 'the GPUs where it ran are not free to it')."""
    req, snap = em.req, em.snap
    mine = [(j, c) for j, c in cand_of.items() if req.cand_restart[c]]
    if not mine:
        return
    rn, rg, ri = run_gpus
    pos = np.full(len(snap.jobs), -1, np.int64)
    pos[req.run_job] = np.arange(len(req.run_job))
    for j, c in mine:
        i = int(pos[j])
        if i < 0 or not restorable[i] or snap.job_on_drain[j]:
            continue
        sel = ri == i
        if not pool.accept[rn[sel]].all():
            continue
        owner = pool.owner[rn[sel], rg[sel]]
        if not ((owner == -1) | (owner == j)).all():
            continue
        pool.release_placement(placements.pop(j), j)
        started[cand_of.pop(j)] = False
        pool.hold_many(rn[sel], rg[sel], np.full(int(sel.sum()), j))
        kept[i] = True


def _restore_once(em, pool, run_gpus, kept, placements, started, cand_of, restorable):
    snap, req = em.snap, em.req
    rn, rg, ri = run_gpus
    none = np.zeros((0, 3), np.int64)
    if not len(ri) or not placements:
        return none
    rj, rt = req.run_job, req.run_type
    stopped = ~kept & restorable & snap.job_tier1[rj, rt]
    # a restart on its own type (beside another job, so that its project's gang takes its
    # node whole) is packing the model may choose: the job runs on (tests/test_epoch_restarts)
    for k in np.flatnonzero(stopped).tolist():
        c = cand_of.get(int(rj[k]))
        if c is not None and req.cand_restart[c]:
            stopped[k] = False
    on = stopped[ri]
    if not on.any():
        return none
    n, g, i = rn[on], rg[on], ri[on]
    o = pool.owner[n, g]
    j = rj[i]
    started_job = np.zeros(len(snap.jobs), bool)
    started_job[list(placements)] = True
    # a start of this epoch (a queued job's, or a running job's move or restart), not a due
    # reservation's gang (the lookahead's call), of a job its team ranks below the running one
    forced = forced_jobs(em)
    held = (o >= 0) & (o != j)
    oo = np.maximum(o, 0)
    pos = project_order(snap)
    # (a due gang's start stands over a teammate it ranks above by the scheme's order, not
    # over one ranked above it: order.scheme_above)
    below = (held & started_job[oo] & ~(forced[oo] & ~scheme_above(snap, j, oo))
             & (snap.job_project[oo] == snap.job_project[j]) & (pos[oo] > pos[j]))
    K = len(rj)
    # per stopped job: any GPU of it held, and none held by anyone but a teammate below it
    any_held = np.bincount(i, weights=held, minlength=K) > 0
    other = np.bincount(i, weights=(held & ~below) | (o == j), minlength=K) > 0
    back = np.flatnonzero(any_held & ~other)
    if not len(back):
        return none
    take = np.isin(i, back) & held
    pairs = np.unique(np.stack([i[take], o[take]], axis=1), axis=0)
    moved = started_job[rj[back]]
    for e in np.unique(np.r_[pairs[:, 1], rj[back[moved]]]).tolist():
        pool.release(e)
        del placements[e]
        started[cand_of.pop(e)] = False
    for k in back.tolist():
        sel = ri == k
        pool.hold_many(rn[sel], rg[sel], np.full(int(sel.sum()), rj[k]))
        kept[k] = True
    was_moved = np.isin(pairs[:, 0], back[moved]).astype(np.int64)
    return np.column_stack([pairs, was_moved])


def pass_held(held: np.ndarray, given: list[tuple[int, int]]) -> np.ndarray:
    """`held` (P, 3) rows (running position, job, moved) with a row more for each job that
    optalloc.plan.place._repair_order gave back behind a held one (`given`: (predecessor,
    job) pairs, in order; a chain passes on): it waits for the same running job, through
    its team's order (fresh draws at stop 43: B's running 8-GPU job kept over its queued
    8-GPU teammate, which then took its 24-GPU teammate's nodes; the 24-GPU start was given
    back, recorded nowhere)."""
    if not given:
        return held
    rows = held.tolist()
    by_job: dict[int, list] = {}
    for r in rows:
        by_job.setdefault(r[1], []).append(r)
    for a, b in given:
        for i, _, m in list(by_job.get(a, ())):
            row = [i, b, m]
            if row not in by_job.setdefault(b, []):
                by_job[b].append(row)
                rows.append(row)
    return np.array(rows, np.int64).reshape(-1, 3)
