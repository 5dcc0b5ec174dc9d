"""Hierarchical share floors and fair-share targets (soft), the scheme's first two goals.

For every org node o (programs and projects, not the root) and gpu_type t with a target
T[o,t] > 0 (optalloc.model.targets: floor F <= target T, whole GPUs):

Variables  m[o,t,s] >= 0 integer, one per tier s of o's share on t:
             s = 0..K-1  the K segments of the floor (F split into K near-equal whole parts),
                         objective omega_s(o) (K = 1 today: one floor tier; omega(o) breaks
                         ties between floors by usage ratio, see impact.py);
             s = K       the target above the floor, ub T - F, objective W_T(o).
A floor above the target counts only up to the target (tier_bounds).
Family `share[o,t]`:  sum_s m[o,t,s] - sum_{c on t, tier 1, project under o} g_c x[c]
                                     - sum_{i kept, on t, tier 1, under o} g_i k[i] <= 0
(plus, on the path of a project whose gang holds a reservation on t, its GPUs g while the gang
waits: + g sum_t' x[gang,t'] on the left, + g on the right; optalloc.model.constraints.lookahead)

A plan's floor and target GPUs are min(got, bound) per tier, filled in tier order (the best
m for a plan); unmet floor F - got is reported as a FloorViolation.
"""

from __future__ import annotations

import numpy as np

from optalloc.contract import short_jobs  # noqa: F401  (the plan and the bench use it from here)
from optalloc.model.constraints.lookahead import share_holding_terms
from optalloc.model.context import BuildContext
from optalloc.model.objective.impact import K_SEGMENTS
from optalloc.model.requirements import cand_counted, runs_elsewhere, share_tier1
from optalloc.shape import fits_nodes
from optalloc.uniq import unique_rows


def tier_bounds(floor: np.ndarray, target: np.ndarray) -> np.ndarray:
    """(..., K+1) whole-GPU bound of each tier: K floor segments, then target - floor. A floor
    above the target (the target is cut where protected jobs hold the capacity) counts only
    up to the target: the targets already share such a shortfall in proportion to floors."""
    F = np.minimum(np.asarray(floor), np.asarray(target)).astype(np.int64)
    base, extra = F // K_SEGMENTS, F % K_SEGMENTS
    seg = base[..., None] + (np.arange(K_SEGMENTS) < extra[..., None])
    top = np.maximum(np.asarray(target) - F, 0)
    return np.concatenate([seg, top[..., None]], axis=-1).astype(float)


def floor_yield(snap, req, demand: np.ndarray) -> np.ndarray:
    """(O, T) in [0, 1]: the share of the GPUs each org node's jobs hold on t that belong to
    running jobs that could move (requirements: a move candidate) to another type whose idle
    GPUs (up nodes, held by no running job) hold the job's shape and are more than the work
    waiting for that type asks. Where two floors on t cannot both be met
    through whole jobs, the one held by work that can restart elsewhere yields: both are
    then met, one of them on the other type (8 h100 + 8 b200, per-type budgets, ratios
    equal: A's movable job kept h100 while B, confined to it, waited below its floor and
    b200 idled). It outweighs the rank tilt, the usage-ratio tie-break (A ranked first
    yields all the same) and the work tier: a yielded floor GPU is worth a target GPU
    (impact.tier_weights). `demand` (O, T), the targets' demand: the share
    is of what o wants on t where that is more than it holds, so a floor its waiting jobs
    confined to t would meet does not yield with the job that can move (a helper's case,
    stop 37: A's movable job took A's whole h100 floor's yield with it, and A's h100-only job
    waited below the floor while B took all of h100)."""
    O, T = snap.org.n, len(snap.gpu_types)
    rj, rt = req.run_job, req.run_type
    if not len(rj) or not req.cand_move.any():
        return np.zeros((O, T))
    busy = np.bincount(req.run_pair_node, weights=req.run_pair_gpus, minlength=len(snap.nodes))
    idle = np.where(snap.node_up, np.maximum(snap.node_gpus - busy, 0), 0).astype(np.int64)
    mj, mt = req.cand_job[req.cand_move], req.cand_type[req.cand_move]
    # GPUs of t that waiting work asks for (each tier-1 start candidate on every type it may
    # use): a type whose idle GPUs other work will take has no room for a move
    cj, ct = req.cand_job, req.cand_type
    asked = ~runs_elsewhere(req) & snap.job_tier1[cj, ct]
    wanted = np.bincount(ct[asked], weights=snap.job_gpus[cj[asked]], minlength=T)
    spare = np.bincount(snap.node_type, weights=idle, minlength=T) - wanted
    can = np.zeros(len(snap.jobs), bool)
    for t in np.unique(mt):  # the job's shape fits the idle GPUs of t's nodes (shape.fits_nodes)
        j = mj[(mt == t) & (snap.job_gpus[mj] <= spare[t] + 1e-9)]
        ok = fits_nodes(req.size[j, t], req.pieces[j, t], req.rem[j, t],
                        idle[(snap.node_type == t) & (idle > 0)])
        can[j[ok]] = True
    t1 = snap.job_tier1[rj, rt]
    held, mov = np.zeros((O, T)), np.zeros((O, T))
    np.add.at(held, (snap.job_project[rj[t1]], rt[t1]), snap.job_gpus[rj[t1]])
    m = t1 & can[rj]
    np.add.at(mov, (snap.job_project[rj[m]], rt[m]), snap.job_gpus[rj[m]])
    M = snap.org.membership().astype(float)
    held, mov = np.maximum(M @ held, demand), M @ mov
    return np.divide(mov, held, out=np.zeros((O, T)), where=held > 0)


