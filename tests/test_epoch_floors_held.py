"""The scheme's order over the objective's weights, and a gap measured honestly.

No finite weight makes one floor GPU outweigh every target GPU: a 2-GPU job that holds its
project's floor can block a 64-GPU gang whose project is under its target. The epoch keeps the
floor (floors come first in the scheme's order, optalloc.plan.score) even though the weighted
MIP optimum drops it; until this change (stop 19) it then reported that plan `feasible` with an 8.7% gap to
the bound of plans that drop the floor, which no plan keeping the floor can reach. Now the MIP
runs again with the chosen plan's floors held (a row on the floor tier), so the plan returned is
the best of those that meet them and its gap is measured against their bound (epoch.py, 3e).
"""

from __future__ import annotations

import numpy as np

from optalloc.epoch import run_epoch
from optalloc.model.build import build_model
from optalloc.model.constraints.fairshare import floor_columns
from optalloc.solve import solve
from optalloc.types import Job, SolverSettings

from test_epoch_toy import H, flat_org, nodes_of, pending_codes, preempted, running, snapshot


def _gang_against_a_floor(extra=()):
    """10 nodes of 8: B's 2-GPU job (its whole floor, past protection) on n00, A's two
    protected 8-GPU jobs (its whole floor of 16) on n08-n09, A's 64-GPU gang waiting: it fits
    only on n00-n07, so it starts only if B's job goes. B ranks just below A (1.6 against
    1.5): a floor ranked first is worth up to twice (impact.RANK_TILT), and B's 2 GPUs ranked
    first would outweigh the gang's targets in the objective itself."""
    jobs = [running("b0", "B", "h100", [("n00", [0, 1])], start=5 * H),
            running("a0", "A", "h100", [("n08", list(range(8)))], start=9.5 * H,
                    min_runtime_s=2 * H),
            running("a1", "A", "h100", [("n09", list(range(8)))], start=9.5 * H,
                    min_runtime_s=2 * H),
            Job("gang", "A", 64, min_runtime_s=H, submit_time=1.0), *extra]
    return snapshot(nodes_of(10, 8), flat_org({"A": 0.2, "B": 0.8}), jobs,
                    usage={"A": 1.5, "B": 1.6})


def test_the_floor_and_the_gang_are_as_the_case_says():
    em = build_model(_gang_against_a_floor())
    assert em.floor[:, 0].tolist() == [0.0, 16.0, 2.0]
    assert em.target[:, 0].tolist() == [80.0, 78.0, 2.0]
    # the weighted optimum trades B's floor for A's target GPUs
    mip = solve(em.lm, SolverSettings())
    k_b0 = em.k[np.flatnonzero(em.req.run_job == em.snap.job_index["b0"])[0]]
    assert mip.status == "optimal" and round(mip.x[k_b0]) == 0


def test_a_floor_job_is_kept_against_a_gang_and_the_plan_is_certified():
    plan = run_epoch(_gang_against_a_floor())
    assert sorted(p.job_id for p in plan.placements) == ["a0", "a1", "b0"]
    assert preempted(plan) == {}
    assert pending_codes(plan) == {"gang": "OverShare"}
    assert plan.floor_violations == ()
    rep = plan.report
    assert rep.status == "optimal" and rep.gap <= SolverSettings().mip_gap
    assert rep.bound >= rep.objective - 1e-9
    assert "meet the floors" in rep.message


def test_the_bound_is_that_of_the_plans_meeting_those_floors():
    snap = _gang_against_a_floor()
    em = build_model(snap)
    plan = run_epoch(snap)
    lp = solve(em.lm, SolverSettings(backend="lp"))
    cols = floor_columns(em.m, em.m_seg)
    held = em.lm.with_row("floors-held", cols, em.lm.c[cols], 2 * float(em.lm.c[cols].min()))
    assert held.n_cons == em.lm.n_cons + 1 and held.n_vars == em.lm.n_vars
    assert held.family_of_row(held.n_cons - 1) == "floors-held"
    # the unconstrained LP bound is above what a plan keeping B's floor can reach
    assert lp.bound > plan.report.bound + 1.0


def test_with_a_projects_smaller_jobs_queued_the_weighted_optimum_keeps_the_floor_itself():
    """With A's 8-GPU jobs queued behind the gang, they fill A's target beside B's job, the
    weighted optimum already keeps B's floor, and no second MIP is needed."""
    extra = [Job(f"a{i + 2}", "A", 8, min_runtime_s=H, submit_time=10.0 + i) for i in range(7)]
    plan = run_epoch(_gang_against_a_floor(extra))
    assert sorted(p.job_id for p in plan.placements) == sorted(
        ["b0", "a0", "a1"] + [j.id for j in extra])
    assert preempted(plan) == {}
    assert pending_codes(plan) == {"gang": "OverShare"}
    assert plan.report.status == "optimal" and "meet the floors" not in plan.report.message


def test_a_plan_chosen_for_the_floor_tie_break_alone_counts_as_floors_traded():
    """ITP cluster04 (day 24.7 of the 60-day ilp run): the greedy plan and the MIP's met the
    same floor GPUs, the greedy plan's in a project of lower usage ratio (the floor weights'
    tie-break: +0.0196 of 282,042.69), and the MIP's 322 more of targets. best_plan takes the
    greedy plan by the scheme's order, so the MIP must run again with its floors held, or the
    plan is left `feasible` at a 0.12% gap to a bound only plans that drop that floor reach.
    Floor tiers that differ by float summation alone are the same."""
    from dataclasses import replace as dc_replace

    import optalloc.epoch as epoch
    from optalloc.plan.outcome import Outcome

    mip = Outcome(None, 285380.193, "mip", "highs", "optimal",
                  tiers=(282042.693296, 2437.5, 900.0), score=(282042.693296, 2437.5))
    greedy = Outcome(None, 285050.626, "greedy", "highs", "feasible",
                     tiers=(282042.712853, 2115.0, 892.9), score=(282042.712853, 2115.0))
    assert epoch.best_plan([mip, greedy]) is greedy
    assert epoch._floors_traded(greedy, [mip, greedy])
    same = dc_replace(mip, tiers=(282042.712853 - 1e-9, 2437.5, 900.0))
    assert not epoch._floors_traded(greedy, [same, greedy])
