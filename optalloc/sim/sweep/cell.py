"""What runs on a worker: one simulation of a scenario under overrides and a policy, returned
as a JSON-ready record. It never raises for the simulation's own sake: an error becomes a
`failed` record holding its message and traceback, so one bad run costs only itself.

The worker needs only optalloc installed: the scenario travels with the task (already loaded
and seeded by the driver), so no scenario file or trace has to be on the worker's disk.
"""

from __future__ import annotations

import math
import os
import socket
import time
import traceback
from types import MappingProxyType
from typing import Any, Mapping, Sequence

import numpy as np

OK, FAILED = "ok", "failed"


def run_cell(scenario, overrides: Sequence[str], policy: str, check: bool = False) -> dict[str, Any]:
    """Simulate `scenario` with `overrides` (as `whatif --set`) under `policy`; the record is
    {status, error, traceback, wall_s, host, pid, metrics}."""
    from optalloc.sim.engine import check_conservation, simulate
    from optalloc.sim.metrics import compute_metrics
    from optalloc.sim.policies import make_policy
    from optalloc.sim.whatif import apply_overrides, with_config

    t0 = time.perf_counter()
    try:
        sc = with_config(scenario, apply_overrides(scenario.config, list(overrides)))
        result = simulate(sc, make_policy(policy), check=check)
        check_conservation(result)
        metrics = clean(compute_metrics(result))
        return record(OK, time.perf_counter() - t0, metrics=metrics)
    except Exception as err:  # a failed run is data, not the end of the sweep
        return failure(err, time.perf_counter() - t0)


def record(status: str, wall_s: float, *, metrics: Mapping[str, Any] | None = None,
           error: str | None = None, tb: str | None = None) -> dict[str, Any]:
    return {
        "status": status,
        "error": error,
        "traceback": tb,
        "wall_s": float(wall_s),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "metrics": dict(metrics) if metrics is not None else None,
    }


def failure(err: BaseException, wall_s: float = 0.0) -> dict[str, Any]:
    """A failed record for `err` (the traceback's last 4000 characters)."""
    tb = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    return record(FAILED, wall_s, error=f"{type(err).__name__}: {err}", tb=tb[-4000:])


def clean(obj: Any) -> Any:
    """JSON-ready: mappings to dicts, tuples to lists, numpy scalars to Python, nan/inf to None."""
    if isinstance(obj, (Mapping, MappingProxyType)):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if math.isfinite(v) else None
    return obj
