"""The pending reasons reservations cause (optalloc.plan.reservations describes the reservations
themselves): `Reserved` for a waiting reserved gang (its nodes and start), and
`HeldForReservation` for a job that would fit GPUs of reserved nodes, were they not reserved,
but would hold its GPUs past the start of the gang they are reserved for.

Such GPUs are free, run unallocated work (an allocated job would evict it), or run the plan's
backfill: allocated starts short enough to end by the gang's start, which the reservation lets
there where it keeps longer work off. The backfill counted is that of the job's teammates
ranked below it in its team's order (the team's order gives the job their places first
elsewhere), and, for a job that waits for capacity (its project has room in its target, or is
below its floor: not its share nor its team's order holds it), every other project's too.
"""

from __future__ import annotations

import numpy as np

from optalloc.hostlist import compress_names
from optalloc.model.build import EpochModel
from optalloc.model.order import project_order
from optalloc.model.requirements import PIECES, SHAPE_NAMES, SMALL
from optalloc.plan.holder_lines import reserved_by_org, reserved_note
from optalloc.plan.holdings import Placed
from optalloc.plan.reservations import describe, past, start_after, when
from optalloc.types import PendingReason, ReasonCode, frozen_map


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


def _starts(em: EpochModel, placed: Placed) -> tuple[np.ndarray, np.ndarray]:
    """(jobs (B,), their GPUs per node (B, N)): the allocated queued jobs the plan starts this
    epoch, the reserved gangs' own starts aside. Those on reserved nodes end by the
    reservation's start (a start that would not is never placed there)."""
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
        jobs.append(j)
        rows.append(on)
    return (np.array(jobs, np.int64),
            np.array(rows, np.int64).reshape(len(jobs), len(snap.nodes)))


