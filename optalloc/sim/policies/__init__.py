"""Policies the simulator compares, one per file behind `Scheduler.decide(snapshot) -> Plan`.

`make_policy(name)` builds one by name: priority (the old system), greedy (the published
system, the baseline to beat), ilp (optalloc's optimizer)."""

from __future__ import annotations

from optalloc.errors import OptallocError
from optalloc.sim.policies.base import Scheduler

POLICIES = ("priority", "greedy", "ilp")


def make_policy(name: str, **kwargs) -> Scheduler:
    """A scheduler by name; kwargs go to its constructor."""
    name = name.strip().lower()
    if name == "priority":
        from optalloc.sim.policies.priority import PriorityScheduler

        return PriorityScheduler(**kwargs)
    if name == "greedy":
        from optalloc.sim.policies.greedy import GreedyScheduler

        return GreedyScheduler(**kwargs)
    if name == "ilp":
        from optalloc.sim.policies.ilp import IlpScheduler

        return IlpScheduler(**kwargs)
    raise OptallocError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}")


__all__ = ["POLICIES", "Scheduler", "make_policy"]
