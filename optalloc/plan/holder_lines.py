"""The lines of pending and preemption reasons that say who holds what after the plan: a
project's share line, the siblings ahead of it, who holds the GPUs neither protected nor free,
and the GPUs of waiting reserved gangs the share rows count as held (optalloc.plan.reasons,
optalloc.plan.preemptions; the projects outside a subtree that hold GPUs outside protection,
and whether they are past their targets: optalloc.plan.true_causes)."""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.plan.holdings import Placed, plan_pairs
from optalloc.snapshot import Snapshot


def reserved_note(reserved: np.ndarray | None, o: int, t: int) -> str:
    """", R of them for its reserved gangs" where o's holdings count GPUs of waiting gangs
    that hold reserved nodes (the share rows count a reservation as held), else ""."""
    r = 0.0 if reserved is None else float(reserved[o, t])
    return f", {r:g} of them for its reserved gangs" if r > 1e-9 else ""


def reserved_by_org(em: EpochModel, placed: Placed) -> np.ndarray | None:
    """(O, T): the GPUs of waiting reserved gangs that got_by_org counts as held (None
    without reservations)."""
    return em.res.holding(em.snap, plan_pairs(em, placed)[0]) if em.res.held else None


def share_line(snap: Snapshot, em: EpochModel, got: np.ndarray, o: int, t: int,
                reserved: np.ndarray | None = None) -> str:
    # entitled: o's share of the up GPUs, the capacity its floor and the ledger's owed
    # GPU-hours count (targets.nested_floors); the targets' capacity adds what protected jobs
    # hold on drain nodes, and with it "floor 2, entitled 3.0" read as a floor cut below
    # min(demand, entitled) on a drain node (a helper's hand-written case at stop 48)
    cap_up = snap.capacity_by_type(up_only=True)
    if em.tg.pooled:  # one budget over every type (optalloc.model.pooled): what o holds of
        # each type against its target over all types (a project at its budget on b200 is
        # at it, whatever it holds of h100)
        ent = float(snap.org.entitlement[o] @ cap_up)
        each = ", ".join(f"{got[o, u]:g} {nm}" for u, nm in enumerate(snap.type_names)
                         if got[o, u] > 0)
        r = 0.0 if reserved is None else float(reserved[o].sum())
        held = (f"{got[o].sum():g} GPUs over all types" + (f" ({each})" if each else "")
                + (f" ({r:g} of them for its reserved gangs)" if r > 1e-9 else ""))
        return (f"{snap.org.names[o]} holds {held}, its fair-share target this epoch is "
                f"{em.target[o].sum():g} over all types (floor {em.floor[o].sum():g}, "
                f"entitled {ent:.1f} GPUs over all gpu types, usage ratio "
                f"{snap.usage_ratio[o]:.2f})")
    note = reserved_note(reserved, o, t)
    held = f"{got[o, t]:g} {snap.type_names[t]} GPUs" + (f" ({note[2:]})" if note else "")
    ent = float(snap.org.entitlement[o, t] * cap_up[t])
    cut = floor_cut(snap, em, o, t)
    return (f"{snap.org.names[o]} holds {held}, its fair-share target this "
            f"epoch is {em.target[o, t]:g} ("
            + (f"entitled {ent:.1f}, usage ratio {snap.usage_ratio[o]:.2f}; its floor of "
               f"{em.floor[o, t]:g} is cut to the target this epoch: {cut}" if cut else
               f"floor {em.floor[o, t]:g}, entitled {ent:.1f}, usage ratio "
               f"{snap.usage_ratio[o]:.2f}")
            + ")")


def floor_cut(snap: Snapshot, em: EpochModel, o: int, t: int) -> str:
    """"" where o's floor on t (per-type budgets) is within its target this epoch, else
    why the target is below it: the floors did not fit beside what protected jobs hold past
    their own floors and were cut in proportion (targets.waterfill), or o's whole jobs in
    their teams' order fill less (targets._inorder_fill). A floor counts only up to the
    target in the model (fairshare.tier_bounds); a floor violation is still reported against
    the floor. Before, a user read "target 1 (floor 2)" with no word of why (a helper's case
    at stop 46: C's protected 4-GPU job on a floor of 2 left A's floor of 2 a target of 1)."""
    tg = em.tg
    if tg.pooled:  # one budget over every type: the pooled floor against the pooled target
        return _pooled_cut(snap, tg, o)
    F, T = float(tg.floor[o, t]), float(tg.target[o, t])
    if F <= T + 1e-9:
        return ""
    if tg.upper.size and tg.upper[o, t] < F - 1e-9:
        whose = "its team's" if snap.org.is_leaf[o] else "their teams'"
        return (f"its jobs, whole and in {whose} order, fill only "
                f"{round(float(tg.upper[o, t]), 1):g} GPUs of it")
    over = np.flatnonzero(snap.org.is_leaf & (tg.protected[:, t] > tg.floor[:, t] + 1e-9))
    over = sorted(over.tolist(), key=lambda v: -(tg.protected[v, t] - tg.floor[v, t]))
    who = ", ".join(f"{snap.org.names[v]} {tg.protected[v, t]:g} of floor {tg.floor[v, t]:g}"
                    for v in over[:3]) + ("..." if len(over) > 3 else "")
    return ("protected jobs hold more GPUs than their projects' floors"
            + (f" ({who})" if who else "") + ", so the floors share what is left in proportion")


