"""The naive model's share, debug, fill, order and keep_order rows, written element by element
from an EpochModel (optalloc.bench.naive: the same problem as optalloc's model)."""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel


def _holders(em: EpochModel, x: list, k: list, moves: bool = False
             ) -> list[tuple[int, int, object]]:
    """(job, type, its variable) of every candidate start and every running job's keep; not
    the moves (a move counts in no debug or fill row, nor in a share row per type, as in
    optalloc's model) unless `moves` (pooled share rows count them); never a restart on its
    own type (no row counts it)."""
    req = em.req
    out = [(int(req.cand_job[ci]), int(req.cand_type[ci]), x[ci]) for ci in range(len(x))
           if (moves or not req.cand_move[ci]) and not req.cand_restart[ci]]
    return out + [(int(req.run_job[i]), int(req.run_type[i]), k[i]) for i in range(len(k))]


def fill_rows(em: EpochModel, prob, x: list, k: list, f: list) -> int:
    """fill[p]: a project's GPUs within its fill target never exceed its unallocated work's."""
    import pulp

    snap = em.snap
    held: dict[int, list] = {int(o): [] for o in em.f_org}
    holders = _holders(em, x, k)
    for j, t, v in holders:
        p = int(snap.job_project[j])
        if not snap.job_tier1[j, t] and p in held:
            held[p].append(int(snap.job_gpus[j]) * v)
    for r, p in enumerate(em.f_org.tolist()):
        prob += f[r] <= pulp.lpSum(held[p])
    return len(em.f)


def debug_rows(em: EpochModel, prob, x: list, k: list, d: list) -> int:
    """debug[p, t]: a project's debug GPUs beyond its target never exceed its short jobs'."""
    import pulp

    from optalloc.model.constraints.fairshare import debug_jobs

    snap = em.snap
    short = debug_jobs(snap)
    held: dict[tuple[int, int], list] = {(int(o), int(t)): [] for o, t in zip(em.d_org, em.d_type)}
    holders = _holders(em, x, k)
    for j, t, v in holders:
        key = (int(snap.job_project[j]), t)
        if short[j] and snap.job_tier1[j, t] and key in held:
            held[key].append(int(snap.job_gpus[j]) * v)
    for r, key in enumerate(zip(em.d_org.tolist(), em.d_type.tolist())):
        prob += d[r] <= pulp.lpSum(held[key])
    return len(em.d)


def share_rows(em: EpochModel, prob, x: list, k: list, m: list) -> int:
    """share[o, s]: the tiers met under org node o on share column s (its type, or every type
    where one budget spans them) never exceed its tier-1 GPUs there."""
    import pulp

    snap, req = em.snap, em.req
    tiers: dict[tuple[int, int], list] = {}
    for r, (o, t) in enumerate(zip(em.m_org.tolist(), em.m_type.tolist())):
        tiers.setdefault((o, t), []).append(m[r])
    got: dict[tuple[int, int], list] = {key: [] for key in tiers}
    M = snap.org.membership()
    col = em.tg.share_col.tolist()
    holders = _holders(em, x, k, moves=em.tg.pooled)
    for j, t, v in holders:
        if not snap.job_tier1[j, t]:
            continue
        for o in np.flatnonzero(M[:, snap.job_project[j]]).tolist():
            if (o, col[t]) in got:
                got[o, col[t]].append(int(snap.job_gpus[j]) * v)
    # a waiting reservation counts as held on its project's path until its gang starts
    for h in em.res.held:
        if h.due:
            continue
        g = int(snap.job_gpus[h.job])
        mine = [x[ci] for ci in range(len(x)) if int(req.cand_job[ci]) == h.job]
        for o in np.flatnonzero(M[:, snap.job_project[h.job]]).tolist():
            if (o, col[h.type]) in got:
                got[o, col[h.type]] += [g] + [-g * v for v in mine]
    for key, ms in tiers.items():
        prob += pulp.lpSum(ms) <= pulp.lpSum(got[key])
    return len(tiers)


def order_rows(em: EpochModel, prob, x: list) -> int:
    """order: a queued job starts only if the job ahead of it in its project does (allocated
    work, and unallocated work among itself)."""
    import pulp

    from optalloc.model.job_groups import order_columns

    snap, req = em.snap, em.req
    by_job: dict[int, list] = {}
    on = order_columns(snap, req)  # allocated starts; unallocated work's among itself
    for ci in range(len(x)):
        if on[ci]:
            by_job.setdefault(int(req.cand_job[ci]), []).append(x[ci])
    for a, b in zip(em.prec_a.tolist(), em.prec_b.tolist()):
        prob += pulp.lpSum(by_job[b]) - pulp.lpSum(by_job[a]) <= 0
    # order_types: b's starts on the types its job ahead may use, as optalloc's model
    typed: dict[tuple[int, int], list] = {}
    for a, c in zip(em.ordx_a.tolist(), em.ordx_c.tolist()):
        typed.setdefault((int(req.cand_job[c]), a), []).append(x[c])
    for (_, a), xs in typed.items():
        prob += pulp.lpSum(xs) - pulp.lpSum(by_job[a]) <= 0
    return len(em.prec_a) + len(typed)


def keep_order_rows(em: EpochModel, prob, x: list, k: list) -> int:
    """keep_order: a start (or a move) on a running job's type of a job of its project with a
    lower priority, only while the running one runs (kept, or moved)."""
    import pulp

    req = em.req
    moves: dict[int, list] = {}
    for ci in range(len(x)):
        if req.cand_move[ci] or req.cand_restart[ci]:
            moves.setdefault(int(req.cand_job[ci]), []).append(x[ci])
    for i, c in zip(em.keep_i.tolist(), em.keep_c.tolist()):
        prob += x[c] - k[i] - pulp.lpSum(moves.get(int(req.run_job[i]), [])) <= 0
    return len(em.keep_i)
