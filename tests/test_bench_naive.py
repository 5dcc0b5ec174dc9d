"""The naive PuLP + CBC formulation is the same problem as optalloc's model, written element by
element: on the published toy it gives the shares, its plans keep every invariant, it never
beats optalloc's LP bound, and without per-node gangs its optimum is optalloc's MIP optimum."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optalloc.bench.checks import invariants, plan_of
from optalloc.bench.instances import _contract, _toy, make_instance
from optalloc.bench.naive import count_binaries, solve_naive
from optalloc.model.build import build_model
from optalloc.model.requirements import PIECES
from optalloc.plan.place import Placed
from optalloc.plan.reasons import got_by_org
from optalloc.solve import BACKENDS
from optalloc.types import SolverSettings

from test_epoch_properties import instances

pytestmark = pytest.mark.skipif(not BACKENDS["cbc"].available(), reason="CBC not installed")

EXACT = SolverSettings(time_limit_s=60.0, mip_gap=0.0)


def _naive(snap):
    em = build_model(snap)
    res = solve_naive(em, time_limit_s=60.0, mip_gap=0.0)
    return em, res, plan_of(snap, em.req.run_job[res.kept], res.placements)


def _gpus_by_project(snap, plan) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in plan.placements:
        proj = snap.jobs[snap.job_index[p.job_id]].project
        out[proj] = out.get(proj, 0) + p.gpus
    return out


def _has_pieces(em) -> bool:
    req = em.req
    return bool((req.shape[req.cand_job, req.cand_type] == PIECES).any())


CASES = [
    # (name, snapshot, GPUs per project after the plan, running jobs preempted)
    ("toy", _toy, {"A": 40, "B": 30, "C": 20, "D": 10}, set()),
    ("contract", _contract, None, set()),
]


@pytest.mark.parametrize("name,make,gpus,preempted", CASES, ids=[c[0] for c in CASES])
def test_the_naive_model_reaches_optalloc_s_optimum_on_the_reference_instances(
        name, make, gpus, preempted):
    snap = make()
    em, res, plan = _naive(snap)
    exact = BACKENDS["highs"].solve(em.lm, EXACT)
    assert res.status == "optimal" and exact.status == "optimal"
    assert res.objective == pytest.approx(exact.objective, rel=1e-9, abs=1e-9)
    assert res.solver_objective == pytest.approx(res.objective, rel=1e-9, abs=1e-9)
    assert invariants(snap, plan) == "ok"
    if gpus is not None:
        assert _gpus_by_project(snap, plan) == gpus
    assert {p.job_id for p in plan.preemptions} >= preempted


def test_the_contract_instance_keeps_protected_jobs_and_moves_none_onto_drained_nodes():
    snap = _contract()
    em, res, plan = _naive(snap)
    placed = {p.job_id: p for p in plan.placements}
    assert placed["prot"] == snap.jobs[snap.job_index["prot"]].placement  # protected: kept as is
    assert placed["drn"].node_names == ("b1",)  # running on a drain node: may stay
    new = [p for p in plan.placements if not snap.jobs[snap.job_index[p.job_id]].running]
    assert all(n != "b1" for p in new for n in p.node_names)


def test_the_binary_count_known_before_building_is_the_built_model_s():
    snap = make_instance(seed=3, n_nodes=6, n_jobs=40, n_programs=2, projects_per_program=2,
                         per_node_gang_frac=0.3, down_nodes=1, busy_drained_nodes=1)
    em = build_model(snap)
    res = solve_naive(em, time_limit_s=60.0, mip_gap=0.0)
    assert res.n_vars == count_binaries(em) + len(em.req.cand_job) + len(em.req.run_job) + len(em.m)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_jobs=16))
def test_naive_plans_keep_the_invariants_and_match_optalloc_s_optimum(snap):
    em, res, plan = _naive(snap)
    assert res.status == "optimal"
    assert invariants(snap, plan) == "ok"
    if em.lm.n_vars == 0:  # nothing to decide: the plan is worth the model's constant
        assert res.objective == pytest.approx(em.lm.obj_offset)
        return
    exact = BACKENDS["highs"].solve(em.lm, EXACT)
    lp = BACKENDS["lp"].solve(em.lm, EXACT)
    tol = 1e-6 * max(1.0, abs(exact.objective))
    assert res.objective <= lp.bound + tol  # a restriction of optalloc's model
    assert res.objective <= exact.objective + tol
    if not _has_pieces(em):  # aggregated packing is exact: same optimum
        assert res.objective == pytest.approx(exact.objective, abs=tol)
    got = got_by_org(em, Placed(res.started, res.kept, np.zeros(len(snap.jobs), bool)))
    assert res.objective == pytest.approx(em.plan_objective(res.started, res.kept, got), abs=tol)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_nodes=st.integers(3, 8), n_jobs=st.integers(5, 50),
       frac=st.sampled_from([0.0, 0.3, 1.0]), down=st.integers(0, 1), busy=st.integers(0, 1))
def test_naive_plans_on_generated_clusters_keep_the_invariants(seed, n_nodes, n_jobs, frac, down,
                                                               busy):
    snap = make_instance(seed=seed, n_nodes=n_nodes, n_jobs=n_jobs, n_programs=2,
                         projects_per_program=2, drained_nodes=1, divisions=2,
                         per_node_gang_frac=frac, down_nodes=down, busy_drained_nodes=busy,
                         zero_share_project=True)
    em, res, plan = _naive(snap)
    assert res.status == "optimal"
    assert invariants(snap, plan) == "ok"
    lp = BACKENDS["lp"].solve(em.lm, EXACT)
    assert res.objective <= lp.bound + 1e-6 * max(1.0, abs(lp.bound))
