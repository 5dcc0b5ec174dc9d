"""Property tests over random clusters and queues: the plan is always exactly feasible and the
contract always holds, whatever the solver does."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from optalloc.epoch import run_epoch
from optalloc.model.build import build_model
from optalloc.model.objective.impact import compute_impact
from optalloc.model.requirements import compute_requirements
from optalloc.snapshot import build_snapshot
from optalloc.solve import BACKENDS, MIP_BACKENDS, available_backends
from optalloc.types import (
    Config,
    GpuType,
    Job,
    JobState,
    Node,
    NodeAlloc,
    NodeState,
    OrgNode,
    Placement,
    Policy,
    ReasonCode,
    SolverSettings,
)

H = 3600.0
TYPES = ("h100", "b200")


@st.composite
def instances(draw, max_jobs: int = 24, queue: bool = True):
    """Random snapshots; `queue=False`: only running jobs (nothing waits)."""
    n_types = draw(st.integers(1, 2))
    nodes = []
    for t in range(n_types):
        for i in range(draw(st.integers(1, 4))):
            state = draw(st.sampled_from([NodeState.UP] * 6 + [NodeState.DRAIN, NodeState.DOWN]))
            nodes.append(Node(f"{TYPES[t]}-{i}", TYPES[t], draw(st.sampled_from([4, 8])), state))
    n_proj = draw(st.integers(1, 4))
    shares = [draw(st.sampled_from([0, 1, 2, 5])) for _ in range(n_proj)]
    if not any(shares):
        shares[0] = 1
    projects = [OrgNode(f"p{i}", share=float(s)) for i, s in enumerate(shares)]
    if n_proj >= 3 and draw(st.booleans()):
        org = OrgNode("root", children=(OrgNode("g", children=tuple(projects[:2])),
                                        *projects[2:]))
    else:
        org = OrgNode("root", children=tuple(projects))
    usage = {p.name: draw(st.floats(0, 4)) for p in projects}
    free = {n.name: list(range(n.gpus)) for n in nodes if n.state is not NodeState.DOWN}
    jobs = []
    now = 20 * H
    for k in range(draw(st.integers(0, max_jobs))):
        g = draw(st.sampled_from([1, 1, 2, 4, 8, 16]))
        allowed = draw(st.sampled_from([(), ("h100",), ("b200",)]))[: n_types]
        allowed = tuple(a for a in allowed if a in TYPES[:n_types])
        mr = draw(st.sampled_from([0.0, 900.0, 2 * H, 8 * H]))
        common = dict(id=f"j{k}", project=f"p{draw(st.integers(0, n_proj - 1))}", gpus=g,
                      gpu_types=allowed, min_runtime_s=mr, priority=draw(st.integers(0, 2)),
                      submit_time=float(k),
                      speedup={"b200": draw(st.sampled_from([1.5, 1.5, 1.0, 3.0]))}
                      if n_types > 1 else {})
        pl = None
        if draw(st.booleans()):
            pl = _pack(nodes, free, g, allowed, k, draw(st.booleans()))
        if pl is not None:
            start = now - draw(st.sampled_from([600.0, 3 * H, 10 * H]))
            jobs.append(Job(**common, state=JobState.RUNNING, start_time=start, placement=pl))
        elif queue:
            jobs.append(Job(**common))
    policy = Policy(max_reservations=draw(st.sampled_from([0, 2])))  # lookahead off / on
    # one billing weight: budgets pooled over the types; b200 at 1.6: a budget per type
    weights = (1.0, draw(st.sampled_from([1.0, 1.6])))
    cfg = Config(tuple(GpuType(t, w) for t, w in zip(TYPES[:n_types], weights)), tuple(nodes),
                 org, policy, tuple(jobs))
    # GPU-hours owed and not delivered (the floors' debt, impact.debt_tilt): none, some, or
    # enough to reach the cap, per project
    shortfall = {p.name: draw(st.sampled_from([0.0, 0.0, 0.0, 2.0, 20.0, 500.0]))
                 for p in projects}
    # and against the fair share (an idle sibling's share flowing: at least the published
    # shortfall), which lifts an owed project's floor (targets.lifted_floors)
    fair = {p: x + draw(st.sampled_from([0.0, 0.0, 3.0, 40.0])) for p, x in shortfall.items()}
    return build_snapshot(cfg, now=now, usage_ratio=usage, shortfall=shortfall,
                          fair_shortfall=fair)


def _pack(nodes, free, g, allowed, k, on_down: bool):
    """Put a running job on nodes (down ones too, sometimes: it must then be displaced)."""
    pool = [n for n in nodes if (not allowed or n.gpu_type in allowed)
            and (n.state is not NodeState.DOWN or on_down)]
    for n in pool:
        if g <= n.gpus:
            if n.state is NodeState.DOWN:
                return Placement(f"j{k}", n.gpu_type, (NodeAlloc(n.name, tuple(range(g))),))
            if len(free[n.name]) >= g:
                gp = tuple(free[n.name][:g])
                del free[n.name][:g]
                return Placement(f"j{k}", n.gpu_type, (NodeAlloc(n.name, gp),))
    return None


def _same(p, q) -> bool:
    return p is not None and q is not None and (p.gpu_type, p.nodes) == (q.gpu_type, q.nodes)


def rules_hold(snap, plan):
    """Every rule a plan keeps, each asserted: the invariants of `_check_plan` (no allocated job
    that fits waits behind idle GPUs or unallocated work, ...), the simulator's `check_plan`,
    and no team-order or proxy-order break."""
    from optalloc.sim.invariants import check_plan, proxy_order_breaks, team_order_breaks

    _check_plan(snap, plan)
    check_plan(snap, plan)
    assert team_order_breaks(snap, plan) == []
    assert proxy_order_breaks(snap, plan) == []


def _check_plan(snap, plan):
    req = compute_requirements(snap)
    imp = compute_impact(snap)
    by_id = {j.id: j for j in snap.jobs}
    seen: set = set()
    placed = {}
    for p in plan.placements:
        assert p.job_id not in placed, "a job is placed twice"
        placed[p.job_id] = p
        job = by_id[p.job_id]
        assert p.gpus == job.gpus, "gang all-or-nothing: every GPU of the job"
        types = {snap.nodes[snap.node_index[a.node]].gpu_type for a in p.nodes}
        assert types == {p.gpu_type}
        for a in p.nodes:
            n = snap.node_index[a.node]
            assert snap.node_present[n], "nothing runs on a down node"
            for gi in a.gpus:
                assert 0 <= gi < snap.node_gpus[n], "GPU index within the node"
                assert (a.node, gi) not in seen, "no GPU is used twice"
                seen.add((a.node, gi))
        j = snap.job_index[p.job_id]
        new = not (job.running and _same(job.placement, p))
        if new:
            assert all(snap.node_up[snap.node_index[a.node]] for a in p.nodes), \
                "no new placement on a drain or down node"
            t = snap.type_names.index(p.gpu_type)
            if req.shape[j, t] == 0:
                assert len(p.nodes) == 1, "a job that fits in one node is not split"
            else:
                # whole-node pieces and the remainder node of an 8+8+4 (an outside judge,
                # stop 53: the remainder was left out, so every such start was refused)
                assert len({a.node for a in p.nodes}) == len(p.nodes) == \
                    req.pieces[j, t] + (req.rem[j, t] > 0)
    # protected jobs keep their exact placement unless their node is down
    for j in np.flatnonzero(snap.job_protected & ~req.displaced):
        job = snap.jobs[j]
        assert _same(placed.get(job.id), job.placement), f"protected {job.id} was moved or preempted"
    # every queued job that is not placed has a reason; no running job gets a pending reason
    queued = {j.id for j in snap.jobs if not j.running}
    assert {r.job_id for r in plan.pending} == queued - set(placed)
    # every running job is kept or preempted, never both unless moved
    pre = {x.job_id: x for x in plan.preemptions}
    for job in snap.jobs:
        if job.running:
            kept = _same(placed.get(job.id), job.placement)
            assert kept != (job.id in pre), f"{job.id}: kept xor preempted"
            moved = job.id in placed and not kept
            assert moved == (job.id in pre and pre[job.id].code is ReasonCode.MOVED), \
                f"{job.id}: placed elsewhere exactly when Moved"
            j = snap.job_index[job.id]
            if moved and not req.displaced[j]:  # past its protection, resumable; a move off
                t_old = snap.type_names.index(job.placement.gpu_type)  # an up node: allocated
                t_new = snap.type_names.index(placed[job.id].gpu_type)  # on both types
                assert not snap.job_protected[j] and job.resumable
                if not snap.job_on_drain[j]:  # (one leaving a drain node restarts as queued)
                    assert snap.job_tier1[j, t_old] and snap.job_tier1[j, t_new]
                if not snap.job_on_drain[j] and t_new == t_old:
                    # a restart on its own type is packing: it gives its GPUs to a job that
                    # starts there now (a gang that needs the whole node), never for nothing
                    old = {(a.node, g) for a in job.placement.nodes for g in a.gpus}
                    takers = set(pre[job.id].needed_by)
                    assert takers and all(
                        old & {(a.node, g) for a in placed[k].nodes for g in a.gpus}
                        for k in takers if k in placed), (job.id, pre[job.id].message)
                    assert takers <= set(placed), (job.id, pre[job.id].message)
    # unallocated work yields to unallocated work only for more GPUs busy, and its message
    # says so only where that is true (fresh draws at stop 43: '3 GPUs where it ran 4')
    for x in plan.preemptions:
        if "keeps more GPUs busy" in x.message:
            took = sum(by_id[k].gpus for k in x.needed_by)
            assert took > by_id[x.job_id].gpus, (x.job_id, x.message)
    # work conservation + unallocated never displaces allocated demand (single-node jobs):
    # no waiting job fits the free GPUs, and no waiting allocated job fits free + GPUs held by
    # unallocated jobs; except GPUs a reservation holds for a gang that starts before the job
    # would end or lose protection (DESIGN.md section 8, rule 6)
    from optalloc.model.reservations import candidate_hold

    deadline = build_model(snap).res.deadline
    hold = candidate_hold(snap, req)
    cand = {(int(j), int(t)): c for c, (j, t) in enumerate(zip(req.cand_job, req.cand_type))}
    free = np.where(snap.node_up, snap.node_gpus, 0).astype(int)
    unalloc = np.zeros(len(snap.nodes), int)
    evictable = (imp.tier.max(axis=1) < 1.0) & ~snap.job_protected
    for p in plan.placements:
        for a in p.nodes:
            n = snap.node_index[a.node]
            if snap.node_up[n]:
                free[n] -= len(a.gpus)
                if evictable[snap.job_index[p.job_id]]:
                    unalloc[n] += len(a.gpus)
    for r in plan.pending:
        j = snap.job_index[r.job_id]
        for t in np.flatnonzero(req.fits[j]):
            if req.shape[j, t] != 0:
                continue
            on_t = snap.node_up & (snap.node_type == t) & (deadline >= hold[cand[(j, t)]])
            g = snap.job_gpus[j]
            assert not (free[on_t] >= g).any(), f"{r.job_id} fits idle GPUs but waits"
            if imp.tier[j, t] >= 1.0:
                assert not ((free + unalloc)[on_t] >= g).any(), \
                    f"allocated {r.job_id} waits behind unallocated jobs"
    # the report is honest: the plan's objective never exceeds the bound, but for a plan the
    # bound does not count (a lower-priority start where its running teammate gave way,
    # epoch_status._outside), whose message says so and how far above the bound it is
    rep = plan.report
    if rep.bound is not None and rep.objective is not None:
        if rep.objective > rep.bound + 1e-6 * max(1.0, abs(rep.bound)):
            assert "above the bound" in rep.message, rep.message
            assert "its bound counts no such plan" in rep.message, rep.message
            assert rep.status != "optimal"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(queue=False))
def test_with_nothing_waiting_no_running_job_is_moved_or_preempted_but_off_a_drain_node(
        snap):
    """A move is worth no more than the keep, and with nothing waiting no floor or target
    needs a job's GPUs: jobs leave only a drain node (past protection), or yield to one that
    restarts after leaving a drain node (it restarts as a queued job would). (A job displaced
    from a down node restarts, and may take another's GPUs: such snapshots are left out.)"""
    req = compute_requirements(snap)
    assume(not req.displaced.any())
    plan = run_epoch(snap)
    _check_plan(snap, plan)
    restarted = {x.job_id for x in plan.preemptions if x.code is ReasonCode.MOVED
                 and snap.job_on_drain[snap.job_index[x.job_id]]}
    for x in plan.preemptions:
        j = snap.job_index[x.job_id]
        assert (req.displaced[j] or snap.job_on_drain[j]
                or restarted & set(x.needed_by)), (x.job_id, x.code, x.message)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_every_plan_is_feasible_and_keeps_the_contract(snap):
    plan = run_epoch(snap)
    assert plan.degraded is None
    _check_plan(snap, plan)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_jobs=12))
