"""Phase 5, preempted running jobs: a machine-readable reason and a true message for every
running job the plan does not keep.

  PreemptedNodeDrain      its node is draining (past its protection, or unallocated) or down
  Moved                   its node is down and it restarts elsewhere, or it is past its
                          protection and restarts on another gpu_type in place of waiting
                          (then the reason it leaves its type follows), or on other GPUs
                          of its own type (then the jobs its GPUs go to)
  PreemptedUnallocated    unallocated work yields to allocated demand, or to unallocated work
                          that keeps more GPUs busy than all it displaces (in a plan the
                          placement did not make: the fill share or the team's order that
                          justified it, else only what the plan does)
  PreemptedForFairShare   past its protection: a floor below, a target exceeded on its path,
                          or a higher priority of its own project takes its place

`needed_by` = the jobs the plan starts on its GPUs.
"""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.constraints.fill import unallocated_held
from optalloc.model.order import scheme_above
from optalloc.model.requirements import SHAPE_NAMES
from optalloc.plan.holdings import Placed, got_by_org, plan_pairs
from optalloc.plan.holder_lines import (
    reserved_by_org,
    reserved_note,
    share_line,
    share_row_view,
)
from optalloc.plan.team_order import forced_jobs
from optalloc.types import Placement, Preemption, ReasonCode


def preemptions(
    em: EpochModel, placed: Placed, grace_s: float, got: np.ndarray | None = None
) -> tuple[Preemption, ...]:
    snap, req = em.snap, em.req
    got = got_by_org(em, placed, moves=True) if got is None else got
    reserved = reserved_by_org(em, placed)
    owner: dict[tuple[str, int], str] = {}
    started = {p.job_id: p for p in placed.placements.values()}
    for p in placed.placements.values():
        for a in p.nodes:
            for gi in a.gpus:
                owner[(a.node, gi)] = p.job_id
    out = []
    restarted = set(req.cand_job[placed.started & req.cand_restart].tolist())

    def takers(pl: Placement | None) -> tuple[str, ...]:
        """The jobs the plan gives its GPUs to (not itself: a gang leaving a drain node may
        restart partly on its own GPUs of an up node)."""
        if pl is None:
            return ()
        ids = {owner[(a.node, gi)] for a in pl.nodes for gi in a.gpus if (a.node, gi) in owner}
        ids.discard(pl.job_id)
        return tuple(sorted(ids))

    low_of: dict | None = None

    def low_takers() -> dict[str, list[int]]:
        """Per unallocated taker: the running unallocated jobs the plan stops whose GPUs it
        takes (once per plan, when a message needs it)."""
        nonlocal low_of
        if low_of is None:
            low_of = {}
            for i in np.flatnonzero(~placed.kept):
                jj, tt = int(req.run_job[i]), int(req.run_type[i])
                if snap.job_tier1[jj, tt] or snap.job_on_drain[jj]:
                    continue
                for k in takers(snap.jobs[jj].placement):
                    if not started[k].allocated:
                        low_of.setdefault(k, []).append(jj)
        return low_of

    # a job whose node is down or gone has nothing to keep through a notice: grace 0 (as
    # greedy's), else a restart elsewhere waited the grace for GPUs that no longer exist
    for j in np.flatnonzero(req.displaced):
        job = snap.jobs[j]
        gone = "its placement is missing" if job.placement is None else (
            "node " + ", ".join(
                a.node for a in job.placement.nodes
                if a.node not in snap.node_index or not snap.node_present[snap.node_index[a.node]]
            ) + " is down")
        if j in placed.placements:
            new = placed.placements[j]
            out.append(Preemption(job.id, ReasonCode.MOVED,
                                  f"{gone}; restarted on {', '.join(new.node_names)}", 0.0))
        else:
            # a job that is not resumable ends when it is stopped (it is no candidate)
            end = "requeued" if job.resumable else "not resumable, it ends"
            out.append(Preemption(job.id, ReasonCode.PREEMPTED_NODE_DRAIN,
                                  f"{gone}; {end}", 0.0))
    for i in np.flatnonzero(~placed.kept):
        j, t = int(req.run_job[i]), int(req.run_type[i])
        job = snap.jobs[j]
        need = takers(job.placement)
        if snap.job_on_drain[j]:
            nodes = [a.node for a in job.placement.nodes
                     if snap.node_drain[snap.node_index[a.node]]]
            code = ReasonCode.PREEMPTED_NODE_DRAIN
            msg = (f"node {', '.join(nodes)} is draining and "
                   + ("unallocated work leaves at once" if not snap.job_tier1[j, t]
                      else "the job is past its protection"))
        elif not snap.job_tier1[j, t]:
            code = ReasonCode.PREEMPTED_UNALLOCATED
            new = [started[k] for k in need]  # takers: owners of GPUs in the plan's starts
            if need and not any(p.allocated for p in new):
                # unallocated takers only: never for nothing (rule 4); the message says what
                # the swap gains, counted over every unallocated job those takers displace
                msg = _unallocated_takers(em, placed, j, need, low_takers())
            else:
                # name the allocated takers only (an unallocated one beside them fills the
                # rest of the GPUs it left)
                need = tuple(k for k in need if started[k].allocated)
                msg = ("unallocated work yields to allocated demand" if need else
                       "unallocated work yields to allocated demand that needs its node")
        else:
            code = ReasonCode.PREEMPTED_FAIR_SHARE
            msg = _fair_share_message(em, got, j, t, need, reserved)
        named = f"{', '.join(need[:5])}{'...' if len(need) > 5 else ''}"
        if need:
            msg += f" ({named})"
        if not job.resumable and j not in restarted and j not in placed.placements:
            msg += "; not resumable, it ends"  # stopped, it is not requeued (as a down node's)
        if j in restarted:
            # a restart on its own type: its project holds the same, the GPUs where it ran
            # go to the jobs named (a gang that needs them whole, or a job ranked above it)
            new = placed.placements[j]
            code = ReasonCode.MOVED
            msg = (f"restarts at once on other {new.gpu_type} GPUs "
                   f"({', '.join(new.node_names)}): " + (
                       f"the plan gives the GPUs where it ran to {named}" if need else
                       "the GPUs where it ran are not free to it"))
        elif j in placed.placements:  # a move: it restarts on another type at once
            new = placed.placements[j]
            code = ReasonCode.MOVED
            msg = (f"restarts on {new.gpu_type} ({', '.join(new.node_names)}) in place of "
                   f"waiting: {msg}")
        out.append(Preemption(job.id, code, msg, grace_s, need))
    return tuple(out)


