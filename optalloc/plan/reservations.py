"""The lookahead after placement (optalloc.model.reservations chose the reserved nodes): the
plan's reservations and the ones that ended, their words, and the greedy incumbent made to
keep them (the pending reasons they cause: optalloc.plan.held_reasons).

* `plan_reservations`: every reservation whose gang waits after the plan (`Reservation`: its
  nodes, expected start, the GPUs of its nodes held idle, the jobs there that end or lose
  protection by then) and every one that ended this epoch (`ReservationEnd`: started, i.e.
  kept, or dropped and why).
* `keep_reservations`: a plan (the greedy baseline's) without the starts that break a
  reservation, running jobs it preempted for them kept again.
"""

from __future__ import annotations

import time

import numpy as np

from optalloc.hostlist import compress_names
from optalloc.model.build import EpochModel
from optalloc.plan.holdings import Placed
from optalloc.plan.rebuild import pool_after, refill
from optalloc.model.reservation_idle import carried
from optalloc.model.free_times import expected_start, own_ends, start_end
from optalloc.model.reservations import idle_so_far
from optalloc.types import (
    Reservation,
    ReservationEnd,
    ReservationIdle,
    frozen_map,
)
from optalloc.units import format_duration


def when(t: float, now: float) -> str:
    """A time as people read it: clock time (UTC) for UNIX times, t=seconds in a simulation,
    with how far ahead it is."""
    at = (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t)) if t > 1e9
          else f"t={t:.0f}")
    return at if t <= now else f"{at} (in {format_duration(t - now)})"


def past(gangs, hold: float, now: float) -> str:
    """What a start kept off the nodes reserved for `gangs` (Held, or None for a reservation
    not named) would hold its GPUs past: 'that start' ('those starts'); or, where its hold
    comes no later than the expected start but after the nodes are clear (a protection
    ending inside the notice the jobs there get then, which would put the gang's due epoch
    off), that time."""
    late = [h for h in gangs if h is not None and h.clear < hold <= h.start]
    if late:
        return (f"the time {'that' if len(gangs) == 1 else 'a'} gang's nodes are clear "
                f"of protected work, {when(min(h.clear for h in late), now)} (the jobs still "
                "there get notice then)")
    return "that start" if len(gangs) <= 1 else "those starts"


def _names(snap, nodes) -> tuple[str, ...]:
    return tuple(snap.nodes[int(n)].name for n in nodes)


def backfilled(em: EpochModel, placed: Placed, h) -> tuple:
    """(node, own end, gpus, job) of this plan's starts on reserved nodes `h.nodes` (the gang's
    own aside): short work the lookahead let in, which ends by the nodes' clear time or else
    is still there, past its protection, when the gang is due, and gets notice then."""
    snap = em.snap
    on = {int(n) for n in h.nodes}
    rows = []
    for j, pl in placed.placements.items():
        if j == h.job:
            continue
        for a in pl.nodes:
            n = snap.node_index.get(a.node)
            if n is not None and n in on:
                rows.append((n, j, len(a.gpus), snap.type_names.index(pl.gpu_type)))
    if not rows:
        z = np.zeros(0, np.int64)
        return z, np.zeros(0), z, z
    n, j, g, t = (np.array(c) for c in zip(*rows))
    return n, start_end(snap, j, t), g, j


def start_after(em: EpochModel, placed: Placed, h) -> float:
    """Reservation h's expected start after the plan: its own (the jobs running on its nodes
    at the snapshot) unless the plan backfills work there that is still running when the
    nodes are clear; that gets notice then and keeps its GPUs through the grace (a helper's
    case at stop 58: the plan announced the clear time, the next epoch a grace later)."""
    memo = placed.__dict__.setdefault("_starts", {})  # once per plan and reservation
    if h.job not in memo:
        more = backfilled(em, placed, h) if not h.due and h.sizes is not None else None
        memo[h.job] = float(h.start) if more is None or not len(more[0]) else max(
            float(h.start), expected_start(em.snap, own_ends(em.snap, em.req, more), h.nodes,
                                           h.sizes, h.clear))
    return memo[h.job]