def reservation_reasons(em: EpochModel, placed: Placed, pending: tuple) -> tuple:
    """The pending reasons, with the reservations' own: `Reserved` for a reserved gang,
    `HeldForReservation` for a job kept off reserved GPUs that are free, run unallocated
    work, or run the starts this module's docstring counts. A helper's case at stop 46:
    A's priority-1 8-hour job, whose two priority-0 10-minute teammates backfilled the one
    free node, reserved, was told only that A was past its target, which alone would not
    have kept it off an idle node; the team's order lets them go first only there. A
    reviewer's, later: with C's 10-minute jobs there instead (A below its floor), it was
    told C held the GPUs "past a target with whole jobs, which cannot shrink to it"; and a
    6-GPU job that fit its 2-GPU teammate's place beside a free reserved node was told it
    fit in no place of its teammates: the reservation, not C's target nor the places, keeps
    them off."""
    snap, req, res = em.snap, em.req, em.res
    if not res.held or placed.free is None:
        return pending
    active = {h.job: h for h in res.held if h.job not in placed.placements}
    free = placed.free
    # an allocated job would evict unallocated work: the GPUs it runs on count as room for
    # one (the backfill may start unallocated work on reserved nodes until the gang's start:
    # reservations._refill), so such a job is still told the reservation keeps it off them
    free_a = free + _unallocated_gpus(em, placed)
    every = np.ones(len(snap.nodes), bool)
    bj, bon = _starts(em, placed) if res.blocking else (
        np.zeros(0, np.int64), np.zeros((0, len(snap.nodes)), np.int64))
    on_res = bon * np.isfinite(res.deadline)  # their GPUs on reserved nodes
    in_res = on_res.any(axis=1)  # (B,) some of theirs on reserved nodes
    off_res = (bon - on_res).any(axis=1)  # (B,) some of theirs elsewhere
    pos = project_order(snap)
    bp, bpos = snap.job_project[bj], pos[bj]
    reserved = None  # the GPUs of waiting reserved gangs that got_by_org counts, once asked
    by_node = {int(n): h for h in res.held if not h.due for n in h.nodes}

    def room(mask: np.ndarray, wide: np.ndarray) -> np.ndarray:
        """(N,) the GPUs of the starts `mask` counted as room, per node."""
        return bon[wide].sum(axis=0) + on_res[mask & ~wide].sum(axis=0)

    # candidates a reservation may keep off free GPUs: their hold passes some deadline; fits
    # computed once per (type, hold bucket, shape, starts counted: a project's teammates
    # below a place in its order are its first k by that order) (a handful)
    cands: dict[int, list[int]] = {}
    cache: dict[tuple, tuple[bool, bool]] = {}  # fits anywhere, fits off reserved nodes
    rooms: dict[tuple, np.ndarray] = {}
    if res.blocking:
        Ds = np.unique(res.deadline[np.isfinite(res.deadline)])
        bucket = np.searchsorted(Ds, res.hold, side="left")
        cj, ct = req.cand_job, req.cand_type
        for c in np.flatnonzero(bucket > 0).tolist():
            cands.setdefault(int(cj[c]), []).append(c)

    teams: dict[int, tuple] = {}

    def team(p: int) -> tuple:
        """(B,) bool: project p's starts; their team positions sorted; per place in that
        order, how many from there on run on reserved nodes, and elsewhere (once per
        project: a job's teammates below it are its project's last starts in its order)."""
        if p not in teams:
            mine = bp == p
            o = np.argsort(bpos[mine], kind="stable")
            tail = np.zeros((len(o) + 1, 2), np.int64)
            tail[:-1] = np.cumsum(np.column_stack([in_res[mine][o], off_res[mine][o]])[::-1],
                                  axis=0)[::-1]
            teams[p] = mine, bpos[mine][o], tail
        return teams[p]

    def kept_off(j: int, r: PendingReason):
        """(candidate, type, hold, starts counted, of them on every node) of the first
        candidate of j that fits the GPUs counted as room on every node but not on those
        whose reservation starts after its hold, or None. Counted: its teammates ranked below
        it on reserved nodes, then (where that finds none) on every node (a 6-GPU job fit its
        teammate's 2-GPU place beside a free reserved node: the reservation kept it off; the
        team's order gives it their places first), and other projects' starts on reserved
        nodes where it waits for capacity on the type (_waits_for_capacity): elsewhere
        whether it would go before them is the share's call (counted for every job, the M
        bench epoch of seed 3, a 32-node reservation backfilled by 18 projects' short jobs,
        told 521 jobs that the reservation held them, most of them held by their shares or
        their teams' order; teammates alone: 79)."""
        p = int(snap.job_project[j])
        mine, order, tail = team(p)
        i = int(np.searchsorted(order, pos[j], side="right"))
        ks = (int(tail[i, 0]), len(order) - i)  # its teammates below it: on reserved nodes, all
        below = None
        inside: set[int] = set()  # candidates that fit outside the reserved nodes: wider
        # room there (the teammates' places) would not keep them off
        for wide in (False, True) if tail[i, 1] else (False,):
            for c in cands[j]:
                if c in inside:
                    continue
                t, b = int(ct[c]), int(bucket[c])
                a = bool(snap.job_tier1[j, t])  # unallocated there: free GPUs only
                others = a and _waits_for_capacity(em, r, t)
                k = ks[wide]
                key = None if not a else (p, k, others, wide) if k or others else ()
                ck = (t, b, int(req.shape[j, t]), int(req.size[j, t]), int(req.pieces[j, t]),
                      int(req.rem[j, t]), key)
                if below is None and (ck not in cache or cache[ck][0]):
                    below = mine & (bpos > pos[j])
                if ck not in cache:
                    if key not in rooms:
                        rooms[key] = (free if key is None else free_a if not key else
                                      free_a + room(below | (~mine & others), below & wide))
                    f = rooms[key]
                    fit = _fits(req, j, t, f, every, snap)
                    cache[ck] = (fit, fit and _fits(req, j, t, f, res.deadline > Ds[b - 1],
                                                    snap))
                fit, fit_ok = cache[ck]
                if fit and not fit_ok:
                    if not a:
                        z = np.zeros(len(bj), bool)
                        return c, t, float(res.hold[c]), z, z
                    return (c, t, float(res.hold[c]), below | (~mine & others),
                            below & wide)
                if fit_ok or not a:
                    inside.add(c)
        return None

    out = []
    for r in pending:
        j = snap.job_index[r.job_id]
        if r.code is ReasonCode.SOLVER_DEGRADED:
            out.append(r)
            continue
        if j in active:
            msg, details = describe(em, active[j], placed)
            out.append(PendingReason(r.job_id, ReasonCode.RESERVED, msg, frozen_map(
                {**dict(r.details), "reservation": details})))
            continue
        hit = kept_off(j, r) if j in cands else None
        if hit is None:
            out.append(r)
            continue
        c, t, hold, mask, on_all = hit
        back = room(mask, on_all)
        f = (free_a if snap.job_tier1[j, t] else free) + back
        if r.code is ReasonCode.OVER_SHARE and reserved is None:
            reserved = reserved_by_org(em, placed)
        rows = np.where(on_all[mask][:, None], bon[mask], on_res[mask])
        msg, gangs, there = _held_message(em, placed, j, t, hold, free, f, back, bj[mask],
                                          rows, by_node)
        msg += _share_too(em, r, t, reserved) if r.code is ReasonCode.OVER_SHARE else ""
        out.append(PendingReason(r.job_id, ReasonCode.HELD_FOR_RESERVATION, msg, frozen_map(
            {**dict(r.details), "underlying": r.code.value, "underlying_message": r.message,
             "hold_until": hold,
             "reservations": [snap.jobs[g.job].id for g in gangs],
             **({"backfilled_by": [snap.jobs[e].id for e in there][:10]} if there else {})})))
    return tuple(out)


