"""The scheduler interface every simulated policy implements.

`Scheduler.decide(snapshot) -> Plan` reads only the immutable Snapshot and returns a Plan:
a placement for every job running after the epoch (kept and new), a preemption with a code
for every running job that stops, and a PendingReason for every queued job not placed.
The ranked pass the baselines share lives in optalloc/plan/ranked.py.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from optalloc.snapshot import Snapshot
from optalloc.types import Plan


@runtime_checkable
class Scheduler(Protocol):
    """A policy the simulator can drive: pure function of the snapshot."""

    name: str

    def decide(self, snapshot: Snapshot) -> Plan: ...
