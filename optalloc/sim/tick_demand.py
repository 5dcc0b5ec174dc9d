"""The demand the simulator's decision ledger holds: what the cron epoch records
(optalloc.cycle), so that both paths charge the same owed time (tests/test_turn_equivalence.py).

Cron sees the queue only at its epochs: a job submitted, or a node that changed, between two
epochs counts from the next one (a sample at each epoch tick). A job's end is reported with
its exact time, though: from that time on the job asks nothing. So a job the last tick knew
that ends between two ticks gets a sample at its end, of the jobs the last tick knew that
still go, on the nodes as that tick saw them; cron records the same (`cycle.end_samples`).
Before (an outside judge, stop 59), a job that finished at 1.5 h with hourly epochs was owed
to its project until 2 h: 8 GPU-hours owed where it asked 6.

The simulator's metrics keep their own samples at the exact times (optalloc.sim.engine).
"""

from __future__ import annotations

import math
from typing import Iterable

from optalloc.demand import Demand
from optalloc.types import Job, Node

__all__ = ["TickDemand"]


class TickDemand:
    """Demand samples into `ledger` as cron takes them, epoch ticks every `epoch_s`."""

    def __init__(self, org, nodes: Iterable[Node], ledger, epoch_s: float):
        self.demand = Demand(org, nodes)
        self.ledger = ledger
        self.epoch_s = float(epoch_s)
        self.pending: dict[str, Job] = {}  # submitted since the last tick
        self.changed = True  # something the next tick's sample must say
        self.new_nodes = False  # a node changed since the last tick

    def on_tick(self, t: float) -> bool:
        return math.ceil(t / self.epoch_s - 1e-9) * self.epoch_s - t <= 1e-9 * self.epoch_s

    def submit(self, job: Job) -> None:
        self.pending[job.id] = job
        self.changed = True

    def nodes_changed(self) -> None:
        self.new_nodes = True

    def end(self, run: Job, t: float) -> None:
        """`run` ended for good at `t` (finished, failed, or stopped without resume)."""
        if self.pending.pop(run.id, None) is not None:
            return  # submitted since the last tick: the ledger never counted it
        self.demand.add(run, -1)
        if self.on_tick(t):
            self.changed = True  # the tick's own sample says it
        else:
            self._record(t)

    def tick(self, t: float, nodes: Iterable[Node]) -> None:
        """At an epoch tick: the jobs submitted and the nodes changed since count from now."""
        if not (self.changed or self.new_nodes) or not self.on_tick(t):
            return
        if self.new_nodes:
            self.changed |= self.demand.set_nodes(nodes)
            self.new_nodes = False
        for job in self.pending.values():
            self.demand.add(job)
        self.pending.clear()
        if self.changed:
            self.changed = False
            self._record(t)

    def _record(self, t: float) -> None:
        d = self.demand
        self.ledger.record_demand(t, d.by_project(), d.placeable_by_project())
