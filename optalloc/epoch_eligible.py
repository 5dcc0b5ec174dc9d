"""Step 4d of the epoch: a bound that counts the plan chosen where it is no point of the model
only because the model keeps the team's order stricter than the scheme.

Such a plan (Outcome.eligible, optalloc.model.keep_displaced) breaks `keep_order` rows and
nothing else: a running job gave way on its type to work ranked above it, and its team's job
of a lower priority fills what is left, as under greedy. The model's LP keeps those rows, so
its optimum bounds no such plan, and the epoch called the plan `feasible` whatever its gap.
The LP without the `keep_order` rows keeps every other row, so its optimum bounds every model
point and every such plan: measured against it, a plan within the gap asked is certified.

Why it matters: which plan is best by the scheme's order decides whether the chosen one is
such a plan, and that turns on details of the cluster; the bench's 1,024-GPU seed 0 epoch
moved to one when a non-resumable job on a down node stopped being a restart candidate
(stop 55), 0.40% from the model's bound, and was `feasible` only for want of a bound that
counts it. The LP is the dive's own, re-solved warm from its first basis (a few
hundredths of a second at 1,024 GPUs); it runs only where such a plan was chosen.
"""

from __future__ import annotations

import numpy as np

from optalloc.epoch_status import _above, gap, gap_text
from optalloc.model.build import EpochModel
from optalloc.plan.outcome import Outcome
from optalloc.solve.base import effective_settings
from optalloc.types import SolverSettings


def certify_eligible(em: EpochModel, out: Outcome, dive, settings: SolverSettings) -> Outcome:
    """`out`; where it is a plan outside the model only by `keep_order` rows (eligible) and
    `feasible` or `timeout` (the MIP stopped by its time limit: its bound counts no such plan
    either, so the gap reported was to no bound of the plan; bench M seeds 129 and 162 with
    two reservations), with the bound of the LP without those rows (its gap to a bound that
    counts it), and `optimal` where that gap is within the one asked. `dive`: the epoch's LP
    (optalloc.solve.highs.Dive), None where it has none."""
    if (dive is None or out.status not in ("feasible", "timeout") or out.model_point
            or not out.eligible or out.placed is None or out.bound is None):
        return out
    lm = em.lm
    block = [(a, b) for label, a, b in lm.row_blocks if label == "keep_order"]
    if not block or block[0][1] <= block[0][0]:
        return out
    a, b = block[0]
    s0 = dive.solve_s
    x = dive.without_rows(np.arange(a, b), lm.row_lo[a:b], lm.row_hi[a:b])
    out.solve_s += dive.solve_s - s0
    if x is None:
        return out
    bound = max(float(lm.objective(x)), out.bound)  # fewer rows: never below the model's
    g = gap(out.objective, bound)
    if g is None or _above(out.objective, bound):  # a point of that LP's rows: cannot be
        return out
    mip_gap = effective_settings(settings, lm)[0].mip_gap
    out.bound = bound
    note = ("; the LP without the `keep_order` rows (every other rule kept) bounds such "
            f"plans: {gap_text(out.objective, bound, g)}")
    head, sep, solver = out.message.partition("; solver: ")  # the solver's word stays last
    out.message = f"{head}{note}{sep}{solver}"
    if g <= mip_gap:
        out.status = "optimal"
    return out
