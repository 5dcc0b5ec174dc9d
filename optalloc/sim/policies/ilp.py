"""`ilp`: optalloc's optimizer, exactly as the cron path runs it (`optalloc.epoch.run_epoch`):
the epoch ILP over the whole queue, then placement, preemptions and reasons. Nothing here is
simulation-specific; the policy only adapts the call to the Scheduler interface."""

from __future__ import annotations

from optalloc.epoch import run_epoch
from optalloc.snapshot import Snapshot
from optalloc.types import Plan, SolverSettings


class IlpScheduler:
    name = "ilp"

    def __init__(self, settings: SolverSettings | None = None):
        self.settings = settings  # None: the scenario's policy.solver

    def decide(self, snapshot: Snapshot) -> Plan:
        return run_epoch(snapshot, self.settings)
