"""One scheduling epoch, as a pure function of a Snapshot: `run_epoch(snapshot) -> Plan`.

Numbered phases (Kueue style):
  1. requirements  shapes of every job on every gpu_type, candidates, running holds
  2. build         floors and fair-share targets, reservations for large gangs (the
                   lookahead, optalloc.model.reservations), the epoch ILP as arrays
                   (optalloc.model; math in models/formulation.md)
  3. solve         the greedy baseline's plan first (its idle GPUs set the fill targets of
                   unallocated work, optalloc.model.fill; meanwhile the LP of 3a is begun on
                   a thread of its own, optalloc.solve.lp.EarlyLp, and the tables every
                   placement reads are made while it runs), then candidate plans,
                   each placed (phase 4) and scored on the model's objective:
                   3a the LP relaxation (its optimum is the LP bound), its point rounded
                      (when not certified, 3a': the LP dived a round at a time, each
                      round's new point rounded and placed as it comes, and after the
                      third, 3a'': the LP with every start it left fractional forbidden);
                   3b the greedy baseline's plan (the published system's ranked pass): the
                      optimizer never returns a plan worse than it on the objective; where
                      it breaks a reservation, that plan without those starts instead;
                   3a+ when neither is certified, the `order_types` rows the LP's point
                      breaks and the `keep_order` rows of starts a placement gave back
                      (optalloc.model.type_rows, team_rows; the cut loop: epoch_status)
                      added, the LP re-solved warm and each new point rounded;
                   3c when the best so far is not within mip_gap of the bound, the MIP around
                      it (RINS: integer columns where it and the LP agree fixed), then
                   3d if still not, the MIP of settings.backend (from scratch: a warm start
                      stalled HiGHS, see below; the integer columns that no plan better
                      than the best placed one can move fixed by the LP's reduced costs;
                      a solution that is a plan already placed is not placed again). An
                      epoch whose MIP has at most solver.exact_up_to integer columns is
                      solved to a 1e-4 gap and goes from 3a/3b straight to 3d
                      (effective_settings)
  4. place         solution -> nodes and GPU indices, repair, restore + backfill; on the
                   plan chosen, the team's order by proxy (optalloc.plan.proxy_order)
                   4b where that left the plan outside mip_gap: the LP again with the
                      plan's keeps fixed, warm, rounded, placed and repaired the same way
                      (optalloc.epoch_kept)
  5. reasons       preemptions, pending reasons, floor violations, drain progress, the
                   reservations after the plan and those that ended, the report

Honest status: `optimal` only when the *placed* plan is within mip_gap of a true bound (the
tighter of the LP optimum and the MIP's dual bound); otherwise `feasible` (or the solver's
timeout / infeasible / error). Never raises on solver trouble: infeasible / timeout / error keep
the best plan found, else every running job that may stay keeps its GPUs and nothing new
starts; either way `plan.degraded` says why and pending jobs carry SolverDegraded.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from optalloc.gcpause import gc_paused
from optalloc.model.build import EpochModel, build_model
from optalloc.model.objective.impact import compute_impact
from optalloc.model.requirements import compute_requirements
from optalloc.plan.drain import drain_status
from optalloc.plan.incumbent import greedy_placed
from optalloc.plan.outcome import Outcome, best_plan, placed_already, placed_outcome
from optalloc.plan.place import prepare
from optalloc.plan.holdings import Placed, as_solution, got_by_org
from optalloc.plan.preemptions import preemptions
from optalloc.plan.floors_unmet import floor_violations
from optalloc.plan.reasons import pending_reasons
from optalloc.plan.held_reasons import reservation_reasons
from optalloc.plan.reservations import plan_reservations
from optalloc.snapshot import Snapshot
from optalloc.epoch_eligible import certify_eligible
from optalloc.epoch_strict import strict_team_plans
from optalloc.epoch_kept import resolve_with_keeps, team_order_steps
from optalloc.epoch_status import (  # the status helpers, under the names tests know
    CUT_ROUNDS, certified as _certified, cut_rows as _cut_rows, cut_type_rows as _cut_type_rows,
    team_pairs as _team_pairs, final as _final, floor_terms as _floor_terms,
    floors_traded as _floors_traded, gap as _gap, greedy_scored, keep_team_order,
    point_key as _point_key, relabel as _relabel, repack_team_order, several_note,
    tol as _tol,
)
from optalloc.solve import BACKENDS, EarlyLp, neighborhood, solve, start_dive
from optalloc.solve.base import effective_settings
from optalloc.solve.fixing import fix_by_reduced_cost
from optalloc.types import Placement, Plan, SolveReport, SolverSettings


#: rounds of the LP dive at most (step 3a'), each round's new point placed
DIVE_ROUNDS = 8
#: the other direction (step 3a'') is tried after this many rounds of the dive
OTHER_AFTER = 3
#: models with fewer columns solve their LP after the greedy pass, not beside it (the thread
#: and the extra fill cost more: 3 days of ITP cluster04, 198-365 columns, 2 ms an epoch
#: slower; bench S ~500 even; M ~6,600 6% faster; XL 25%)
EARLY_LP_FROM = 2000


def run_epoch(snapshot: Snapshot, settings: SolverSettings | None = None) -> Plan:
    with gc_paused():  # optalloc.gcpause: the collector's full passes cost XL ~0.1-0.2 s
        return _run_epoch(snapshot, settings)


def _run_epoch(snapshot: Snapshot, settings: SolverSettings | None) -> Plan:
    settings = snapshot.policy.solver if settings is None else settings
    # 1. requirements
    t0 = time.perf_counter()
    req = compute_requirements(snapshot)
    imp = compute_impact(snapshot)
    # 2. build
    em = build_model(snapshot, req, imp)
    build_s = time.perf_counter() - t0
    # 3a begun on a thread of its own (EarlyLp), the fill columns at their most, while
    # 3b first: the greedy baseline's plan, whose idle GPUs set the fill targets (how the GPUs
    #    allocated work leaves are shared among unallocated work, optalloc.model.fill)
    early = _early_lp(em, settings)
    t = time.perf_counter()
    g = greedy_placed(em)
    if g is not None:
        em = em.with_fill(left_idle(em, g))
    greedy_s = time.perf_counter() - t
    if early is not None:  # while the LP solves: what every placement of a solution reads,
        prepare(em)        # and the greedy plan scored (3b, kept on em)
        if g is not None:
            greedy_scored(em, g)
    # 3. solve + 4. place
    dives: list = []  # the LP of step 3a, once made (steps 4 and 4b read it)
    em, out = _solve_and_place(em, settings, g, greedy_s, early, dives)
    # 4. the team's order by proxy (plan.proxy_order), 4b. where that left the plan outside
    # the gap: the LP again with its keeps fixed, 4c. the team's order over several places,
    # with other starts moved within their type (epoch_kept.team_order_steps)
    out = team_order_steps(em, out, dives[0] if dives else None, settings, g,
                           (keep_team_order, resolve_with_keeps, repack_team_order))
    out = several_note(em, out, settings)  # a wide gap from the team's order over several
    # 4d. a plan outside the model only by `keep_order` rows its jobs gave way on, measured
    # against the LP without them (optalloc.epoch_eligible)
    out = certify_eligible(em, out, dives[0] if dives else None, settings)
    degraded = None
    if out.status in ("infeasible", "timeout", "error") and out.source in ("fallback", "empty"):
        degraded = f"{out.backend}: {out.status} ({out.message}); running jobs kept, nothing new"
    elif out.status in ("infeasible", "error"):
        degraded = f"{out.backend}: {out.status} ({out.message}); best plan found kept"
    # 5. reasons and report
    placed = out.placed
    got = got_by_org(em, placed, moves=True)  # what each holds, for the messages
    gap = _gap(out.objective, out.bound)
    report = SolveReport(
        backend=out.backend, status=out.status, objective=out.objective, bound=out.bound,
        gap=gap, n_vars=em.lm.n_vars, n_cons=em.lm.n_cons, build_s=build_s,
        solve_s=out.solve_s, place_s=out.place_s, message=out.message, source=out.source,
    )
    kept = [snapshot.jobs[j].placement for j in req.run_job[placed.kept]]
    new = [placed.placements[j] for j in sorted(placed.placements)]
    reservations, ended, idle = plan_reservations(em, placed)
    return Plan(
        now=snapshot.now,
        placements=tuple(_with_alloc(p, snapshot) for p in kept) + tuple(new),
        preemptions=preemptions(em, placed, snapshot.policy.grace_s, got),
        pending=reservation_reasons(em, placed, pending_reasons(em, placed, degraded, got)),
        floor_violations=floor_violations(em, got_by_org(em, placed, reserved=False,
                                                          moves=True), placed),
        report=report,
        degraded=degraded,
        drains=drain_status(em, placed),
        reservations=reservations,
        reservations_ended=ended,
        reservation_idle=idle,
    )


def _with_alloc(p: Placement, snap: Snapshot) -> Placement:
    """A kept placement says whether its run is charged: allocated work on that type."""
    t = snap.type_names.index(p.gpu_type)
    alloc = bool(snap.job_tier1[snap.job_index[p.job_id], t])
    return p if p.allocated == alloc else Placement(p.job_id, p.gpu_type, p.nodes, alloc)


def left_idle(em: EpochModel, placed: Placed) -> float:
    """GPUs a plan leaves to unallocated work: the capacity less its allocated GPUs (the
    root's tier-1 GPUs)."""
    return float(em.tg.capacity.sum()
                 - got_by_org(em, placed, reserved=False, moves=True)[0].sum())


def _early_lp(em: EpochModel, settings: SolverSettings) -> EarlyLp | None:
    """The epoch's LP begun before the fill targets are known (None: nothing for it to
    solve, or no backend that would use it)."""
    backend = BACKENDS.get(settings.backend)
    if em.lm.n_vars < EARLY_LP_FROM or backend is None or not backend.available():
        return None
    # the fill of every GPU idle: the greedy plan leaves fewer, so the LP finishes mostly by
    # lowering bounds, the dual simplex's warm case
    return EarlyLp(em.with_fill(float(em.tg.capacity.sum())).lm, settings)


def _solve_and_place(em: EpochModel, settings: SolverSettings, g: Placed | None,
                     greedy_s: float, early: EarlyLp | None = None,
                     dives: list | None = None) -> tuple[EpochModel, Outcome]:
    """(the model with the `order_types` rows its solutions broke, the plan chosen);
    `dives` receives the LP of step 3a (its Dive) once made."""
    lm = em.lm
    name = settings.backend
    if lm.n_vars == 0:  # nothing to decide: an empty model is trivially optimal
        out = placed_outcome(em, np.zeros(0), "empty", backend=name, status="optimal",
                              message="empty model")
        out.bound = out.objective
        return em, out
    settings, exact = effective_settings(settings, lm)
    backend = BACKENDS.get(name)
    if backend is None or not backend.available():
        res = solve(lm, settings)  # the error result naming the problem
        return em, placed_outcome(em, None, "fallback", backend=name, status="error",
                                   message=res.message)
    # 3a. the LP relaxation: its optimum is the bound, its point rounds to a plan
    dive = start_dive(lm, settings, em.x, early=early)
    if dives is not None:
        dives.append(dive)
    lp = dive.first
    plans: list[Outcome] = []
    if lp.has_solution and lp.x is not None:
        plans.append(placed_outcome(em, lp.x, "lp-rounded", backend=name, status="feasible",
                                     message="LP relaxation rounded and placed"))
    bound = lp.bound if lp.has_solution else None
    solve_s = dive.solve_s
    # 3b. the greedy baseline's plan (made before the model's fill targets were set),
    #     scored on the same objective
    if g is not None:
        t = time.perf_counter()
        # where it starts long work on a reserved node, it breaks the reservation (the model
        # counts reserved nodes by class, so it may still be a model point): no answer, not
        # even where no candidate keeps every rule (a helper's random draw at stop 46 returned
        # it, a due gang on a node reserved for another gang), so the plan is greedy's without
        # those starts (g2)
        _, g2, s1, s2 = greedy_scored(em, g)  # scored while the LP solved, where it did
        plans.append(_relabel(s1 if g2 is None else s2, backend=name, status="feasible",
                              message="the greedy baseline's plan" + (
                                  "" if g2 is None else ", reservations kept"),
                              place_s=greedy_s + time.perf_counter() - t))
    if not plans:
        return em, placed_outcome(em, None, "fallback", backend=name, status=lp.status,
                                   message=lp.message)
    best = best_plan(plans)
    place_s = sum(p.place_s for p in plans)
    if backend.relaxation or _certified(best, bound, settings):
        return em, _final(best, name, bound, settings, solve_s, place_s, lp.status)
    # 3a+. not certified: the `order_types` rows the LP's point breaks (the team's order
    #      across gpu_types, optalloc.model.type_rows) and the `keep_order` rows of the
    #      starts a placement gave back (a running job's own priority, optalloc.model.
    #      team_rows) added, warm, and each new point rounded, until none is broken. Only
    #      now: the placement keeps every link anyway, and a certified plan needs no rows (the
    #      16,384-GPU bench epoch: 0.5 s a round, where its rounding was certified without)
    em, bound, done = _cut_rows(em, dive, plans, bound, settings, name)
    lm, lp, solve_s = em.lm, dive.first, dive.solve_s
    place_s = sum(p.place_s for p in plans)
    if done:
        return em, _final(best_plan(plans), name, bound, settings, solve_s, place_s, lp.status)
    rc = (lp.x, dive.reduced_costs) if dive.reduced_costs is not None else None
    if exact:  # a small MIP: straight to 3d (measured: the dive and RINS decide ~1% of them)
        return _mip(em, settings, name, plans, bound, solve_s, place_s, rc, with_cutoff=True)
    # 3a'. the LP dive, a round at a time (Dive: fix what the LP sets to 1, forbid the lower
    #      half of what it leaves fractional, re-solve warm; at most DIVE_ROUNDS rounds): each
    #      round's new point is rounded and placed at once, the first certified plan ends the
    #      epoch (no round's point is reliably the best rounding: models/formulation.md 3a');
    #      a placement costs ~1 s at 16,384 GPUs, so the dive stops at half the time limit
    seen = {_point_key(em, lp.x)} if lp.x is not None else set()

    def tried(x, message: str) -> bool:  # x placed unless placed already; certified?
        nonlocal place_s
        key = _point_key(em, x)
        if key in seen:
            return False
        seen.add(key)
        cand = placed_outcome(em, x, "lp-dive", backend=name, status="feasible",
                              message=message)
        place_s += cand.place_s
        plans.append(cand)
        return _certified(best_plan(plans), bound, settings)

    def other() -> bool:
        # 3a''. the other direction: from the LP's optimum, every start it left fractional
        #       forbidden at once (Dive.forbid_fractional); the dive then goes on. The bench's
        #       1,024-GPU instance, seeds 4-63 with and without two reservations: 12 of the
        #       120 epochs went on to the whole MIP (6-10 s); this point certified 6 of them
        #       (0.12-0.48% from the bound). No round after the third certified on those 120
        #       epochs (stop 27), so it comes after the third, or where the dive ends sooner
        xa = dive.forbid_fractional()
        return xa is not None and tried(xa, "the LP with every start it left fractional "
                                            "forbidden, rounded and placed")

    other_tried = False
    for r in range(1, DIVE_ROUNDS + 1):
        if r == OTHER_AFTER + 1:
            other_tried = True
            if other():
                return em, _final(best_plan(plans), name, bound, settings, dive.solve_s, place_s,
                              lp.status)
        n = len(dive.points)
        dive.run(1)
        if len(dive.points) == n:  # no LP point, nothing fractional left, or the LP failed
            break
        if tried(dive.points[-1], f"the LP dive's point after {r} round"
                                  f"{'' if r == 1 else 's'}, rounded and placed"):
            return em, _final(best_plan(plans), name, bound, settings, dive.solve_s, place_s,
                          lp.status)
        if dive.solve_s + place_s >= settings.time_limit_s / 2:  # leave the MIP its time
            break
    if not other_tried and dive.solve_s + place_s < settings.time_limit_s / 2 and other():
        return em, _final(best_plan(plans), name, bound, settings, dive.solve_s, place_s,
                      lp.status)
    solve_s = dive.solve_s
    anchor = best_plan(plans)
    # 3c. the MIP around the best plan (RINS): the integer columns where that plan and the LP
    #     agree are fixed; measured on the 1,024-GPU bench epoch with two reservations: the
    #     rounded plan was 0.79% from the bound, the neighbourhood's 0.38% in 0.5 s, where the
    #     whole MIP took 5-9 s
    if anchor.model_point and lp.x is not None:
        sub, free = neighborhood(lm, as_solution(em, anchor.placed), lp.x)
        left = max(0.05, settings.time_limit_s - solve_s)
        r = solve(sub, replace(settings, time_limit_s=max(0.05, left / 2)))
        solve_s += r.solve_s
        if r.has_solution:
            place_s += _new_plan(em, r.x, plans, "mip-neighborhood", backend=name,
                                 status=r.status, message=f"the MIP around the best plan "
                                                          f"({free} integer columns free)")
            best = best_plan(plans)
            if _certified(best, bound, settings):
                return em, _final(best, name, bound, settings, solve_s, place_s, lp.status)
    return _mip(em, settings, name, plans, bound, solve_s, place_s, rc)


#: the MIP's plan says what it is; the solver's own word ends the report ("solver: optimal
#: (Optimal)"): as its first word, 'Optimal; 3.32e-01 above the bound' read as a contradiction
_MIP = "the MIP's solution placed"


def _mip(em: EpochModel, settings: SolverSettings, name: str, plans: list, bound,
         solve_s: float, place_s: float, rc: tuple | None = None,
         with_cutoff: bool = False) -> tuple[EpochModel, Outcome]:
    """Steps 3d and 3e: the MIP, then the MIP with the scheme's best plan's floors held.
    `rc`: the LP optimum's point and reduced costs, to fix what no better plan can move;
    `with_cutoff`: the first MIP is given the best plan's value as its cutoff.
    (The model with the `order_types` rows the MIP's solutions broke, the plan chosen.)"""
    lm = em.lm
    # 3d. the MIP, from scratch: a warm start from the best plan stalled HiGHS 1.16 (bench M:
    #     the 20 s limit, 7.6 s without) or was wrong (tests/test_solve_highs_start.py).
    #     The integer columns that no plan better than the best placed one can move (the LP's
    #     reduced costs, optalloc.solve.fixing) are fixed first; the model's bound is then the
    #     larger of that plan's value and the fixed MIP's bound (cluster04, 3 days: 70 of 211
    #     MIPs had such columns, 1.26 -> 0.60 s).
    #     A small MIP solved exactly is given that value as its cutoff (solve.highs._cut:
    #     10 days of cluster04's 2,587 MIPs 45.4 -> 33.1 s); not a large one at a looser gap,
    #     which must then find a point above it where one within the gap would do (bench M
    #     seed 34, two reservations: 5.0 s without, the 10 s limit with), nor later rounds
    inc = max((p.model_value for p in plans if p.model_value is not None), default=None)
    cutoff = None if inc is None or not with_cutoff else inc - 1e-7 * max(1.0, abs(inc))
    for _ in range(CUT_ROUNDS):
        fixed, n_fixed = (fix_by_reduced_cost(lm, rc[0], rc[1], inc)
                          if rc is not None and inc is not None else (lm, 0))
        left = max(0.05, settings.time_limit_s - solve_s)
        mip = solve(fixed, replace(settings, time_limit_s=left), cutoff=cutoff)
        if n_fixed and mip.status in ("infeasible", "error"):  # a plan is in it: retry
            solve_s += mip.solve_s
            n_fixed = 0
            mip = solve(lm, replace(settings, time_limit_s=max(0.05, left - mip.solve_s)),
                        cutoff=cutoff)
        solve_s += mip.solve_s
        if mip.bound is not None:  # a bound without rows is one too: they only take plans away
            mb = max(mip.bound, inc) if n_fixed or cutoff is not None else mip.bound
            bound = mb if bound is None else min(bound, mb)
        # the `order_types` rows its solution breaks and the `keep_order` rows of the starts
        # its placement gave back (optalloc.model.team_rows), added, and the MIP solved
        # again; the solution is placed all the same (the placement keeps every link), as
        # the MIP again may not finish in the time left (the 1,024-GPU bench epoch, seed 2:
        # the first MIP's solution 0.0008% from its bound broke 29 links, the second timed
        # out)
        if not mip.has_solution:
            break
        more = em.ordx.broken(mip.x)
        place_s += _new_plan(em, mip.x, plans, "mip", backend=name, status=mip.status,
                             message=_MIP + ("; placed keeping the team's order across "
                                             "gpu_types" if more.any() else ""))
        mip = replace(mip, x=None)  # placed already
        cut = em.with_team_rows(_team_pairs(plans))
        cut = cut.with_type_rows(more) if more.any() else cut
        if (cut is em or _certified(best_plan(plans), bound, settings)
                or settings.time_limit_s - solve_s <= 0.05):
            break
        em, cutoff = cut, None
        lm = em.lm
    if mip.has_solution:
        place_s += _new_plan(em, mip.x, plans, "mip", backend=name, status=mip.status,
                             message=_MIP)
    # 3f. the team's order held pair by pair where the per-type rows let the MIP stop a running
    #     job for its lower-ranked teammate that the placement then gave back (candidates only:
    #     optalloc.epoch_strict)
    if not _certified(best_plan(plans), bound, settings):
        solve_s, place_s = strict_team_plans(em, settings, name, plans, solve_s, place_s,
                                             _new_plan)
    best = best_plan(plans)
    msg = f"{mip.status} ({mip.message})" + (
        f"; {n_fixed} integer columns fixed by the LP's reduced costs" if n_fixed else "")
    # 3e. the scheme's order over the objective: where the best plan by that order meets more
    #     floor GPUs than the objective's optimum (no finite weight makes one 2-GPU floor job
    #     outweigh a 64-GPU gang's target), the MIP again with those floors held, so the plan
    #     that is returned is the best of those that meet them, and its gap is measured
    #     against the bound of those plans (ITP cluster02: 12 of 8,480 epochs reported 0.6-3.6%
    #     against a bound only plans that drop a floor could reach)
    if _floors_traded(best, plans) and not _certified(best, bound, settings):
        left = settings.time_limit_s - solve_s
        if left > 0.05:
            held = em.lm.with_row("floors-held", *_floor_terms(em), best.tiers[0] - _tol(best))
            r = solve(held, replace(settings, time_limit_s=left))
            solve_s += r.solve_s
            if r.has_solution:
                place_s += _new_plan(em, r.x, plans, "mip-floors-held", backend=name,
                                     status=r.status, message="the MIP with the floors of "
                                     "the scheme's best plan held")
                best = best_plan(plans)
            if r.bound is not None and r.status in ("optimal", "timeout", "feasible"):
                bound = r.bound  # of every plan meeting those floors, the best plan among them
                msg = (f"{r.status} ({r.message}); bound of the plans that meet the floors "
                       f"of the scheme's best plan")
    return em, _final(best, name, bound, settings, solve_s, place_s, mip.status, msg)


def _new_plan(em: EpochModel, x, plans: list[Outcome], source: str, **kw) -> float:
    """A solver's integer solution placed and added to `plans`, unless a plan there already
    places it (optalloc.plan.outcome.placed_already: 155 of the 211 MIP solutions of 3 days
    of ITP cluster04 were the LP's rounding or the greedy plan), which then says so. The
    seconds its placement took (0 when not placed)."""
    same = placed_already(em, x, plans)
    if same is not None:
        same.message += f"; the {source} solution is the same plan"
        return 0.0
    cand = placed_outcome(em, x, source, **kw)
    plans.append(cand)
    return cand.place_s


__all__ = ["effective_settings", "run_epoch"]
