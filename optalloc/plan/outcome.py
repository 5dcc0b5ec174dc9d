"""A solution of the epoch model placed and scored (an `Outcome`), and the better of several
by the scheme's order: what phase 3 of `optalloc.epoch` compares.

A solution is placed once, again longest hold first when a start of it did not place beside
reserved nodes (optalloc.plan.due_gangs), and once more with the keeps of its victims and
their interchangeable twins that yield first (submitted later, or losing less work)
exchanged, and of its victims and teammates of their size ranked below them
(optalloc.plan.victims) when there are such, each exchange made in place first where it is
exact (optalloc.plan.keeps_in_place); the better placed plan by the scheme's order is its
outcome.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.keep_displaced import breaks_only_given_way
from optalloc.model.type_rows import broken_links
from optalloc.plan.due_gangs import hold_ordered
from optalloc.plan.place import place
from optalloc.plan.holdings import Placed, as_solution, got_by_org
from optalloc.plan.score import placed_score
from optalloc.plan.keeps_in_place import exchanged_in_place
from optalloc.plan.victims import (
    exchanged_x,
    moved_pairs,
    moved_x,
    priority_swapped_x,
    priority_swaps,
    ranked_pairs,
    swapped_in_place,
    swapped_pairs,
)


@dataclass
class Outcome:
    """The plan phase 3 settled on, with what is known about its quality."""

    placed: Placed
    objective: float
    source: str  # lp-rounded | greedy | mip | fallback | empty
    backend: str
    status: str
    bound: float | None = None
    solve_s: float = 0.0
    place_s: float = 0.0
    message: str = ""
    model_point: bool = True  # the placed plan satisfies every row of the model
    # ... or every row but `keep_order` rows of running jobs that gave way on their type to
    # work ranked above them (optalloc.model.keep_displaced): the scheme's order, which the
    # model keeps stricter; such a plan may be chosen, but the model's bound does not count it
    eligible: bool = True
    model_value: float | None = None  # em.lm's objective at the placed plan, when a model point
    tiers: tuple = ()  # (floors, targets, work): the objective by the scheme's order
    score: tuple = ()  # optalloc.plan.score: the scheme's order, compared lexicographically


def placed_outcome(em: EpochModel, x, source: str, **kw) -> Outcome:
    """Solution x placed and scored (x None: keep what may stay, start nothing), placed again
    longest hold first when a start of it did not place beside reserved nodes; then, when it
    preempts allocated work whose interchangeable twin that yields first (submitted later, or
    submitted with it and losing less) stays, also x with
    those keeps exchanged, and the better of the two by the scheme's order; then likewise x
    with running jobs exchanged for waiting higher-priority jobs of their own projects that
    fit in their place (optalloc.plan.victims.priority_swaps); last, x with preempted
    allocated jobs kept in place of teammates of their size and type ranked below them
    (optalloc.plan.victims.ranked_keeps)."""
    t = time.perf_counter()
    placed = place(em, x, backfill=x is not None)
    place_s = time.perf_counter() - t
    out = scored(em, placed, source, place_s=place_s, **kw)
    by_hold = hold_ordered(em, x, placed)
    if by_hold:  # a start did not place beside reserved nodes: again, longest hold first
        t = time.perf_counter()
        placed_h = place(em, x, by_hold=True)
        place_s += time.perf_counter() - t
        alt = scored(em, placed_h, source, place_s=place_s, **kw)
        out.place_s = place_s
        if (best_plan([out, alt]) is alt
                and (alt.score, alt.objective) > (out.score, out.objective)):
            alt.message = _also(alt.message, "placed longest hold first")
            out, placed = alt, placed_h
        else:
            by_hold = False
    elif x is not None and _unplaced(em, x, placed):
        # best fit decreasing missed a packing the model found (single-node jobs 4, 3, 3,
        # 2, 2, 2 on two empty 8-GPU nodes: best fit leaves a GPU on each and the last 2-GPU
        # job waits; the model packs 4+2+2 and 3+3+2): again, the model's slots first
        t = time.perf_counter()
        placed_s = place(em, x, slots_first=True)
        place_s += time.perf_counter() - t
        alt = scored(em, placed_s, source, place_s=place_s, **kw)
        out.place_s = place_s
        # and only where it keeps in place every running job the first placement kept: the
        # model's slots may restart two running jobs past their protection to start their
        # teammate, which the team's order ranks below them (tests/test_epoch_restart_stays)
        if (best_plan([out, alt]) is alt and not (out.placed.kept & ~alt.placed.kept).any()
                and (alt.score, alt.objective) > (out.score, out.objective)):
            alt.message = _also(alt.message, "placed in the model's packing")
            out, placed = alt, placed_s
    if x is None:
        return out
    pairs = swapped_pairs(em, x, out.placed.kept)
    if pairs:
        out, x, place_s = _exchanged(em, out, x, pairs, source, by_hold, place_s,
                                     "victims that yield first (submitted later, or losing "
                                     "less work)", kw)
    pairs = moved_pairs(em, x, out.placed.kept)
    if pairs:  # a twin that moves yields first too: the stopped job moves in its place
        out, x, place_s = _better(em, out, x, moved_x(em, x, pairs), None, source, by_hold,
                                  place_s, "moved twins that yield first", kw)
    pairs = priority_swaps(em, out.placed)
    if pairs:  # exchanged in place: the rest of the plan stands
        out, x, place_s = _better(em, out, x, priority_swapped_x(em, x, pairs),
                                  swapped_in_place(em, out.placed, pairs), source, by_hold,
                                  place_s, "a higher priority of a project in place of its "
                                  "running job", kw)
    # last: it only ever betters the plan the steps above made (tried first, on a random
    # snapshot, it left the priority swaps less to do, 2 points of the teams' order lost)
    pairs = ranked_pairs(em, x, out.placed.kept)
    if pairs:
        out, x, place_s = _exchanged(em, out, x, pairs, source, by_hold, place_s,
                                     "victims ranked below in their team's order", kw)
    return out


def _exchanged(em, out, x, pairs, source, by_hold, place_s, note, kw):
    """_better with x's keeps exchanged by `pairs` (optalloc.plan.victims): first the exact
    pairs in place (optalloc.plan.keeps_in_place), then, where a pair is not exact or the
    exchange in place does not win, x with every pair exchanged placed again."""
    placed2, left = exchanged_in_place(em, out.placed, pairs)
    x0 = x
    if placed2 is not None:
        before = out
        done = [p for p in pairs if p not in left]
        out, x, place_s = _better(em, out, x, exchanged_x(em, x, done), placed2, source,
                                  by_hold, place_s, note, kw)
        if out is not before and not left and not _unlocks(em, out.placed, done):
            return out, x, place_s
    return _better(em, out, x, exchanged_x(em, x0, pairs), None, source, by_hold, place_s,
                   note, kw)


def _unlocks(em: EpochModel, placed: Placed, pairs) -> bool:
    """Whether a waiting candidate may start only beside a running job that `pairs` keeps
    (a `keep_order` row of one of them: the placement held it back while that job stopped)
    and its type has room for it after the plan: free GPUs, or GPUs unallocated work holds
    (an allocated start may evict it)."""
    if not len(em.keep_i):
        return False
    now = np.isin(em.keep_i, [i for i, _ in pairs]) & ~placed.started[em.keep_c]
    if not now.any():
        return False
    snap, req = em.snap, em.req
    T = len(snap.gpu_types)
    room = np.zeros(T)
    if placed.free is not None:
        room += np.bincount(snap.node_type, weights=placed.free, minlength=T)
    rj, rt = req.run_job[placed.kept], req.run_type[placed.kept]
    low = ~snap.job_tier1[rj, rt]
    room += np.bincount(rt[low], weights=snap.job_gpus[rj[low]], minlength=T)
    c = np.flatnonzero(placed.started)
    cj, ct = req.cand_job[c], req.cand_type[c]
    low = ~snap.job_tier1[cj, ct]
    room += np.bincount(ct[low], weights=snap.job_gpus[cj[low]], minlength=T)
    c = em.keep_c[now]
    return bool((snap.job_gpus[req.cand_job[c]] <= room[req.cand_type[c]]).any())


def _unplaced(em: EpochModel, x, placed: Placed) -> bool:
    """Whether a start of solution x did not place though its type has as many GPUs free
    after the plan (another packing may hold it; where none are free, as after a rounded LP
    point that asks more than there is, placing again cannot start it)."""
    want = np.asarray(x)[em.x] > 1.0 - 1e-6
    c = np.flatnonzero(want & ~placed.started)
    if not len(c):
        return False
    if placed.free is None:  # no free map to judge by: try again
        return True
    snap, req = em.snap, em.req
    free = np.bincount(snap.node_type, weights=np.where(snap.node_up, placed.free, 0),
                       minlength=len(snap.gpu_types))
    return bool((snap.job_gpus[req.cand_job[c]] <= free[req.cand_type[c]]).any())


def _better(em, out, x, x2, placed2, source, by_hold, place_s, note, kw):
    """(outcome, solution, placement seconds): x2 placed (or `placed2`, the same plan placed
    already) and scored beside `out`, the better by the scheme's order."""
    t = time.perf_counter()
    if placed2 is None:
        placed2 = place(em, x2, by_hold=by_hold)
    out.place_s = place_s = place_s + time.perf_counter() - t
    alt = scored(em, placed2, source, place_s=place_s, **kw)
    if best_plan([out, alt]) is alt and alt.score > out.score:
        alt.message = _also(alt.message, note)
        return alt, x2, place_s
    return out, x, place_s


