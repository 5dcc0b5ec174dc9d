"""Scenario files: a config (cluster, org tree, policy) plus `workload:` and `simulation:`.

```yaml
workload:
  source: itp              # itp | philly | synthetic | jobs (the config's own `jobs:`)
  cluster: cluster04       # itp: <traces>/itp/<cluster>.csv; or `file: path` (relative to this file)
  teams: [6214e9, ee9e8c]  # philly: teams to read (default: every team in the folder)
  base_gpu_type: v100      # philly: speedups are relative to it (duration = work on it)
  window: {start: 0, end: 60d}   # keep jobs submitted in [start, end); time 0 = start
                           # (points on the trace's clock: 22d, or 1700000000 / an ISO time
                           # for a trace in Unix seconds)
  load_scale: 1.0          # divide submit times (after the window) by this: offered load x it
  sample: 1.0              # keep this fraction of jobs (stable hash of the id)
  max_jobs: 5000           # keep only the first N (by submit time)
  synthetic: {offered_load: 0.95, debug_fraction: 0.3, team_skew: 1.0, ...}  # see generate.py
  mapping: {unallocated_share: 0.1, resumable_fraction: 0.9, ...}           # see workload.py
simulation:
  start: 2026-11-29T12:00:00Z  # optional: the wall-clock time that scenario time 0 stands for;
                           # times in the config's `jobs:` and ISO node-event times are shifted by it
  duration: 60d            # simulated horizon (default: window length, else last submit, whole days)
  epoch: 5m                # default policy.epoch
  checkpoint_interval: 1h  # default policy.checkpoint_interval
  early_solve: true        # also solve when a job is submitted, not only every epoch
  seed: 0
  node_events:
    - {at: 10d, nodes: ["gpu-[001-004]"], state: drain}   # at: a duration after time 0 or an ISO time
    - {at: 11d, node: gpu-001, state: up}
```
Every problem is reported with file, key path and a fix, all at once (ConfigError).
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from optalloc.config import load as config_load
from optalloc.config.problems import Loc, Problems
from optalloc.sim.scenario.build import build_workload
from optalloc.sim.scenario.parse import parse_simulation, parse_workload
from optalloc.sim.scenario.sizing import (
    ClusterSize,
    nodes_for_offered_load,
    scale_cluster_to_demand_ratio,
)
from optalloc.sim.scenario.spec import NodeEvent, Scenario, with_horizon
from optalloc.types import Config
from optalloc.units import MAX_DURATION_S

__all__ = ["ClusterSize", "NodeEvent", "Scenario", "load_scenario", "nodes_for_offered_load",
           "scale_cluster_to_demand_ratio", "scenario_from_parts", "with_horizon"]


def load_scenario(path: str | os.PathLike, *, env: Mapping[str, str] | None = None) -> Scenario:
    """Load a scenario file (or config directory) into a Scenario. Raises ConfigError for any
    problem in the file; OptallocError when a trace it needs cannot be found."""
    path = Path(path)
    config, extras = config_load.load_document(path)
    source = str(path)
    return scenario_from_parts(config, extras, source, name=path.stem, base_dir=_base_dir(path), env=env)


def scenario_from_parts(
    config: Config,
    extras: Mapping[str, Any],
    source: str,
    *,
    name: str = "scenario",
    base_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Scenario:
    """Build a Scenario from a parsed config and its raw `workload` / `simulation` sections."""
    problems = Problems()
    root = Loc(source)
    if "workload" not in extras:
        problems.add(root.key("workload"), "missing section", "add `workload: {source: itp|philly|synthetic|jobs, ...}`")
    sim = parse_simulation(extras.get("simulation"), root.key("simulation"), config, problems)
    wl = parse_workload(extras.get("workload"), root.key("workload"), config, problems)
    problems.raise_if_any()
    policy = replace(config.policy, epoch_s=sim["epoch_s"], checkpoint_interval_s=sim["checkpoint_interval_s"])
    config = replace(config, policy=policy)
    jobs, summary, last_submit = build_workload(wl, config, sim, source, base_dir or Path("."), env, problems)
    problems.raise_if_any()
    duration = sim["duration_s"]
    if duration is None:
        w = wl["window"]
        if w[1] is not None:
            duration = (w[1] - w[0]) / wl["load_scale"]
        else:
            duration = max(86400.0, math.ceil(last_submit / 86400.0) * 86400.0)
        if duration > MAX_DURATION_S:  # the limit simulation.duration has (e.g. Unix-time submits)
            until = "end" if w[1] is None else f"{w[1]:g}s"
            problems.add(root.key("simulation").key("duration"),
                         f"not given, and the workload implies {duration / 86400:.0f} days from time 0 "
                         f"(last job submitted at {last_submit:g}s, window {w[0]:g}s..{until}, "
                         f"load_scale {wl['load_scale']:g}), more than ten years",
                         "set workload.window: start at the trace's first submit time (its times may "
                         "be Unix seconds), end at start + the days to simulate")
            problems.raise_if_any()
    return Scenario(
        name=name,
        config=config,
        jobs=jobs,
        duration_s=float(duration),
        epoch_s=sim["epoch_s"],
        checkpoint_interval_s=sim["checkpoint_interval_s"],
        early_solve=sim["early_solve"],
        seed=sim["seed"],
        node_events=sim["node_events"],
        source_path=source,
        workload=summary,
        start_time=sim["start"],
    )


def _base_dir(path: Path) -> Path:
    return path if path.is_dir() else path.parent
