"""Fair share across gpu_types: one budget per org node, placed on the types its jobs can use
(models/formulation.md, "Several gpu_types").

A project's budget is GPU time on the whole cluster (DESIGN.md section 1: "A1: 35% of the
cluster"), and the published fairness metric counts it that way (optalloc.ledger.owed:
entitled = sum over types of ent[p, t] * cap_t, delivered over all types). Water-filling each
type alone (optalloc.model.targets) splits a job that may run on several types across them in
proportion to its project's entitlement there, so a project that can use any type keeps a
floor on a type another project is confined to: with 8 h100 + 8 b200 and equal shares, A's
any-type jobs took 4 h100 that B's h100-only jobs needed (A 12, B 4), and B's any-type jobs
took b200 GPUs from A's b200-only jobs while 4 h100 sat idle.

So when every org node's share is the same on every type (no `share_by_type` override; with
one the user asked for per-type budgets) and the types have one billing weight (a GPU of one
is a GPU of another to the ledger), the targets are (else each type is filled alone):

1. **Pooled**: the same water-filling, floors and in-order caps as per type, on one pooled
   capacity C = sum_t cap_t, demand D_o = the GPUs of o's jobs (each counted once),
   entitlement E_o = sum_t ent[o, t] cap_t, protected GPUs summed over types.
2. **Routed** (optalloc.model.route): each project's pooled target X_p goes onto the types
   its jobs allow (at most the GPUs of its jobs allowed on t; its protected GPUs stay where
   they run), within the types' capacities: the floors first, level by level (max-min,
   held), then the org nodes' targets in the Fair-Tree order (rule 2: the spare to the
   lowest ratio first; tied nodes max-min), then as many GPUs as possible (small LPs, HiGHS).
3. **Capped**: a project that cannot get its pooled target on the types its jobs allow (its
   type is full) is capped at what it got and the pooled water-filling runs again, so the
   rest flows to its siblings (at most PASSES times).

Per-type targets are the routed GPUs (whole, largest remainder per type) summed up the tree;
a node's floor is its pooled floor min(D_o, E_o), split over types in proportion to its
targets there.
"""

from __future__ import annotations

import numpy as np

from optalloc.confined import confined_caps
from optalloc.model.debt import pooled_applies  # noqa: F401 (re-exported: tests, callers)
from optalloc.model.requirements import Requirements
from optalloc.model.targets import (
    PASSES,
    Targets,
    _demand,
    _fill_tree,
    _integerize,
    cap_in_order,
    capacities,
    compute_targets,
    counted_running,
    horizons,
    lookahead_on,
    lifted_floors,
    nested_floors,
    overshoot_room,
    owed_nodes,
)
from optalloc.model.order import clipped_ratios, tree_position
from optalloc.model.route import Levels, route
from optalloc.snapshot import Snapshot


def fair_targets(snap: Snapshot, req: Requirements) -> Targets:
    """The floors and targets the model uses: pooled across types when shares are the same
    on every type and there is more than one type, else per type."""
    if not pooled_applies(snap):
        return compute_targets(snap, req)
    return _pooled(snap, req)


def _leaf_demand(snap: Snapshot, req: Requirements):
    """(full (O, T): GPUs of each project's jobs that may run on t, pooled (O,): each job
    once, speed (O, T): how fast those GPUs' work runs on t, as a fraction of each job's best
    allowed type (the model's srel), GPU-weighted; 1 where it has none, stay (O, T): GPUs of
    running jobs past their protection on their own type, which may move to another), at the
    leaves (the protected GPUs are targets._demand's). A running job past its protection
    counts on its own type and on every other type it is allowed and fits (it may restart
    there, optalloc.model.requirements: a move), once in `pooled`. The speed is what routing
    a project's target onto t is worth per GPU."""
    O, T = snap.org.n, len(snap.gpu_types)
    full, pooled, fast = np.zeros((O, T)), np.zeros(O), np.zeros((O, T))
    stay = np.zeros((O, T))
    srel = snap.relative_speed()
    rj, rt = req.run_job, req.run_type
    keep = counted_running(snap, req)
    cj, ct = req.cand_job, req.cand_type
    ok = snap.job_tier1[cj, ct] if len(cj) else np.zeros(0, bool)
    # a move's pair counts only for a job counted on its own type (not a drain leaver)
    counted = np.zeros(len(snap.jobs), bool)
    counted[rj[keep]] = True
    ok &= (~req.cand_move | counted[cj]) & ~req.cand_restart  # a restart: its keep's pair
    pairs = np.unique(np.stack([cj[ok], ct[ok]]), axis=1) if ok.any() else np.zeros((2, 0), int)
    # running jobs on their own type, then each waiting job on every type it may use (a
    # running one past its protection on every other type it may move to)
    j = np.concatenate([rj[keep], pairs[0]]).astype(np.int64)
    t = np.concatenate([rt[keep], pairs[1]]).astype(np.int64)
    g = snap.job_gpus[j].astype(float)
    np.add.at(full, (snap.job_project[j], t), g)
    np.add.at(fast, (snap.job_project[j], t), g * srel[j, t])
    np.add.at(pooled, snap.job_project[rj[keep]], snap.job_gpus[rj[keep]])
    jobs = np.unique(pairs[0])
    jobs = jobs[~counted[jobs]]  # each running job once (above)
    np.add.at(pooled, snap.job_project[jobs], snap.job_gpus[jobs])
    mv = keep & ~req.run_fixed & np.isin(rj, cj[req.cand_move]) if len(rj) else keep
    np.add.at(stay, (snap.job_project[rj[mv]], rt[mv]), snap.job_gpus[rj[mv]])
    speed = np.divide(fast, full, out=np.ones((O, T)), where=full > 0)
    return full, pooled, speed, stay


