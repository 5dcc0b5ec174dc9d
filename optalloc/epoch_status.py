"""The epoch's honest status (optalloc.epoch, step 3): a placed plan's gap to the bound, when
it is certified, the final outcome's status and message, the scheme's order over the
objective (step 3e's test) and the `order_types` cut loop (optalloc.model.type_rows).

Status: `optimal` only when the *placed* plan is within mip_gap of a true bound (the tighter
of the LP optimum and the MIP's dual bound); otherwise `feasible` (or the solver's timeout /
infeasible / error)."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.constraints.fairshare import floor_columns
from optalloc.plan.holdings import Placed
from optalloc.plan.outcome import Outcome, best_plan, placed_outcome, scored
from optalloc.plan.proxy_check import proxy_breaks
from optalloc.plan.proxy_order import keep_over_proxies
from optalloc.plan.repack_order import repacked
from optalloc.plan.reservations import keep_reservations
from optalloc.plan.team_order import forced_jobs
from optalloc.solve import relative_gap
from optalloc.solve.base import effective_settings
from optalloc.types import SolverSettings

#: rounds of `order_types` rows added (optalloc.model.type_rows) to the LP, and to the MIP,
#: at most: each adds the rows the last solution broke and solves again
CUT_ROUNDS = 6


def gap(objective: float | None, bound: float | None) -> float | None:
    """The relative gap of a plan worth `objective` to `bound` (0 above it; None: unknown)."""
    if bound is None or objective is None:
        return None
    return relative_gap(objective, bound) if bound > objective else 0.0


def gap_text(objective: float | None, bound: float | None, g: float) -> str:
    """'gap G to the bound', or, for a plan the bound does not count (a plan outside the
    model, `_outside`) worth more than it, how far above it: 'gap 0' there read as a plan
    at the optimum (fresh draws at stop 43: greedy's plan, 20% above the bound)."""
    if _above(objective, bound):
        return f"{(objective - bound) / max(abs(bound), 1e-9):.2e} above the bound"
    return f"gap {g:.2e} to the bound"


def certified(best: Outcome, bound, settings: SolverSettings) -> bool:
    """The placed plan is within mip_gap of the bound."""
    g = gap(best.objective, bound)
    return g is not None and g <= settings.mip_gap


def final(best: Outcome, backend: str, bound, settings, solve_s, place_s, solver_status,
           solver_msg: str = "") -> Outcome:
    """Status from the placed plan's real gap: optimal only within mip_gap of a true bound."""
    if bound is not None and 0 < best.objective - bound <= 1e-9 * max(1.0, abs(bound)):
        bound = best.objective  # the same optimum summed in another order: a rounding, not a gap
    g = gap(best.objective, bound)
    if g is not None and g <= settings.mip_gap and not beyond_bound(best, bound):
        status = "optimal"
    elif solver_status in ("timeout", "infeasible", "error"):
        status = solver_status
    else:
        status = "feasible"
    parts = [best.message]
    if g is not None:
        parts.append(gap_text(best.objective, bound, g) + _outside(best, bound=bound))
    if solver_msg:
        parts.append(f"solver: {solver_msg}")
    return replace(best, backend=backend, status=status, bound=bound, solve_s=solve_s,
                   place_s=place_s, message="; ".join(parts))


def beyond_bound(best: Outcome, bound: float | None = None) -> bool:
    """No gap to the model's bound makes the plan optimal: it breaks a `keep_order` row where
    its running job gave way to work ranked above it (optalloc.model.keep_displaced), which
    the bound counts no such plan for; or it is no point of the model and worth more than
    the bound (`bound`), which then bounds nothing (a helper's sweep at stop 44: the bench's
    1,024-GPU seed 114 with two reservations was `optimal` 12% above its bound, "the placed
    plan leaves the model"). A plan outside the model below the bound (a priority swap
    placed beside the solution) is certified by it as any plan is."""
    return (best.eligible and not best.model_point) or (
        not best.model_point and _above(best.objective, bound))


def _above(objective: float | None, bound: float | None) -> bool:
    """The objective is above the bound by more than a rounding."""
    return (bound is not None and objective is not None
            and objective - bound > 1e-9 * max(1.0, abs(bound)))


def _outside(best: Outcome, waits: list[str] | None = None, bound: float | None = None) -> str:
    """What the message says of a plan that is no point of the model; `waits`: the jobs of a
    due reservation's gang whose start (forced in the model) the plan undid for its team's
    order (optalloc.plan.proxy_order)."""
    if best.model_point:
        return ""
    if best.eligible:  # optalloc.model.keep_displaced
        return ("; the plan starts a lower-priority job on a type where a running job of its "
                "project gave way to work ranked above it, which the model does not allow, so "
                "its bound counts no such plan")
    if waits:
        return (f"; the placed plan leaves the model: the due reservation's gang "
                f"{', '.join(waits)} waits an epoch rather than stop, by proxy, a running job "
                "of its team ranked above it, where the model starts it, so its bound counts "
                "no such plan")
    return "; the placed plan leaves the model" + (
        ", so its bound counts no such plan" if _above(best.objective, bound) else "")


def several_note(em: EpochModel, out: Outcome, settings) -> Outcome:
    """`out`, its message saying why the gap is wide where its plan gave waiting jobs the
    places of several lower-priority starts of their team (optalloc.plan.several_places):
    the model links a job only to the place of one job, so its bound counts plans that break
    the team's order there."""
    placed = out.placed
    ahead = placed.ahead if placed is not None else None
    if ahead is None or not len(ahead):
        return out
    # the pairs still true of the final plan (the team's order by proxy repairs a placed plan
    # after the placement recorded them, optalloc.plan.proxy_order)
    on = [(a, b) for a, b in ahead.tolist() if a in placed.placements
          and b not in placed.placements]
    g = gap(out.objective, out.bound)
    if not on or g is None or g <= effective_settings(settings, em.lm)[0].mip_gap:
        return out
    snap = em.snap
    firsts = sorted({a for a, _ in on})
    ids = ", ".join(snap.jobs[a].id for a in firsts[:3]) + ("..." if len(firsts) > 3 else "")
    one = len(firsts) == 1
    out.message += (f"; {len(firsts)} job{'' if one else 's'} ({ids}) took the places of "
                    f"several lower-priority starts of {'its' if one else 'their'} team (the "
                    "team's order), which the model links only one by one, so its bound counts "
                    "plans that break that order")
    return out


def point_key(em: EpochModel, x) -> bytes:
    """What a placement reads of an LP point: its starts and keeps."""
    x = np.asarray(x)
    return np.round(x[em.x], 6).tobytes() + np.round(x[em.k], 6).tobytes()


def floors_traded(best: Outcome, plans: list[Outcome]) -> bool:
    """The objective's best candidate is not the scheme's: its floor tier is worth less than
    the plan chosen (fewer floor GPUs, or the same number in projects of higher usage ratio:
    the floor weights' tie-break, optalloc.model.objective.impact.tier_weights); both keep the
    model's rules."""
    top = max(plans, key=lambda o: o.objective)
    return (best.model_point and top.model_point and top.objective > best.objective
            and top.tiers[0] < best.tiers[0] - tol(best))


def tol(o: Outcome) -> float:
    """Two floor tiers closer than this are the same (float summation, ~1e-14 relative). It
    must stay below the floor weights' tie-break, which best_plan compares exactly: at 1e-7
    a plan chosen for a tie-break worth 0.02 (ITP cluster04, day 24.7: the greedy plan met a
    lower-ratio project's floor instead of another's, losing 322 of targets) was left
    `feasible` at a 0.12% gap without the MIP with its floors held, which certifies it."""
    return 1e-11 * max(1.0, abs(o.tiers[0]))


def floor_terms(em: EpochModel) -> tuple[np.ndarray, np.ndarray]:
    cols = floor_columns(em.m, em.m_seg)
    return cols, em.lm.c[cols]


def cut_type_rows(em: EpochModel, dive, rounds: int = CUT_ROUNDS) -> EpochModel:
    """The `order_types` rows (the team's order across gpu_types, optalloc.model.type_rows)
    the LP's point breaks, added to the model and to the dive's LP, re-solved warm, until the
    point breaks none (at most CUT_ROUNDS rounds; a later solution's are added where it is
    solved, and every placement keeps all of them whatever the rows)."""
    for _ in range(rounds):
        if dive.x is None or em.ordx is None:
            break
        more = em.ordx.broken(dive.x)
        if not more.any():
            break
        em = em.with_type_rows(more)
        dive.add_rows(em.lm)
    return em


def team_pairs(plans: list[Outcome]) -> np.ndarray:
    """(P, 3) the (running job's position, job, moved) the placements of `plans` gave a start
    back for (optalloc.plan.team_order), each a `keep_order` row the model may lack."""
    held = [o.placed.held for o in plans if o.placed.held is not None and len(o.placed.held)]
    return np.concatenate(held) if held else np.zeros((0, 3), np.int64)


def cut_rows(em: EpochModel, dive, plans: list[Outcome], bound, settings: SolverSettings,
             backend: str, rounds: int = CUT_ROUNDS) -> tuple[EpochModel, object, bool]:
    """Step 3a+: the rows the LP's point or the plans placed so far break, added and the LP
    solved again warm, its new point rounded, placed and added to `plans`; again while a
    round adds rows (at most `rounds`): the `order_types` rows (cut_type_rows) and the
    `keep_order` rows for the starts a placement gave back so that a running job of their
    team ranked above them keeps its GPUs (optalloc.model.team_rows: without them the bound
    counted such a start). (The model, the bound, whether the best plan is certified.)"""
    for _ in range(rounds):
        n = em.lm.n_cons
        em = cut_type_rows(em, dive)
        more = em.with_team_rows(team_pairs(plans))
        if more is not em:
            em = more
            dive.add_rows(em.lm)
        lp = dive.first
        if em.lm.n_cons == n or not lp.has_solution or lp.x is None:
            break
        bound = lp.bound if bound is None else min(bound, lp.bound)
        plans.append(placed_outcome(em, lp.x, "lp-rounded", backend=backend, status="feasible",
                                    message="LP relaxation with the team's order rows its "
                                            "plans broke rounded and placed"))
        if certified(best_plan(plans), bound, settings):
            return em, bound, True
    return em, bound, False


def greedy_scored(em: EpochModel, greedy: Placed) -> tuple:
    """(greedy's plan, the same without the starts that break a reservation (None: it breaks
    none), greedy's plan scored on em, that one scored (or None)), once per model (kept on
    em: a model with other rows scores anew): the epoch makes it while its LP solves on its
    thread; step 3b and `keep_team_order` read copies, labelled (`relabel`). The 16,384-GPU
    bench epoch scored greedy's plan after its LP, twice, 0.03-0.05 s each."""
    pre = em.__dict__.get("greedy_scored")
    if pre is None or pre[0] is not greedy:
        g2 = keep_reservations(em, greedy)
        pre = em.__dict__["greedy_scored"] = (
            greedy, g2, scored(em, greedy, "greedy", backend="", status=""),
            None if g2 is None else scored(em, g2, "greedy", backend="", status=""))
    return pre


def relabel(out: Outcome, **kw) -> Outcome:
    """A copy of a plan scored by `greedy_scored`, with `kw` (backend, status, message...)."""
    return replace(out, **kw)


#: rounds of the team's order by proxy at most after the first, each on the last one's plan,
#: where the epoch runs it again on its own plan (optalloc.epoch_kept.team_order_steps)
PROXY_ROUNDS = 3


def kept_over_proxies(em: EpochModel, placed: Placed,
                      rounds: int = 0) -> tuple[int, Placed] | None:
    """optalloc.plan.proxy_order.keep_over_proxies, then, at most `rounds` times, again on its
    own plan while that stops a running job by proxy (proxy_check) and a round leaves no more
    such jobs and not the same ones as an earlier round: a teammate it undid may start in the
    place of a later one on another type (the team's order, plan.place._repair_order), or the
    backfill start one, beside a running job of their project that the plan stopped for
    another project's start, which is then stopped by proxy. A round may trade one such job
    for another that the next round keeps (the bench's 1,024-GPU seed 121, its MIP stopped by
    the time limit: keeping j00096 undid j01731 and left j00178 stopped by proxy, kept by a
    second round; until stop 55 a round had to leave fewer, and j00096 stayed stopped while
    j01731 took the GPUs its GPU's new holder fitted on). (How many kept in all, the plan),
    None where the first round keeps none."""
    got = keep_over_proxies(em, placed)
    if got is None:
        return None
    n, placed = got
    left = proxy_breaks(em, placed) if rounds else set()
    seen = [left]
    for _ in range(rounds):
        more = keep_over_proxies(em, placed) if left else None
        if more is None:
            break
        now = proxy_breaks(em, more[1])
        if len(now) > len(left) or now in seen:  # more, or a set seen before: no progress
            break
        n, placed, left = n + more[0], more[1], now
        seen.append(now)
    return n, placed


def keep_team_order(em: EpochModel, out: Outcome, settings: SolverSettings,
                    greedy: Placed | None = None, rounds: int = 0) -> Outcome:
    """The chosen plan with the running jobs kept that it stopped only so that their team's
    lower-ranked starts had room (optalloc.plan.proxy_order), scored again; its status and
    gap from the same bound. Where the greedy baseline's plan (`greedy`, reservations kept)
    keeps the model's rules and now scores better by the scheme's order, that plan: undoing
    the teammates' starts can leave fewer floor GPUs than greedy's packing around the same
    running job (a helper's search: 10 of 6,700 random snapshots), and the optimizer never
    loses to greedy. `out` itself where no job is kept so. `rounds`: the repair again on its
    own plan at most so many times (kept_over_proxies)."""
    if out.placed is None or not out.placed.placements:
        return out
    t = time.perf_counter()
    got = kept_over_proxies(em, out.placed, rounds)
    if got is None:
        return out
    n, placed = got
    kw = dict(backend=out.backend, status=out.status, bound=out.bound, solve_s=out.solve_s)
    alt = scored(em, placed, out.source, **kw)
    note = (f"then {n} running job{'s' if n != 1 else ''} kept that it stopped only for "
            f"starts of {'their' if n != 1 else 'its'} team ranked below "
            f"{'them' if n != 1 else 'it'} (another start moved to free GPUs)")
    if greedy is not None:
        _, _, s1, s2 = greedy_scored(em, greedy)  # scored already where em is the same
        base = relabel(s1 if s2 is None else s2, **kw)
        if ((base.model_point or base.eligible)
                and (base.score, base.objective) > (alt.score, alt.objective)):
            alt = base
            note = (f"{note}; the greedy baseline's plan scores better than that by the "
                    "scheme's order, and is the plan")
    alt.place_s = out.place_s + time.perf_counter() - t
    g = _restatus(em, alt, out, settings)
    waits = None
    if not (alt.model_point or alt.eligible):  # outside the model: a due gang that waits?
        forced = forced_jobs(em)
        waits = sorted(em.snap.jobs[j].id for j in out.placed.placements
                       if forced[j] and j not in alt.placed.placements)
    alt.message = f"{out.message}; {note}" + ("" if g is None else
                                               f": {gap_text(alt.objective, out.bound, g)}"
                                               f"{_outside(alt, waits, out.bound)}")
    return alt


def _restatus(em: EpochModel, alt: Outcome, out: Outcome, settings: SolverSettings):
    """The gap of `alt`, a repair of `out`, to out's bound; alt is `optimal` where that gap is
    within mip_gap and it is not above the bound, else `feasible` where out was `optimal`."""
    g = gap(alt.objective, out.bound)
    mip_gap = effective_settings(settings, em.lm)[0].mip_gap
    if g is not None and g <= mip_gap and not beyond_bound(alt, out.bound):
        alt.status = "optimal"
    elif out.status == "optimal":
        alt.status = "feasible"
    return g


def repack_team_order(em: EpochModel, out: Outcome, settings: SolverSettings) -> Outcome:
    """Step 4c: the chosen plan with each waiting job that fits in the places of its team's
    lower-priority starts once the plan's other queued starts beside them move within their
    type started there (optalloc.plan.repack_order), scored again, its status and gap from
    the same bound; `out` itself where no job does, or where that plan does not score better
    by the scheme's order. Then, likewise and kept only where it scores better again, each
    running job the plan stops restarted in the places of its team's starts ranked below it
    (several_places._stopped: the team's order starts it first)."""
    return _repack_step(em, _repack_step(em, out, settings, False), settings, True)


def _repack_step(em: EpochModel, out: Outcome, settings: SolverSettings,
                 restarts: bool) -> Outcome:
    t = time.perf_counter()
    got = repacked(em, out.placed, restarts)
    if got is None:
        return out
    firsts, placed = got
    if proxy_breaks(em, placed) - proxy_breaks(em, out.placed):  # no new proxy for a keep
        out.place_s += time.perf_counter() - t
        return out
    alt = scored(em, placed, out.source, backend=out.backend, status=out.status,
                 bound=out.bound, solve_s=out.solve_s)
    if best_plan([out, alt]) is not alt or alt.score <= out.score:
        out.place_s += time.perf_counter() - t
        return out
    alt.place_s = out.place_s + time.perf_counter() - t
    g = _restatus(em, alt, out, settings)
    snap = em.snap
    ids = ", ".join(snap.jobs[a].id for a in firsts[:3]) + ("..." if len(firsts) > 3 else "")
    one = len(firsts) == 1
    what = (f"restarted in the places of starts {'its' if one else 'their'} team ranks below "
            f"{'it' if one else 'them'}" if restarts else
            f"started in the places of lower-priority starts of {'its' if one else 'their'} "
            "team")
    alt.message = (f"{out.message}; then {len(firsts)} job{'' if one else 's'} ({ids}) {what}, "
                   "other starts moved within their type (the team's order)"
                   + ("" if g is None else f": {gap_text(alt.objective, out.bound, g)}"
                      f"{_outside(alt, bound=out.bound)}"))
    return alt
