"""Policy tuning and what-if sweeps: every cell of a grid of overrides (as `whatif --set`)
under several policies and seeds, on local processes or a Dask cluster, restartable, with a
tidy results table, a summary over seeds and plots.

    plan = plan_sweep({seed: scenario, ...}, grid=["org.B.share=+10%,+20%"], policies="greedy,ilp")
    result = run_sweep(plan, scenarios, "out/sweep", make_executor("local", jobs=4))
    result.table, result.summary

Modules: `grid` (axes, cells, seeds, policies, override checks), `plan` (runs and their keys),
`cell` (one run, on a worker), `executors` (sequential, local processes, Dask), `store`
(atomic files in OUT), `table` (results and summary), `plots`, `report`, `run`.
"""

from __future__ import annotations

import importlib

# name -> module; imported on first use, so that a worker unpickling `cell.run_cell` loads
# neither pandas nor plotly
_EXPORTS = {
    "DaskExecutor": "executors", "ProcessExecutor": "executors", "SerialExecutor": "executors",
    "default_jobs": "executors", "make_executor": "executors",
    "Axis": "grid", "Cell": "grid", "format_seeds": "grid", "parse_seeds": "grid",
    "Run": "plan", "SweepPlan": "plan", "plan_sweep": "plan",
    "SweepResult": "run", "run_sweep": "run",
    "TIMING_COLUMNS": "table",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"optalloc.sim.sweep.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