def describe(em: EpochModel, h, placed: Placed) -> tuple[str, dict]:
    """(message, details) of reservation `h` (optalloc.model.reservations.Held) after the
    plan `placed`: the expected start is start_after's (the jobs it counts are those running
    there at the snapshot: what the plan backfills there ends or loses protection by then)."""
    snap = em.snap
    job = snap.jobs[h.job]
    names = _names(snap, h.nodes)
    prot = [(j, e) for j, e, p in h.blockers if p and snap.now < e <= h.clear]
    loose = [j for j, e, p in h.blockers if not p or e <= snap.now]
    start = start_after(em, placed, h)
    # protected past the time its nodes are clear: they share a node the gang needs only part
    # of (a remainder or per-node pieces), and stay
    stay = [j for j, e, p in h.blockers if p and e > max(h.clear, snap.now)]
    head = (f"reserved nodes {compress_names(names)} for job {job.id} ({job.gpus} "
            f"{snap.type_names[h.type]} GPUs of project {job.project}), expected start "
            f"{when(start, snap.now)}")
    if h.due:  # told only while its gang waits: once it starts, the reservation has ended
        head += ("; nothing protected is left there; it could not be placed this epoch and "
                 "waits for the next")
    elif prot:
        head += (f"; {len(prot)} job{'s there end or lose' if len(prot) != 1 else ' there ends or loses'}"
                 " protection by then")
        if loose:
            head += f", {len(loose)} more are preemptible now"
    if stay and not h.due:
        what = "protected" if all(snap.job_protected[j] for j in stay) else "holding"
        head += (f"; {len(stay)} {what} job{'s stay' if len(stay) != 1 else ' stays'} beside "
                 "it on a node it needs only part of")
    details = {
        "project": job.project,
        "gpus": int(job.gpus),
        "since": h.since,
        "due": bool(h.due),
        "rank_test": h.test,
        "idle_gpu_h": round(float(h.idle_gpu_h), 3),
        "node_free_at": {n: float(f) for n, f in zip(names, h.free)},
        # nothing protected is left on its nodes: due then (their deadline); the expected
        # start adds the notice of the jobs still there
        "clear_at": float(h.clear),
        # holds: it keeps its GPUs until `until` (protected, or a teammate ranked above the
        # gang: optalloc.model.free_times.team_holds); else it is preemptible now
        "blockers": [{"job": snap.jobs[j].id, "until": float(e), "holds": bool(p),
                      "protected": bool(p and snap.job_protected[j])}
                     for j, e, p in h.blockers][:50],
    }
    return head, details


def plan_reservations(em: EpochModel, placed: Placed):
    """(reservations after the plan, reservations that ended this epoch, the idle GPU-hours
    of ended reservations the next epochs charge: optalloc.model.reservation_idle)."""
    snap, res = em.snap, em.res
    ended = [ReservationEnd(e.prev.job_id, e.prev.gpu_type, tuple(e.prev.nodes),
                            float(e.prev.expected_start), e.outcome, e.message, e.prev.since)
             for e in res.ended]
    charges = [_idle_record(e.prev.job_id, e.prev.project or _project(snap, e.prev.job_id),
                         e.prev.gpu_type, e.prev.since, snap.now, idle_so_far(e.prev, snap.now))
            for e in res.ended]
    active = []
    for h in res.held:
        job = snap.jobs[h.job]
        names = _names(snap, h.nodes)
        msg, details = describe(em, h, placed)
        if h.job in placed.placements:
            pl = placed.placements[h.job]
            on = set(pl.node_names) == set(names)
            ended.append(ReservationEnd(
                job.id, snap.type_names[h.type], names, h.start, "started",
                f"{job.id} starts {'on its reserved nodes' if on else 'on ' + compress_names(pl.node_names)}"
                f" (held since {when(h.since, snap.now)})", h.since))
            charges.append(_idle_record(job.id, job.project, snap.type_names[h.type], h.since,
                                     snap.now, h.idle_gpu_h))
            continue
        idle = int(placed.free[h.nodes].sum()) if placed.free is not None else 0
        active.append(Reservation(job.id, snap.type_names[h.type], names,
                                  start_after(em, placed, h),
                                  job.project, int(job.gpus), h.since, idle, msg,
                                  frozen_map(details), at=snap.now, idle_gpu_h=h.idle_gpu_h))
    return tuple(active), tuple(ended), carried(snap, charges)