def _unallocated_takers(em: EpochModel, placed: Placed, j: int, need, low_of: dict) -> str:
    """Why running unallocated job j gives its GPUs to unallocated starts `need` (rule 4:
    never for nothing): they keep more GPUs busy than every unallocated job they displace
    together; else, where that is not so (a plan the placement did not make: greedy's), the
    fill shares (a project below its share of the idle GPUs takes from one at or above its
    own) or its team's order, whichever holds; else only what the plan does, no reason it
    does not have."""
    snap = em.snap
    job = snap.jobs[j]
    took = sum(int(snap.jobs[snap.job_index[k]].gpus) for k in need)
    gone = sorted({v for k in need for v in low_of.get(k, [])} | {j})
    ran = sum(int(snap.job_gpus[v]) for v in gone)
    where = (f"where it ran {ran}" if gone == [j] else
             f"where it and {len(gone) - 1} other job{'s' if len(gone) > 2 else ''} ran {ran}")
    if took > ran:
        return (f"unallocated work yields to unallocated work that keeps more GPUs busy "
                f"({took} GPUs {where})")
    p = int(snap.job_project[j])
    jobs, types = plan_pairs(em, placed)
    held = unallocated_held(snap, jobs, types)
    fill = em.fill if len(em.fill) else np.zeros(snap.org.n)
    qs = sorted({int(snap.job_project[snap.job_index[k]]) for k in need} - {p})
    below = [q for q in qs if held[q] <= fill[q] + 1e-9]
    if qs and len(below) == len(qs) and held[p] >= fill[p] - 1e-9:
        q = below[0]
        return (f"unallocated work yields to unallocated work of a project below its share "
                f"of the idle GPUs ({snap.org.names[q]} runs {held[q]:g} of {fill[q]:g} with "
                f"it, {job.project} {held[p]:g} of {fill[p]:g} without; {took} GPUs {where})")
    mates = [snap.job_index[k] for k in need]
    if all(int(snap.job_project[k]) == p and snap.job_priority[k] > job.priority
           for k in mates):
        return (f"unallocated work yields to a higher-priority job of project {job.project} "
                f"(priority {int(snap.job_priority[mates[0]])} > {job.priority}; {took} GPUs "
                f"{where})")
    return (f"unallocated work yields to unallocated work the plan starts on its GPUs "
            f"({took} GPUs {where})")


