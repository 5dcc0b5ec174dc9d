"""Step 4b of the epoch: after the team's order by proxy (optalloc.epoch_status.
keep_team_order) kept running jobs that the chosen plan had stopped, the LP again with every
running job that plan keeps fixed, rounded, placed and repaired the same way; the better plan
by the scheme's order is the epoch's.

Why: the model counts GPUs per type, so its LP may stop a running job R for another project's
start while R's queued teammates take free GPUs that start could have had (a proxy for R).
The repair keeps R and undoes the teammates' starts, and the other project's start moves to
what they freed; but the GPUs the rest of the plan was built around do not move with it. On
the 16,384-GPU bench epoch the repair kept 83 running jobs and took the plan from 0.12% to
0.60% of the bound, almost all of it floor GPUs. With the plan's keeps fixed the LP reroutes
the rest around them. Measured in the epoch (stop 44): the 16,384-GPU bench epoch 0.60% ->
0.10% after one round (then certified), the 1,024-GPU one's seed 4 0.51% -> 0.14%; tried
beside it on seeds 0 and 2, whose repaired plans are certified already (0.31%, 0.41%), a
round took them to 0.01% and 0.25%. Each better by the scheme's order. A round whose plan is
within the gap asked ends the step.

It runs only where the repair changed the plan and left it outside the gap asked (mip_gap):
a certified plan is not worth another LP. The LP is the dive's own, re-solved warm from its
first basis (optalloc.solve.highs.Dive.fixed_point). The bound is the first LP's: fixing the
keeps only takes plans away, so it stays a bound of every plan.
"""

from __future__ import annotations

import time

import numpy as np

from optalloc.epoch_status import (
    PROXY_ROUNDS, _outside, beyond_bound, gap, gap_text, keep_team_order, repack_team_order,
)
from optalloc.model.build import EpochModel
from optalloc.plan.holdings import Placed
from optalloc.plan.outcome import Outcome, best_plan, placed_outcome
from optalloc.plan.proxy_check import proxy_breaks
from optalloc.solve.base import effective_settings
from optalloc.types import SolverSettings

#: LPs with the keeps fixed at most (a round's plan may keep other jobs by proxy again)
KEPT_ROUNDS = 2


def team_order_steps(em: EpochModel, chosen: Outcome, dive, settings: SolverSettings,
                     greedy: Placed | None = None, steps: tuple | None = None) -> Outcome:
    """Steps 4, 4b and 4c on the chosen plan: the team's order by proxy (keep_team_order),
    the LP again with its keeps fixed where that left the plan outside the gap
    (resolve_with_keeps), the team's order over several places (repack_team_order).

    The repair's own plan may stop a running job by proxy that the chosen plan did not: a
    teammate it undid takes a later one's place on another type (the team's order), or the
    backfill starts one, beside a running job of their project that the plan stopped for
    another project's start that fits on the free GPUs. Steps 4b and 4c remove such a job
    now and then (their plans are other plans), and then better by the scheme's order than
    the repair run again on its own plan (the bench's 1,024-GPU seeds 21 and 32 with two
    reservations); else it stays (seeds 6 and 18 with two reservations, 37 without: j00042
    stopped for j01147's 16-GPU start, which fitted on the free GPUs, while its teammate
    j01935, undone on b300 to keep j00069, took a later teammate's place on b200). So where
    the repair leaves such a job, the three steps run again with the repair repeated on its
    own plan (keep_team_order's `rounds`), and the epoch's plan is the one of the two that
    stops fewer jobs by proxy, then the better by the scheme's order. `steps`: the three
    steps' functions (keep_team_order, resolve_with_keeps, repack_team_order), as the epoch
    names them."""
    keep, resolve, repack = steps or (keep_team_order, resolve_with_keeps, repack_team_order)
    out = keep(em, chosen, settings, greedy)
    best = repack(em, resolve(em, chosen, out, dive, settings, greedy), settings)
    if out is chosen or not proxy_breaks(em, out.placed):
        return best
    n = len(proxy_breaks(em, best.placed))  # once: the comparison below reads it too
    if not n:
        return best
    again = keep(em, chosen, settings, greedy, PROXY_ROUNDS)
    other = repack(em, resolve(em, chosen, again, dive, settings, greedy), settings)
    m = len(proxy_breaks(em, other.placed))
    if m < n or (m == n and best_plan([best, other]) is other
                 and (other.score, other.objective) > (best.score, best.objective)):
        other.solve_s += best.solve_s - out.solve_s  # the first path's time counts too
        other.place_s += best.place_s - out.place_s
        return other
    return best


def resolve_with_keeps(em: EpochModel, before: Outcome, out: Outcome, dive,
                       settings: SolverSettings, greedy: Placed | None = None) -> Outcome:
    """`out` (the team's order by proxy applied to `before`), or a better plan by the
    scheme's order: the LP with every running job the plan keeps fixed, rounded, placed and
    repaired (keep_team_order), at most KEPT_ROUNDS times. `dive`: the epoch's LP
    (optalloc.solve.highs.Dive), None where it has none."""
    if (out is before or dive is None or out.placed is None or out.bound is None
            or not len(em.k)):
        return out
    mip_gap = effective_settings(settings, em.lm)[0].mip_gap
    g = gap(out.objective, out.bound)
    if g is None or g <= mip_gap:
        return out
    t = time.perf_counter()
    s0 = dive.solve_s
    may_stay = em.lm.ub[em.k] > 0
    best, cur, rounds = out, out, 0
    allowed = None  # the proxy breaks `out` has (a plan of this step may have no others)
    for _ in range(KEPT_ROUNDS):
        x = dive.fixed_point(em.k[np.flatnonzero(cur.placed.kept & may_stay)])
        if x is None:
            break
        rounds += 1
        placed = placed_outcome(em, x, "lp-kept", backend=out.backend, status="feasible",
                                message=out.message)
        cur = keep_team_order(em, placed, settings, greedy)
        if best_plan([best, cur]) is cur and (cur.score, cur.objective) > (best.score,
                                                                            best.objective):
            # the repair misses a proxy it cannot move the other start for; such a plan is
            # no answer (a helper's sweep at stop 44: the bench's 1,024-GPU seed 104)
            allowed = proxy_breaks(em, out.placed) if allowed is None else allowed
            if proxy_breaks(em, cur.placed) <= allowed:
                best = cur
        if cur is placed or cur.placed is None:  # nothing kept by proxy: a fixed point
            break
        g_best = gap(best.objective, out.bound)
        if g_best is not None and g_best <= mip_gap:  # certified: no other LP is worth it
            break
    if best is out:
        out.solve_s += dive.solve_s - s0
        out.place_s += time.perf_counter() - t - (dive.solve_s - s0)
        return out
    g2 = gap(best.objective, out.bound)
    best.bound = out.bound
    best.solve_s = out.solve_s + dive.solve_s - s0
    best.place_s = out.place_s + time.perf_counter() - t - (dive.solve_s - s0)
    best.status = ("optimal" if g2 is not None and g2 <= mip_gap
                   and not beyond_bound(best, out.bound) else "feasible")
    best.message = (f"{out.message}; then the LP again with the running jobs it keeps fixed "
                    f"({rounds} round{'s' if rounds != 1 else ''}), rounded and placed: "
                    f"{gap_text(best.objective, out.bound, g2)}"
                    f"{_outside(best, bound=out.bound)}")
    return best
