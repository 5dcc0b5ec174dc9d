"""Step 3f of the epoch: the MIP with the team's order held pair by pair, for candidates only.

The `keep_order` rows the epoch adds for a running job's own priority (optalloc.model.team_rows)
let its lower-ranked teammate start on its type wherever another project's start there may take
its GPUs: a per-type row cannot tell such a start from a proxy (one that fits on free GPUs). So
the MIP's optimum may stop a running job past its protection for a larger queued teammate of its
priority (more of its project's floor), any start of another project on the type its cover; the
placement gives the teammate's start back (the team's order), and the plan left is worth less.
The next MIP, with that row, returns the same optimum, and the search never reaches the plan
that keeps the order. Measured on the demo (3 days, ilp, stop 56, a helper's capture of every
epoch): all 25 of its 83 epochs reported `feasible` were so, and in 9 of them a plan better on
floors met, the scheme's first tier, keeps the team's order (evals' two running 1-GPU debug
jobs stopped for its queued 4-GPU one; foundation's running 8-GPU job for its 16-GPU one).

Here the rows of the pairs the placements gave back are written strict (the teammate starts on
the type only while the running job runs or restarts there), the MIP solved again and its
solution placed as one more candidate; again with the pairs that placement gave back, while new
ones appear. Strict rows forbid plans that keep the team's order too (another project truly
needs the running job's GPUs and the teammate starts on other free GPUs), so what these solves
prove is no bound: the epoch's bound stays the model's, and the scheme's order picks the plan.
Only in small epochs solved exactly (at most `exact_up_to` integer columns: tens of
milliseconds a MIP); a large one would pay seconds for each.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from optalloc.epoch_status import CUT_ROUNDS, team_pairs
from optalloc.model.build import EpochModel
from optalloc.model.team_rows import team_rows
from optalloc.plan.outcome import Outcome
from optalloc.solve import solve
from optalloc.types import SolverSettings

NOTE = "the MIP with the team's order held pair by pair (the pairs its placements gave back)"


def strict_team_plans(em: EpochModel, settings: SolverSettings, name: str,
                      plans: list[Outcome], solve_s: float, place_s: float,
                      new_plan: Callable[..., float]) -> tuple[float, float]:
    """More candidates in `plans` (each placed by `new_plan`, optalloc.epoch._new_plan): the
    MIP with every pair the placements gave back held strict, while new pairs appear, at most
    CUT_ROUNDS times and within the time left. (solve_s, place_s) with these solves'."""
    if int(em.lm.integer.sum()) > settings.exact_up_to:
        return solve_s, place_s
    forced = em.res.forced if em.res is not None else np.zeros(0)
    seen: set = set()
    for _ in range(CUT_ROUNDS):
        pairs = {tuple(p) for p in team_pairs(plans).tolist()}
        left = settings.time_limit_s - solve_s
        if pairs <= seen or left <= 0.05:
            break
        seen |= pairs
        rows = team_rows(em.snap, em.req, forced, em.x, em.k, em.lm.n_vars,
                         np.array(sorted(seen), np.int64), strict=True)
        r = solve(em.lm.with_rows("keep_order_strict", rows, -np.inf, 0.0),
                  replace(settings, time_limit_s=left))
        solve_s += r.solve_s
        if not r.has_solution:
            break
        place_s += new_plan(em, r.x, plans, "mip-team-strict", backend=name, status=r.status,
                            message=NOTE)
    return solve_s, place_s
