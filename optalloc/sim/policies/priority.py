"""`priority`: the old system the published work replaced.

* Rank: static priority label (`Job.priority`, higher first), then FIFO (submit time, then id).
  No fair share: usage never changes the order.
* Opt-out: a job with min_runtime > 0 is non-preemptible once running, for as long as it runs,
  even on a drained node (the on-call engineer has to negotiate). Unallocated jobs
  (min_runtime 0) are preemptible: a queued allocated job ranked above them may take their GPUs
  (lowest-ranked victims first, only when that makes it fit), and they leave drained nodes.
* Backfill: a job that does not fit does not block the smaller ones behind it.
* Placement: best fit (shared with greedy, see placement.py).
"""

from __future__ import annotations

import time

import numpy as np

from optalloc.plan.ranked import make_plan, pending_reasons, rank_pass
from optalloc.snapshot import Snapshot
from optalloc.types import Plan, ReasonCode


def priority_order(snap: Snapshot) -> np.ndarray:
    """Job indices best first: label descending, submit time, id."""
    ids = np.array([j.id for j in snap.jobs], dtype=object)
    return np.lexsort((ids, snap.job_submit, -snap.job_priority)) if len(ids) else np.zeros(0, int)


class PriorityScheduler:
    name = "priority"

    def decide(self, snapshot: Snapshot) -> Plan:
        t0 = time.perf_counter()
        snap = snapshot
        order = priority_order(snap)
        fixed = snap.job_running & snap.job_allocated
        res = rank_pass(
            snap,
            order,
            fixed=fixed,
            may_preempt=snap.job_allocated,  # running jobs are kept, bar a down node's
            victim_code=lambda v: ReasonCode.PREEMPTED_UNALLOCATED,
        )

        def explain(j: int):
            return (
                ReasonCode.WAITING_FOR_CAPACITY,
                f"waiting behind higher labels / earlier jobs (label {int(snap.job_priority[j])})",
            )

        return make_plan(snap, self.name, res, pending_reasons(snap, res, explain), t0)