def _project(snap, job_id: str) -> str:
    j = snap.job_index.get(job_id)
    return "" if j is None else snap.jobs[j].project


def _idle_record(job_id, project, gpu_type, since, now, gpu_h) -> ReservationIdle:
    start = now if since is None else float(since)
    return ReservationIdle(job_id, project, gpu_type, min(start, now), now, float(gpu_h))


def keep_reservations(em: EpochModel, placed: Placed) -> Placed | None:
    """`placed` without its starts that break a reservation (a job holding its GPUs past the
    start of a gang whose node it takes), the running jobs it preempted whose GPUs are then
    unused kept again; None when it breaks none."""
    snap, req, res = em.snap, em.req, em.res
    if not res.blocking:
        return None
    cand = {(int(j), int(t)): c for c, (j, t) in enumerate(zip(req.cand_job, req.cand_type))}
    tidx = {n: i for i, n in enumerate(snap.type_names)}
    bad = []
    for j, pl in placed.placements.items():
        c = cand.get((j, tidx[pl.gpu_type]))
        nodes = [snap.node_index[a.node] for a in pl.nodes]
        if c is not None and (res.deadline[nodes] < res.hold[c]).any():
            bad.append(j)
    if not bad:
        return None
    placements = {j: p for j, p in placed.placements.items() if j not in bad}
    started = placed.started.copy()
    for j in bad:
        started[cand[(j, tidx[placed.placements[j].gpu_type])]] = False
    used = {k for p in placements.values() for k in p.gpu_keys}
    kept = placed.kept.copy()
    ub = em.lm.ub[em.k] if len(em.k) else np.zeros(0)
    for i in np.flatnonzero(kept):
        pl = snap.jobs[int(req.run_job[i])].placement
        used |= set(pl.gpu_keys)
    for i in np.flatnonzero(~kept & (ub > 0)):
        pl = snap.jobs[int(req.run_job[i])].placement
        mine = set(pl.gpu_keys)
        if not mine & used:
            kept[i] = True
            used |= mine
    return _refill(em, started, kept, placements)


def _refill(em: EpochModel, started: np.ndarray, kept: np.ndarray, placements: dict) -> Placed:
    """The plan with its reservation-breaking starts undone, and the GPUs they held offered
    to the backfill, which starts there only work that ends or may be preempted before the
    gang's start (NodePool's deadlines): before, they stayed idle beside an unallocated job
    that could use them until then (a helper's sweep at stop 44: a 1-GPU unallocated job
    waited beside a GPU held for a gang that started in 5 minutes, told the largest free
    node had 1 GPU)."""
    pool, gpus = pool_after(em, kept, placements, freed=True)
    cand_of = {int(em.req.cand_job[c]): int(c) for c in np.flatnonzero(started)}
    backfilled = np.zeros(len(em.snap.jobs), bool)
    held: list = []
    restored = refill(em, pool, gpus, kept, started, placements, cand_of, backfilled, held)
    return Placed(started, kept | restored, placements, backfilled, restored,
                  np.where(pool.accept, pool.free, 0), np.unique(np.concatenate(held), axis=0))


__all__ = ["describe", "keep_reservations", "past", "plan_reservations", "when"]
