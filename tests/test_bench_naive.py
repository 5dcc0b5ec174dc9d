"""The naive PuLP + CBC formulation is the same problem as optalloc's model, written element by
element: on the published toy it gives the shares, its plans keep every invariant and the
one gang-shape rule (8 + 8 + 4), and its optimum is optalloc's MIP optimum on every instance,
per-node gangs and remainder nodes included (optalloc's y is exact for per-node gangs)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optalloc.bench.checks import invariants, plan_of
from optalloc.bench.instances import _contract, _toy, make_instance
from optalloc.bench.naive import (
    EMPTIED,
    _cbc_went_wrong,
    build_naive,
    count_binaries,
    solve_naive,
    unwritten_parts,
)
from optalloc.model.build import build_model
from optalloc.plan.holdings import Placed
from optalloc.plan.reasons import got_by_org
from optalloc.shape import chunks
from optalloc.snapshot import build_snapshot
from optalloc.solve import BACKENDS
from optalloc.types import (
    Config,
    GpuType,
    Job,
    JobState,
    Node,
    NodeAlloc,
    OrgNode,
    Placement,
    Policy,
    SolverSettings,
)

from test_epoch_properties import instances

pytestmark = pytest.mark.skipif(not BACKENDS["cbc"].available(), reason="CBC not installed")

EXACT = SolverSettings(time_limit_s=60.0, mip_gap=0.0)
H = 3600.0


def _naive(snap):
    em = build_model(snap)
    res = solve_naive(em, time_limit_s=60.0, mip_gap=0.0)
    return em, res, plan_of(snap, em.req.run_job[res.kept], res.placements)


def _running(jid, proj, gpus_on: list[tuple[str, range]], start: float, mr: float = 2 * H):
    pl = Placement(jid, "h100", tuple(NodeAlloc(n, tuple(g)) for n, g in gpus_on))
    return Job(jid, proj, sum(len(g) for _, g in gpus_on), min_runtime_s=mr,
               state=JobState.RUNNING, start_time=start, placement=pl)


def _remainder():
    """A 20-GPU gang on 8-GPU nodes (8 + 8 + 4): two nodes are partly held by protected jobs,
    so the whole pieces take n1 and n2 and the remainder the 4 GPUs left on n0."""
    nodes = tuple(Node(f"n{i}", "h100", 8) for i in range(4))
    org = OrgNode("root", children=(OrgNode("A", share=1), OrgNode("B", share=1)))
    jobs = (
        _running("half", "A", [("n0", range(4))], 9.5 * H),
        _running("most", "B", [("n3", range(6))], 9.5 * H),
        Job("gang", "A", 20, min_runtime_s=H, submit_time=1.0),
        Job("small", "B", 2, min_runtime_s=H, submit_time=2.0),
    )
    cfg = Config((GpuType("h100"),), nodes, org, Policy(), jobs)
    return build_snapshot(cfg, now=10 * H, usage_ratio={"A": 0.5, "B": 0.5})


def _keep_or_gang():
    """Keep a running allocated 1-GPU job, or evict it for an unallocated 16-GPU gang: CBC's
    preprocessing reduces this 5-column model to nothing and returned the gang as optimal
    (coin-or/Cbc#720); the naive row must solve it again and keep the job."""
    nodes = (Node("h100-0", "h100", 8), Node("h100-1", "h100", 4), Node("h100-2", "h100", 4),
             Node("h100-3", "h100", 8))
    org = OrgNode("root", children=(OrgNode("p0", share=1),))
    jobs = (_running("j0", "p0", [("h100-0", range(1))], 17 * H, mr=900.0),
            Job("j1", "p0", 16, submit_time=1.0))
    cfg = Config((GpuType("h100"),), nodes, org, Policy(), jobs)
    return build_snapshot(cfg, now=20 * H, usage_ratio={"p0": 0.0})


def _gpus_by_project(snap, plan) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in plan.placements:
        proj = snap.jobs[snap.job_index[p.job_id]].project
        out[proj] = out.get(proj, 0) + p.gpus
    return out


def _off_shape(em, res) -> list[str]:
    """New placements whose GPUs per node break the gang-shape rule (optalloc.shape.chunks)."""
    snap, out = em.snap, []
    for j, p in res.placements.items():
        t = snap.type_names.index(p.gpu_type)
        want = chunks(int(snap.job_gpus[j]), snap.jobs[j].gpus_per_node,
                      int(em.req.type_max_node[t]))
        got = sorted((len(a.gpus) for a in p.nodes), reverse=True)
        if got != want:
            out.append(f"{p.job_id}: {got} != {want}")
    return out


def _agrees_with_optalloc(em, res) -> None:
    """The naive optimum is optalloc's MIP optimum, never above its LP bound, and its plan's
    objective is what CBC reports."""
    exact = BACKENDS["highs"].solve(em.lm, EXACT)
    lp = BACKENDS["lp"].solve(em.lm, EXACT)
    assert exact.status == "optimal", exact.message
    tol = 1e-6 * max(1.0, abs(exact.objective))
    assert res.objective == pytest.approx(exact.objective, abs=tol)
    assert res.objective <= lp.bound + tol
    assert res.solver_objective == pytest.approx(res.objective, abs=tol)
    got = got_by_org(em, Placed(res.started, res.kept))
    assert res.objective == pytest.approx(em.plan_objective(res.started, res.kept, got), abs=tol)


CASES = [
    # (name, snapshot, GPUs per project after the plan, running jobs preempted,
    #  new starts: job -> ((node, GPUs), ...); None: not pinned)
    ("toy", _toy, {"A": 40, "B": 30, "C": 20, "D": 10}, set(), None),
    # C, a project under the root (ratio 0.4), ranks above P (1.2): its h100 floor takes B's
    # "old" (past its protection; B's ratio 2.0) where drn restarts, and fast gets b0 (P's
    # floor is met by A and B). Until stop 34 C's path weighed half of B's (one floor row
    # against two) and B kept "old". Since stop 37 a floor ranked first is worth up to twice
    # (impact.RANK_TILT): C's "any" (4 GPUs) takes h0's free GPUs, where B's "small" (2) did
    ("contract", _contract, {"A": 16, "B": 4, "C": 20}, {"unal", "drn", "old"},
     {"gang": (("h1", tuple(range(8))), ("h2", tuple(range(8)))),
      "drn": (("h3", tuple(range(8))),), "fast": (("b0", tuple(range(8))),),
      "any": (("h0", (4, 5, 6, 7)),)}),
    ("remainder", _remainder, {"A": 24, "B": 8}, set(),
     {"gang": (("n1", tuple(range(8))), ("n2", tuple(range(8))), ("n0", (4, 5, 6, 7))),
      "small": (("n3", (6, 7)),)}),
    ("emptied by CBC's preprocessing", _keep_or_gang, {"p0": 1}, set(), {}),
]


@pytest.mark.parametrize("name,make,gpus,preempted,starts", CASES,
                         ids=["toy", "contract", "remainder", "emptied"])
def test_the_naive_model_reaches_optalloc_s_optimum_on_the_reference_instances(
        name, make, gpus, preempted, starts):
    snap = make()
    em, res, plan = _naive(snap)
    assert res.status == "optimal"
    _agrees_with_optalloc(em, res)
    assert invariants(snap, plan) == "ok"
    assert _off_shape(em, res) == []
    assert _gpus_by_project(snap, plan) == gpus
    assert {p.job_id for p in plan.preemptions} == preempted
    if starts is not None:
        assert {snap.jobs[j].id: tuple((a.node, a.gpus) for a in p.nodes)
                for j, p in res.placements.items()} == starts


def test_the_contract_instance_keeps_protected_jobs_and_drains_the_drain_node():
    snap = _contract()
    em, res, plan = _naive(snap)
    placed = {p.job_id: p for p in plan.placements}
    assert placed["prot"] == snap.jobs[snap.job_index["prot"]].placement  # protected: kept as is
    # past its protection on a drain node: it leaves, and restarts at once on h100, where C's
    # floor takes B's job past its protection (C ranks above P), and C's b200-only job gets b0
    assert placed["drn"].gpu_type == "h100" and placed["fast"].node_names == ("b0",)
    assert {p.job_id: p.code.value for p in plan.preemptions}["drn"] == "Moved"
    new = [p for p in plan.placements if not snap.jobs[snap.job_index[p.job_id]].running]
    assert all(n != "b1" for p in new for n in p.node_names)  # nothing starts on a drain node


@pytest.mark.parametrize("name,make,binaries", [
    # remainder: the gang's whole pieces on 4 nodes of 8, its remainder on 4, small on 4
    ("remainder", _remainder, 4 + 4 + 4),
    ("generated", lambda: make_instance(seed=3, n_nodes=6, n_jobs=40, n_programs=2,
                                        projects_per_program=2, per_node_gang_frac=0.3,
                                        down_nodes=1, busy_drained_nodes=1), None),
], ids=["remainder", "generated"])
def test_the_binary_count_known_before_building_is_the_built_model_s(name, make, binaries):
    em = build_model(make())
    nm = build_naive(em)
    assert len(nm.y) == count_binaries(em)
    assert nm.n_vars == (count_binaries(em) + len(em.req.cand_job) + len(em.req.run_job)
                         + len(em.m) + len(em.d) + len(em.f))
    if binaries is not None:
        assert count_binaries(em) == binaries


def _with_extra_row_family(lm):
    return replace(lm, row_blocks=lm.row_blocks + (("fence[h100]", lm.n_cons, lm.n_cons),))


def _with_extra_block(lm):
    return replace(lm, var_blocks={**lm.var_blocks, "w": (lm.n_vars, lm.n_vars)})


def _with_value_on_z(em):
    def change(lm):
        c = lm.c.copy()
        c[em.z[0]] = 1.0
        return replace(lm, c=c)
    return change


@pytest.mark.parametrize("name,change,parts", [
    ("a row family it does not write", lambda em: _with_extra_row_family,
     ["row family fence"]),
    ("a column block it does not write", lambda em: _with_extra_block, ["column block w"]),
    ("an objective term on a packing column", _with_value_on_z,
     ["objective terms on z, u or y"]),
], ids=["row family", "column block", "objective on z"])
def test_the_naive_model_refuses_a_model_with_parts_it_does_not_write(name, change, parts):
    em = build_model(_contract())
    assert unwritten_parts(em) == []
    changed = replace(em, lm=change(em)(em.lm))
    assert unwritten_parts(changed) == parts
    with pytest.raises(ValueError, match="update optalloc/bench/naive.py"):
        build_naive(changed)


KEEP = {"x": 0, "k": 1, "m": 1, "y": 0, "d": 1, "f": 0}
GANG = {"x": 1, "k": 0, "m": 0, "y": 1, "d": 0, "f": 16}


@pytest.mark.parametrize("name,optimal,log,point,reason", [
    ("an emptied model", True, f"Cgl0004I {EMPTIED} (0 integer)", KEEP,
     "CBC's preprocessing reduced the model to nothing"),
    ("an optimum below keeping every running job", True, "", GANG,
     "CBC's optimum is below keeping every running job"),
    ("a trusted optimum", True, "", KEEP, ""),
    ("an incumbent at the time limit (not judged)", False, EMPTIED, GANG, ""),
], ids=["emptied", "below keep-all", "trusted", "time limit"])
def test_cbc_answers_that_cannot_be_trusted_are_recognized(name, optimal, log, point, reason):
    import pulp

    em = build_model(_keep_or_gang())
    nm = build_naive(em)
    for v in nm.prob.variables():
        v.varValue = point[v.name[0]]
    nm.prob.sol_status = pulp.LpSolutionOptimal if optimal else pulp.LpSolutionIntegerFeasible
    assert _cbc_went_wrong(em, nm, log, 0.0) == reason


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_jobs=16))
def test_naive_plans_keep_the_invariants_and_match_optalloc_s_optimum(snap):
    em, res, plan = _naive(snap)
    assert res.status == "optimal"
    assert invariants(snap, plan) == "ok"
    assert _off_shape(em, res) == []
    if em.lm.n_vars == 0:  # nothing to decide: the plan is worth the model's constant
        assert res.objective == pytest.approx(em.lm.obj_offset)
        return
    _agrees_with_optalloc(em, res)


