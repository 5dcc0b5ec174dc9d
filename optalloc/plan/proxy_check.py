"""Whether a placed plan stops a running job by proxy for its own team's lower-ranked starts
(DESIGN.md section 8, rule 3; optalloc.plan.proxy_order is the repair): the rule of
optalloc.sim.invariants.proxy_order_breaks, read on a Placed in the model's coordinates, for
the epoch to judge a candidate plan with (optalloc.epoch_kept).

A running allocated job k past its protection, on up nodes, that the plan stops (not kept,
moved or restarted) breaks it where queued jobs its project ranks below it start on its type
(`mates`), its GPUs went only to other placements of this epoch (`others`: queued jobs'
starts, or running jobs' moves and restarts, since stop 47), and those would all fit, best
fit, largest first or else the most distinct nodes first (optalloc.shape.fit_orders, the
orders the repair tries, since stop 55), on the GPUs left free if k stayed and no mate
started, each only on nodes the placement lets it use: not a node reserved until a gang's
start that it would hold its GPUs past (optalloc.plan.nodepool.NodePool.allowed; before, a
mate's GPU on such a node counted as room for a long start that may not go there: the
bench's 1,024-GPU seed 15 with two reservations, j00009 for j01269).
A due reservation's gang is no such mate of a job it ranks above by the scheme's order.
"""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.order import project_order, scheme_above
from optalloc.plan.backfill import candidates_by_job
from optalloc.plan.holdings import Placed
from optalloc.plan.team_order import forced_jobs
from optalloc.shape import chunks, fit_orders, job_nodes


def proxy_breaks(em: EpochModel, placed: Placed) -> set[int]:
    """The running jobs (job indices) the plan stops by proxy for teammates ranked below."""
    snap, req = em.snap, em.req
    if placed.placements is None or not placed.placements or not len(req.run_job):
        return set()
    rj, rt = req.run_job, req.run_type
    stopped = (~placed.kept & snap.job_tier1[rj, rt] & ~snap.job_protected[rj]
               & ~snap.job_on_drain[rj])
    stopped &= ~np.isin(rj, np.fromiter(placed.placements, np.int64, len(placed.placements)))
    if not stopped.any():
        return set()
    pos = project_order(snap)
    forced = forced_jobs(em)
    tname = {n: i for i, n in enumerate(snap.type_names)}
    new = [(j, p) for j, p in placed.placements.items() if not snap.job_running[j]]
    mates_of: dict = {}  # (project, type) -> the queued jobs starting there
    for j, p in new:
        mates_of.setdefault((int(snap.job_project[j]), tname[p.gpu_type]), []).append(j)
    owner: dict = {}
    for j, p in placed.placements.items():
        for a in p.nodes:
            n = snap.node_index[a.node]
            for g in a.gpus:
                owner[(n, g)] = j
    free0 = np.where(snap.node_up, placed.free if placed.free is not None else 0, 0)
    out: set[int] = set()
    for i in np.flatnonzero(stopped).tolist():
        k, t = int(rj[i]), int(rt[i])
        nodes = [(snap.node_index[a.node], a.gpus) for a in snap.jobs[k].placement.nodes]
        if not all(snap.node_up[n] for n, _ in nodes):
            continue
        cand = mates_of.get((int(snap.job_project[k]), t), [])
        mates = {q for q in cand if pos[q] > pos[k]
                 and not (forced[q] and bool(scheme_above(snap, q, k)))}
        on = {owner[(n, g)] for n, gs in nodes for g in gs if (n, g) in owner}
        others = on - mates
        if not mates or not others:  # others: starts, or running jobs' moves, of this epoch
            continue
        free = free0.copy()
        for q in mates | others:
            for a in placed.placements[q].nodes:
                free[snap.node_index[a.node]] += len(a.gpus)
        for n, gs in nodes:
            free[n] -= len(gs)
        if _all_fit(em, sorted(others), placed, tname, free):
            out.add(k)
    return out


def _all_fit(em: EpochModel, jobs: list, placed: Placed, tname: dict,
             free: np.ndarray) -> bool:
    """Whether `jobs` (sorted by job) all fit on `free`, one by one, best fit, in some order of
    optalloc.shape.fit_orders (the orders the repair, proxy_order._fit, tries)."""
    snap = em.snap
    ts = [tname[placed.placements[o].gpu_type] for o in jobs]
    need = []
    for o, t in zip(jobs, ts):
        on = (snap.node_type == t) & snap.node_up
        size = int(snap.node_gpus[on].max()) if on.any() else 0
        need.append(job_nodes(snap.jobs[o].gpus, snap.jobs[o].gpus_per_node, size))
    for order in fit_orders(snap.job_gpus[jobs], need):
        f = free.copy()
        if all(_fits(snap, jobs[i], ts[i], f, _allowed(em, jobs[i], ts[i])) for i in order):
            return True
    return False


def _allowed(em: EpochModel, j: int, t: int) -> np.ndarray | None:
    """(N,) bool: the nodes job j's start on t may use under the reservations (a reserved
    node's deadline no earlier than its hold, the same for every candidate of j on t), None
    where no node is reserved or j has no candidate on t. Its candidates come from the
    model's once-per-model grouping (backfill.candidates_by_job), not a (job, type) map of
    every candidate built on each call."""
    res = em.res
    if res is None or not res.blocking:
        return None
    c = next((c for c in candidates_by_job(em)[0].get(j, ()) if int(em.req.cand_type[c]) == t),
             None)
    return None if c is None else res.deadline >= res.hold[c]


def _fits(snap, j: int, t: int, free: np.ndarray, ok: np.ndarray | None = None) -> bool:
    """Job j on the free GPUs of t's up nodes (`free` updated where it fits), best fit, as
    optalloc.sim.invariants._fits_free; only on nodes `ok` allows (the shape is still that
    of t's nodes)."""
    on = np.flatnonzero((snap.node_type == t) & snap.node_up)
    if not len(on):
        return False
    job = snap.jobs[j]
    ch = chunks(job.gpus, job.gpus_per_node, int(snap.node_gpus[on].max()))
    if ch is None:
        return False
    if ok is not None:
        on = on[ok[on]]
    # one array pass per chunk, not a Python loop over the type's nodes (the 16,384-GPU bench
    # epoch: 0.037 of this check's 0.089 s a call, 8 calls an epoch); argmin's first minimum
    # is the least-free node of the lowest index, as min((free, node)) chose
    avail = np.ones(len(on), bool)
    for c in ch:
        f = free[on]
        fit = avail & (f >= c)
        if not fit.any():
            return False
        i = int(np.argmin(np.where(fit, f, f.max() + 1)))
        avail[i] = False
        free[on[i]] -= c
    return True
