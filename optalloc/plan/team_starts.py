"""The lines of a pending job's reason that name its teammates' starts this epoch on a type
(optalloc.plan.reasons): those of a lower priority, whose places the team's order gives it
first where it fits there, and those of a higher priority, which the team's order starts
first."""

from __future__ import annotations

import numpy as np

from optalloc.plan.backfill import candidates_by_job
from optalloc.plan.held_reasons import _fits
from optalloc.plan.reason_context import ReasonContext
from optalloc.plan.reason_facts import free_by_type


def _below_starts(ctx: ReasonContext, p: int, t: int, prio: int, type_name: str,
                  j: int | None = None) -> str:
    """'; ... of its jobs with a lower priority start on t this epoch (...)' where they do:
    the team's order gives this job their places, alone or several together with the free
    GPUs beside them (optalloc.plan.several_places), so it waits beside them only where it
    fits in none of them or a job ahead of it in its team's order waits (whose `order` row
    holds it); the reason says so rather than name capacity alone (a helper's case at stop
    44: A's priority-1 4-GPU job waited while its two priority-0 2 + 2 debug gangs took both
    4-GPU nodes, told only that A held every GPU)."""
    low = ctx.lower_starts(p, t, prio)
    if not len(low):
        return ""
    return (_starts_text(ctx, low, "lower", prio, type_name, "start") + ": it does not fit in "
            "their places, alone or together with the free GPUs beside them, or a job ahead "
            "of it in its team's order waits"
            + (_reserved_clause(ctx, j, t, low) if j is not None else ""))


def _reserved_clause(ctx: ReasonContext, j: int, t: int, low: np.ndarray) -> str:
    """", or ..." where the reservations are what keeps job j, started on t, out of the
    places of its teammates' starts `low`: some of them backfill nodes reserved for a gang
    whose start j would outlast (a helper's case at stop 46: A's 8-hour job was told only
    that it fit in none of its teammates' places, where their 10-minute jobs backfilled a
    gang's node), or j would fit their places together with the free GPUs of such nodes (a
    6-GPU job beside its teammate's 2-GPU start and a free reserved node was told it fit in
    none of their places, with the free GPUs beside them or not); "" otherwise."""
    em = ctx.em
    res, snap = em.res, em.snap
    if res is None or not np.isfinite(res.deadline).any():
        return ""
    cands = [c for c in candidates_by_job(em)[0].get(j, ()) if int(em.req.cand_type[c]) == t]
    if not cands:
        return ""
    hold = float(res.hold[cands[0]])
    idx = snap.node_index
    if any(res.deadline[idx[a.node]] < hold
           for b in low.tolist() for a in ctx.placed.placements[b].nodes):
        return (", or they backfill nodes reserved for a gang, which end or may be preempted "
                "before its start and this job would not")
    if ctx.placed.free is None:
        return ""
    room = _room_with(ctx, low)
    if (_fits(em.req, j, t, room, np.ones(len(room), bool), snap)
            and not _fits(em.req, j, t, room, ~(res.deadline < hold), snap)):
        return (", or it would fit there only with free GPUs of nodes reserved for a gang, "
                "which starts before this job would end")
    return ""


def _above_starts(ctx: ReasonContext, p: int, t: int, prio: int, type_name: str) -> str:
    """'; ... of its jobs with a higher priority start on t this epoch (...)': the team's
    order starts them first (a job given their places, optalloc.plan.several_places, leaves
    the lower-priority jobs it displaced waiting where the GPUs left do not fit them)."""
    high = ctx.higher_starts(p, t, prio)
    if not len(high):
        return ""
    one = len(high) == 1
    return (_starts_text(ctx, high, "higher", prio, type_name, "starts" if one else "start")
            + f": the team's order starts {'it' if one else 'them'} first")


def _starts_text(ctx: ReasonContext, jobs: np.ndarray, than: str, prio: int, type_name: str,
                 verb: str) -> str:
    """'; G of them run N of its jobs with a <than> priority than <prio> that <verb> on
    <type> this epoch (ids)': what _below_starts and _above_starts name."""
    snap = ctx.em.snap
    ids = ", ".join(snap.jobs[j].id for j in jobs[:3]) + ("..." if len(jobs) > 3 else "")
    return (f"; {int(snap.job_gpus[jobs].sum())} of them run {len(jobs)} of its jobs with a "
            f"{than} priority than {prio} that {verb} on {type_name} this epoch ({ids})")


def shape_beyond_room(ctx: ReasonContext, j: int, t: int, shape: str) -> str | None:
    """Why job j (a gang over its project's target on t) waits where its shape, not its
    share, holds it: the GPUs of its project's lower-priority starts on t and the free ones
    add up to its size, yet it fits no placement even with those starts given back, so the
    team's order lets them take the GPUs it cannot use (an outside judge, stop 59: A's
    16-GPU whole-node gang, A ranked first, was told only that starting it would exceed A's
    target while its eight 2-GPU teammates filled the one node B's protected jobs left
    whole). None where that is not so."""
    em, snap = ctx.em, ctx.em.snap
    job = snap.jobs[j]
    low = ctx.lower_starts(int(snap.job_project[j]), t, job.priority)
    if not len(low) or ctx.placed.free is None:
        return None
    room = _room_with(ctx, low)
    tn = snap.type_names[t]
    fr = free_by_type(snap, room)[tn]
    if fr["free_gpus"] < job.gpus or _fits(em.req, j, t, room, np.ones(len(room), bool), snap):
        return None
    return (f"needs {job.gpus} GPUs as {shape}; with the {len(low)} jobs of project "
            f"{job.project} with a lower priority that start on {tn} this epoch given back, "
            f"{tn} would have {fr['free_gpus']} free GPUs, but the largest free node has "
            f"{fr['largest_free_node']} and {fr['free_whole_nodes']} nodes are entirely "
            "free: its shape holds it, not its share, and they take the GPUs it cannot use")


def _room_with(ctx: ReasonContext, starts: np.ndarray) -> np.ndarray:
    """(N,) GPUs free after the plan, with those of the plan's starts `starts` given back."""
    room = ctx.placed.free.astype(np.int64).copy()
    idx = ctx.em.snap.node_index
    for b in starts.tolist():
        for a in ctx.placed.placements[b].nodes:
            room[idx[a.node]] += len(a.gpus)
    return room