def tier_values(imp, org_idx: np.ndarray, yields: np.ndarray | None = None,
                lifted: np.ndarray | None = None) -> np.ndarray:
    """(n, K+1) objective per GPU of each tier for org nodes `org_idx` (on the types whose
    floor_yield is `yields` (n,), if given; `lifted` (n,): the rows whose floor an idle
    sibling's share lifted, lifted_rows)."""
    idx = np.asarray(org_idx, dtype=np.int64)
    seg, unit = np.asarray(imp.floor_weight)[idx], np.asarray(imp.floor_unit)[idx]
    if lifted is not None and len(idx) and np.asarray(lifted).any():
        on = np.asarray(lifted, dtype=bool)[:, None]
        seg = np.where(on, np.asarray(imp.lifted_weight)[idx], seg)
        unit = np.where(on, np.asarray(imp.lifted_unit)[idx], unit)
    if yields is not None and len(yields):
        seg = seg - np.asarray(yields)[:, None] * unit
    return np.concatenate([seg, imp.target_weight[org_idx][:, None]], axis=1)


def lifted_rows(tg) -> np.ndarray | None:
    """(O, S) bool: the share rows whose floor an idle sibling's share lifted
    (targets.lifted_floors), weighed by the node's fair debt (impact.tier_weights); None
    where no floor was lifted."""
    if not tg.lift_base.size:
        return None
    return tg.share_floor > tg.share_base + 1e-9


def yields_of(tg) -> np.ndarray | None:
    """(O, T) floor_yield of the targets, or None when none was computed."""
    return tg.floor_yield if tg.floor_yield.size else None


def met_tiers(imp, floor: np.ndarray, target: np.ndarray, got: np.ndarray,
              yields: np.ndarray | None = None, lifted: np.ndarray | None = None) -> tuple:
    """(floor value, target value): the share tiers' objective for a plan that gives `got`
    (O, T) tier-1 GPUs, split by tier (floor segments, target); `yields`: floor_yield;
    `lifted`: lifted_rows."""
    O, T = floor.shape
    bounds = tier_bounds(floor[1:], target[1:])  # (O-1, T, K+1)
    lo = np.concatenate([np.zeros(bounds.shape[:-1] + (1,)), np.cumsum(bounds, -1)[..., :-1]],
                        axis=-1)
    met = np.clip(got[1:, :, None] - lo, 0, bounds)
    idx = np.arange(1, O)
    vals = np.stack([tier_values(imp, idx, None if yields is None else yields[1:, t],
                                 None if lifted is None else lifted[1:, t]) for t in range(T)],
                    axis=1)  # (O-1, T, K+1)
    v = met * vals
    return float(v[..., :-1].sum()), float(v[..., -1].sum())


def share_tiers(imp, tg, got: np.ndarray) -> tuple:
    """(floor value, target value) of a plan that gives `got` (O, T) tier-1 GPUs, as the share
    rows value them: per type, or over all types where one budget spans them, with the floor
    yield (met_tiers on the targets' share view)."""
    return met_tiers(imp, tg.share_floor, tg.share_target, tg.share_view(got), yields_of(tg),
                     lifted_rows(tg))


