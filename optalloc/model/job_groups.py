"""What the team's order links (optalloc.model.order.precedence_pairs, the `order` rows, and
optalloc.model.type_order, the `order_types` rows): the queued jobs of each project grouped by
the gpu_types they may start on, and whether a job ahead fits another's place, type by type.

A job's shape may differ by type (optalloc.shape): a 6-GPU job is one node on an 8-GPU b200
node and a whole-node gang 4 + 2 on h100 nodes of 4 and 2. Fitting is judged on each type the
two jobs may both use, with the job's shape *there*: before, a job whose shape differed
between its types had no shape class, so it was linked to no job ahead of it, and a
priority-1 4-GPU job waited while its team's priority-0 6-GPU job took the b200 node it
would have fitted (a helper's review, stop 42; greedy starts the priority-1 job).

Allocated and unallocated work are ordered apart: a job's allocated starts (the types where
its project has a share) are linked with its team's other allocated starts; a job with no
allocated start (min_runtime 0, or no share on any of its types) with its team's other such
jobs. Unallocated work yields to allocated work (DESIGN.md rule 4) but keeps its team's own
order among itself (rule 3): a priority-5 2-GPU unallocated job waited while its team's
priority-0 8-GPU one took the node (a helper's review, stop 42; greedy runs the priority-5
job).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from optalloc.contract import short_jobs
from optalloc.model.order import project_order
from optalloc.shape import PIECES, SMALL, WHOLE
from optalloc.snapshot import Snapshot
from optalloc.uniq import unique_rows


class JobGroups(NamedTuple):
    jobs: np.ndarray   # (n,) job indices
    g: np.ndarray      # (n,) GPUs
    gpn: np.ndarray    # (n,) gpus_per_node (0: not given)
    pos: np.ndarray    # (n,) position in its project's order
    group: np.ndarray  # (n,) group id: (project, allocated or not, candidate types)
    gproj: np.ndarray  # (groups,) the group's project * 2 + allocated (groups ordered apart)
    gtypes: np.ndarray  # (groups, T) the group's candidate types
    shp: np.ndarray    # (n, T) shape class on each type, -1 where it may not start there
    size: np.ndarray   # (n, T) GPUs per full piece there (SMALL: all of them)
    pcs: np.ndarray    # (n, T) full pieces there
    rem: np.ndarray    # (n, T) GPUs of a whole-node gang's remainder node there (0: none)
    kind: np.ndarray   # (n,) the job's kind as a job ahead: (GPUs, pieces of q, shapes)
    kinds: np.ndarray  # (K, 2 + T) per kind: GPUs, q (0 unless a per-node gang), shapes


def ordered_candidates(snap: Snapshot, req) -> np.ndarray:
    """(C,) bool: the candidates the team's order links: a queued job's start (or a start
    after a down node displaced it), on a type where it is allocated, or anywhere for a job
    with no allocated start at all (unallocated work, ordered among itself); never a running
    job's move or restart."""
    if "_ordered_candidates" not in req.__dict__:
        cj, ct = req.cand_job, req.cand_type
        t1 = snap.job_tier1[cj, ct]
        has_t1 = np.zeros(len(snap.jobs), bool)
        has_t1[cj[t1]] = True
        req.__dict__["_ordered_candidates"] = ((t1 | ~has_t1[cj])
                                               & ~(req.cand_move | req.cand_restart))
    return req.__dict__["_ordered_candidates"]


def order_columns(snap: Snapshot, req) -> np.ndarray:
    """(C,) bool: the candidates an `order` row sums for its jobs: a job's allocated starts,
    or all its starts where it has no allocated one (ordered_candidates, as the rows have
    always read the allocated ones)."""
    return ordered_candidates(snap, req) | snap.job_tier1[req.cand_job, req.cand_type]


def job_groups(snap: Snapshot, req) -> JobGroups | None:
    """The queued jobs the team's order links, or None when fewer than two wait. Made once
    per requirements (the `order` and the `order_types` links both read it)."""
    if "_job_groups" not in req.__dict__:
        req.__dict__["_job_groups"] = _job_groups(snap, req)
    return req.__dict__["_job_groups"]


