"""Step 4b (optalloc.epoch_kept): where the team's order by proxy left the plan outside the
gap asked, the LP again with the plan's keeps fixed brings it back, better by the scheme's
order; and the LP it re-solves (Dive.fixed_point) is left as it was."""

from __future__ import annotations

import numpy as np

import optalloc.epoch_kept
from optalloc.bench.instances import scale_instance
from optalloc.epoch import left_idle, run_epoch
from optalloc.model.build import build_model
from optalloc.plan.incumbent import greedy_placed
from optalloc.plan.score import plan_score
from optalloc.solve import start_dive
from test_epoch_properties import _check_plan


def test_the_lp_again_with_the_keeps_fixed_brings_a_repaired_plan_within_the_gap(monkeypatch):
    """The bench's 1,024-GPU epoch, seed 53: the repair keeps 8 running jobs the LP's plan
    stopped for their teammates and leaves it 0.68% from the bound (mip_gap 0.5%); one LP
    with the plan's keeps fixed gives a plan 0.13% from it, better by the scheme's order.
    (Seed 9 at stop 55, 0.88 -> 0.12%, until its tree's same-priority victims by submit
    order came with the same-priority type-order links: 0.26% after that LP; seed 21 until
    stop 55, 0.86 -> 0.01%: with the same-priority
    type-order links its repaired plan is certified, 0.22%; seed 4 until stop 45, 0.51 ->
    0.14%: with the team's order over several places its LP rounding is certified, 0.48%.)"""
    snap = scale_instance("M", 53)
    em = build_model(snap)
    em = em.with_fill(left_idle(em, greedy_placed(em)))
    plan = run_epoch(snap)
    _check_plan(snap, plan)
    rep = plan.report
    assert (rep.status, rep.source) == ("optimal", "lp-kept")
    assert rep.gap <= 0.002
    assert "then the LP again with the running jobs it keeps fixed (1 round)" in rep.message
    monkeypatch.setattr(optalloc.epoch_kept, "KEPT_ROUNDS", 0)
    before = run_epoch(snap)
    _check_plan(snap, before)
    assert before.report.status == "feasible" and before.report.gap > 0.005
    assert "running jobs kept that it stopped only for starts of their team" in (
        before.report.message)
    assert plan_score(snap, plan, em) > plan_score(snap, before, em)


def test_a_certified_plan_gets_no_second_lp():
    """Seed 3's repaired plan is 0.15% from the bound, within mip_gap: no other LP (seed 0
    until stop 45, whose team's order over several places leaves it outside the gap after
    the repair, where one LP more brings it to 0.39%; seed 1, certified after its repair
    until the node-by-node gave-way check of stop 45 left its plan outside the model). The
    repair kept 1 running job until stop 56's same-priority type-order links, 2 since."""
    plan = run_epoch(scale_instance("M", 3))
    assert ("then 2 running jobs kept that it stopped only for starts of their team"
            in plan.report.message)  # the repair ran
    assert plan.report.status == "optimal"
    assert "then the LP again" not in plan.report.message


def test_the_lp_with_keeps_fixed_leaves_the_dive_as_it_was():
    snap = scale_instance("S", 0)
    em = build_model(snap)
    settings = snap.policy.solver
    dive, fresh = start_dive(em.lm, settings, em.x), start_dive(em.lm, settings, em.x)
    dive.run(1)
    fresh.run(1)
    ones = em.k[em.lm.ub[em.k] > 0][:5]
    x = dive.fixed_point(ones)
    assert x is not None and np.allclose(x[ones], 1.0)
    assert em.lm.violation(x) <= 1e-6  # a point of the model's LP relaxation
    # the dive goes on where it was: the same next round as a dive never asked
    a, b = dive.run(1), fresh.run(1)
    assert (a is None) == (b is None)
    if a is not None:
        assert abs(em.lm.objective(a) - em.lm.objective(b)) <= 1e-6 * max(1.0, abs(
            em.lm.objective(b)))


def _m(seed: int, res: int):
    from optalloc.bench.instances import SCALE_COMMON, SCALES, make_instance
    from optalloc.types import Policy

    return make_instance(seed=seed, **SCALES["M"], **SCALE_COMMON,
                         policy=Policy(max_reservations=res))


def test_step_4b_keeps_no_plan_that_stops_a_job_by_proxy():
    """A helper's sweep at stop 44: on the 1,024-GPU seed 104 the first round's plan stopped
    a priority-1 b200 job for another project's gang while a later teammate started there
    (the repair could not move the gang); that plan is no answer, the second round's is.
    Seed 109 since stop 59: seed 104's whole-GPU targets moved when equal remainders went to
    the Fair-Tree order (targets._integerize), and its answer is now the MIP's, 0.53% from
    the bound, with no proxy stop either; 109 is the next seed whose answer is step 4b's."""
    from optalloc.sim.invariants import proxy_order_breaks, team_order_breaks

    snap = _m(109, 0)
    plan = run_epoch(snap)
    _check_plan(snap, plan)
    assert (proxy_order_breaks(snap, plan), team_order_breaks(snap, plan)) == ([], [])
    assert plan.report.source == "lp-kept" and plan.report.gap <= 0.005


def test_the_proxy_check_reads_a_placed_plan_as_the_simulator_reads_the_plan(monkeypatch):
    """optalloc.plan.proxy_check.proxy_breaks (the epoch's) against
    optalloc.sim.invariants.proxy_order_breaks (the simulator's, on the Plan), on plans
    left unrepaired: 1,024-GPU seeds where the model's plans stop jobs by proxy."""
    import optalloc.epoch as ep
    from optalloc.plan.proxy_check import proxy_breaks
    from optalloc.sim.invariants import proxy_order_breaks

    seen = {}

    def keep(em, before, out, dive, settings, g=None):
        seen["em"], seen["placed"] = em, out.placed
        return out

    monkeypatch.setattr(ep, "keep_team_order", lambda em, out, settings, g=None: out)
    monkeypatch.setattr(ep, "resolve_with_keeps", keep)
    # step 4c (optalloc.plan.repack_order) moves starts of the plan captured above
    monkeypatch.setattr(ep, "repack_team_order", lambda em, out, settings: out)
    found = 0
    for seed, res in ((8, 2), (10, 0), (11, 0)):
        snap = _m(seed, res)
        plan = run_epoch(snap)
        mine = {snap.jobs[k].id for k in proxy_breaks(seen["em"], seen["placed"])}
        theirs = {j for j, _ in proxy_order_breaks(snap, plan)}
        assert mine == theirs, (seed, res)
        found += len(theirs)
    assert found >= 5  # the check is not vacuous: 3 + 1 + 4 at stop 44


def test_a_plan_outside_the_model_above_its_bound_is_never_optimal():
    """A helper's sweep at stop 44: the 1,024-GPU seed 114 with two reservations chose a plan
    outside the model (the model forces a due gang's start the placement does not make) 12%
    above the bound and called it `optimal`; a plan the bound does not count is `feasible`
    and says so."""
    snap = _m(114, 2)
    plan = run_epoch(snap)
    _check_plan(snap, plan)
    rep = plan.report
    assert rep.objective > rep.bound and rep.status == "feasible"
    assert rep.message.endswith("the placed plan leaves the model, so its bound counts no "
                                "such plan")