@st.composite
def gang_clusters(draw):
    """8-GPU nodes (and sometimes a 4-GPU one) partly held by running jobs, queued gangs whose
    size the node does not divide (remainder nodes) and per-node gangs."""
    n_nodes = draw(st.integers(2, 5))
    nodes = [Node(f"n{i}", "h100", 8) for i in range(n_nodes)]
    if draw(st.booleans()):
        nodes.append(Node("s0", "h100", 4))
    org = OrgNode("root", children=(OrgNode("A", share=draw(st.sampled_from([1, 2]))),
                                    OrgNode("B", share=1)))
    jobs = []
    for i, node in enumerate(nodes):
        used = draw(st.integers(0, node.gpus))
        if used:
            jobs.append(_running(f"r{i}", draw(st.sampled_from("AB")), [(node.name, range(used))],
                                 10 * H - draw(st.sampled_from([600.0, 3 * H]))))
    for q in range(draw(st.integers(1, 6))):
        g = draw(st.sampled_from([2, 3, 5, 10, 12, 20]))
        gpn = draw(st.sampled_from([None, None, 1] + ([2] if g % 2 == 0 else [])))
        jobs.append(Job(f"q{q}", draw(st.sampled_from("AB")), g, gpus_per_node=gpn,
                        min_runtime_s=draw(st.sampled_from([0.0, H])), submit_time=float(q),
                        priority=draw(st.integers(0, 1))))
    cfg = Config((GpuType("h100"),), tuple(nodes), org, Policy(), tuple(jobs))
    return build_snapshot(cfg, now=10 * H, usage_ratio={"A": draw(st.floats(0, 2)), "B": 1.0})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gang_clusters())