def _job_groups(snap: Snapshot, req) -> JobGroups | None:
    cj, ct = req.cand_job, req.cand_type
    if not len(cj):
        return None
    ok = ordered_candidates(snap, req)
    J, T = snap.job_allowed.shape
    mask = np.zeros((J, T), dtype=bool)
    mask[cj[ok], ct[ok]] = True
    jobs = np.flatnonzero(mask.any(axis=1))
    if len(jobs) < 2:
        return None
    m = mask[jobs]
    alloc = (snap.job_tier1[jobs] & m).any(axis=1)
    proj2 = snap.job_project[jobs].astype(np.int64) * 2 + alloc
    key = np.concatenate([proj2[:, None], m.astype(np.int64)], axis=1)
    ukey, group = unique_rows(key)  # np.unique(axis=0) less its per-call cost (optalloc.uniq)
    shp = np.where(m, req.shape[jobs], -1).astype(np.int64)
    g, gpn = snap.job_gpus[jobs].astype(np.int64), snap.job_gpn[jobs].astype(np.int64)
    q = np.where((shp == PIECES).any(axis=1), gpn, 0)
    kkey = np.concatenate([g[:, None], q[:, None], shp], axis=1)
    kinds, kind = unique_rows(kkey)
    return JobGroups(jobs, g, gpn, project_order(snap)[jobs], group, ukey[:, 0],
                     ukey[:, 1:].astype(bool), shp, req.size[jobs].astype(np.int64),
                     req.pieces[jobs].astype(np.int64), req.rem[jobs].astype(np.int64),
                     np.asarray(kind).reshape(-1), kinds)


