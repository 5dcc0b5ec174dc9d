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
)
from optalloc.model.order import clipped_ratios
from optalloc.snapshot import Snapshot


def fair_targets(snap: Snapshot, req: Requirements) -> Targets:
    """The floors and targets the model uses: pooled across types when shares are the same
    on every type and there is more than one type, else per type."""
    if not pooled_applies(snap):
        return compute_targets(snap, req)
    return _pooled(snap, req)


def pooled_applies(snap: Snapshot) -> bool:
    """Several types, every org node's share the same on each, and one billing weight: a GPU
    of one type is then worth a GPU of another to the ledger. (With different weights a
    pooled budget would need a unit for a job that may run on either; each type is then
    filled alone, as with share_by_type.)"""
    ent = snap.org.entitlement
    bw = np.array([g.billing_weight for g in snap.gpu_types], dtype=float)
    return (ent.shape[1] > 1 and bool(np.allclose(ent, ent[:, :1], rtol=1e-9, atol=1e-12))
            and bool(np.allclose(bw, bw[:1], rtol=1e-9)))


def _leaf_demand(snap: Snapshot, req: Requirements):
    """(full (O, T): GPUs of each project's jobs that may run on t, pooled (O,): each job
    once, speed (O, T): how fast those GPUs' work runs on t, as a fraction of each job's best
    allowed type (the model's srel), GPU-weighted; 1 where it has none), at the leaves (the
    protected GPUs are targets._demand's). The speed is what routing a project's target onto
    t is worth per GPU."""
    O, T = snap.org.n, len(snap.gpu_types)
    full, pooled, fast = np.zeros((O, T)), np.zeros(O), np.zeros((O, T))
    srel = snap.relative_speed()
    rj, rt = req.run_job, req.run_type
    keep = counted_running(snap, req)
    cj, ct = req.cand_job, req.cand_type
    ok = snap.job_tier1[cj, ct] if len(cj) else np.zeros(0, bool)
    pairs = np.unique(np.stack([cj[ok], ct[ok]]), axis=1) if ok.any() else np.zeros((2, 0), int)
    # running jobs on their own type, then each waiting job on every type it may use
    j = np.concatenate([rj[keep], pairs[0]]).astype(np.int64)
    t = np.concatenate([rt[keep], pairs[1]]).astype(np.int64)
    g = snap.job_gpus[j].astype(float)
    np.add.at(full, (snap.job_project[j], t), g)
    np.add.at(fast, (snap.job_project[j], t), g * srel[j, t])
    np.add.at(pooled, snap.job_project[rj[keep]], snap.job_gpus[rj[keep]])
    jobs = np.unique(pairs[0])
    np.add.at(pooled, snap.job_project[jobs], snap.job_gpus[jobs])
    return full, pooled, np.divide(fast, full, out=np.ones((O, T)), where=full > 0)


def _pooled(snap: Snapshot, req: Requirements) -> Targets:
    org = snap.org
    O = org.n
    M = org.membership().astype(float)
    cap_up, cap = capacities(snap, req)
    demand, prot, _ = _demand(snap, req, cap_up)  # demand: the per-type view, for reports
    full, dp, speed = _leaf_demand(snap, req)
    window, horizon = horizons(snap)
    rho = clipped_ratios(snap) * (1.0 - horizon / window)
    ent = (org.entitlement * cap_up[None, :]).sum(axis=1, keepdims=True)  # (O, 1) GPUs
    kappa = (org.entitlement * cap[None, :]).sum(axis=1, keepdims=True) * (window / horizon)
    D = (M @ dp)[:, None]
    FP = np.floor(np.minimum(D, ent) + 1e-9)
    FP[0] = 0.0
    P = M @ prot
    target = _fit(snap, req, np.array([cap.sum()]), FP, P.sum(axis=1, keepdims=True), D, dp,
                  rho, kappa, full, prot, cap, speed)
    free = (_fit(snap, req, np.array([cap_up.sum()]), FP, np.zeros((O, 1)), D, dp, rho, kappa,
                 full, np.zeros_like(prot), cap_up, speed)
            if lookahead_on(snap) else np.zeros((0, 0)))
    return Targets(_split_floors(target, FP[:, 0]), target, M @ demand, P, cap,
                   np.zeros(len(req.cand_job)), horizon, window, free, pooled=True)


