"""A due reservation's gang in the placement (optalloc.plan.place): where it starts, and when
the placement runs again with the longest holds first."""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.order import scheme_above
from optalloc.plan.fit import alloc, chunks, nodes_for


def hold_ordered(em: EpochModel, x: np.ndarray | None, placed) -> bool:
    """Worth placing `x` again with `by_hold`: nodes are reserved and a start of x did not
    place (`placed`: its optalloc.plan.place.Placed). Nodes reserved until S take only work
    that holds its GPUs until S or sooner, so the sets of nodes the jobs of one shape may use
    are nested, and placing the longest hold first fits every job the model's counts fit
    (each later job may use any node an earlier one took instead). The default order breaks
    that in two ways: a due reservation's gang starts on its own nodes first, and when it ends
    before another reservation starts (its hold is short) the model may have put it on that
    reservation's free nodes and long work on its own (the gang-heavy scenario, seed 4, 7
    days: MIP plans placed 1.4-15% below their optimum, a 32-GPU gang or two 8-GPU jobs left
    waiting); and single-node jobs take free GPUs by best fit before the model's slots, so a
    short job took the free GPU off the reserved nodes that the model left to a long one,
    whose only slot was on a reserved node (ITP cluster02 with the lookahead: 0.55% below
    the MIP). The second pass also puts single-node jobs in the model's slots first
    (`optalloc.plan.fit.slot_or_best_fit`, `slots_first`)."""
    if x is None or em.res is None or not em.res.blocking:
        return False
    want = np.asarray(x)[em.x] > 1.0 - 1e-6
    return bool((want & ~placed.started).any())


def start_due_gangs(em, pool, chosen, kept, run_of_job, placements, started, cand_of,
                    evict_for) -> None:
    """A due reservation's gang (its start is forced: nothing protected is left on its nodes)
    starts on the nodes it reserved, before anything else is placed: every running job still
    there leaves (none is protected; an LP point may keep them fractionally, and rounding
    those keeps up would leave the forced start without room, the plan outside the model).
    Where the solution keeps allocated work on them, it starts on free nodes first, the
    reserved ones before others, when they hold it."""
    res, req, snap = em.res, em.req, em.snap
    if res is None or not len(res.forced) or not res.forced.any():
        return
    k_lb = em.lm.lb[em.k] if len(em.k) else np.zeros(0)
    for h in res.held:
        if not h.due:
            continue
        cs = np.flatnonzero(res.forced & (req.cand_job == h.job) & (req.cand_type == h.type))
        if not len(cs) or not chosen[cs[0]] or h.job in placements:
            continue
        c = int(cs[0])
        nodes = [int(n) for n in h.nodes]
        need = chunks(req, h.job, h.type)
        if len(nodes) != len(need):
            continue
        owners = {int(e) for n in nodes for e in pool.owner[n] if e >= 0}
        at = None
        if any(kept[run_of_job[e]] and snap.job_tier1[e, req.run_type[run_of_job[e]]]
               for e in owners if e in run_of_job):
            # the solution keeps allocated work there and the model does not tie a due gang to
            # its reserved nodes: where free nodes allow (unallocated work yielding, as to any
            # allocated start), it starts on the reserved nodes that are free and others, and
            # nobody is preempted for it (the lookahead's gang-heavy runs: the MIP's optimum
            # kept two jobs there, the placement evicted them and the plan fell 26% below a
            # bound it had reached); never on the GPUs the solution frees by stopping a
            # teammate ranked above the gang (the team's order gives them back: it would wait)
            held = _hold_above(em, pool, h.job, kept)
            try:
                at = nodes_for(pool, em, c, nodes, {}, evict=False) or nodes_for(
                    pool, em, c, nodes, {}, evict=bool(snap.job_tier1[h.job, h.type]))
            finally:
                for n, g, e in held:
                    pool.release_gpus(np.full(len(g), n), g, e)
            if at is not None:
                evict_for(h.job, c, at)
        if at is None:
            movable = all(e in run_of_job and not req.run_fixed[run_of_job[e]]
                          and k_lb[run_of_job[e]] < 0.5 for e in owners)
            if not movable:  # something there must stay: the usual placement decides
                continue
            for e in owners:
                pool.release(e)
                kept[run_of_job[e]] = False
            if any(pool.free[n] < g or not pool.accept[n] for n, g in zip(nodes, need)):
                continue
            at = nodes
        placements[h.job] = alloc(pool, em, h.job, h.type, at)
        started[c] = True
        cand_of[h.job] = c


def _hold_above(em: EpochModel, pool, j: int, kept: np.ndarray) -> list:
    """Hold in the pool, while gang j looks for GPUs, the free GPUs of the running jobs of its
    team ranked above it (order.scheme_above) that the solution does not keep; returns the
    [(node, GPU indices, job)] held, for the caller to release. Its reservation avoided them
    (they are never stopped for it: free_times.team_holds), and a start on their GPUs is
    given back for the team's order (optalloc.plan.team_order), the gang then waiting beside
    its own reserved nodes (a helper's random draw at stop 46: the LP's point kept A's later
    job on the gang's node and stopped A's earlier one elsewhere; the gang went there, was
    given back, and no candidate plan started it). Their GPUs only, not their whole nodes:
    kept off a whole node where such a teammate held one GPU, a 1-GPU-per-node gang of the
    bench's M seed 29 (two reservations) started across four nodes outside its reservation
    and other projects lost floor GPUs (a review at stop 46)."""
    snap, req = em.snap, em.req
    rj = req.run_job
    out: list = []
    if not len(rj):
        return out
    above = ~kept & (snap.job_project[rj] == snap.job_project[j]) & scheme_above(snap, rj, j)
    G = pool.occ.shape[1]
    for e in rj[above].tolist():
        for a in snap.jobs[e].placement.nodes:
            n = snap.node_index[a.node]
            g = np.asarray([x for x in a.gpus if x < G and not pool.occ[n, x]], np.int64)
            if len(g):
                pool.hold(n, g, e)
                out.append((n, g, e))
    return out


__all__ = ["hold_ordered", "start_due_gangs"]
