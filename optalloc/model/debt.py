"""The floors' debt (stop 49): what each org node was owed over the window and not delivered,
as a factor on its floor GPUs' weight (optalloc.model.objective.impact.tier_weights), and
whether it applies (one budget over every type). The model's targets read it too: a node owed
its fair share has its floor lifted by an idle sibling's share (targets.lifted_floors)."""

from __future__ import annotations

import numpy as np

from optalloc.shape import fits_up
from optalloc.snapshot import Snapshot

DEBT_CAP = 2.0  # the debt tilt's least cap, times the largest node's GPUs (debt_tilt)
DEBT_UNIT_S = 3600.0  # one unit of the debt tilt: an hour of a node's whole share (debt_tilt)


def pooled_applies(snap: Snapshot) -> bool:
    """Several types, every org node's share the same on each, and one billing weight: a GPU
    of one type is then worth a GPU of another to the ledger. (With different weights a
    pooled budget would need a unit for a job that may run on either; each type is then
    filled alone, as with share_by_type.)"""
    ent = snap.org.entitlement
    bw = np.array([g.billing_weight for g in snap.gpu_types], dtype=float)
    return (ent.shape[1] > 1 and bool(np.allclose(ent, ent[:, :1], rtol=1e-9, atol=1e-12))
            and bool(np.allclose(bw, bw[:1], rtol=1e-9)))


def projects_with_work(snap: Snapshot) -> np.ndarray:
    """(O,) bool: the projects with allocated work this epoch (a job that is allocated work on
    some type), the org nodes the rank tilt spreads over and the debt compares."""
    org = snap.org
    alloc = snap.job_tier1.any(axis=1) if len(snap.jobs) else np.zeros(0, bool)
    return (np.bincount(snap.job_project[alloc], minlength=org.n) > 0) & (org.depth > 0)


def projects_with_placeable_work(snap: Snapshot) -> np.ndarray:
    """(O,) bool: projects_with_work, of jobs that run or fit the up nodes of a type where
    they are allocated work (shape.fits_up, the epoch's `Requirements.fits`): a project whose
    every job needs a type that is down holds no floor this epoch and claims no share of the
    capacity there is (optalloc.demand: the fair measure leaves it out too)."""
    return placeable_types(snap).any(axis=1) & np.asarray(snap.org.is_leaf)


def placeable_types(snap: Snapshot) -> np.ndarray:
    """(O, T) bool: the types on which each org node (not the root) has such work in its
    subtree: a running job on the type it runs on (on every type where it is allocated work
    where it runs as unallocated work), a waiting one on the types whose up nodes it fits."""
    return snap.derived(_placeable_types)


def _placeable_types(snap: Snapshot) -> np.ndarray:
    org = snap.org
    T = len(snap.gpu_types)
    if not len(snap.jobs):
        return np.zeros((org.n, T), dtype=bool)
    usable = snap.job_tier1 & snap.job_allowed
    up = [snap.node_gpus[snap.node_up & (snap.node_type == t)] for t in range(T)]
    on = fits_up(snap.job_gpus, snap.job_gpn, usable, up)
    run = snap.job_running
    here = np.zeros_like(usable)
    k = np.flatnonzero(run & (snap.job_run_type >= 0))
    here[k, snap.job_run_type[k]] = True
    here &= usable
    on = np.where(run[:, None], np.where(here.any(axis=1)[:, None], here, usable), on)
    leaf = np.zeros((org.n, T), dtype=bool)
    np.logical_or.at(leaf, snap.job_project, on)
    out = (org.membership().astype(np.int64) @ leaf.astype(np.int64)) > 0
    return out & (org.depth > 0)[:, None]


def nodes_with_work(snap: Snapshot) -> np.ndarray:
    """(O,) bool: the org nodes (not the root) with a project with work (projects_with_work)
    in their subtree."""
    return _above(snap, projects_with_work(snap))


def nodes_with_placeable_work(snap: Snapshot) -> np.ndarray:
    """(O,) bool: nodes_with_work, of projects_with_placeable_work."""
    return _above(snap, projects_with_placeable_work(snap))


def _above(snap: Snapshot, leaf: np.ndarray) -> np.ndarray:
    """(O,) bool: the org nodes (not the root) with one of the projects `leaf` in their
    subtree."""
    org = snap.org
    return (org.membership() & leaf[None, :]).any(axis=1) & (org.depth > 0)