def test_naive_plans_with_remainder_nodes_match_optalloc_s_optimum(snap):
    em, res, plan = _naive(snap)
    assert res.status == "optimal"
    assert invariants(snap, plan) == "ok"
    assert _off_shape(em, res) == []
    _agrees_with_optalloc(em, res)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_nodes=st.integers(3, 8), n_jobs=st.integers(5, 50),
       frac=st.sampled_from([0.0, 0.3, 1.0]), down=st.integers(0, 1), busy=st.integers(0, 1))
def test_naive_plans_on_generated_clusters_keep_the_invariants_and_match_optalloc_s_optimum(
        seed, n_nodes, n_jobs, frac, down, busy):
    snap = make_instance(seed=seed, n_nodes=n_nodes, n_jobs=n_jobs, n_programs=2,
                         projects_per_program=2, drained_nodes=1, divisions=2,
                         per_node_gang_frac=frac, down_nodes=down, busy_drained_nodes=busy,
                         zero_share_project=True)
    em, res, plan = _naive(snap)
    assert res.status == "optimal"
    assert invariants(snap, plan) == "ok"
    assert _off_shape(em, res) == []
    if em.lm.n_vars == 0:  # every node drained or down: nothing to decide
        assert res.objective == pytest.approx(em.lm.obj_offset)
        return
    _agrees_with_optalloc(em, res)
