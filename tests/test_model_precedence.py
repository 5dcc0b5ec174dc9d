"""The `order` pairs (optalloc.model.order.precedence_pairs: a job ahead of another in its
project's line that fits in its place) computed with one searchsorted per kind of job over all
groups equal the pairs of the group-by-group loop they replaced (kept here as the reference,
on the module's own groups and last filter, with the same fit rules), on random clusters and
on the bench's instances."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from optalloc.contract import short_jobs
from optalloc.bench.instances import scale_instance
from optalloc.model.order import job_groups, linked_pairs, precedence_pairs
from optalloc.model.requirements import compute_requirements
from optalloc.shape import PIECES, SMALL, WHOLE

from test_epoch_properties import instances


def _reference(snap, req) -> tuple[np.ndarray, np.ndarray]:
    """The pairs as linked before `4038756`: group by group, in a Python loop (the groups and
    the pairs' last filter are the module's own, unchanged by that commit)."""
    grouped = job_groups(snap, req)
    if grouped is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    jobs, cls, g, chunk, gpn, pos, group, npieces = grouped
    short = short_jobs(snap)
    A, B = [], []
    order = np.lexsort((pos, group))
    cut = np.r_[0, np.flatnonzero(np.diff(group[order])) + 1, len(order)]
    for lo_, hi_ in zip(cut[:-1], cut[1:]):
        if hi_ - lo_ < 2:
            continue
        idx = order[lo_:hi_]  # one group, in project order
        ci, gi, pi, ki, ni, mi = cls[idx], g[idx], pos[idx], chunk[idx], gpn[idx], npieces[idx]
        for s in np.unique(gi[ci == SMALL]):  # single-node a of size s
            have = np.flatnonzero((ci == SMALL) & (gi == s))
            fits = np.flatnonzero((ci >= 0) & (gi >= s) & (ki >= s))
            _ref_link(A, B, jobs, idx, pi, have, fits, short)
        for s in np.unique(gi[ci == WHOLE]):  # whole-node gang a of s GPUs
            have = np.flatnonzero((ci == WHOLE) & (gi == s))
            _ref_link(A, B, jobs, idx, pi, have, np.flatnonzero((ci == WHOLE) & (gi >= s)),
                      short)
        for s, q in set(zip(gi[ci == PIECES].tolist(), ni[ci == PIECES].tolist())):
            have = np.flatnonzero((ci == PIECES) & (gi == s) & (ni == q))
            room = ((ci == PIECES) & (ni >= q)) | ((ci == WHOLE) & (ki >= q))
            _ref_link(A, B, jobs, idx, pi, have, np.flatnonzero(room & (mi >= s // q)), short)
    return linked_pairs(snap, A, B)


def _ref_link(A: list, B: list, jobs, idx, pi, have, cand, short=None) -> None:
    """Link each job in `cand` to the latest job of `have` ahead of it, and (stop 35) to the
    latest one of them that is not a debug job (`short`, per job index)."""
    k = np.searchsorted(pi[have], pi[cand], side="left") - 1
    sel = k >= 0
    A.append(jobs[idx[have[k[sel]]]])
    B.append(jobs[idx[cand[sel]]])
    if short is not None and short[jobs[idx[have]]].any():
        _ref_link(A, B, jobs, idx, pi, have[~short[jobs[idx[have]]]], cand)


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