def debt_tilt(snap: Snapshot, g_max: float, short: np.ndarray | None = None) -> np.ndarray:
    """(O,) what each org node with allocated work this epoch was owed over the window and not
    delivered (Snapshot.owed_shortfall, GPU-hours), in hours of its whole share of the up GPUs
    (DEBT_UNIT_S: the owed metric's own bins, whatever the epoch), beyond the least of its
    siblings with work (a node with no sibling with work takes its parent's; one with siblings
    at most its parent's where the parent competes: its floor GPUs count in the parent's rows
    too, so what its siblings owe it must not take another subtree's floor); capped at the
    size ratio two exclusive floors can have that a plan trades: a 1-GPU floor job against
    the largest allocated job this epoch, or two whole nodes of a gang (DEBT_CAP * the
    largest node), whichever is more. 0 for nodes without work
    and the root, and everywhere without ledger history (one-off snapshots, the bench).
    `short`: another shortfall (O,) in place of Snapshot.owed_shortfall (the fair share's:
    optalloc.model.targets.owed_nodes).

    The rank tilt alone sees places, not how long a choice has lasted: where whole jobs make
    two floors exclusive in every epoch, the larger one won every epoch. 3 nodes of 8 GPUs,
    equal shares, A only 16-GPU gangs, B 1-GPU jobs: A's gang (12 floor GPUs of A + 8 of B)
    beat B's 12 floor GPUs at twice the weight, A 384 and B 192 GPU-hours a day where greedy
    delivers 288 each (DESIGN.md rule 2: delivered shares converge to entitlements capped by
    demand). With the debt, B's floor factor (1 + its rank tilt) is multiplied by 1 + one
    for each hour of its share it is owed (tier_weights), so a larger floor wins only until
    the other is owed about (size ratio / (1 + the rank tilt) - 1) hours of its share, and
    the floors take turns (`tests/test_fairness_over_time_
    judge_cases.py`). A project that got what it was owed has no debt, whatever its usage
    ratio. One unit per epoch of the share (300 s) instead of per hour flipped floors twelve
    times as fast, with more preemptions and less owed delivered hour by hour (README, "How
    an epoch decides")."""
    return _debts(snap, g_max, short)[0]


def floor_debts(snap: Snapshot, g_max: float) -> tuple[np.ndarray, np.ndarray]:
    """(debt_tilt of the owed shortfall (O,), a scale (O,)) in one pass; the scale is a factor
    in (0, 1] on each org node's floor rows: what its parent's other children
    with work owe beyond the parent's own debt (debt_tilt's `bound`, which keeps that part off
    the owed node's rows). The bound keeps a project's debt to its sibling from taking another
    subtree's floor (rule 1), but alone it left the sibling unpaid wherever the program gets
    its share every hour: root -> P [g, s], Q [q] on 4 x 8, g only 16-GPU gangs, g's gang
    (12 floor GPUs of g, 8 of s) beat s's 24 (12 of s) every epoch, g 384 / s 192 GPU-hours
    a day where the turns give 288 / 288 (rule 2). So what the bound holds back weighs
    relative to the siblings instead: a child of P with the unbounded debt r and the bounded b
    keeps (1 + r) / (1 + b) of its rows' weight over the most-owed child's ratio (the factor
    holds for its whole subtree's rows), the most-owed keeps all of its weight, and P's row
    gains what the least-owed child's path lost (parent_transfer). Inside P's floor the
    children then trade as with the whole debt, and a GPU of the least-owed within P's floor
    weighs what it did against other subtrees. A first form without the transfer lowered the
    over-served child against every other subtree too: P ranked first lost an equal trade of
    floors to a worse-ranked program (rule 1; the s54 file's rank case). What is left: where
    a plan holds P below its floor, a floor GPU of the owed child weighs up to the lowered
    rows' weight more against another subtree, and one of the least-owed child beyond P's
    floor that much less. 1 where no bound binds."""
    return _debts(snap, g_max, None)