def _waits_for_capacity(em: EpochModel, r: PendingReason, t: int) -> bool:
    """Job r waits for capacity (`WaitingForCapacity`) and on t no level on its path would
    pass its target with it, or the one that would is below its floor (as its reason reads
    the share rows; one budget over every type: its reason alone)."""
    if r.code is not ReasonCode.WAITING_FOR_CAPACITY:
        return False
    if em.tg.pooled:
        return True
    g = float(r.details["gpus"])
    levels = r.details.get("targets", {}).get(em.snap.type_names[t])
    if levels is None:
        return False
    lvl = next((v for v in levels if v["got"] + g > v["target"] + 1e-9), None)
    return lvl is None or lvl["got"] < lvl["floor"] - 1e-9


def _held_message(em: EpochModel, placed: Placed, j: int, t: int, hold: float,
                  free: np.ndarray, f: np.ndarray, back: np.ndarray, bj: np.ndarray,
                  bon: np.ndarray, by_node: dict):
    """(message, the gangs named, the backfill starts named) for job j kept off the reserved
    nodes of t that reservations starting before `hold` hold (`f`: the GPUs it could use on
    each node, were they not reserved; `back` of them the starts `bj`, `bon` per node;
    `by_node`: the gang each reserved node is held for).
    Each gang is named with its own nodes (a job kept off nodes of two reservations was told
    all of them were held for the nearer gang), and where the job's shape needs GPUs off
    those nodes too, the message names them (a 6-GPU job on 4-GPU nodes was told of the 4
    reserved GPUs it lacked, not of the 2 free beside them it would also take)."""
    snap, res = em.snap, em.res
    on_t = snap.node_up & (snap.node_type == t) & (f > 0)
    kept = on_t & (res.deadline < hold)
    groups: dict = {}
    for n in np.flatnonzero(kept).tolist():
        groups.setdefault(by_node.get(n), []).append(n)
    order = sorted(groups, key=lambda h: (h is None, 0.0 if h is None
                                          else start_after(em, placed, h)))
    gangs = [h for h in order if h is not None]

    def on(nodes) -> list[int]:  # the backfill starts on `nodes`
        return bj[bon[:, nodes].sum(axis=1) > 0].tolist()

    there = on(kept)
    heads = []
    for h in order:
        nodes = groups[h]
        what = _gpus_there(snap, t, nodes, free, f, back, _ids(snap, on(nodes)))
        whose = ("a reservation" if h is None else f"job {snap.jobs[h.job].id}'s"
                 + (" reservation" if not heads else "")
                 + f" (expected start {when(start_after(em, placed, h), snap.now)})")
        heads.append(f"{what} are held for {whose}" if not heads else f"{what} for {whose}")
    starts = "that start" if len(order) == 1 else "those starts"
    msg = (", and ".join(heads) + f"; this job would hold its GPUs until {when(hold, snap.now)}"
           f" (its protection, or its expected end if sooner), past "
           f"{past(order, hold, snap.now)}")
    if not _fits(em.req, j, t, f, kept, snap):  # its shape needs GPUs beside them too
        rest = np.flatnonzero(on_t & ~kept).tolist()
        mates = on(rest)  # its teammates ranked below it: the team's order gives it theirs
        one = len(mates) == 1
        msg += (f"; this {int(snap.job_gpus[j])}-GPU job, a "
                f"{SHAPE_NAMES[int(em.req.shape[j, t])]}, needs GPUs of both these and "
                f"{_gpus_there(snap, t, rest, free, f, back, _ids(snap, mates), '')}, which it "
                "may use" + (f" ({_ids(snap, mates)} rank{'s' if one else ''} below it in its "
                             "team's order)" if mates else "") + ": neither alone holds it")
    return msg + _backfill_text(snap, j, there, starts), gangs, there


