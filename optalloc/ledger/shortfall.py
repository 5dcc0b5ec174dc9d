"""What each org node was owed over the lookback window and not delivered, in the published
measure and in the fair one (`Ledger.shortfalls`, whose docstring gives the math).

The fair measure's demand is the placeable demand (optalloc.demand): a project whose jobs
cannot run on any up node wants none of the capacity there is, so its share goes to its
siblings (DESIGN.md rule 2). The published owed keeps every allocated job's GPUs: it is the
fairness metric's own definition (DESIGN.md section 6), unchanged.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from optalloc.ledger.kernel import step_integrals, window_rows
from optalloc.types import Interval

SHORT_EPS = 1e-6  # GPU-hours: a shortfall below this is float noise


def shortfalls(led, now: float, open_intervals: Sequence[Interval] = (),
               marks: tuple[int, int, int] | None = None
               ) -> tuple[dict[str, float], dict[str, float]]:
    """(owed, fair) shortfall per org node name of the ledger `led` (optalloc.ledger.memory,
    which calls this: not imported back); see `Ledger.shortfalls`."""
    window = float(led.policy.lookback_s)
    n_iv, n_dem, n_cap = marks if marks is not None else (None, None, None)
    seen = led._samples("demand", n_dem)[0]  # the tracked hours only, as the report's
    if (not window > 0 or not led._samples("capacity", n_cap)[0].size or not seen.size
            or seen[0] >= now):
        zero = {name: 0.0 for name in led.tree.names}
        return zero, dict(zero)
    # (report.tracked_since): what ran before optalloc first saw the queue was owed
    # nothing and repays nothing
    od = led.owed_delivered(max(float(seen[0]), now - window), now, 3600.0, open_intervals,
                            marks=marks)
    dlv = led.members @ led._per_leaf(od.delivered_total())
    owed = led.members @ led._per_leaf(od.owed_total())
    # the fair share is capped at the placeable demand: what could run on the up nodes
    pt, pv = led._samples("demand", n_dem, "placeable")
    w = window_rows(pt, od.edges)  # the window's rows: the same integrals, no (N, P) copy
    placeable_h = step_integrals(pt[w], pv[w][:, led.leaf_index], od.edges,
                                 before="zero").T / 3600.0
    fair = led.tree.fair_shares(led._per_node(placeable_h),
                                led._per_node(od.entitled_h)).sum(axis=1)
    # below SHORT_EPS GPU-hours is the float noise of the hourly sums, not a debt: a
    # project delivered exactly its fair share (4 of 24 GPUs at shares 1:5:5, the third
    # idle) read 3.6e-15 owed, and owed_nodes lifted its floor 2 -> 4
    return tuple({name: float(x) for name, x in
                  zip(led.tree.names, np.where(o - dlv > SHORT_EPS, o - dlv, 0.0))}
                 for o in (owed, fair))