def _pooled(snap: Snapshot, req: Requirements) -> Targets:
    org = snap.org
    O = org.n
    M = org.membership().astype(float)
    cap_up, cap = capacities(snap, req)
    demand, prot, _ = _demand(snap, req, cap_up)  # demand: the per-type view, for reports
    full, dp, speed, stay = _leaf_demand(snap, req)
    window, horizon = horizons(snap)
    rho = clipped_ratios(snap) * (1.0 - horizon / window)
    ent = (org.entitlement * cap_up[None, :]).sum(axis=1, keepdims=True)  # (O, 1) GPUs
    kappa = (org.entitlement * cap[None, :]).sum(axis=1, keepdims=True) * (window / horizon)
    D = (M @ dp)[:, None]
    FP = nested_floors(org, D, ent)  # a child's share of its parent's floor (targets.py)
    P = M @ prot
    target = _fit(snap, req, np.array([cap.sum()]), FP, P.sum(axis=1, keepdims=True), D, dp,
                  rho, kappa, full, prot, cap, speed, stay)
    free = (_fit(snap, req, np.array([cap_up.sum()]), FP, np.zeros((O, 1)), D, dp, rho, kappa,
                 full, np.zeros_like(prot), cap_up, speed, stay)
            if lookahead_on(snap) else np.zeros((0, 0)))
    # what the projects could hold of the idle siblings' share: those confined to the same
    # types at most those types' GPUs together (optalloc.confined), as the fair measure that
    # marks them owed counts it (C and D confined to one 8-GPU a100 node want 8 of 32, not
    # 16: an outside review, stop 52)
    held = (M @ _confined(org, dp, full, cap_up))[:, None]
    lifted = lifted_floors(org, FP, target.sum(axis=1, keepdims=True), held, ent,
                           owed_nodes(snap))
    return Targets(_split_floors(target, lifted[:, 0]), target, M @ demand, P, cap,
                   np.zeros(len(req.cand_job)), horizon, window, free, pooled=True,
                   pool_floor=lifted[:, 0],  # Targets.share_base caps lift_base as share_floor
                   lift_base=FP if lifted is not FP else np.zeros((0, 0)))


def _confined(org, dp: np.ndarray, full: np.ndarray, cap_up: np.ndarray) -> np.ndarray:
    """(O,) the pooled leaf demand `dp`, projects confined to the same types (`full` (O, T):
    the GPUs of their jobs that may run on each) capped together at those types' up GPUs
    `cap_up` (optalloc.confined.confined_caps)."""
    live = np.flatnonzero(dp > 0)
    if len(cap_up) < 2 or len(live) < 2:
        return dp
    bit = 1 << np.arange(len(cap_up))
    on = ((full > 0) & (cap_up > 0)[None, :]).astype(np.int64) @ bit
    names = org.names
    got = confined_caps(org, {names[v]: float(dp[v]) for v in live},
                        {names[v]: int(on[v]) for v in live}, cap_up)
    out = dp.astype(float).copy()
    for name, g in got.items():
        out[org.index[name]] = g
    return out


