"""The backfill prices one entry per value group (optalloc.plan.backfill.value_groups) instead of
every waiting job. That is exact only if every candidate of a group gains the same from the
share tiers whatever they hold, so that the group's order by work value is its order by
marginal objective at every step. These tests check that premise and the grouping itself on
generated epochs; that the plans are the same as with one heap entry per job was measured on
the 26 bench epochs and 4,339 simulated decisions when the grouping landed."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from optalloc.bench.instances import make_instance
from optalloc.model.build import build_model
from optalloc.model.objective.impact import candidate_values
from optalloc.plan.backfill import ShareGain, value_groups


def _model(seed: int, n_nodes: int = 24, n_jobs: int = 160):
    return build_model(make_instance(seed=seed, n_nodes=n_nodes, n_jobs=n_jobs, n_programs=3,
                                     projects_per_program=3))


def _entries(em):
    """Every (job, type, value) candidate of the model, as a sorted list."""
    req = em.req
    v = candidate_values(em.imp, req)  # a move's value is capped at its keep's
    return sorted(zip(req.cand_job.tolist(), req.cand_type.tolist(), v.tolist()))


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_the_groups_hold_every_candidate_once_best_value_first(seed):
    em = _model(seed)
    keys, gpus, jobs, vals = value_groups(em)
    assert len(keys) == len(gpus) == len(jobs) == len(vals)
    sg = ShareGain(em)
    req = em.req
    types_of = {}
    value = dict(zip(zip(req.cand_job.tolist(), req.cand_type.tolist()),
                     candidate_values(em.imp, req).tolist()))
    for j, t in zip(req.cand_job.tolist(), req.cand_type.tolist()):
        types_of.setdefault(j, []).append(t)
    # a running job's restart on its own type gains nothing (no share row counts it): no key
    restarts = set(zip(req.cand_job[req.cand_restart].tolist(),
                       req.cand_type[req.cand_restart].tolist()))
    seen = []
    for key, g, js, vs in zip(keys, gpus, jobs, vals):
        assert js, "no empty group"
        # best value first, then the lowest job index (the per-job heap's tie order)
        assert [(-v, j) for v, j in zip(vs, js)] == sorted((-v, j) for v, j in zip(vs, js))
        for j, v in zip(js, vs):
            assert float(em.snap.job_gpus[j]) == g
            # the entry is one of j's candidates with this key and this value
            ts = [t for t in types_of[j]
                  if (None if (j, t) in restarts else sg.key(j, t)) == key
                  and value[(j, t)] == v and (j, t, v) not in seen]
            assert ts, (j, key, v)  # (a job's moves to two types may share key and value)
            seen.append((j, ts[0], v))
    assert sorted(seen) == _entries(em)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), fill=st.integers(0, 10_000))
def test_every_candidate_of_a_group_gains_the_same_whatever_the_tiers_hold(seed, fill):
    """The premise of the grouping: with any jobs already counted in the tiers (floors and
    targets part filled, the debug allowance part used), each entry's own share gain equals
    its group's."""
    em = _model(seed)
    keys, _, jobs, _ = value_groups(em)
    sg = ShareGain(em)
    rng = np.random.default_rng(fill)
    req = em.req
    for c in rng.choice(len(req.cand_job), size=min(40, len(req.cand_job)), replace=False):
        sg.add(int(req.cand_job[c]), int(req.cand_type[c]))
    for key, js in zip(keys, jobs):
        want = sg.gain_of(key)
        for j in js:
            gains = [sg.gain(j, t) for t in range(len(em.snap.gpu_types))
                     if em.snap.job_tier1[j, t] and sg.key(j, t) == key]
            if key is None:
                assert want == 0.0
            else:
                assert gains and all(g == want for g in gains)
