"""`greedy`: the published new system, as a strong list-scheduling baseline. The rules, with
the reasoning behind each, are in models/greedy.md; in short:

1. Rank projects hierarchically by usage ratio over the lookback window (Fair-Tree style:
   siblings are compared by ratio at every level of the org tree, lower ratio first, ties by
   name). Within a project: declared priority (higher first), then submit time, then id.
   All allocated jobs rank above all unallocated ones (which keep the same order among
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

import numpy as np

from optalloc.sim.policies.base import make_plan, pending_reasons, rank_pass
from optalloc.snapshot import Snapshot
from optalloc.types import Plan, ReasonCode


def project_rank(snap: Snapshot) -> np.ndarray:
    """(O,) rank of every org node's subtree among all leaves: leaf ranks are 0.. in Fair-Tree
    order (inner nodes get -1). Siblings compare by (usage ratio, name) at every level."""
    org = snap.org
    key = {}
    for v in range(org.n):
        if not org.is_leaf[v]:
            continue
        path = []
        u = v
        while org.parent[u] >= 0:
            path.append((float(snap.usage_ratio[u]), org.names[u]))
            u = org.parent[u]
        key[v] = tuple(reversed(path))
    rank = np.full(org.n, -1, dtype=np.int64)
    for r, v in enumerate(sorted(key, key=key.__getitem__)):
        rank[v] = r
    return rank


def greedy_order(snap: Snapshot) -> np.ndarray:
    """Job indices best first: allocated before unallocated, project Fair-Tree rank, declared
    priority (higher first), submit time, id."""
    if not snap.jobs:
        return np.zeros(0, dtype=np.int64)
    prank = project_rank(snap)[snap.job_project]
    ids = np.array([j.id for j in snap.jobs], dtype=object)
    return np.lexsort((ids, snap.job_submit, -snap.job_priority, prank, ~snap.job_allocated))


class GreedyScheduler:
    name = "greedy"

    def decide(self, snapshot: Snapshot) -> Plan:
        t0 = time.perf_counter()
        snap = snapshot
        order = greedy_order(snap)
        res = rank_pass(
            snap,
            order,
            fixed=snap.job_protected,
            may_preempt=snap.job_allocated & ~snap.job_running,
            victim_code=lambda v: (
                ReasonCode.PREEMPTED_FAIR_SHARE
                if snap.job_allocated[v]
                else ReasonCode.PREEMPTED_UNALLOCATED
            ),
        )
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