def test_every_backend_plan_is_feasible(snap):
    for name in available_backends():
        plan = run_epoch(snap, SolverSettings(backend=name, mip_gap=1e-6))
        assert plan.degraded is None, name
        _check_plan(snap, plan)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_jobs=12))
def test_all_mip_backends_agree_on_the_optimum_within_their_gaps(snap):
    em = build_model(snap)
    if em.lm.n_vars == 0:
        return
    s = SolverSettings(time_limit_s=20.0, mip_gap=1e-6)
    results = {n: BACKENDS[n].solve(em.lm, s) for n in MIP_BACKENDS if n in available_backends()}
    for name, r in results.items():
        assert r.status == "optimal", (name, r.status, r.message)
    objs = {n: r.objective for n, r in results.items()}
    ref = max(objs.values())
    tol = 1e-4 * max(1.0, abs(ref))
    for name, r in results.items():
        assert r.objective >= ref - tol - (r.bound - r.objective if r.bound else 0.0), \
            (name, objs)
        if r.bound is not None:
            assert r.bound >= ref - tol, (name, r.bound, objs)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_a_placed_plan_is_a_feasible_point_of_the_model_with_the_same_objective(snap):
    """as_solution (the MIP's warm start) maps a placed plan back into the model exactly."""
    from optalloc.model.keep_displaced import breaks_only_given_way
    from optalloc.plan.place import place
    from optalloc.plan.holdings import as_solution
    from optalloc.plan.reasons import got_by_org
    from optalloc.solve.highs import HighsBackend

    em = build_model(snap)
    if em.lm.n_vars == 0:
        return
    _, x = HighsBackend().dive(em.lm, SolverSettings(), em.x, rounds=8)
    placed = place(em, x)
    sol = as_solution(em, placed)
    # ... but for `keep_order` rows of running jobs that gave way on their type, which the
    # backfill may break (optalloc.plan.backfill.gave_way_rows: the team's job below fills
    # what is left, rule 6; fresh draws at stop 44)
    assert em.lm.violation(sol) <= 1e-6 or breaks_only_given_way(
        em, sol, placed.started, placed.kept, placements=placed.placements)
    assert np.allclose(sol, np.round(sol))
    expected = em.plan_objective(placed.started, placed.kept, got_by_org(em, placed))
    assert abs(em.lm.objective(sol) - expected) <= 1e-6 * max(1.0, abs(expected))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_a_small_epoch_called_optimal_is_within_the_exact_gap_of_the_true_optimum(snap):
    """Every epoch here is under solver.exact_up_to: its plan is held to 1e-4 of the true
    optimum of its model (the model with the fill targets the greedy plan sets), its bound is
    never below that optimum, and `optimal` is within 1e-4 of it. Where the scheme's order
    kept more floor GPUs than the objective's optimum (step 3e), the bound is that of the
    plans meeting those floors, below the unrestricted optimum by design."""
    assert_true_bound_and_honest_status(snap, run_epoch)


