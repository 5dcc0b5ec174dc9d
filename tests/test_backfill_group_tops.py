"""optalloc.plan.group_tops walks every value group at once; the backfill's `group_top` walked
them one by one. On random job states and rooms both must find the same best job per group,
end each walk at the same position and put out the same jobs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from optalloc.bench.instances import make_instance
from optalloc.model.build import build_model
from optalloc.plan.backfill import value_groups
from optalloc.plan.group_tops import group_tops


def _walk_one_by_one(em, groups, state: bytearray, room: list):
    """The backfill's group_top for each group from position 0, in group order."""
    keys, gpus, jobs, _ = groups
    req, T = em.req, len(room) - 1
    types_of: dict = {}
    for j, t in zip(req.cand_job.tolist(), req.cand_type.tolist()):
        types_of.setdefault(j, []).append(t)
    g = em.snap.job_gpus.astype(float).tolist()
    tops, at = [], []
    for q, js in enumerate(jobs):
        if gpus[q] > room[T]:
            at.append(len(js))
            continue
        fits = keys[q] is not None and gpus[q] <= room[keys[q][1]]
        i = 0
        while i < len(js) and (state[js[i]] or not (
                fits or any(g[js[i]] <= room[t] for t in types_of[js[i]]))):
            state[js[i]] = 2
            i += 1
        at.append(i)
        if i < len(js):
            tops.append((q, i))
    return tops, at


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), draw=st.integers(0, 10_000))
def test_group_tops_walks_as_group_top_does(seed, draw):
    em = build_model(make_instance(seed=seed, n_nodes=16, n_jobs=150, n_programs=3,
                                   projects_per_program=3, per_node_gang_frac=0.3))
    groups = value_groups(em)
    rng = np.random.default_rng(draw)
    J, T = len(em.snap.jobs), len(em.snap.gpu_types)
    state = bytearray(rng.choice([0, 0, 0, 1, 2], size=J).astype(np.uint8).tobytes())
    room = rng.integers(0, 40, size=T).astype(float).tolist()
    room.append(max(room))
    want_state = bytearray(state)
    want = _walk_one_by_one(em, groups, want_state, room)
    got = group_tops(em, groups, state, room)
    assert got == want
    assert state == want_state
