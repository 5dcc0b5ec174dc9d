"""`explain(snapshot, plan, job_id)`: why a job is where it is, and what would change that.

The answer holds the outcome (running / started / preempted / pending with its reason code and
message), the job's rank inputs (usage ratio and entitlement at every level of its path, its
project's Fair-Tree rank, its priority and place in its project's own order; for a pending
job the fair-share target and holdings at every level) and a list of concrete changes that
would let it start ("8 GPUs of h100 must free up", "A1's h100 target must grow by 8 GPUs").
Pure: it reads the snapshot and the plan, never re-solves.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from optalloc.errors import OptallocError
from optalloc.model.order import fair_tree_rank, project_order
from optalloc.model.requirements import SHAPE_NAMES, compute_requirements
from optalloc.units import format_time
from optalloc.snapshot import Snapshot
from optalloc.types import Plan, ReasonCode


def _free_after(snap: Snapshot, plan: Plan) -> np.ndarray:
    free = np.where(snap.node_up, snap.node_gpus, 0).astype(np.int64)
    for p in plan.placements:
        for a in p.nodes:
            n = snap.node_index.get(a.node)
            if n is not None and snap.node_up[n]:
                free[n] -= len(a.gpus)
    return free


def explain(snap: Snapshot, plan: Plan, job_id: str,
            entitlement: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
    """`entitlement`: each org node's per-type entitlement as the epoch ranked them (the
    plan's recorded inputs); the snapshot's (today's config) where it has none."""
    if job_id not in snap.job_index:
        raise OptallocError(f"job {job_id!r} is not in this epoch's queue")
    j = snap.job_index[job_id]
    job = snap.jobs[j]
    org = snap.org
    p = int(snap.job_project[j])
    path = []
    for nm in org.path(job.project)[1:]:
        o = org.index[nm]
        path.append({
            "org": nm,
            "depth": int(org.depth[o]),
            "usage_ratio": float(snap.usage_ratio[o]),
            "entitlement": dict(entitlement[nm]) if entitlement and nm in entitlement else
            {t: float(org.entitlement[o, i]) for i, t in enumerate(snap.type_names)},
        })
    d: dict[str, Any] = {
        "job": job_id,
        "project": job.project,
        "gpus": job.gpus,
        "state": job.state.value,
        "allocated": job.allocated,
        "rank_inputs": {
            "path": path,
            "fair_tree_rank": int(fair_tree_rank(snap)[p]) + 1,
            "projects": int(snap.org.is_leaf.sum()),
            "priority": job.priority,
            "place_in_project": int(project_order(snap)[j]) + 1,
        },
        "changes": [],
    }
    placed = {pl.job_id: pl for pl in plan.placements}
    pre = {x.job_id: x for x in plan.preemptions}
    pend = {x.job_id: x for x in plan.pending}
    _reservation(d, plan, job_id)
    if job_id in pre:
        x = pre[job_id]
        d.update(outcome="preempted", code=x.code.value, message=x.message,
                 needed_by=list(x.needed_by), grace_s=x.grace_s,
                 stops_by=snap.now + x.grace_s, resumable=job.resumable)
        if job_id in placed:
            d["placement"] = _placement(placed[job_id])
        return d
    if job_id in placed:
        d.update(outcome="running" if job.running else "started", code=None,
                 message=("keeps its GPUs" if job.running else
                          _after_leavers(snap, plan, placed[job_id]) or "starts this epoch"),
                 placement=_placement(placed[job_id]))
        prot = snap.protected_until(job)
        if prot is not None and snap.job_protected[j]:
            d["protected_until"] = prot
        if job.running and snap.job_on_drain[j]:  # it stays only for its protection (rule 5)
            drains = [a.node for a in job.placement.nodes if a.node in snap.node_index
                      and snap.node_drain[snap.node_index[a.node]]]
            leaves = (f"it leaves with notice when its protection ends ({format_time(prot)}), "
                      f"{snap.policy.grace_s:g} s grace" if prot is not None
                      and snap.job_protected[j] else "this plan keeps it there")
            d["message"] = f"keeps its GPUs for now: node {', '.join(drains)} is draining; {leaves}"
            d["draining"] = drains
        return d
    if job_id not in pend:
        d.update(outcome="unknown", code=None, message="not in the plan (plan from another queue?)")
        return d
    r = pend[job_id]
    code = r.code
    d.update(outcome="pending", code=code.value, message=r.message, details=dict(r.details))
    if code is ReasonCode.SOLVER_DEGRADED and "underlying" in r.details:
        code = ReasonCode(r.details["underlying"])
    d["changes"] = _changes(snap, plan, j, code, r.details)
    return d


def _after_leavers(snap: Snapshot, plan: Plan, pl) -> str:
    """For a start on GPUs that jobs preempted by the same plan still hold: when it starts."""
    mine = set(pl.gpu_keys)
    by = []
    for x in plan.preemptions:
        k = snap.job_index.get(x.job_id)
        other = snap.jobs[k].placement if k is not None else None
        if other is not None and mine.intersection(other.gpu_keys):
            by.append(f"{x.job_id} ({x.code.value}, grace {x.grace_s:g} s)")
    if not by:
        return ""
    return (f"starts once {', '.join(by)} has left these GPUs: the first epoch after that "
            "starts it")


def _reservation(d: dict, plan: Plan, job_id: str) -> None:
    """The job's reservation, if the plan holds one for it or one ended this epoch."""
    from optalloc.hostlist import compress_names

    for r in plan.reservations:
        if r.job_id == job_id:
            d["reservation"] = {
                "nodes": compress_names(r.nodes), "n_nodes": len(r.nodes),
                "gpu_type": r.gpu_type, "expected_start": r.expected_start, "since": r.since,
                "idle_gpus": r.idle_gpus, "message": r.message,
                "blockers": list((r.details or {}).get("blockers", ())),
            }
            return
    for e in plan.reservations_ended:
        if e.job_id == job_id:
            d["reservation"] = {"nodes": compress_names(e.nodes), "n_nodes": len(e.nodes),
                                "gpu_type": e.gpu_type, "expected_start": e.expected_start,
                                "since": e.since, "ended": e.outcome, "message": e.message}
            return


def _placement(pl) -> dict:
    return {"gpu_type": pl.gpu_type, "nodes": {a.node: list(a.gpus) for a in pl.nodes}}


def _changes(snap, plan, j, code, details) -> list[str]:
    job = snap.jobs[j]
    req = compute_requirements(snap)
    free = _free_after(snap, plan)
    types = [t for t in range(len(snap.gpu_types)) if req.fits[j, t]] or list(
        np.flatnonzero(snap.job_allowed[j])
    )
    tn = snap.type_names
    out: list[str] = []

    def gpus_line(t: int, off: np.ndarray | None = None) -> str:
        # `off`: nodes the job may not use (reserved for a gang that starts before its hold)
        sel = snap.node_up & (snap.node_type == t) & (True if off is None else ~off)
        may = "" if off is None or not off.any() else " it may use"
        need = max(0, job.gpus - int(free[sel].sum()))
        shape, size, pieces = int(req.shape[j, t]), int(req.size[j, t]), int(req.pieces[j, t])
        if shape == 0:
            big = int(free[sel].max()) if sel.any() else 0
            return (f"{max(need, size - big)} GPUs of {tn[t]} must free up on one node{may} "
                    f"(largest free block{' there' if may else ''}: {big})")
        whole = int((free[sel] >= size).sum())
        return (f"{max(0, pieces - whole)} more {tn[t]} nodes{may} with {size} free GPUs must "
                f"free up ({SHAPE_NAMES[shape]} of {pieces} nodes; {whole} available)")

    def reserved_off() -> np.ndarray:
        """The nodes of reservations whose gangs start before the job's hold ends (the
        placement keeps it off them; optalloc.plan.held_reasons)."""
        hold = float(details.get("hold_until", np.inf))
        off = np.zeros(len(snap.nodes), bool)
        for r in plan.reservations:
            if float(dict(r.details).get("clear_at", r.expected_start)) < hold:
                off[[snap.node_index[n] for n in r.nodes if n in snap.node_index]] = True
        return off

    if code is ReasonCode.NO_MATCHING_GPU_TYPE:
        allowed = [tn[t] for t in np.flatnonzero(snap.job_allowed[j])] or list(tn)
        out.append(f"an up node of type {'/'.join(allowed)} big enough for its shape must exist, "
                   "or the job must allow another gpu_type / a smaller gpus_per_node")
    elif code is ReasonCode.NODE_DRAINING:
        out.append("the drained/down nodes of its types must return to service")
    elif code is ReasonCode.UNALLOCATED_YIELDS:
        out += [gpus_line(t) + ", with no allocated job wanting them" for t in types]
        if job.allocated:
            out.append(f"project {job.project} needs a non-zero share")
        else:
            out.append("or give the job a min_runtime > 0 (an allocated job, charged to the budget)")
    elif code is ReasonCode.OVER_SHARE:
        for t_name, levels in details.get("targets", {}).items():
            for lvl in levels:
                short = job.gpus - (lvl["target"] - lvl["got"])
                if short > 0:
                    o = snap.org.index[lvl["org"]]
                    out.append(
                        f"{lvl['org']}'s {t_name} fair-share target must grow by {short:g} GPUs "
                        f"(now {lvl['target']:g}, held {lvl['got']:g}): its usage ratio "
                        f"({snap.usage_ratio[o]:.2f}) must fall relative to its siblings' as the "
                        "window moves, its share must grow, or their demand must fall")
                    break
        out += [gpus_line(t) for t in types]
    elif code is ReasonCode.RESERVED:
        res = details.get("reservation") or {}
        held = [b for b in res.get("blockers", ()) if b.get("holds", b.get("protected"))]
        ends = [b["until"] for b in held]
        if ends:
            who = ("protected jobs" if all(b.get("protected") for b in held) else
                   "jobs that hold them (protected, or its team's ranked above it)")
            start = next((r.expected_start for r in plan.reservations
                          if r.job_id == job.id), max(ends))
            then = ("then it starts there" if start <= max(ends) + 1e-6 else
                    "then the jobs still there get notice and keep their GPUs through it: it "
                    f"starts there at {format_time(start)}")
            out.append(f"the {len(ends)} {who} on its reserved nodes must end or lose "
                       f"protection (the last at {format_time(max(ends))}); {then}")
        else:
            out.append("nothing protected is left on its reserved nodes: it starts there next")
    elif code is ReasonCode.HELD_FOR_RESERVATION:
        names = ", ".join(details.get("reservations", ())) or "another gang"
        out.append(f"the reservation of {names} must start or be dropped, or this job must "
                   f"hold its GPUs no longer than that start (a shorter min_runtime, or an "
                   "expected duration that ends in time)")
        off = reserved_off()
        out += [gpus_line(t, off) for t in types]
    elif code is ReasonCode.LOWER_PRIORITY_IN_PROJECT:
        out.append(f"jobs of project {job.project} ahead of it must finish, or it needs a higher "
                   f"priority than {job.priority}")
        out += [gpus_line(t) for t in types]
    else:  # WaitingForCapacity, GangDoesNotFit
        out += [gpus_line(t) for t in types]
    return out


def format_explanation(d: dict) -> str:
    lines = [f"job {d['job']} (project {d['project']}, {d['gpus']} GPUs, {d['state']}, "
             f"{'allocated' if d['allocated'] else 'unallocated'}): {d['outcome']}"]
    if d.get("code"):
        lines.append(f"  reason: {d['code']}: {d['message']}")
    else:
        lines.append(f"  {d['message']}")
    if "placement" in d:
        pl = d["placement"]
        nodes = ", ".join(f"{n}[{','.join(map(str, g))}]" for n, g in pl["nodes"].items())
        lines.append(f"  on {pl['gpu_type']}: {nodes}")
    if d.get("needed_by"):
        lines.append(f"  GPUs taken by: {', '.join(d['needed_by'])}")
    if "stops_by" in d:  # the contract's notice: it keeps its GPUs through the grace period
        # a Moved job restarts where the plan places it (not requeued)
        then = (f"restarts on {', '.join(d['placement']['nodes'])}" if d.get("placement")
                else "requeued" if d.get("resumable", True) else "ends (not resumable)")
        if d["grace_s"] > 0:
            lines.append(f"  notice now, {d['grace_s']:g} s grace: it stops by "
                         f"{format_time(d['stops_by'])}, then {then}")
        else:  # no grace (its node is down, or a policy without one): it is stopped now
            lines.append(f"  stopped now, no grace period; then {then}")
    if "protected_until" in d:
        lines.append(f"  protected (min_runtime) until {format_time(d['protected_until'])}")
    if "reservation" in d:
        from optalloc.plan.reservations import when

        r = d["reservation"]
        head = (f"  reservation: {r['n_nodes']} {r['gpu_type']} nodes {r['nodes']}, expected "
                f"start {when(r['expected_start'], r['expected_start'])}")
        if r.get("since") is not None:
            head += f", held since {when(r['since'], r['since'])}"
        if "ended" in r:
            lines.append(head + f"; ended this epoch: {r['ended']} ({r['message']})")
        else:
            lines.append(head + f"; {r['idle_gpus']} of its GPUs idle after this plan")
            for b in r.get("blockers", ())[:10]:
                what = (f"ends or loses protection at {when(b['until'], b['until'])}"
                        if b.get("holds", b.get("protected")) else "preemptible now")
                lines.append(f"    - {b['job']} {what}")
    ri = d["rank_inputs"]
    lines.append(f"  project rank {ri['fair_tree_rank']} of {ri['projects']} (Fair Tree), "
                 f"priority {ri['priority']}, place {ri['place_in_project']} in its project")
    targets = d.get("details", {}).get("targets", {})
    for lvl in ri["path"]:
        tg = "; ".join(f"{t}: holds {x['got']:g}"
                       + (f" ({x['reserved']:g} of them for its reserved gangs)"
                          if x.get("reserved", 0) > 1e-9 else "")
                       + f" of target {x['target']:g}"
                       for t, levels in targets.items() for x in levels if x["org"] == lvl["org"])
        lines.append(f"    {'  ' * (lvl['depth'] - 1)}{lvl['org']}: usage ratio "
                     f"{lvl['usage_ratio']:.3f}" + (f" ({tg})" if tg else ""))
    if d.get("changes"):
        lines.append("  to start:")
        lines += [f"    - {c}" for c in d["changes"]]
    return "\n".join(lines)
