"""`greedy`: the published new system, as a strong list-scheduling baseline. The rules, with
the reasoning behind each, are in models/greedy.md; in short:

1. Rank projects hierarchically by usage ratio over the lookback window (Fair-Tree style:
   siblings are compared by ratio at every level of the org tree, lower ratio first, ties by
   name). Within a project: declared priority (higher first), then running before queued
   (an equal-priority job never displaces a started one), then submit time, then id.
   All allocated work ranks above all unallocated work (which keep the same order among
   themselves).
2. A running allocated job inside its min_runtime is protected: never preempted.
3. After it, a running job keeps its GPUs unless a higher-ranked queued allocated job needs
   them: victims are released lowest-ranked first (so unallocated jobs go first), and only if
   enough can be freed to place the higher-ranked job; victims not needed are kept.
4. Unallocated jobs only fill GPUs nobody ranked above them wants; they never preempt.
5. Backfill: a job that does not fit does not block smaller lower-ranked ones.
6. Best-fit placement prefers partly used nodes, so whole nodes stay free for gangs.
7. Running jobs past their protection on a drained node are preempted so the node empties.
"""

from __future__ import annotations

import time

from optalloc.model.order import fair_tree_rank
from optalloc.plan.ranked import greedy_order, greedy_pass, make_plan, pending_reasons
from optalloc.snapshot import Snapshot
from optalloc.types import Plan, ReasonCode

__all__ = ["GreedyScheduler", "greedy_order", "project_rank"]
project_rank = fair_tree_rank  # the Fair-Tree rank of every project (optalloc.model.order)


class GreedyScheduler:
    name = "greedy"

    def decide(self, snapshot: Snapshot) -> Plan:
        t0 = time.perf_counter()
        snap = snapshot
        res = greedy_pass(snap)
        first_pending = {}
        for j in res.pending:  # rank order: the first pending job of each project
            first_pending.setdefault(int(snap.job_project[j]), j)

        def explain(j: int):
            p = int(snap.job_project[j])
            if first_pending.get(p) != j:
                other = snap.jobs[first_pending[p]].id
                return (
                    ReasonCode.LOWER_PRIORITY_IN_PROJECT,
                    f"{other} of the same project ranks above it and is waiting too",
                )
            ratio = float(snap.usage_ratio[p])
            if ratio >= 1.0:
                return (
                    ReasonCode.OVER_SHARE,
                    f"project {snap.org.names[p]} used {ratio:.2f}x its entitlement in the "
                    "lookback window; projects below their share rank first",
                )
            return (
                ReasonCode.WAITING_FOR_CAPACITY,
                "no free GPUs of an allowed type and no lower-ranked job can make room",
            )

        return make_plan(snap, self.name, res, pending_reasons(snap, res, explain), t0)