def floor_columns(m: np.ndarray, m_seg: np.ndarray) -> np.ndarray:
    """The share columns of the floor tier (segments below the target): with their objective
    coefficients, the floor value met_tiers gives a plan."""
    return m[m_seg < K_SEGMENTS]


def met_value(imp, floor: np.ndarray, target: np.ndarray, got: np.ndarray) -> float:
    """Objective of the share tiers for a plan that gives `got` (O, T) tier-1 GPUs."""
    return sum(met_tiers(imp, floor, target, got))


def define_shares(ctx: BuildContext) -> None:
    snap, req, imp, tg, b = ctx.snap, ctx.req, ctx.imp, ctx.tg, ctx.b
    F, T = tg.share_floor, tg.share_target  # (O, S): per type, or pooled over the types
    mo, mt = np.nonzero(T > 0)
    keep = mo > 0
    mo, mt = mo[keep], mt[keep]
    if not len(mo):
        return
    bounds = tier_bounds(F[mo, mt], T[mo, mt])  # (R, K+1)
    y = yields_of(tg)
    up = lifted_rows(tg)
    vals = tier_values(imp, mo, None if y is None else y[mo, mt],
                       None if up is None else up[mo, mt])
    r_idx, s_idx = np.nonzero(bounds > 0)
    ctx.m_org, ctx.m_type, ctx.m_seg = mo[r_idx], mt[r_idx], s_idx
    ctx.m = b.add_vars("m", len(r_idx), 0, bounds[r_idx, s_idx], vals[r_idx, s_idx])
    O, Tn = F.shape
    row_of = np.full((O, Tn), -1)
    row_of[mo, mt] = np.arange(len(mo))
    row_of = row_of[:, tg.share_col]  # (O, T): the row of each org node's GPUs on each type
    M = snap.org.membership()
    jobs = np.concatenate([req.cand_job, req.run_job])
    types = np.concatenate([req.cand_type, req.run_type])
    cols = np.concatenate([ctx.x, ctx.k])
    t1 = np.concatenate([cand_counted(snap, req, tg.pooled),  # per type: no move; no restart
                         share_tier1(snap, req, tg.pooled)[req.run_job, req.run_type]])
    anc, e = ancestor_pairs(M, snap.job_project[jobs], t1)
    r = row_of[anc, types[e]]
    ok = r >= 0
    # a waiting reservation counts as held by its project's subtree (lookahead.py)
    hr, hc, hv, hi = share_holding_terms(ctx, row_of)
    rows = np.concatenate([r_idx, r[ok], hr])
    allc = np.concatenate([ctx.m, cols[e[ok]], hc])
    coef = np.concatenate([np.ones(len(r_idx)), -snap.job_gpus[jobs[e[ok]]].astype(float), hv])
    order = np.argsort(rows, kind="stable")
    rows, allc, coef = rows[order], allc[order], coef[order]
    bnd = np.searchsorted(rows, np.arange(len(mo) + 1))
    names, tnames = snap.org.names, (("all",) if tg.pooled else snap.type_names)
    for i in range(len(mo)):
        a, z = bnd[i], bnd[i + 1]
        b.add_rows(f"share[{names[mo[i]]},{tnames[mt[i]]}]", 1, np.zeros(z - a), allc[a:z],
                   coef[a:z], -np.inf, float(hi[i]) if i < len(hi) else 0.0)


def ancestor_pairs(M: np.ndarray, proj: np.ndarray, on: np.ndarray) -> tuple:
    """(org node, entry) pairs: every ancestor (itself included) of the project proj[e] of
    every entry e where on[e], entry by entry, ancestors in org order. The share rows read
    them only through a stable sort by row, and a row is one org node's, so within a row the
    entries come in ascending order as np.nonzero(M[:, proj] & on) gives them, without its
    walk of an (O, E) matrix (the 32,768-GPU bench epoch: 317 x 140,712, ~0.18 s)."""
    node, anc = np.nonzero(M.T)  # per org node, its ancestors in org order
    deg = np.bincount(node, minlength=M.shape[1])
    start = np.cumsum(deg) - deg
    e = np.flatnonzero(on)
    n = deg[proj[e]]
    e = np.repeat(e, n)
    first = np.repeat(np.cumsum(n) - n, n)
    return anc[start[proj[e]] + np.arange(len(e)) - first], e


