"""The `order` pairs (optalloc.model.order.precedence_pairs: a job ahead of another in its
project's line that fits in its place) computed with one searchsorted per kind of job over all
groups equal the pairs of the group-by-group loop they replaced (kept here as the reference),
on random clusters and on the bench's instances."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from optalloc.bench.instances import scale_instance
from optalloc.contract import short_jobs
from optalloc.model.order import precedence_pairs, project_order
from optalloc.model.requirements import compute_requirements
from optalloc.shape import PIECES, SMALL, WHOLE

from test_epoch_properties import instances


def _reference(ctx_snap, req) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) job index pairs: a ahead of b in its project's order, a must start if b does.

    a "fits in b's place" on every candidate type of the pair (the same type set): a
    single-node a no larger than b's per-node chunk (b's GPUs on one node, a whole node, or
    its gpus_per_node), a whole-node gang a no larger than a whole-node gang b, a per-node
    gang a of b's gpus_per_node with no more pieces."""
    snap = ctx_snap
    cj, ct = req.cand_job, req.cand_type
    empty = np.zeros(0, np.int64)
    if not len(cj):
        return empty, empty
    ok = snap.job_tier1[cj, ct]  # queued, or displaced from a down node (queued again)
    J, T = snap.job_allowed.shape
    mask = np.zeros((J, T), dtype=bool)
    mask[cj[ok], ct[ok]] = True
    jobs = np.flatnonzero(mask.any(axis=1))
    if len(jobs) < 2:
        return empty, empty
    m = mask[jobs]
    big = np.iinfo(np.int64).max
    shape = np.where(m, req.shape[jobs], -1)
    # the job's shape class if it is the same on all its types, else -1 (no pairs)
    lo = np.where(m, shape, big).min(axis=1)
    hi = np.where(m, shape, -1).max(axis=1)
    cls = np.where(lo == hi, lo, -1)
    chunk = np.where(m, req.size[jobs], big).min(axis=1)  # smallest per-node chunk
    gpn = snap.job_gpn[jobs]
    g = snap.job_gpus[jobs]
    pos = project_order(snap)[jobs]
    key = np.concatenate([snap.job_project[jobs][:, None], m.astype(np.int64)], axis=1)
    _, group = np.unique(key, axis=0, return_inverse=True)
    group = np.asarray(group).reshape(-1)
    A, B = [], []
    order = np.lexsort((pos, group))
    cut = np.r_[0, np.flatnonzero(np.diff(group[order])) + 1, len(order)]
    for lo_, hi_ in zip(cut[:-1], cut[1:]):
        if hi_ - lo_ < 2:
            continue
        idx = order[lo_:hi_]  # one group, in project order
        ci, gi, pi, ki, ni = cls[idx], g[idx], pos[idx], chunk[idx], gpn[idx]
        for s in np.unique(gi[ci == SMALL]):  # single-node a of size s
            have = np.flatnonzero((ci == SMALL) & (gi == s))
            fits = np.flatnonzero((ci >= 0) & (gi >= s) & (ki >= s))
            _ref_link(A, B, jobs, idx, pi, have, fits)
        for s in np.unique(gi[ci == WHOLE]):  # whole-node gang a of s GPUs
            have = np.flatnonzero((ci == WHOLE) & (gi == s))
            _ref_link(A, B, jobs, idx, pi, have, np.flatnonzero((ci == WHOLE) & (gi >= s)))
        for s, q in set(zip(gi[ci == PIECES].tolist(), ni[ci == PIECES].tolist())):
            have = np.flatnonzero((ci == PIECES) & (gi == s) & (ni == q))
            _ref_link(A, B, jobs, idx, pi, have, np.flatnonzero((ci == PIECES) & (gi >= s) & (ni == q)))
    if not A:
        return empty, empty
    a, b = np.concatenate(A), np.concatenate(B)
    short = short_jobs(snap)
    # a debug job may start while a longer job ahead of it waits (the debug allowance): the
    # contract's cheap grant; inside the target it is still worth less than the jobs ahead
    keep = (a != b) & ~(short[b] & ~short[a])
    pairs = np.unique(np.stack([a[keep], b[keep]], axis=1), axis=0)
    return pairs[:, 0], pairs[:, 1]


def _ref_link(A: list, B: list, jobs, idx, pi, have, cand) -> None:
    """Link each job in `cand` to the latest job of `have` ahead of it."""
    k = np.searchsorted(pi[have], pi[cand], side="left") - 1
    sel = k >= 0
    A.append(jobs[idx[have[k[sel]]]])
    B.append(jobs[idx[cand[sel]]])


def _same(snap) -> int:
    req = compute_requirements(snap)
    got, want = precedence_pairs(snap, req), _reference(snap, req)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    return len(got[0])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_jobs=40))
def test_the_pairs_equal_the_group_by_group_reference_on_random_clusters(snap):
    _same(snap)


@pytest.mark.parametrize("size,seed", [("S", 0), ("S", 1), ("M", 0), ("M", 1)])
def test_the_pairs_equal_the_group_by_group_reference_on_the_bench_instances(size, seed):
    assert _same(scale_instance(size, seed)) > 0
