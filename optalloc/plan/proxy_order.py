"""The team's order by proxy, once on the epoch's chosen plan (optalloc.epoch_status.
keep_team_order): a running job stopped for another project's start that would fit on free
GPUs but for starts of teammates it ranks above keeps its GPUs; those teammates' starts are
undone and the other start moves (DESIGN.md section 8, rule 3).

optalloc.plan.team_order gives a running job its GPUs back where only its team's lower-ranked
starts hold them. The model sees GPU counts per type, not nodes, so it can also swap a
running job for them by proxy: R (project A, past its protection) is stopped and B's start
takes its GPUs, while A's queued jobs that R ranks above take free GPUs that B's start could
have had (a helper's case of stop 38: R stopped "for" B's 4-GPU job while A's queued 8-GPU
job of R's priority took a whole node; greedy puts B's job there and keeps R). In the bench's
1,024-GPU instance such swaps came up in every placement (A's target tier counts its queued
jobs' GPUs, 18 of them for R's 16).

It runs once on the plan the epoch chose, not in every candidate's placement: the model has
no row for it (a row per such pair cannot tell a proxy from a start that truly needs R's
GPUs without nodes), so placing every candidate this way left none certified and sent the
bench's 1,024-GPU epoch to the whole MIP (0.12 -> 5.6 s) and the 16,384-GPU one to its time
limit. The plan's gap to the bound is reported as it is after it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.order import project_order, scheme_above
from optalloc.plan.backfill import candidates_by_job
from optalloc.plan.fit import alloc, nodes_for
from optalloc.plan.holdings import Placed
from optalloc.plan.nodepool import NodePool
from optalloc.plan.place import _repair_order, keep_bounds_of
from optalloc.plan.rebuild import pool_after, refill
from optalloc.plan.team_order import forced_jobs
from optalloc.shape import fit_orders, nodes_needed


def keep_over_proxies(em: EpochModel, placed: Placed) -> tuple[int, Placed] | None:
    """(how many, `placed` with every running job kept that was stopped only so that its
    team's lower-ranked starts had room: see the module docstring), or None when none is."""
    snap, req = em.snap, em.req
    if not len(req.run_job) or not placed.placements:
        return None
    rj, rt = req.run_job, req.run_type
    _, ub = keep_bounds_of(em)
    stopped = ~placed.kept & (ub > 0) & snap.job_tier1[rj, rt]
    stopped &= ~np.isin(rj, np.fromiter(placed.placements, np.int64, len(placed.placements)))
    started_job = np.zeros(len(snap.jobs), bool)
    started_job[list(placed.placements)] = True
    forced = forced_jobs(em)
    # another start may move, a due reservation's gang's too: it still starts, elsewhere (a
    # random cluster at stop 41: B's due gang took A's running job's node while A started a
    # job ranked below that one on the free nodes where the gang fitted); so may a running
    # job's move or restart: its new GPUs are this epoch's placement as well (`moves`). Until
    # stop 47 those held the job: a helper's random snapshot, p2's and p1's jobs leaving a down
    # node restarted on R's GPUs beside p3's start, R waited, and its `keep_order` rows held
    # its team's allocated 1-GPU job beside p1's unallocated one
    # (tests/test_epoch_running_before_queued_draw.py). The teammates undone are queued starts
    moves = started_job
    movable = started_job & ~snap.job_running
    pos = project_order(snap)
    # a stopped job with a queued start of its project ranked below it on its type; a due
    # reservation's gang's only where the stopped job ranks above it by the scheme's order
    # (order.scheme_above; a helper's case at stop 41: A's due gang took the free reserved
    # nodes, B's start, ranked first, took A's job ranked above the gang, and would have fitted
    # on the gang's nodes), then the gang waits for the next epoch
    cand_of = {int(req.cand_job[c]): int(c) for c in np.flatnonzero(placed.started)}
    q = np.array([e for e in placed.placements if movable[e]], np.int64)
    if not len(q) or not stopped.any():
        return None
    qt = req.cand_type[[cand_of[int(e)] for e in q]]
    ks = np.flatnonzero(stopped)
    has = ((snap.job_project[q][None, :] == snap.job_project[rj[ks]][:, None])
           & (pos[q][None, :] > pos[rj[ks]][:, None]) & (qt[None, :] == rt[ks][:, None])
           & (~forced[q][None, :] | scheme_above(snap, rj[ks][:, None], q[None, :])))
    if not has.any():
        return None
    pool, (rn, rg, ri) = pool_after(em, placed.kept, placed.placements, freed=False)
    kept, started = placed.kept.copy(), placed.started.copy()
    placements = dict(placed.placements)
    # the GPUs the plan's stopped jobs that may stay leave idle are room for a moved start
    # only where it fits nowhere else, the backfill may give them back (a helper's case: a
    # 1-GPU job stayed preempted "for" a start moved onto its GPU while two GPUs of its node
    # sat idle; greedy keeps it); an unallocated job's before an allocated one's (it yields
    # to allocated work, but not for nothing); a job's that must leave (a drain's) are room
    may = ~kept & (ub > 0)
    idle = may[ri]
    alloc_ = (may & snap.job_tier1[rj, rt])[ri]
    # (k's own GPUs are among them, but _keep_one holds those for k before it fits anything
    # and _fit_around skips GPUs already taken: the same sets for every k, made once; per k
    # they cost the 32,768-GPU epoch's 240 stopped jobs four passes over every running GPU)
    blocked = ((rn[idle], rg[idle]), (rn[alloc_], rg[alloc_]), (rn[:0], rg[:0]))
    pairs, n_kept = [], 0
    for r in np.flatnonzero(has.any(axis=1)).tolist():
        k = int(ks[r])
        mine = {e for e in q[has[r]].tolist() if e in placements}
        undone = _keep_one(em, pool, k, (rn, rg, ri), pos, mine, moves, placements, cand_of,
                           blocked)
        if undone is None:
            continue
        for e in undone:
            started[cand_of.pop(e)] = False
        kept[k] = True
        n_kept += 1
        pairs += [(k, e, 0) for e in undone]
    if not n_kept:
        return None
    J, K = len(snap.jobs), len(rj)
    backfilled = np.zeros(J, bool) if placed.backfilled is None else placed.backfilled.copy()
    backfilled[[int(e) for _, e, _ in pairs]] = False
    restored = np.zeros(K, bool) if placed.restored is None else placed.restored.copy()
    # a teammate undone may be ahead of one that still starts (submit order): it takes that
    # one's place (a helper's search: the undone 4-GPU job waited behind a later 6-GPU one);
    # then what the moved starts left free goes to the backfill, as after any placement (a
    # teammate may start there now: its running job ranked above it stays where it is)
    _repair_order(em, pool, placements, started, cand_of, candidates_by_job(em)[0])
    more = np.zeros(J, bool)
    held = [np.array(pairs, np.int64).reshape(-1, 3)]
    restored = (restored & kept) | refill(em, pool, (rn, rg, ri), kept, started, placements,
                                          cand_of, more, held)
    now = np.zeros(J, bool)
    now[list(placements)] = True
    if placed.held is not None and len(placed.held):
        held.insert(0, placed.held)
    return n_kept, replace(placed, started=started, kept=kept | restored, placements=placements,
                   backfilled=(backfilled | more) & now, restored=restored,
                   free=np.where(pool.accept, pool.free, 0),
                   held=np.unique(np.concatenate(held), axis=0))


def _keep_one(em, pool, k, run_gpus, pos, mine, moves, placements, cand_of,
              blocked) -> list | None:
    """Running job k kept: the starts on its GPUs moved to free GPUs (its teammates' ranked
    below it undone instead), undoing as few more of those teammates' starts on its type as
    that needs, the lowest ranked first (`mine`: those teammates' jobs). The teammates' starts
    undone, or None with the pool and `placements` as they were (a start on its GPUs that may
    not move, or no room). `moves`: (J,) bool, the jobs placed this epoch (queued jobs'
    starts, running jobs' moves and restarts), which may move. `blocked`: GPUs no moved start
    may take, as `_fit_all` reads them."""
    req = em.req
    rn, rg, ri = run_gpus
    j = int(req.run_job[k])
    sel = ri == k
    n, g = rn[sel], rg[sel]
    owners = pool.owner[n, g]
    on = set(np.unique(owners[owners >= 0]).tolist())
    others = sorted(on - mine)
    if not mine or not others or not all(moves[e] for e in others):
        return None  # nothing of its team in the way, or a start there that does not move
    mates = sorted(mine, key=lambda e: (e not in on, -pos[e]))  # on its GPUs first
    saved = {e: placements[e] for e in others}
    undone = [e for e in mates if e in on]
    saved.update({e: placements[e] for e in undone})
    for e, pl in saved.items():
        pool.release_placement(pl, e)
    pool.hold_many(n, g, np.full(len(n), j))
    moved = _fit_all(pool, em, others, cand_of, blocked)
    while moved is None and len(undone) < len(mates):
        e = mates[len(undone)]
        saved[e] = placements[e]
        pool.release_placement(saved[e], e)
        undone.append(e)
        moved = _fit_all(pool, em, others, cand_of, blocked)
    if moved is None:  # everything as it was
        pool.release_gpus(n, g, j)
        for e, pl in saved.items():
            pool.hold_placement(pl, e)
        return None
    placements.update(moved)
    for e in undone:
        del placements[e]
    return undone


def _fit_all(pool: NodePool, em: EpochModel, jobs, cand_of, blocked) -> dict | None:
    """Each of `jobs` (largest first) placed on free GPUs of its candidate's type, not on
    those of `blocked[0]` ((nodes, GPUs): every stopped running job's that may stay, which
    the backfill may give back), else not on those of `blocked[1]` (the allocated ones'),
    else anywhere free (`blocked[2]`, none: a job the plan stopped anyway, its GPUs idle,
    is no reason to stop one more), or None with the pool as it was."""
    for b in blocked:
        out = _fit_around(pool, em, jobs, cand_of, b)
        if out is not None:
            return out
    return None


def _fit_around(pool: NodePool, em: EpochModel, jobs, cand_of, blocked) -> dict | None:
    bn, bg = blocked
    free = ~pool.occ[bn, bg]
    bn, bg = bn[free], bg[free]
    pool.occ[bn, bg] = True  # taken for the fit only (no owner), released below
    np.subtract.at(pool.free, bn, 1)
    try:
        return _fit(pool, em, jobs, cand_of)
    finally:
        pool.occ[bn, bg] = False
        np.add.at(pool.free, bn, 1)


def _fit(pool: NodePool, em: EpochModel, jobs, cand_of) -> dict | None:
    """Each of `jobs` (in the caller's order, sorted by job) placed best fit, in each order of
    optalloc.shape.fit_orders in turn (largest first, then the most distinct nodes first) until
    one fits them all; None with the pool as it was where none does."""
    jobs = list(jobs)
    req = em.req
    ts = [int(req.cand_type[cand_of[e]]) for e in jobs]
    need = nodes_needed(None, req.pieces[jobs, ts], req.rem[jobs, ts])
    for order in fit_orders(em.snap.job_gpus[jobs], need):
        done = {}
        for e in (jobs[i] for i in order):
            nodes = nodes_for(pool, em, cand_of[e], [], {}, evict=False)
            if nodes is None:
                for d, pl in done.items():
                    pool.release_placement(pl, d)
                done = None
                break
            done[e] = alloc(pool, em, e, int(req.cand_type[cand_of[e]]), nodes)
        if done is not None:
            return done
    return None
