"""Clocks: what differs between production and simulation about time. The scheduling turn
reads `now` from an injected clock once, at its start, and never asks which clock it has:
cron gets the wall clock (or `epoch --now`'s fixed time), the simulator a clock its event
loop advances."""

from __future__ import annotations

import time
from typing import Protocol

from optalloc.errors import OptallocError


class Clock(Protocol):
    def now(self) -> float: ...


class WallClock:
    """UNIX time, for the cron path."""

    def now(self) -> float:
        return time.time()


class FixedClock:
    """A clock stopped at `t` (`optalloc epoch --now T`, tests)."""

    def __init__(self, t: float):
        self.t = float(t)

    def now(self) -> float:
        return self.t


class SimClock:
    """Scenario time in seconds, moved forward only by the simulation engine (or a test that
    drives the cron path through simulated time)."""

    def __init__(self, start: float = 0.0):
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def advance_to(self, t: float) -> None:
        if t < self._now:
            raise OptallocError(
                f"simulation clock cannot go back from {self._now} to {t}; events must be "
                "processed in time order"
            )
        self._now = float(t)