def _fair_share_message(em: EpochModel, got: np.ndarray, j: int, t: int, need,
                        reserved: np.ndarray | None = None) -> str:
    """Why a running allocated job past its protection loses its GPUs, by the scheme's order:
    a floor below, a target exceeded on its path, or a higher priority of its own project."""
    snap = em.snap
    job = snap.jobs[j]
    p = int(snap.job_project[j])
    path = [snap.org.index[nm] for nm in snap.org.path(job.project)[1:]]
    takers = [snap.job_index[k] for k in need if k in snap.job_index]
    own = [k for k in takers if int(snap.job_project[k]) == p]
    higher = [k for k in own if snap.job_priority[k] > job.priority]
    if higher and len(own) == len(takers):
        return (f"past its protection; a higher-priority job of project {job.project} takes "
                f"its place (priority {int(snap.job_priority[higher[0]])} > {job.priority})")
    forced = forced_jobs(em) if own else None
    gangs = [k for k in own if forced[k] and scheme_above(snap, k, j)]
    if gangs and len(own) == len(takers):  # a due reservation's gang ranked above it
        g = snap.jobs[gangs[0]]
        why = ("submitted before it" if g.submit_time < job.submit_time else "before it in "
               "line")
        return (f"past its protection; job {g.id} of project {job.project}, ahead of it in "
                f"the team's order (priority {g.priority}, {why}), starts on the nodes its "
                "reservation held (nothing protected is left there), where it could not "
                "start before")
    if own and len(own) == len(takers):  # its project's own work of its priority or below
        return (f"past its protection; project {job.project}'s "
                f"{sum(int(snap.job_gpus[k]) for k in own)}-GPU work takes its place "
                f"({', '.join(snap.jobs[k].id for k in own[:3])}): it meets more of the "
                "project's floor or target, which come before its own order of jobs")
    G, F, T, where = share_row_view(em, got, t)  # per type, or over all types when pooled
    due = _due_gangs(em, j, takers) if takers and not own else None
    if due is not None:  # another project's due reservation starts there (its x is forced)
        return (f"past its protection; {due}; project {job.project} holds {G[p]:g} of its "
                f"{T[p]:g}-GPU target{where} after this")
    over = [o for o in path if G[o] >= T[o] - 1e-9]
    head = (f"past its protection; {share_line(snap, em, got, over[0], t, reserved)}" if over
            else f"past its protection; project {job.project} holds {G[p]:g} of its "
                 f"{T[p]:g}-GPU target{where}{reserved_note(reserved, p, t)}")
    if G[p] < F[p] - 1e-9:
        shape = SHAPE_NAMES[int(em.req.shape[j, t])]
        shape = f"{shape} job" if shape == "single-node" else shape  # "a single-node job"
        head += (f"; it stays below its floor ({G[p]:g} of {F[p]:g}{where}) because "
                 f"this {int(snap.job_gpus[j])}-GPU {shape} cannot shrink and its GPUs meet "
                 + _floor_trade(em, G, F, j, takers))
    others = sorted({int(snap.job_project[k]) for k in takers} - {p})
    if others:
        q = others[0]
        more = f" and {len(others) - 1} more" if len(others) > 1 else ""
        return (f"{head}; its GPUs go to {snap.org.names[q]}{more} ({G[q]:g} GPUs{where} after "
                f"this, floor {F[q]:g}, target {T[q]:g})")
    return f"{head}; other projects' floors and targets need its GPUs"


def _due_gangs(em: EpochModel, j: int, takers: list) -> str | None:
    """When every job that takes running job j's GPUs is the gang of a due reservation (the
    model must start it: `em.res.forced`), that start, not the floors, decides: say so, and
    whether it starts on the nodes its reservation held (a reserved node takes only work that
    ends or loses its protection by the gang's start, so j may be preempted there). None
    otherwise (a helper's case at stop 48: C's job, backfilled on a reserved node and past its
    protection, was told A's gang met "the other projects' floors and targets first, in the
    scheme's order" while C ranked first, below its floor, and A went past its target)."""
    snap = em.snap
    forced = forced_jobs(em)
    if not all(forced[k] for k in takers):
        return None
    mine = {a.node for a in snap.jobs[j].placement.nodes}
    g = snap.jobs[takers[0]]
    held = next((h for h in (em.res.held if em.res is not None else ())
                 if h.job == takers[0] and h.due), None)
    there = held is not None and bool(mine & {snap.nodes[n].name for n in held.nodes})
    more = f" (and {len(takers) - 1} more)" if len(takers) > 1 else ""
    return (f"job {g.id} of project {g.project}{more} starts "
            + ("on the nodes its reservation held, now" if there else "on its GPUs, its "
               "reservation")
            + " due (nothing protected is left there; a reserved node takes only work that "
            "ends or loses its protection by the gang's start)")


def _floor_trade(em: EpochModel, got: np.ndarray, F: np.ndarray, j: int, takers: list) -> str:
    """How the takers' floors compare with the floor the preempted job would have met: more
    floor GPUs, or as many for projects that rank ahead by usage ratio (the floors' tie-break,
    optalloc.model.objective.impact.tier_weights). got, F: (O,) GPUs held and floors, on the
    job's type or pooled."""
    snap = em.snap
    p, g = int(snap.job_project[j]), float(snap.job_gpus[j])
    lost = min(got[p] + g, F[p]) - min(got[p], F[p])
    gain, ahead, lower = 0.0, [], True
    for q in sorted({int(snap.job_project[k]) for k in takers} - {p}):
        gq = float(sum(snap.job_gpus[k] for k in takers if int(snap.job_project[k]) == q))
        gain += min(got[q], F[q]) - min(got[q] - gq, F[q])
        ahead.append(f"{snap.org.names[q]} {snap.usage_ratio[q]:.2f}")
        lower &= bool(snap.usage_ratio[q] < snap.usage_ratio[p])
    if gain > lost + 1e-9:
        return "more of the other projects' floors"
    if ahead and lower and gain > lost - 1e-9:
        return (f"as many floor GPUs of projects with a lower usage ratio "
                f"({', '.join(ahead[:3])} against {snap.org.names[p]} "
                f"{snap.usage_ratio[p]:.2f})")
    return "the other projects' floors and targets first, in the scheme's order"
