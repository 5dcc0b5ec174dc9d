"""The lookahead after placement (optalloc.model.reservations chose the reserved nodes): the
plan's reservations and the ones that ended, their words, the pending reasons they cause, and
the greedy incumbent made to keep them.

* `plan_reservations`: every reservation whose gang waits after the plan (`Reservation`: its
  nodes, expected start, the GPUs of its nodes held idle, the jobs there that end or lose
  protection by then) and every one that ended this epoch (`ReservationEnd`: started, i.e.
  kept, or dropped and why).
* `reservation_reasons`: the reserved gang's pending reason is `Reserved` (its nodes and
  start); a job that would fit the free GPUs were they not reserved, but would hold its GPUs
  past the reservation's start, waits with `HeldForReservation`.
* `keep_reservations`: a plan (the greedy baseline's) without the starts that break a
  reservation, running jobs it preempted for them kept again.
"""

from __future__ import annotations

import time

import numpy as np

from optalloc.hostlist import compress_names
from optalloc.model.build import EpochModel
from optalloc.model.order import project_order
from optalloc.model.requirements import PIECES, SMALL
from optalloc.plan.holder_lines import reserved_by_org, reserved_note
from optalloc.plan.holdings import Placed
from optalloc.plan.rebuild import pool_after, refill
from optalloc.model.reservation_idle import carried
from optalloc.model.reservations import idle_so_far
from optalloc.types import (
    PendingReason,
    ReasonCode,
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


def _names(snap, nodes) -> tuple[str, ...]:
    return tuple(snap.nodes[int(n)].name for n in nodes)


def describe(em: EpochModel, h) -> tuple[str, dict]:
    """(message, details) of reservation `h` (optalloc.model.reservations.Held)."""
    snap = em.snap
    job = snap.jobs[h.job]
    names = _names(snap, h.nodes)
    prot = [(j, e) for j, e, p in h.blockers if p and snap.now < e <= h.start]
    loose = [j for j, e, p in h.blockers if not p or e <= snap.now]
    # protected past the start: they share a node the gang needs only part of (a remainder or
    # per-node pieces), and stay
    stay = [j for j, e, p in h.blockers if p and e > max(h.start, snap.now)]
    head = (f"reserved nodes {compress_names(names)} for job {job.id} ({job.gpus} "
            f"{snap.type_names[h.type]} GPUs of project {job.project}), expected start "
            f"{when(h.start, snap.now)}")
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
        msg, details = describe(em, h)
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
        active.append(Reservation(job.id, snap.type_names[h.type], names, h.start,
                                  job.project, int(job.gpus), h.since, idle, msg,
                                  frozen_map(details), at=snap.now, idle_gpu_h=h.idle_gpu_h))
    return tuple(active), tuple(ended), carried(snap, charges)


def _project(snap, job_id: str) -> str:
    j = snap.job_index.get(job_id)
    return "" if j is None else snap.jobs[j].project


def _idle_record(job_id, project, gpu_type, since, now, gpu_h) -> ReservationIdle:
    start = now if since is None else float(since)
    return ReservationIdle(job_id, project, gpu_type, min(start, now), now, float(gpu_h))


def _fits(req, j: int, t: int, free: np.ndarray, ok: np.ndarray, snap) -> bool:
    """Would job j's shape on t fit the free GPUs of the nodes `ok`?"""
    sel = ok & snap.node_up & (snap.node_type == t)
    f = free[sel]
    shape, size, pieces, rem = (int(req.shape[j, t]), int(req.size[j, t]),
                                int(req.pieces[j, t]), int(req.rem[j, t]))
    if shape == SMALL:
        return bool((f >= size).any())
    if shape == PIECES:
        return int((f >= size).sum()) >= pieces
    whole = (f == snap.node_gpus[sel]) & (snap.node_gpus[sel] == size)
    if int(whole.sum()) < pieces:
        return False
    return not rem or int(((f >= rem) & ~whole).sum()) + int(whole.sum()) - pieces >= 1


def _unallocated_gpus(em: EpochModel, placed: Placed) -> np.ndarray:
    """(N,) GPUs per node that unallocated work runs on after the plan (new starts and kept
    running jobs), 0 on nodes that are not up."""
    snap, req = em.snap, em.req
    out = np.zeros(len(snap.nodes), np.int64)
    tidx = {n: i for i, n in enumerate(snap.type_names)}
    pls = [p for j, p in placed.placements.items() if not snap.job_tier1[j, tidx[p.gpu_type]]]
    pls += [snap.jobs[j].placement for j, t in zip(req.run_job[placed.kept],
                                                   req.run_type[placed.kept])
            if not snap.job_tier1[j, t]]
    for pl in pls:
        for a in pl.nodes:
            out[snap.node_index[a.node]] += len(a.gpus)
    return np.where(snap.node_up, out, 0)


def _backfill(em: EpochModel, placed: Placed) -> tuple[np.ndarray, np.ndarray]:
    """(jobs (B,), their GPUs per node (B, N)): the allocated jobs the plan starts on
    reserved nodes this epoch (their GPUs there), the reserved gangs' own starts aside. They
    end by the reservation's start (a start that would not is never placed there)."""
    snap, res = em.snap, em.res
    gangs = {h.job for h in res.held}
    tidx = {n: i for i, n in enumerate(snap.type_names)}
    jobs, rows = [], []
    for j, pl in placed.placements.items():
        if snap.job_running[j] or j in gangs or not snap.job_tier1[j, tidx[pl.gpu_type]]:
            continue
        on = np.zeros(len(snap.nodes), np.int64)
        for a in pl.nodes:
            on[snap.node_index[a.node]] += len(a.gpus)
        on[~np.isfinite(res.deadline)] = 0
        if on.any():
            jobs.append(j)
            rows.append(on)
    return (np.array(jobs, np.int64),
            np.array(rows, np.int64).reshape(len(jobs), len(snap.nodes)))


def reservation_reasons(em: EpochModel, placed: Placed, pending: tuple) -> tuple:
    """The pending reasons, with the reservations' own: `Reserved` for a reserved gang,
    `HeldForReservation` for a job kept off reserved GPUs that are free, run unallocated
    work, or run its teammates ranked below it in its team's order, which backfill them this
    epoch, short enough to end by the start where the job is not. A helper's case at stop
    46: A's priority-1 8-hour job, whose two priority-0 10-minute teammates backfilled the
    one free node, reserved, was told only that A was past its target, which alone would
    not have kept it off an idle node; the team's order lets them go first only there."""
    snap, req, res = em.snap, em.req, em.res
    if not res.held or placed.free is None:
        return pending
    active = {h.job: h for h in res.held if h.job not in placed.placements}
    by_node = {int(n): h for h in res.held if not h.due for n in h.nodes}
    free = placed.free
    # an allocated job would evict unallocated work: the GPUs it runs on count as room for
    # one (the backfill may start unallocated work on reserved nodes until the gang's start:
    # _refill), so such a job is still told the reservation keeps it off them
    free_a = free + _unallocated_gpus(em, placed)
    every = np.ones(len(snap.nodes), bool)
    bj, bon = _backfill(em, placed) if res.blocking else (
        np.zeros(0, np.int64), np.zeros((0, len(snap.nodes)), np.int64))
    pos = project_order(snap)
    reserved = None  # the GPUs of waiting reserved gangs that got_by_org counts, once asked

    def backfilled(j: int) -> np.ndarray:
        """(B,) bool: the backfill starts of job j's teammates ranked below it in its team's
        order, whose GPUs the team's order would give j first were the nodes not reserved.
        Other projects' are not counted: whether j would go before them is the share's call
        (counted, the M bench epoch of seed 3, a 32-node reservation backfilled by 18
        projects' short jobs, told 521 jobs that the reservation held them, most of them
        held by their shares or their teams' order; teammates alone: 79)."""
        return (snap.job_project[bj] == snap.job_project[j]) & (pos[bj] > pos[j])

    # candidates a reservation may keep off free GPUs: their hold passes some deadline; fits
    # computed once per (type, hold bucket, shape, backfill starts counted) (a handful)
    cands: dict[int, list[int]] = {}
    if res.blocking:
        Ds = np.unique(res.deadline[np.isfinite(res.deadline)])
        bucket = np.searchsorted(Ds, res.hold, side="left")
        cj, ct = req.cand_job, req.cand_type
        for c in np.flatnonzero(bucket > 0).tolist():
            cands.setdefault(int(cj[c]), []).append(c)
        cache: dict[tuple, bool] = {}

        def kept_off_by(c: int, mask: np.ndarray) -> bool:
            j, t, b = int(cj[c]), int(ct[c]), int(bucket[c])
            a = bool(snap.job_tier1[j, t])
            key = (t, b, int(req.shape[j, t]), int(req.size[j, t]), int(req.pieces[j, t]),
                   int(req.rem[j, t]), a, mask.tobytes() if a else b"")
            if key not in cache:
                ok = res.deadline > Ds[b - 1]
                f = free_a + bon[mask].sum(axis=0) if a else free
                cache[key] = (_fits(req, j, t, f, every, snap)
                              and not _fits(req, j, t, f, ok, snap))
            return cache[key]
    out = []
    for r in pending:
        j = snap.job_index[r.job_id]
        if r.code is ReasonCode.SOLVER_DEGRADED:
            out.append(r)
            continue
        if j in active:
            msg, details = describe(em, active[j])
            out.append(PendingReason(r.job_id, ReasonCode.RESERVED, msg, frozen_map(
                {**dict(r.details), "reservation": details})))
            continue
        kept_off = None
        mask = backfilled(j) if j in cands else None
        for c in cands.get(j, []):
            if kept_off_by(c, mask):
                kept_off = (c, int(req.cand_type[c]), float(res.hold[c]))
                break
        if kept_off is None:
            out.append(r)
            continue
        c, t, hold = kept_off
        a = bool(snap.job_tier1[j, t])
        mask = mask & a
        back = bon[mask].sum(axis=0)
        f = (free_a if a else free) + back
        nodes = [n for n in np.flatnonzero(~(res.deadline >= hold) & (snap.node_type == t)
                                           & (f > 0)).tolist()]
        gangs = sorted({id(by_node[n]): by_node[n] for n in nodes if n in by_node}.values(),
                       key=lambda h: h.start)
        h = gangs[0] if gangs else None
        who = (f"job {snap.jobs[h.job].id}'s reservation (expected start "
               f"{when(h.start, snap.now)})" if h is not None else "a reservation")
        there = bj[mask & (bon[:, nodes].sum(axis=1) > 0)].tolist()
        if r.code is ReasonCode.OVER_SHARE and reserved is None:
            reserved = reserved_by_org(em, placed)
        msg = (f"{_gpus_there(snap, t, nodes, free, f, back, _ids(snap, there))} are held "
               f"for {who}; this job would hold its GPUs until {when(hold, snap.now)} (its "
               "protection, or its expected end if sooner), past that start"
               + _backfill_text(snap, j, there)
               + (_share_too(em, r, t, reserved) if r.code is ReasonCode.OVER_SHARE else ""))
        out.append(PendingReason(r.job_id, ReasonCode.HELD_FOR_RESERVATION, msg, frozen_map(
            {**dict(r.details), "underlying": r.code.value, "underlying_message": r.message,
             "hold_until": hold,
             "reservations": [snap.jobs[g.job].id for g in gangs],
             **({"backfilled_by": [snap.jobs[e].id for e in there][:10]} if there else {})})))
    return tuple(out)


def _backfill_text(snap, j: int, there: list[int]) -> str:
    """'; <ids> of project <its> rank below it in its team's order but end by that start, so
    they may backfill there and this job may not', or "" for none."""
    if not there:
        return ""
    one = len(there) == 1
    return (f"; {_ids(snap, there)} of project {snap.jobs[j].project} rank{'s' if one else ''} "
            f"below it in its team's order but end{'s' if one else ''} by that start, so "
            f"{'it' if one else 'they'} may backfill there and this job may not")


def _ids(snap, jobs: list[int]) -> str:
    return ", ".join(snap.jobs[e].id for e in jobs[:3]) + ("..." if len(jobs) > 3 else "")


def _share_too(em: EpochModel, r: PendingReason, t: int, reserved: np.ndarray | None) -> str:
    """'; besides, <level> holds ...' for a job whose reason without the reservation is
    OverShare (per-type budgets; pooled, the underlying message in the details says it): the
    level on its path it would take past its target on t, as the OverShare line says it."""
    if em.tg.pooled:
        return ""
    g = float(r.details["gpus"])
    levels = r.details.get("targets", {}).get(em.snap.type_names[t], ())
    lvl = next((v for v in levels if v["got"] + g > v["target"] + 1e-9), None)
    if lvl is None:
        return ""
    note = reserved_note(reserved, em.snap.org.index[lvl["org"]], t)
    return (f"; besides, {lvl['org']} holds {lvl['got']:g} {em.snap.type_names[t]} GPUs"
            + (f" ({note[2:]})" if note else "") + ", its fair-share target this epoch is "
            f"{lvl['target']:g}, and this {g:g}-GPU job would exceed it")


def _gpus_there(snap, t: int, nodes: list[int], free: np.ndarray, f: np.ndarray,
                back: np.ndarray, names: str) -> str:
    """'the N free <type> GPUs on <nodes>', or with what runs there until the reservation's
    start: unallocated work, allocated work that backfills them (`back` per node, `names`)."""
    n, idle, mine = int(f[nodes].sum()), int(free[nodes].sum()), int(back[nodes].sum())
    low = n - idle - mine
    where = compress_names(_names(snap, nodes))
    tn = snap.type_names[t]
    if not mine:
        return (f"the {n} free {tn} GPUs on {where}" if not low else
                f"the {n} {tn} GPUs on {where} that run unallocated work until then"
                if low == n else
                f"the {n} {tn} GPUs on {where}, free or running unallocated work "
                f"until then ({low})")
    parts = ([f"{idle} free"] if idle else []) + (
        [f"{low} running unallocated work"] if low else []) + (
        [f"{mine} running {names} until then"])
    return f"the {n} {tn} GPUs on {where} ({', '.join(parts)})"


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


__all__ = ["keep_reservations", "plan_reservations", "reservation_reasons", "when"]
