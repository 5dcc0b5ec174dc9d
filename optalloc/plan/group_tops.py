"""Every value group's best entry at once, for the backfill's first heap and its `reopen`
(optalloc.plan.backfill.restore_and_backfill).

The backfill keeps one heap entry per value group (optalloc.plan.backfill.value_groups): the
group's best job that may still start. Its `group_top` finds it by walking the group's jobs
in order and putting out (state 2) every job it passes that already has an entry or is
decided (state 1 or 2) or fits no type's room any more. Run for every group at the start of
each backfill (and again at each reopen), that walk was a Python loop over every group (bench
M: ~700 groups, 7 backfills an epoch; XL: 5,800 groups). Here it is one pass over all the
groups' jobs as arrays, with the same result: the walks of different groups do not change
each other's outcome (a job passed in one group for lack of room fits no type, so no other
group's walk would stop at it either), so they may run in any order.
"""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel


def group_arrays(em: EpochModel, groups: tuple) -> tuple:
    """The value groups `groups` (value_groups(em)) flat, once per model: per group its first
    position and size, its GPUs and its own type (-1: unallocated); per position its job,
    group and place in the group."""
    out = em.__dict__.get("_group_arrays")
    if out is None:
        keys, gpus, jobs, _ = groups
        size = np.array([len(js) for js in jobs], np.int64)
        start = np.cumsum(size) - size
        flat = np.array([j for js in jobs for j in js], np.int64)
        grp = np.repeat(np.arange(len(jobs)), size)
        pos = np.arange(len(flat)) - start[grp]
        own = np.array([-1 if k is None else k[1] for k in keys], np.int64)
        out = em.__dict__["_group_arrays"] = (start, size, np.asarray(gpus, float), own,
                                              flat, grp, pos)
    return out


def group_tops(em: EpochModel, groups: tuple, state: bytearray,
               room: list) -> tuple[list[tuple[int, int]], list[int]]:
    """(group, position of its best job that may start now) for every group that has one, in
    group order, and per group where its walk ended (its size: none); every job a group's
    walk passes set to 2 in `state` (as group_top does for each group from position 0).
    `groups`: value_groups(em); `room`: the backfill's per-type room, then the most of any
    type."""
    start, size, gpus, own, flat, grp, pos = group_arrays(em, groups)
    if not len(size):
        return [], []
    req, snap = em.req, em.snap
    r = np.asarray(room, float)
    T = len(r) - 1
    st = np.frombuffer(state, np.uint8)  # a view: writes go to `state`
    live = gpus <= r[T]  # no type has room for its jobs' size: none of them fits (not walked)
    fits = (own >= 0) & (gpus <= r[np.maximum(own, 0)])  # its own type has room for all
    # could_fit per job: some candidate type with room for its GPUs
    g = snap.job_gpus.astype(float)
    cf = np.zeros(len(snap.jobs), bool)
    cf[req.cand_job[g[req.cand_job] <= r[req.cand_type]]] = True
    ok = (st[flat] == 0) & (fits[grp] | cf[flat])
    first = np.full(len(size), -1, np.int64)  # per group: its first ok position
    hit = ok.nonzero()[0]  # group by group (flat is), in order within each
    head = np.ones(len(hit), bool)
    head[1:] = grp[hit[1:]] != grp[hit[:-1]]
    first[grp[hit[head]]] = pos[hit[head]]
    walked = live & (first >= 0)
    end = np.where(walked, first, size)  # the walk passes every position before it
    passed = live[grp] & (pos < end[grp])
    st[flat[passed]] = 2
    return list(zip(walked.nonzero()[0].tolist(), first[walked].tolist())), end.tolist()
