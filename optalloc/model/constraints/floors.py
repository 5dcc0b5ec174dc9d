"""Hierarchical share floors (soft).

For every org node o (programs and projects, not the root) and gpu_type t:

    F[o,t] = floor( min(D[o,t], ent[o,t] * cap_t) )          whole GPUs

cap_t = GPUs of type t on up nodes. D[o,t] = allocated demand of o's subtree on t, defined so
that the floors are satisfiable together: a running job's GPUs count on the type it runs on; a
startable job allowed on several types has its GPUs split across them in proportion to its
project's entitled GPUs there (so sum_t D[o,t] is o's real demand, never double-counted).
Only tier-1 jobs count (allocated jobs of projects with a positive share on t); unallocated
jobs are never charged and never count toward a floor.

Variables  m[o,t] in {0..F[o,t]}: floor GPUs met, objective + FLOOR_WEIGHT each
Family `floor[o,t]`:  m[o,t] - sum_{c on t, tier 1, project under o} g_c x[c]
                             - sum_{i kept, on t, tier 1, project under o} g_i k[i] <= 0

Unmet floor F - m is the slack; FLOOR_WEIGHT exceeds the best per-GPU impact, so floors come
first, then impact. Plans report unmet floors as FloorViolation.
"""

from __future__ import annotations

import numpy as np

from optalloc.model.context import BuildContext


def floor_targets(ctx: BuildContext) -> tuple[np.ndarray, np.ndarray]:
    """(floor F, demand D), both (O, T)."""
    snap, req, imp = ctx.snap, ctx.req, ctx.imp
    O, T = snap.org.n, len(snap.gpu_types)
    cap = snap.capacity_by_type(up_only=True).astype(float)
    ent_gpus = snap.org.entitlement * cap[None, :]
    leaf = np.zeros((O, T))
    # running jobs that may stay: their GPUs on their current type
    rj, rt = req.run_job, req.run_type
    tier1 = imp.tier[rj, rt] >= 1.0 if len(rj) else np.zeros(0, bool)
    np.add.at(leaf, (snap.job_project[rj[tier1]], rt[tier1]), snap.job_gpus[rj[tier1]])
    # startable jobs: split across tier-1 candidate types by the project's entitled GPUs
    cj, ct = req.cand_job, req.cand_type
    ok = imp.tier[cj, ct] >= 1.0
    cj, ct = cj[ok], ct[ok]
    w = ent_gpus[snap.job_project[cj], ct]
    tot = np.bincount(cj, weights=w, minlength=len(snap.jobs))
    frac = np.divide(w, tot[cj], out=np.zeros_like(w), where=tot[cj] > 0)
    np.add.at(leaf, (snap.job_project[cj], ct), snap.job_gpus[cj] * frac)
    D = snap.org.membership().astype(float) @ leaf
    F = np.floor(np.minimum(D, ent_gpus) + 1e-9)
    F[0] = 0.0  # the root's "floor" would be plain work conservation; impact handles that
    return F, D


def define_floors(ctx: BuildContext) -> None:
    snap, req, imp, b = ctx.snap, ctx.req, ctx.imp, ctx.b
    F, D = floor_targets(ctx)
    ctx.floor, ctx.demand = F, D
    mo, mt = np.nonzero(F > 0)
    if not len(mo):
        return
    ctx.m_org, ctx.m_type = mo, mt
    ctx.m = b.add_vars("m", len(mo), 0, F[mo, mt], imp.floor_weight)
    O, T = F.shape
    row_of = np.full((O, T), -1)
    row_of[mo, mt] = np.arange(len(mo))
    M = snap.org.membership()
    jobs = np.concatenate([req.cand_job, req.run_job])
    types = np.concatenate([req.cand_type, req.run_type])
    cols = np.concatenate([ctx.x, ctx.k])
    t1 = imp.tier[jobs, types] >= 1.0 if len(jobs) else np.zeros(0, bool)
    anc, e = np.nonzero(M[:, snap.job_project[jobs]] & t1[None, :])
    r = row_of[anc, types[e]]
    keep = r >= 0
    rows = np.concatenate([np.arange(len(mo)), r[keep]])
    allc = np.concatenate([ctx.m, cols[e[keep]]])
    vals = np.concatenate([np.ones(len(mo)), -snap.job_gpus[jobs[e[keep]]].astype(float)])
    order = np.argsort(rows, kind="stable")
    rows, allc, vals = rows[order], allc[order], vals[order]
    bounds = np.searchsorted(rows, np.arange(len(mo) + 1))
    names, tnames = snap.org.names, snap.type_names
    for i in range(len(mo)):
        a, z = bounds[i], bounds[i + 1]
        b.add_rows(f"floor[{names[mo[i]]},{tnames[mt[i]]}]", 1, np.zeros(z - a), allc[a:z],
                   vals[a:z], -np.inf, 0.0)