def _backfill_text(snap, j: int, there: list[int], starts: str) -> str:
    """'; <ids> of project <its> rank below it in its team's order but end by that start, so
    they may backfill there and this job may not', and '; <ids> of project <other> end by
    that start, so ...' for other projects' backfill, or "" for none."""
    p = snap.job_project[j]
    out = ""
    for own in (True, False):
        jobs = [e for e in there if (snap.job_project[e] == p) == own]
        if not jobs:
            continue
        one = len(jobs) == 1
        names = sorted({snap.jobs[e].project for e in jobs})
        out += (f"; {_ids(snap, jobs)} of project{'s' if len(names) > 1 else ''} "
                f"{', '.join(names)} "
                + (f"rank{'s' if one else ''} below it in its team's order but " if own else "")
                + f"end{'s' if one else ''} by {starts}, so {'it' if one else 'they'} may "
                "backfill there and this job may not")
    return out


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
                back: np.ndarray, names: str, until: str = " until then") -> str:
    """'the N free <type> GPUs on <nodes>', or with what runs there (`until` the
    reservation's start): unallocated work, allocated work that backfills them (`back` per
    node, `names`)."""
    n, idle, mine = int(f[nodes].sum()), int(free[nodes].sum()), int(back[nodes].sum())
    low = n - idle - mine
    where = compress_names(tuple(snap.nodes[k].name for k in nodes))
    tn = snap.type_names[t]
    if not mine:
        return (f"the {n} free {tn} GPUs on {where}" if not low else
                f"the {n} {tn} GPUs on {where} that run unallocated work{until}"
                if low == n else
                f"the {n} {tn} GPUs on {where}, free or running unallocated work{until} "
                f"({low})")
    parts = ([f"{idle} free"] if idle else []) + (
        [f"{low} running unallocated work"] if low else []) + (
        [f"{mine} running {names}{until}"])
    return f"the {n} {tn} GPUs on {where} ({', '.join(parts)})"


__all__ = ["reservation_reasons"]