def assert_true_bound_and_honest_status(snap, run) -> None:
    """`run(snap, settings)`'s plan (mip_gap 0.5%, the snapshot under exact_up_to) is worth no
    more than the true optimum of its model (the fill targets the greedy plan sets), its bound
    is never below it, and `optimal` is within 1e-4 of it, unless its bound is that of the
    plans meeting the floors of the scheme's best plan (step 3e)."""
    from optalloc.epoch import left_idle
    from optalloc.plan.incumbent import greedy_placed
    from optalloc.solve import solve
    from optalloc.types import EXACT_GAP

    em = build_model(snap)
    if em.lm.n_vars == 0:
        return
    g = greedy_placed(em)
    if g is not None:
        em = em.with_fill(left_idle(em, g))
    plan = run(snap, SolverSettings(mip_gap=0.005))
    # the whole problem: every `order_types` row (the epoch adds those its solutions break);
    # the team's order for a running job's own priority is kept by the placement: a plan is
    # worth no more than the model without its rows, and the epoch's bound (some of the
    # rows) is no lower than the model with all of them (optalloc.model.team_rows)
    full = em.with_all_type_rows()
    exact = solve(full.lm, SolverSettings(mip_gap=1e-9, time_limit_s=60.0))
    strict = solve(full.with_all_team_rows().lm, SolverSettings(mip_gap=1e-9, time_limit_s=60.0))
    assert exact.status == "optimal" and strict.status == "optimal"
    rep, opt, low = plan.report, exact.objective, strict.objective
    tol = 1e-6 * max(1.0, abs(opt))
    why = (rep.status, rep.source, rep.objective, rep.bound, opt, low, rep.message)
    if "its bound counts no such plan" in rep.message:
        # a plan outside the model (a lower-priority start where its running teammate gave
        # way: optalloc.model.keep_displaced) may be worth more than the model's optimum; it
        # is never called optimal (fresh draws at stop 44: greedy's plan 781.0 against 648.75)
        assert rep.status != "optimal", why
        return
    assert rep.objective <= opt + tol, why
    if "bound of the plans that meet the floors" in rep.message:
        return
    assert rep.bound >= low - tol, why
    if rep.status == "optimal":
        assert rep.objective >= low - EXACT_GAP * abs(low) - tol, why