def debug_allowance(snap) -> np.ndarray:
    """(O, T) whole GPUs a project's debug jobs may hold beyond its target: the policy's
    debug_allowance times its entitled GPUs, at least one where it has a share (0 on inner
    nodes)."""
    cap = snap.capacity_by_type(up_only=True).astype(float)
    a = np.ceil(snap.policy.debug_allowance * snap.org.entitlement * cap[None, :] - 1e-9)
    a = np.where(snap.org.entitlement > 0, np.maximum(a, 1.0), 0.0)
    return np.where(snap.org.is_leaf[:, None] & (snap.policy.debug_allowance > 0), a, 0.0)


def debug_jobs(snap) -> np.ndarray:
    """(J,) bool: the debug jobs that earn the allowance: short (protection <= the policy's
    debug protection) and no queued allocated job of their project with a higher declared
    priority (a debug job may pass its project's longer jobs of its own priority, which it
    delays by minutes, never one the team ranked above it). Once per snapshot (Snapshot.derived:
    the model, the backfill's values, the share gains and the reasons ask; 26 calls at XL)."""
    return snap.derived(_debug_jobs)


def _debug_jobs(snap) -> np.ndarray:
    short = short_jobs(snap)
    if not short.any():
        return short
    waiting = ~snap.job_running & snap.job_tier1.any(axis=1)
    top = np.full(snap.org.n, np.iinfo(np.int64).min)
    np.maximum.at(top, snap.job_project[waiting], snap.job_priority[waiting])
    return short & (snap.job_priority >= top[snap.job_project])


def define_debug_allowance(ctx: BuildContext) -> None:
    """The contract's cheap grant: a job protected for at most policy.debug_protection (a
    debug job) holds its GPUs for minutes, so a project's debug jobs may run beyond its
    target, up to debug_allowance x its entitlement (at least 1 GPU):

    Variables  d[p,t] in {0..A[p,t]}   objective W_T(leaf) / 2 (below any target GPU of
               another project, above all work)
    Family `debug[p,t]`:  d[p,t] - sum_{short tier-1 jobs of p on t} g (x or k) <= 0

    Debug jobs still count toward their project's floor and target like any job; the
    allowance's weight makes one worth more than its project's longer jobs of the same
    priority, so it may pass them (it delays them by minutes; the order rows let it), but
    only the debug jobs of `debug_jobs` earn it: none while a job of its project with a higher
    declared priority waits (the team's own order ranks that one first)."""
    snap, req, imp, b = ctx.snap, ctx.req, ctx.imp, ctx.b
    A = debug_allowance(snap)
    short = debug_jobs(snap)
    jobs = np.concatenate([req.cand_job, req.run_job])
    types = np.concatenate([req.cand_type, req.run_type])
    cols = np.concatenate([ctx.x, ctx.k])
    sel = short[jobs] & np.concatenate([cand_counted(snap, req),
                                        share_tier1(snap, req)[req.run_job, req.run_type]])
    if not sel.any():
        return
    jobs, types, cols = jobs[sel], types[sel], cols[sel]
    proj = snap.job_project[jobs]
    # np.unique(axis=0) less its per-call cost (optalloc.uniq)
    keys, inv = unique_rows(np.stack([proj, types], axis=1))
    ok = A[keys[:, 0], keys[:, 1]] > 0
    if not ok.any():
        return
    row_of = np.cumsum(ok) - 1
    keep = ok[inv]
    n = int(ok.sum())
    w = imp.debug_weight[keys[ok, 0]]
    ctx.d = b.add_vars("d", n, 0, A[keys[ok, 0], keys[ok, 1]], w)
    ctx.d_org, ctx.d_type = keys[ok, 0], keys[ok, 1]
    rows = np.concatenate([np.arange(n), row_of[inv[keep]]])
    allc = np.concatenate([ctx.d, cols[keep]])
    coef = np.concatenate([np.ones(n), -snap.job_gpus[jobs[keep]].astype(float)])
    b.add_rows("debug", n, rows, allc, coef, -np.inf, 0.0)


def debug_value(imp, snap, jobs: np.ndarray, types: np.ndarray) -> float:
    """The debug tier's objective for a plan running jobs[i] on types[i]."""
    A = debug_allowance(snap)
    short = debug_jobs(snap)
    sel = short[jobs] & snap.job_tier1[jobs, types] if len(jobs) else np.zeros(0, bool)
    held = np.zeros_like(A)
    np.add.at(held, (snap.job_project[jobs[sel]], types[sel]), snap.job_gpus[jobs[sel]])
    return float((np.minimum(held, A) * imp.debug_weight[:, None]).sum())