def _debts(snap: Snapshot, g_max: float, short: np.ndarray | None):
    org = snap.org
    out, one = np.zeros(org.n), np.ones(org.n)
    if not len(snap.jobs) or org.n < 2 or not debt_applies(snap):
        return out, one
    short = snap.owed_shortfall if short is None else short
    if not short.any():
        return out, one
    work = nodes_with_work(snap)
    if work.sum() < 2:
        return out, one
    ent_gpus = org.entitlement @ snap.capacity_by_type(up_only=True)
    unit_h = DEBT_UNIT_S / 3600.0
    debt = np.where(work & (ent_gpus > 0), short / np.maximum(ent_gpus * unit_h, 1e-9), 0.0)
    parent = np.maximum(np.asarray(org.parent), 0)
    least = np.full(org.n, np.inf)  # per parent: the least debt among its children with work
    np.minimum.at(least, parent[work], debt[work])
    rel = np.where(work, debt - least[parent], 0.0)
    # a node with no sibling with work competes where its parent does: it takes the parent's
    # (B alone in program P2 against P1's gangs: its floor row weighs P2's debt too)
    alone = work & (np.bincount(parent[work], minlength=org.n)[parent] == 1)
    # a node's floor GPUs count in its ancestors' rows too, so what its siblings owe it must
    # not outweigh its parent where the parent competes (rule 1: a subtree's rank before
    # anything inside it): beyond its siblings it carries at most its parent's own debt
    # (`bound`: unbounded under a node that competes with nobody); what it holds back weighs
    # relative to the siblings (floor_debts)
    bound = np.where(alone & (org.depth == 1), np.inf, rel)
    raw = rel.copy()
    for d in range(2, int(org.depth.max(initial=0)) + 1):
        at = alone & (org.depth == d)
        rel[at] = rel[parent[at]]
        bound[at] = bound[parent[at]]
        at = work & ~alone & (org.depth == d)
        raw[at] = rel[at]
        rel[at] = np.minimum(rel[at], bound[parent[at]])
        bound[at] = rel[at]
    # the largest size ratio two exclusive floors can have: a 1-GPU floor against what one
    # allocated job meets (two whole nodes of a gang at least). At 2 x 8 alone, a 1-GPU share
    # against whole-cluster 24-GPU gangs never ran (needs 21: a judge's case)
    big = float(snap.job_gpus[snap.job_tier1.any(axis=1)].max(initial=0))
    cap = max(DEBT_CAP * g_max, big)
    out = np.clip(rel, 0.0, cap)
    sib = work & ~alone & (org.depth >= 2)
    ratio = np.where(sib, (1.0 + np.clip(raw, 0.0, cap)) / (1.0 + out), 1.0)
    most = np.ones(org.n)  # per parent: the largest ratio among its children
    np.maximum.at(most, parent[sib], ratio[sib])
    local = np.where(sib, ratio / most[parent], 1.0)
    M = org.membership()  # M[u, v]: u is v or an ancestor of v
    return out, np.exp(np.log(local) @ M.astype(float))


def fair_debt_tilt(snap: Snapshot) -> np.ndarray:
    """(O,) debt_tilt on the fair shortfall (Snapshot.fair_owed_shortfall: against each node's
    share with an idle sibling's part in it), a program counting what each of its projects
    was owed of its own fair share (targets.owed_nodes says why). It marks the nodes whose
    floors are lifted (targets.lifted_floors) and weighs those floors (impact.tier_weights);
    once per snapshot (both ask for it)."""
    return snap.derived(_fair_debt_tilt)


def _fair_debt_tilt(snap: Snapshot) -> np.ndarray:
    short = snap.fair_owed_shortfall
    if not short.any():
        return np.zeros(snap.org.n)
    org = snap.org
    short = org.membership().astype(float) @ np.where(org.is_leaf, short, 0.0)
    return debt_tilt(snap, float(snap.node_gpus.max(initial=1)), short)


def debt_applies(snap: Snapshot) -> bool:
    """Whether the owed metric the debt reads is the scheme's budget: owed and delivered are
    one budget over every type (min(entitled over all types, demanded) per project and hour,
    GPUs of any type delivered), so they are where there is one type or the types pool
    (one billing weight, the same shares: pooled_applies). With per-type budgets a
    project above its share of the only type its jobs can use was 'owed' GPUs of a type they
    cannot use, and its debt took that type from a better-ranked project."""
    return len(snap.gpu_types) <= 1 or pooled_applies(snap)


def parent_transfer(snap: Snapshot, full: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """(O,) what each parent's floor row gains of its children's rows lowered by
    floor_debts: `full` (O,) a floor GPU's weight per row unscaled, `scale` the factors.
    A parent gains what a floor GPU's path below it lost in its most-lowered child (the least
    owed), so that child's GPUs within the parent's floor weigh as before against other
    subtrees, the owed child's more."""
    org = snap.org
    out = np.zeros(org.n)
    if np.all(scale >= 1.0):
        return out
    M = org.membership()  # M[u, v]: u is v or an ancestor of v
    Mf = M.astype(float)
    parent = np.asarray(org.parent)
    leaf = projects_with_work(snap)
    for p in np.unique(parent[scale < 1.0]):
        if p < 0:
            continue
        below = M[p] & (np.arange(org.n) != p)  # strictly below p
        lost = np.where(below, full * (scale[p] - scale), 0.0)
        path = lost @ Mf  # per leaf: what its path below p lost
        best = 0.0
        for c in np.flatnonzero(parent == p):
            v = M[c] & leaf
            if v.any():
                best = max(best, float(path[v].min()))
        out[p] = best
    return out