def fits_on(ca, s, q, cb, gb, size_b, gpn_b, pcs_b, rem_b) -> np.ndarray:
    """Elementwise, on one gpu_type: a job ahead of shape class `ca` there, `s` GPUs (in
    pieces of `q` where a per-node gang), fits the place of a job b of class `cb` there: a
    single-node job in b's per-node chunk (b's GPUs on one node, a whole node, or its
    gpus_per_node); a whole-node gang in a whole-node gang of as many GPUs or more; a
    per-node gang of q per node in as many of b's nodes of >= q GPUs: a per-node gang's
    pieces, or a whole-node gang's whole nodes and its remainder node when that has q (a
    priority-1 2 + 2 gang waited while its team's priority-0 8 + 4 gang took both nodes: the
    remainder was not counted; a helper's review, stop 42)."""
    small = (ca == SMALL) & (cb >= 0) & (gb >= s) & (size_b >= s)
    whole = (ca == WHOLE) & (cb == WHOLE) & (gb >= s)
    qq = np.maximum(q, 1)
    nodes = np.where((cb == PIECES) & (gpn_b >= qq), pcs_b,
                     np.where((cb == WHOLE) & (size_b >= qq), pcs_b + (rem_b >= qq), 0))
    pieces = (ca == PIECES) & (nodes >= s // qq)
    return small | whole | pieces


def kind_fits(gr: JobGroups, k, b, types: np.ndarray | None = None) -> np.ndarray:
    """Elementwise over pairs (kind k[i] ahead, job position b[i] in gr): a job of that kind
    fits b's place on every type both may use (`types`: (P, T) bool, further confined to
    those; None: the kind's own types, which are b's in the same group)."""
    k, b = np.asarray(k), np.asarray(b)
    K = gr.kinds[k]
    s, q, ca = K[:, 0], K[:, 1], K[:, 2:]
    need = ca >= 0
    if types is not None:
        need = need & types
    out = np.ones(len(b), bool)
    for t in range(ca.shape[1]):
        on = need[:, t]
        if not on.any():
            continue
        i = np.flatnonzero(on)
        bi = b[i]
        ok = fits_on(ca[i, t], s[i], q[i], gr.shp[bi, t], gr.g[bi], gr.size[bi, t],
                     gr.gpn[bi], gr.pcs[bi, t], gr.rem[bi, t])
        out[i] &= ok
    return out


_EMPTY = np.zeros(0, np.int64)


def precedence_pairs(snap: Snapshot, req) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) job index pairs: a ahead of b in its project's order, of one group (the same
    candidate types, both allocated there or both unallocated work), a must start if b does,
    where a fits b's place on every one of those types (fits_on). Each b is linked to the
    latest job ahead of it of each kind that fits (the rest follows by transitivity), and to
    the latest such that is not a debug job; one searchsorted over every kind and group."""
    gr = job_groups(snap, req)
    if gr is None:
        return _EMPTY, _EMPTY
    jobs, pos, group = gr.jobs, gr.pos, gr.group
    order = np.lexsort((pos, group))  # by group, then the project's order
    gk = group[order] * (int(pos.max()) + 1) + pos[order]  # ascending
    short = short_jobs(snap)[jobs[order]]
    kind_o = gr.kind[order]
    # per job, its type set's id; the jobs of each type set, in `order` positions
    _, gset = unique_rows(gr.gtypes)  # np.unique(axis=0) less its per-call cost
    tset = gset[group[order]]
    by_set = np.argsort(tset, kind="stable")
    set_at = np.searchsorted(tset[by_set], np.arange(int(tset.max()) + 2))  # set s: [s, s+1)
    by_kind = np.argsort(kind_o, kind="stable")
    cut = np.flatnonzero(np.r_[True, kind_o[by_kind][1:] != kind_o[by_kind][:-1]])
    ends = np.r_[cut[1:], len(by_kind)]
    # every kind against the jobs of its own type set (the only ones it can be linked
    # with), all kinds at once: one kind_fits over the (kind, job) pairs instead of one call
    # per kind (the 1,024-GPU bench epoch: ~90 kinds, 7 ms a model)
    first = by_kind[cut]
    kd, ts = kind_o[first], tset[first]
    lo, hi = set_at[ts], set_at[ts + 1]
    seg = np.repeat(np.arange(len(cut)), hi - lo)  # per pair: its kind's segment
    cand = by_set[np.arange(len(seg)) - np.repeat(np.cumsum(hi - lo) - (hi - lo) - lo,
                                                  hi - lo)]
    fit = kind_fits(gr, kd[seg], order[cand])
    # each fitting job linked to the latest job ahead of it of the kind, in its group: one
    # searchsorted over every kind's (segment, order position) keys
    span = np.int64(int(gk.max()) + 1)
    hseg = np.repeat(np.arange(len(cut)), ends - cut)  # by_kind is by segment, then order
    fseg, f = seg[fit], cand[fit]
    A, B = [], []

    def _link(hs: np.ndarray, h: np.ndarray) -> None:
        hk = hs * span + gk[h]  # ascending: by segment, then the project's order
        k = np.searchsorted(hk, fseg * span + gk[f], side="left") - 1
        ok_ = k >= 0
        ok_[ok_] = hs[k[ok_]] == fseg[ok_]
        k, ff = k[ok_], f[ok_]
        same = group[order[h[k]]] == group[order[ff]]
        A.append(jobs[order[h[k[same]]]])
        B.append(jobs[order[ff[same]]])

    _link(hseg, by_kind)
    # and to the latest such job ahead that is not a debug job: a debug job's own link to a
    # longer job of its priority ahead of it is dropped (linked_pairs), and the chain through
    # it with it (A's priority-0 4-GPU job ran while its priority-2 1-GPU job waited, linked
    # only to a priority-2 debug job between them); only for kinds with a debug job
    sk = short[by_kind]
    has_short = np.zeros(len(cut), bool)
    has_short[hseg[sk]] = True
    keep = has_short[hseg] & ~sk
    if has_short.any():
        _link(hseg[keep], by_kind[keep])
    return linked_pairs(snap, A, B)


def linked_pairs(snap: Snapshot, A: list, B: list) -> tuple[np.ndarray, np.ndarray]:
    """The (a, b) pairs of the links A[i] -> B[i] (lists of index arrays): self-links dropped,
    and a debug job never behind a longer one of its own priority; unique, sorted."""
    if not A:
        return _EMPTY, _EMPTY
    a, b = np.concatenate(A), np.concatenate(B)
    short = short_jobs(snap)
    # a debug job may start while a longer job of its priority ahead of it waits (the debug
    # allowance): the contract's cheap grant; inside the target it is still worth less than
    # the jobs ahead. Never one its team declared more important (README, "The contract")
    prio = snap.job_priority
    keep = (a != b) & ~(short[b] & ~short[a] & (prio[b] >= prio[a]))
    # one integer per pair (a * J + b): sorted as the pairs are, by a then b, and unique
    # (np.unique over rows sorted a structured view: the 32,768-GPU epoch ~0.1 s)
    J = np.int64(max(len(snap.jobs), 1))
    key = np.unique(a[keep].astype(np.int64) * J + b[keep])
    return key // J, key % J