def _pooled_cut(snap: Snapshot, tg, o: int) -> str:
    """floor_cut over all types (optalloc.model.pooled): where o's pooled floor is above its
    pooled target and protected jobs hold more GPUs, over all types, than their projects'
    pooled floors, say so; else "" (the in-order caps of the pooled filling are not kept, so
    no other cause is named)."""
    if not tg.pool_floor.size:
        return ""
    F, T = float(tg.pool_floor[o]), float(tg.target[o].sum())
    if F <= T + 1e-9:
        return ""
    P = tg.protected.sum(axis=1)
    over = np.flatnonzero(snap.org.is_leaf & (P > tg.pool_floor + 1e-9))
    if not len(over):
        return ""
    over = sorted(over.tolist(), key=lambda v: -(P[v] - tg.pool_floor[v]))
    who = ", ".join(f"{snap.org.names[v]} {P[v]:g} of floor {tg.pool_floor[v]:g}"
                    for v in over[:3]) + ("..." if len(over) > 3 else "")
    return (f"protected jobs hold more GPUs over all types than their projects' floors ({who}), "
            "so the floors share what is left in proportion")


def share_row_view(em: EpochModel, got: np.ndarray, t: int) -> tuple:
    """(O,) GPUs held, floors and targets on t's share row, as the model counts them: of t,
    or over all types where one budget spans them (optalloc.model.pooled), and the words that
    say which (" over all types" or "")."""
    tg = em.tg
    s = int(tg.share_col[t])
    return (tg.share_view(got)[:, s], _shown_floor(tg)[:, s], tg.share_target[:, s],
            " over all types" if tg.pooled else "")


def _shown_floor(tg) -> np.ndarray:
    """(O, S) the floors the messages judge "below its floor" by: per type the floor, not cut
    to the target (Targets.floor); pooled likewise the pooled floor min(D_o, E_o) before the
    cut (Targets.pool_floor). The share rows' pooled floor is cut to the target
    (Targets.share_floor), and with it a project of usage ratio 0 that held nothing, kept off
    by protected jobs alone, was told OverShare, "its fair-share target this epoch is 0 over
    all types (floor 0, ...)", where per type it was WaitingForCapacity below its floor with
    the cut explained (an outside judge, stop 52)."""
    if not tg.pooled or not tg.pool_floor.size:
        return tg.share_floor
    f = np.maximum(tg.pool_floor, tg.share_floor[:, 0])[:, None]
    f[0] = 0.0
    return f


def _siblings(snap: Snapshot, em: EpochModel, got: np.ndarray, o: int, t: int,
              reserved: np.ndarray | None = None) -> str:
    """Siblings of o that hold GPUs of t, with their ratios and targets (who ranks ahead), and
    how many of those GPUs are their waiting reserved gangs' (`reserved`, as reserved_note:
    a project running 8 GPUs with an 8-GPU gang waiting on reserved nodes was said to hold
    16, a helper's case at stop 46)."""
    org = snap.org
    G, _, T, where = share_row_view(em, got, t)
    R = None if reserved is None else share_row_view(em, reserved, t)[0]
    sib = [v for v in np.flatnonzero(org.parent == org.parent[o]) if v != o and got[v, t] > 0]
    sib.sort(key=lambda v: float(snap.usage_ratio[v]))
    return ", ".join(f"{org.names[v]} (usage ratio {snap.usage_ratio[v]:.2f}, holds "
                     f"{G[v]:g} of target {T[v]:g}{where}"
                     + (f", {R[v]:g} of them for its reserved gangs" if R is not None
                        and R[v] > 1e-9 else "") + ")" for v in sib[:3])


def _rest_text(split: tuple[float, float, float], project: str) -> str:
    """Who holds the GPUs that are neither protected nor free (ReasonContext.rest_split):
    before, every such GPU was said to hold 'other projects' floors and targets', also where
    the project's own jobs held them (a helper's cases at stop 44)."""
    mine, others, low = split
    parts = ([f"{others:g} hold other projects' floors and targets"] if others > 0 else []) + (
        [f"{mine:g} run {project}'s own jobs"] if mine > 0 else []) + (
        [f"{low:g} run unallocated work"] if low > 0 else [])
    return "the rest: " + ", ".join(parts) if parts else "the rest are free"


def _leaves_outside(snap: Snapshot, o: int) -> np.ndarray:
    """(O,) bool: projects outside o's subtree."""
    return snap.org.is_leaf & ~snap.org.membership()[o]