def placed_already(em: EpochModel, x, plans: list[Outcome]) -> Outcome | None:
    """The plan among `plans` that already places the integer solution x: the same starts and
    keeps, every row of the model kept, and no keeps of twins to exchange
    (optalloc.plan.victims). The scheme's order and the objective read only a plan's starts and
    keeps, so placing x again gives that plan's score. Measured on 3 days of ITP cluster04: 155
    of the 211 MIP solutions were a plan already placed (the LP's rounding or the greedy plan),
    placed again to the same score and objective in every one of them. None when x is
    fractional or no such plan is there."""
    x = np.asarray(x, dtype=float)
    xs, xk = x[em.x], x[em.k]
    if (np.abs(xs - np.rint(xs)) > 1e-6).any() or (np.abs(xk - np.rint(xk)) > 1e-6).any():
        return None
    started, kept = xs > 0.5, xk > 0.5
    for o in plans:
        if (o.model_point and np.array_equal(o.placed.started, started)
                and np.array_equal(o.placed.kept, kept)):
            return (o if not swapped_pairs(em, x, kept)
                    and not ranked_pairs(em, x, kept)
                    and not priority_swaps(em, o.placed) else None)
    return None


def scored(em: EpochModel, placed: Placed, source: str, **kw) -> Outcome:
    tiers = em.plan_tiers(placed.started, placed.kept, got_by_org(em, placed))
    point, value, eligible = True, None, True
    if em.lm.n_vars:
        sol = as_solution(em, placed)
        # every `order_types` link, whether its row is in the model yet or not
        # (optalloc.model.type_rows): a plan that breaks one is no answer
        typed = breaks_type_order(em, placed)
        point = em.lm.violation(sol) <= 1e-6 and not typed
        value = em.lm.objective(sol) if point else None
        eligible = point
        if not point and not typed:  # only keep_order rows broken, where their jobs gave way?
            eligible = breaks_only_given_way(em, sol, placed.started, placed.kept,
                                             placements=placed.placements)
    return Outcome(placed, sum(tiers), source, model_point=point, model_value=value, tiers=tiers,
                   score=placed_score(em, placed), eligible=eligible, **kw)


