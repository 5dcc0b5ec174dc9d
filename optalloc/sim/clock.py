"""Clocks: the one thing that differs between production (wall time) and simulation (a
clock the event engine advances). Core code asks an injected clock for `now()` and never
branches on which one it has."""

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


class SimClock:
    """Scenario time in seconds, moved forward only by the simulation engine."""

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