def _fit(snap, req, C, FP, Ppool, D, dp, rho, kappa, full, prot, cap, speed=None,
         stay=None, FB=None):
    """(O, T) whole per-type targets: pooled water-filling with in-order caps, routed onto
    types; a project that cannot be routed is capped at what it got and the pooled filling
    runs again. FB: the floors the filling gives first (FP where None)."""
    org = snap.org
    M = org.membership().astype(float)
    leaves = org.is_leaf
    routed = np.where(leaves, dp, 0.0)  # each leaf's bound: its demand, or what was routed
    tree = _levels(org)
    order = -tree_position(snap)  # the Fair-Tree order, a subtree before anything in it
    args = (C, FP if FB is None else FB, Ppool, rho, kappa)
    room = overshoot_room(cap, prot, full)
    for _ in range(PASSES + 1):
        pooled, upper = _capped(snap, req, args, routed, M, D, room)
        want = np.where(leaves, _integerize(snap, np.maximum(pooled, 0.0), upper)[:, 0], 0.0)
        X = route(want, full, prot, cap, speed, stay, tree=tree,
                  floor=FP[:, 0], order=order)
        got = X.sum(axis=1)
        short = leaves & (got < want - 0.5)
        if not short.any():
            break
        # capped at the whole GPUs routed, each type's remainder by largest fraction: A and B
        # confined to 8 h100 and routed 4.36 and 3.64 were capped at 4 and 3 each rounded
        # down, and the GPU lost went to C, which may run anywhere (C 9, B 3)
        routed = np.where(short, _whole_by_type(X, cap).sum(axis=1), routed)
    return M @ _whole_by_type(X, cap)


def _capped(snap, req, args, routed, M, D, room):
    """(pooled (O, 1), upper (O, 1)): the pooled water-filling (args: capacity, floors,
    protected, rho, kappa) with the in-order caps as the per-type targets apply them
    (targets.compute_targets): a leaf whose own order realizes a whole GPU less than its budget
    is capped there, one leaf of a family a pass (the one losing most, its siblings' orders
    tried again on their new budgets), at most CAP_PASSES passes, the last capping every leaf
    still short (each leaf's bound: what was `routed`, or its demand). Capped all at once in one
    pass (until stop 61), P0 {A1, A2} on 4 h100 + 8 b200: A1 realized 1 of 2 and A2 2 of 4,
    P0 held 3 of its floor 6 and a GPU went to no one; now A1 4, A2 2
    (tests/test_inorder_caps_s61.py)."""
    C, F, Ppool, rho, kappa = args

    def fill(leaf_up):
        up = np.minimum(M @ leaf_up, D[:, 0])[:, None]
        return _fill_tree(snap, C, np.minimum(F, up), Ppool, up, rho, kappa), (up, leaf_up)

    def step(capped, filled, budget, pooled, state):
        return fill(np.where(capped, filled, state[1]))

    pooled, (upper, _) = cap_in_order(snap, req, room, fill(routed), step)
    return pooled, upper


def _levels(org) -> Levels:
    """The inner nodes below the root with the leaves under each, every node's depth and
    parent: route holds a subtree's floor and want before its projects'."""
    M = org.membership()
    ids = np.flatnonzero(~np.asarray(org.is_leaf) & (org.depth >= 1))
    return Levels(ids, M[ids] & np.asarray(org.is_leaf)[None, :], np.asarray(org.depth),
                  np.asarray(org.parent))


def _whole_by_type(X: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Whole GPUs per (leaf, type): floors, then each type's remainder by largest fraction
    (never above the type's capacity)."""
    base = np.floor(X + 1e-6)
    frac = X - base
    short = np.clip(np.floor(np.minimum(X.sum(axis=0), cap) + 1e-6) - base.sum(axis=0), 0, None)
    rank = np.argsort(np.argsort(-frac, axis=0, kind="stable"), axis=0)
    return base + ((rank < short[None, :]) & (frac > 1e-6))


def _split_floors(target: np.ndarray, FP: np.ndarray) -> np.ndarray:
    """(O, T) each node's pooled floor min(FP, its whole target) split over types in
    proportion to its targets there (largest remainder)."""
    tot = target.sum(axis=1)
    f = np.minimum(FP, tot)
    share = np.divide(target * f[:, None], tot[:, None], out=np.zeros_like(target),
                      where=tot[:, None] > 0)
    base = np.floor(share + 1e-9)
    left = np.round(f - base.sum(axis=1)).astype(np.int64)
    frac = share - base
    rank = np.argsort(np.argsort(-frac, axis=1, kind="stable"), axis=1)
    out = base + (rank < left[:, None])
    out = np.minimum(out, target)
    out[0] = 0.0
    return out
