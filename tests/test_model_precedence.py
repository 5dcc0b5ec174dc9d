"""The `order` pairs (optalloc.model.job_groups.precedence_pairs: a job ahead of another in its
project's line that fits in its place) computed with one searchsorted per kind of job over all
groups equal the pairs of a group-by-group, job-by-job loop (kept here as the reference, on
the module's own groups and last filter, with the fit rule written out per type), on random
clusters and on the bench's instances."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from optalloc.contract import short_jobs
from optalloc.bench.instances import scale_instance
from optalloc.model.job_groups import job_groups, linked_pairs, precedence_pairs
from optalloc.model.requirements import compute_requirements
from optalloc.shape import PIECES, SMALL, WHOLE

from test_epoch_properties import instances


def _fits_here(gr, a: int, b: int, t: int) -> bool:
    """Job position a fits job position b's place on type t, written out as the rule reads:
    a single-node job in b's per-node chunk; a whole-node gang in one of as many GPUs or
    more; a per-node gang of q per node in as many of b's nodes of >= q GPUs (a per-node
    gang's pieces, a whole-node gang's whole nodes and its remainder node when it has q)."""
    ca, cb = gr.shp[a, t], gr.shp[b, t]
    s, gb = gr.g[a], gr.g[b]
    if ca == SMALL:
        return cb >= 0 and gb >= s and gr.size[b, t] >= s
    if ca == WHOLE:
        return cb == WHOLE and gb >= s
    q = gr.gpn[a]
    if cb == PIECES and gr.gpn[b] >= q:
        nodes = gr.pcs[b, t]
    elif cb == WHOLE and gr.size[b, t] >= q:
        nodes = gr.pcs[b, t] + (gr.rem[b, t] >= q)
    else:
        nodes = 0
    return nodes >= s // q


def _reference(snap, req) -> tuple[np.ndarray, np.ndarray]:
    """Group by group, job by job: each job linked, per kind of job ahead of it, to the latest
    of that kind that fits its place on every type of the group, and to the latest such that
    is not a debug job."""
    gr = job_groups(snap, req)
    if gr is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    short = short_jobs(snap)[gr.jobs]
    A, B = [], []
    order = np.lexsort((gr.pos, gr.group))
    cut = np.r_[0, np.flatnonzero(np.diff(gr.group[order])) + 1, len(order)]
    for lo_, hi_ in zip(cut[:-1], cut[1:]):
        idx = order[lo_:hi_].tolist()  # one group, in project order
        types = np.flatnonzero(gr.gtypes[gr.group[idx[0]]]).tolist()
        for i, b in enumerate(idx):
            latest: dict = {}  # per kind: the latest job ahead that fits; and not a debug job
            for a in idx[:i]:
                if all(_fits_here(gr, a, b, t) for t in types):
                    latest[gr.kind[a]] = a
                    if not short[a]:
                        latest[("long", gr.kind[a])] = a
            for a in latest.values():
                A.append(gr.jobs[[a]])
                B.append(gr.jobs[[b]])
    return linked_pairs(snap, A, B)


def _same(snap) -> int:
    req = compute_requirements(snap)
    got, want = precedence_pairs(snap, req), _reference(snap, req)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    return len(got[0])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_jobs=40))
def test_the_pairs_equal_the_job_by_job_reference_on_random_clusters(snap):
    _same(snap)


@pytest.mark.parametrize("size,seed", [("S", 0), ("S", 1)])
def test_the_pairs_equal_the_job_by_job_reference_on_the_bench_instances(size, seed):
    assert _same(scale_instance(size, seed)) > 0