def breaks_type_order(em: EpochModel, placed: Placed) -> bool:
    """The plan starts a job on a type that a job of its project ahead of it may use, fits
    its place there and waits (optalloc.model.type_order)."""
    if not len(em.ordx_a):
        return False
    req = em.req
    started_job = np.zeros(len(em.snap.jobs), bool)
    started_job[req.cand_job[placed.started]] = True
    return bool(broken_links(em.ordx, placed.started, started_job).any())


def best_plan(plans: list[Outcome]) -> Outcome:
    """The best plan by the scheme's order (optalloc.plan.score: floors met, targets met, the
    teams' own order, allocated GPUs, fill shares met, GPUs busy, less work lost), compared
    lexicographically, then by the objective: no finite weights make the objective
    lexicographic (a 1-GPU floor job can block a 512-GPU gang), so among the candidates the
    scheme's order decides. Only
    plans that keep every rule of the model (the contract, the teams' own order, no
    self-displacement) are eligible while one exists: the greedy baseline's plan breaks the teams' own order now and
    then, and such a plan is not an answer, however well it scores. Nor is a `keep_order` row
    of the model a rule where its running job gave way on its type to work ranked above it
    (Outcome.eligible: the team's lower-priority job may fill what is left, as greedy does)."""
    ok = [o for o in plans if o.model_point or o.eligible] or plans
    return max(ok, key=lambda o: (o.score, o.objective))


def _also(message: str, more: str) -> str:
    return (message + "; " if message else "") + more
