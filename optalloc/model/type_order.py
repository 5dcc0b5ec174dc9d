"""A team's order between queued jobs that may use different gpu_types (DESIGN.md rule 3).

The `order` rows (optalloc.model.order.precedence_pairs) link jobs of one project with the
same candidate types: a job starts only if the job ahead of it that fits its place does. Jobs
confined to some of the types were linked to no one: on one h100 and one a100 node, A's
priority-2 1-GPU job allowed only a100 waited while A's two priority-0 8-GPU jobs (any type)
took both nodes; greedy runs it and one of them. Here the links between jobs of one project
whose type sets differ but meet: b's starts on the types a may use too wait for a, where a is
ahead of b in the team's order by a strictly higher declared priority and fits b's place
there:

    sum of x[b, t] over t in types(a) & types(b)  <=  sum of x[a, t] over types(a)

Each b is linked, per other type set of its project and per kind of job ahead (the kinds of
precedence_pairs), to the latest such job ahead of it that fits its place, and to the latest
that is not a debug job; the links inside a type set (the `order` rows) carry the rest.
Submit order inside one priority is not linked across type sets: with it, 10 of the bench's
1,024-GPU epochs (seeds 0-44) went on to RINS or the whole MIP, against 6 by priority only
(p90 on seeds 0-29: 1.39 s against 0.40 s).
Candidate-level, as (job a, candidate c of b) pairs: b's candidates on its other types are
free of a.
"""

from __future__ import annotations

import numpy as np

from optalloc.contract import short_jobs
from optalloc.model.order import job_groups
from optalloc.shape import PIECES, SMALL, WHOLE
from optalloc.snapshot import Snapshot

_EMPTY = np.zeros(0, np.int64)
_SUBSET_ONLY = False


def type_links(snap: Snapshot, req) -> tuple[np.ndarray, np.ndarray]:
    """(a, c): job a must start if candidate c (of a job b behind it, on a type a may use)
    does; sorted by (b, a)."""
    grouped = job_groups(snap, req)
    if grouped is None:
        return _EMPTY, _EMPTY
    jobs, cls, g, chunk, gpn, pos, group, npieces = grouped
    cj, ct = req.cand_job, req.cand_type
    ok = snap.job_tier1[cj, ct] & ~(req.cand_move | req.cand_restart)
    J, T = snap.job_allowed.shape
    mask = np.zeros((J, T), dtype=bool)
    mask[cj[ok], ct[ok]] = True
    ng = int(group.max()) + 1
    gtypes = np.zeros((ng, T), dtype=bool)
    gtypes[group] = mask[jobs]
    gproj = np.zeros(ng, np.int64)
    gproj[group] = snap.job_project[jobs]
    short = short_jobs(snap)[jobs]
    rank = -snap.job_priority[jobs].astype(np.int64)  # ascending in the project's order
    A, B, G = [], [], []
    by_group = [np.flatnonzero(group == q) for q in range(ng)]
    for q in range(ng):  # members by position in their project's order
        by_group[q] = by_group[q][np.argsort(pos[by_group[q]], kind="stable")]
    for p in np.unique(gproj):
        qs = np.flatnonzero(gproj == p)
        if len(qs) < 2:
            continue
        for qa in qs.tolist():
            for qb in qs.tolist():
                if qa == qb or not (gtypes[qa] & gtypes[qb]).any():
                    continue
                if _SUBSET_ONLY and (gtypes[qa] & ~gtypes[qb]).any():
                    continue
                ia, ib = by_group[qa], by_group[qb]
                for a, b in _links(ia, ib, cls, g, chunk, gpn, rank, npieces, short):
                    A.append(jobs[a])
                    B.append(jobs[b])
                    G.append(np.full(len(a), qa))
    if not A:
        return _EMPTY, _EMPTY
    a, b, qa = np.concatenate(A), np.concatenate(B), np.concatenate(G)
    # a debug job may pass a longer job of its priority (the debug allowance), never one its
    # team declared more important (as optalloc.model.order.linked_pairs)
    sj, prio = short_jobs(snap), snap.job_priority
    keep = ~(sj[b] & ~sj[a] & (prio[b] >= prio[a]))
    pairs = np.unique(np.stack([b[keep], a[keep], qa[keep]], axis=1), axis=0)
    if not len(pairs):
        return _EMPTY, _EMPTY
    # each pair's candidates of b on the types a may use
    sel = np.flatnonzero(ok)
    order = np.argsort(cj[sel], kind="stable")
    sc = sel[order]
    scj = cj[sc]
    start = np.searchsorted(scj, pairs[:, 0], "left")
    n = np.searchsorted(scj, pairs[:, 0], "right") - start
    row = np.repeat(np.arange(len(pairs)), n)
    c = sc[np.repeat(start - np.cumsum(n) + n, n) + np.arange(int(n.sum()))]
    on = gtypes[pairs[row, 2], ct[c]]
    return pairs[row[on], 1].astype(np.int64), c[on].astype(np.int64)


def _links(ia, ib, cls, g, chunk, gpn, rank, npieces, short):
    """(a, b) index pairs into the job arrays: each b of `ib` to the latest a of `ia` with a
    strictly higher priority (`rank`: minus the priority, ascending along `ia`) that fits its
    place, per kind of a (as precedence_pairs), and to the latest such a that is not a debug
    job."""
    pa, pb = rank[ia], rank[ib]
    ca, cb, ga, gb = cls[ia], cls[ib], g[ia], g[ib]

    def latest(have: np.ndarray, fits: np.ndarray):
        for h in (have, have & ~short[ia]) if (have & short[ia]).any() else (have,):
            hh, ff = np.flatnonzero(h), np.flatnonzero(fits)
            if not len(hh) or not len(ff):
                continue
            k = np.searchsorted(pa[hh], pb[ff], side="left") - 1
            yes = k >= 0
            yield ia[hh[k[yes]]], ib[ff[yes]]

    for s in np.unique(ga[ca == SMALL]):
        yield from latest((ca == SMALL) & (ga == s), (cb >= 0) & (gb >= s) & (chunk[ib] >= s))
    for s in np.unique(ga[ca == WHOLE]):
        yield from latest((ca == WHOLE) & (ga == s), (cb == WHOLE) & (gb >= s))
    qa_ = gpn[ia]
    for s, q in set(zip(ga[ca == PIECES].tolist(), qa_[ca == PIECES].tolist())):
        room = ((cb == PIECES) & (gpn[ib] >= q)) | ((cb == WHOLE) & (chunk[ib] >= q))
        yield from latest((ca == PIECES) & (ga == s) & (qa_ == q), room & (npieces[ib] >= s // q))