def _fit(snap, req, C, FP, Ppool, D, dp, rho, kappa, full, prot, cap, speed=None):
    """(O, T) whole per-type targets: pooled water-filling with in-order caps, routed onto
    types; a project that cannot be routed is capped at what it got and the pooled filling
    runs again."""
    org = snap.org
    M = org.membership().astype(float)
    leaves = org.is_leaf
    leaf_up = np.where(leaves, dp, 0.0)
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
        X = route(want, full, prot, cap, speed)
        got = X.sum(axis=1)
        short = leaves & (got < want - 0.5)
        if not short.any():
            break
        leaf_up = np.where(short, np.floor(got + 1e-6), leaf_up)
    return M @ _whole_by_type(X, cap)


def route(want: np.ndarray, full: np.ndarray, prot: np.ndarray, cap: np.ndarray,
          speed: np.ndarray | None = None) -> np.ndarray:
    """(O, T) GPUs of each leaf's pooled target `want` (O,) placed on types, max-min: every
    leaf gets at least z * want with the largest z, then the most GPUs in all, then, among
    the routings with those GPUs, the most work by `speed` (O, T: how fast the leaf's work
    runs on t relative to its best type; without it, or where it is the same everywhere,
    any such routing); a leaf's GPUs on t within [prot, full] (its protected jobs stay, at
    most what its jobs allowed on t ask), each type within its capacity. Equal shares route
    as well onto one type as another, so without the third step a project whose jobs run 3x
    faster on h100 could be routed onto a100 and one indifferent to the type onto h100: the
    targets' floors then hold each there, above anything the work tier can pay."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix, vstack

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
    top = np.maximum(w, np.bincount(li, weights=lo, minlength=L))
    types = np.unique(t)
    ti = np.searchsorted(types, t)
    # rows: [leaf sums <= top] [-(leaf sums) + w z <= 0] [type sums <= cap]
    k = np.arange(n)
    rows = np.concatenate([li, L + li, 2 * L + ti, L + np.arange(L)])
    cols = np.concatenate([k, k, k, np.full(L, n)])
    vals = np.concatenate([np.ones(n), -np.ones(n), np.ones(n), w])
    A = coo_matrix((vals, (rows, cols)), shape=(2 * L + len(types), n + 1)).tocsr()
    b = np.concatenate([top, np.zeros(L), cap[types]])
    bounds = np.concatenate([np.stack([lo, hi], 1), [[0.0, 1.0]]])
    c = np.zeros(n + 1)
    c[n] = -1.0
    r = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    if r.status != 0:
        X[p, t] = lo
        return X
    z = float(r.x[n])
    bounds[n] = [max(0.0, z - 1e-7), 1.0]
    c = np.concatenate([-np.ones(n), [0.0]])
    r2 = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    x = (r2 if r2.status == 0 else r).x[:n]
    s = speed[p, t] if speed is not None else np.ones(n)
    if r2.status == 0 and np.ptp(s) > 1e-9:
        # the most work at that many GPUs: GPUs first (a GPU more is worth more than any
        # speed), speed among the routings that keep them
        most = float(x.sum())
        A3 = vstack([A, coo_matrix(np.concatenate([-np.ones(n), [0.0]])[None, :])]).tocsr()
        b3 = np.concatenate([b, [-(most - 1e-6 * max(1.0, most))]])
        r3 = linprog(np.concatenate([-s, [0.0]]), A_ub=A3, b_ub=b3, bounds=bounds,
                     method="highs")
        if r3.status == 0:
            x = r3.x[:n]
    X[p, t] = np.clip(x, lo, hi)
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
