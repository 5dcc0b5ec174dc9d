"""Scenario files: a config (cluster, org tree, policy) plus `workload:` and `simulation:`.

```yaml
workload:
  source: itp              # itp | philly | synthetic | jobs (the config's own `jobs:`)
  cluster: cluster04       # itp: <traces>/itp/<cluster>.csv; or `file: path` (relative to this file)
  teams: [6214e9, ee9e8c]  # philly: teams to read (default: every team in the folder)
  base_gpu_type: v100      # philly: speedups are relative to it (duration = work on it)
  window: {start: 0, end: 60d}   # keep jobs submitted in [start, end); time 0 = start
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

import datetime
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from optalloc.config import load as config_load
from optalloc.config.nodes import expand_node_names
from optalloc.config.problems import MISSING, Loc, Problems, show_list, type_name
from optalloc.errors import ConfigError
from optalloc.sim import generate as gen
from optalloc.sim.traces import (
    RawJobs,
    philly_teams,
    read_itp,
    read_philly,
    traces_available,
    traces_dir,
)
from optalloc.sim.workload import (
    MappingRules,
    WorkloadSummary,
    build_jobs,
    parse_mapping,
    project_names,
    stable_uniform,
)
from optalloc.types import Config, Job, NodeState
from optalloc.units import parse_duration, parse_time

SOURCES = ("itp", "philly", "synthetic", "jobs")
WORKLOAD_KEYS = (
    "source", "cluster", "file", "teams", "base_gpu_type", "window", "load_scale", "sample", "max_jobs",
    "synthetic", "mapping",
)
SIMULATION_KEYS = ("start", "duration", "epoch", "checkpoint_interval", "early_solve", "seed", "node_events")
SYNTHETIC_KEYS = (
    "offered_load", "sizes", "duration_median", "duration_sigma", "min_duration", "max_duration",
    "debug_fraction", "debug_sizes", "debug_duration", "team_skew", "teams",
)
NODE_EVENT_KEYS = ("at", "node", "nodes", "state")


@dataclass(frozen=True)
class NodeEvent:
    time: float
    nodes: tuple[str, ...]
    state: NodeState


@dataclass(frozen=True)
class Scenario:
    name: str
    config: Config
    jobs: tuple[Job, ...]  # sorted by submit_time
    duration_s: float
    epoch_s: float
    checkpoint_interval_s: float
    early_solve: bool
    seed: int
    node_events: tuple[NodeEvent, ...]
    source_path: str
    workload: WorkloadSummary | None = None
    start_time: float = 0.0  # wall-clock seconds that scenario time 0 stands for (simulation.start)

    @property
    def capacity_gpus(self) -> int:
        return sum(n.gpus for n in self.config.nodes)


# --------------------------------------------------------------------------- loading


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
    sim = _parse_simulation(extras.get("simulation"), root.key("simulation"), config, problems)
    wl = _parse_workload(extras.get("workload"), root.key("workload"), config, problems)
    problems.raise_if_any()
    policy = replace(config.policy, epoch_s=sim["epoch_s"], checkpoint_interval_s=sim["checkpoint_interval_s"])
    config = replace(config, policy=policy)
    jobs, summary, last_submit = _build_workload(wl, config, sim, source, base_dir or Path("."), env, problems)
    problems.raise_if_any()
    duration = sim["duration_s"]
    if duration is None:
        w = wl["window"]
        if w[1] is not None:
            duration = (w[1] - w[0]) / wl["load_scale"]
        else:
            duration = max(86400.0, math.ceil(last_submit / 86400.0) * 86400.0)
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


# --------------------------------------------------------------------------- simulation section


def _parse_simulation(value: Any, loc: Loc, config: Config, problems: Problems) -> dict:
    out = {
        "start": 0.0,
        "duration_s": None,
        "epoch_s": config.policy.epoch_s,
        "checkpoint_interval_s": config.policy.checkpoint_interval_s,
        "early_solve": True,
        "seed": 0,
        "node_events": (),
    }
    if value is None:
        return out
    data = problems.mapping(value, loc)
    if data is MISSING:
        return out
    problems.known_keys(data, loc, SIMULATION_KEYS)
    if "start" in data:
        v = problems.time(data["start"], loc.key("start"))
        if v is not MISSING:
            out["start"] = v
    for key, field_name in (("duration", "duration_s"), ("epoch", "epoch_s"), ("checkpoint_interval", "checkpoint_interval_s")):
        if key in data:
            v = problems.duration(data[key], loc.key(key), positive=True)
            if v is not MISSING:
                out[field_name] = v
    if "early_solve" in data:
        v = problems.boolean(data["early_solve"], loc.key("early_solve"))
        if v is not MISSING:
            out["early_solve"] = v
    if "seed" in data:
        v = problems.integer(data["seed"], loc.key("seed"), minimum=0)
        if v is not MISSING:
            out["seed"] = v
    if "node_events" in data:
        out["node_events"] = _parse_node_events(
            data["node_events"], loc.key("node_events"), config, out["start"], problems
        )
    dur = out["duration_s"]
    if dur is not None:
        for ev_i, ev in enumerate(out["node_events"]):
            if ev.time > dur:
                problems.add(
                    loc.key("node_events").idx(ev_i).key("at"),
                    f"at {ev.time:g}s is after the end of the simulation ({dur:g}s)",
                    "move it inside simulation.duration or remove it",
                )
    return out


def _parse_node_events(
    value: Any, loc: Loc, config: Config, start: float, problems: Problems
) -> tuple[NodeEvent, ...]:
    seq = problems.sequence(value, loc)
    if seq is MISSING:
        return ()
    known = [n.name for n in config.nodes]
    known_set = set(known)
    states = tuple(s.value for s in NodeState)
    events = []
    for i, item in enumerate(seq):
        il = loc.idx(i)
        d = problems.mapping(item, il, "a mapping {at, node(s), state}")
        if d is MISSING:
            continue
        problems.known_keys(d, il, NODE_EVENT_KEYS, required=("at", "state"))
        at = _event_time(d["at"], il.key("at"), start, problems) if "at" in d else MISSING
        if at is not MISSING and at < 0:
            problems.add(il.key("at"), f"must be >= 0, got {d['at']!r}", "give a time inside the simulation")
            at = MISSING
        state = problems.choice(d["state"], il.key("state"), states, "node state") if "state" in d else MISSING
        if ("node" in d) == ("nodes" in d):
            problems.add(il, "give exactly one of `node:` or `nodes:`", "e.g. `node: gpu-001` or `nodes: [\"gpu-[001-004]\"]`")
            continue
        key = "node" if "node" in d else "nodes"
        raw = [d[key]] if key == "node" else problems.sequence(d[key], il.key(key))
        if raw is MISSING:
            continue
        names: list[str] = []
        for j, pat in enumerate(raw):
            pl = il.key(key) if key == "node" else il.key(key).idx(j)
            p = problems.string(pat, pl)
            if p is MISSING:
                continue
            try:
                expanded = expand_node_names(p)
            except ValueError as err:
                problems.add(pl, str(err))
                continue
            missing = [n for n in expanded if n not in known_set]
            if missing:
                problems.add(pl, f"no such node(s): {show_list(missing)}", f"nodes in the config: {show_list(known)}")
                continue
            names.extend(expanded)
        if at is MISSING or state is MISSING or not names:
            continue
        events.append(NodeEvent(float(at), tuple(dict.fromkeys(names)), NodeState(state)))
    return tuple(sorted(events, key=lambda e: e.time))


def _event_time(value: Any, loc: Loc, start: float, problems: Problems) -> float | Any:
    """A duration after time 0, or an ISO-8601 time (minus simulation.start)."""
    try:
        return parse_duration(value)
    except (ValueError, TypeError):
        pass
    if isinstance(value, (str, datetime.datetime)):
        try:
            return parse_time(value) - start
        except (ValueError, TypeError):
            pass
    problems.add(loc, f"expected a duration after the start or an ISO time, got {type_name(value)}",
                 "write e.g. 10d, 36h or 2026-12-01T08:00:00Z")
    return MISSING


# --------------------------------------------------------------------------- workload section


def _parse_workload(value: Any, loc: Loc, config: Config, problems: Problems) -> dict:
    out: dict[str, Any] = {"source": MISSING, "window": (0.0, None), "load_scale": 1.0, "sample": 1.0, "max_jobs": None,
                           "mapping": MappingRules(), "loc": loc}
    if value is None:
        return out
    data = problems.mapping(value, loc)
    if data is MISSING:
        return out
    problems.known_keys(data, loc, WORKLOAD_KEYS, required=("source",))
    src = problems.choice(data["source"], loc.key("source"), SOURCES, "workload source") if "source" in data else MISSING
    out["source"] = src
    allowed_by_source = {
        "itp": ("cluster", "file"),
        "philly": ("teams", "base_gpu_type", "file"),
        "synthetic": ("synthetic",),
        "jobs": (),
    }
    if src is not MISSING:
        for key in ("cluster", "file", "teams", "base_gpu_type", "synthetic"):
            if key in data and key not in allowed_by_source[src]:
                problems.add(loc.key(key), f"does not apply to source {src!r}", f"remove it (it is for source {_owner(key)})")
        if src == "itp" and ("cluster" in data) == ("file" in data):
            problems.add(loc, "an itp workload needs exactly one of `cluster:` (e.g. cluster04) or `file:`",
                         "add `cluster: cluster04` (read from $OPTALLOC_TRACES/itp/) or `file: path/to.csv`")
    for key in ("cluster", "file", "base_gpu_type"):
        if key in data:
            v = problems.string(data[key], loc.key(key))
            if v is not MISSING:
                out[key] = v
    if "base_gpu_type" in out:
        tnames = [g.name for g in config.gpu_types]
        if out["base_gpu_type"] not in tnames:
            problems.add(loc.key("base_gpu_type"), f"{out['base_gpu_type']!r} is not a gpu_type of this config",
                         f"use one of: {', '.join(tnames)}")
    if "teams" in data:
        seq = problems.sequence(data["teams"], loc.key("teams"))
        if seq is not MISSING:
            teams = [problems.string(t, loc.key("teams").idx(i), allow_int=True) for i, t in enumerate(seq)]
            out["teams"] = tuple(t for t in teams if t is not MISSING)
            if not seq:
                problems.add(loc.key("teams"), "is empty", "list team names, or remove the key to read every team")
    if "window" in data:
        out["window"] = _parse_window(data["window"], loc.key("window"), problems)
    if "load_scale" in data:
        v = problems.number(data["load_scale"], loc.key("load_scale"), positive=True)
        if v is not MISSING:
            out["load_scale"] = v
    if "sample" in data:
        v = problems.number(data["sample"], loc.key("sample"), positive=True, maximum=1.0)
        if v is not MISSING:
            out["sample"] = v
    if "max_jobs" in data:
        v = problems.integer(data["max_jobs"], loc.key("max_jobs"), minimum=1)
        if v is not MISSING:
            out["max_jobs"] = v
    if "synthetic" in data or src == "synthetic":
        out["synthetic"] = _parse_synthetic(data.get("synthetic"), loc.key("synthetic"), config, problems)
    out["mapping"] = parse_mapping(data.get("mapping"), loc.key("mapping"), config, problems)
    return out


def _owner(key: str) -> str:
    return {"cluster": "itp", "file": "itp or philly", "teams": "philly", "base_gpu_type": "philly",
            "synthetic": "synthetic"}[key]


def _parse_window(value: Any, loc: Loc, problems: Problems) -> tuple[float, float | None]:
    d = problems.mapping(value, loc, "a mapping {start, end}")
    if d is MISSING:
        return (0.0, None)
    problems.known_keys(d, loc, ("start", "end"))
    start = problems.duration(d["start"], loc.key("start")) if "start" in d else 0.0
    end = problems.duration(d["end"], loc.key("end"), positive=True) if "end" in d else None
    if start is MISSING:
        start = 0.0
    if end is MISSING:
        end = None
    if end is not None and end <= start:
        problems.add(loc.key("end"), f"must be after start ({start:g}s), got {end:g}s", "make end later than start")
        end = None
    return (float(start), end)


def _parse_synthetic(value: Any, loc: Loc, config: Config, problems: Problems) -> dict:
    d = {} if value is None else problems.mapping(value, loc)
    if d is MISSING:
        return {}
    problems.known_keys(d, loc, SYNTHETIC_KEYS)
    kw: dict[str, Any] = {}
    numbers = {"offered_load": dict(positive=True), "duration_sigma": dict(minimum=0.0),
               "debug_fraction": dict(minimum=0.0, maximum=1.0), "team_skew": dict(minimum=0.0)}
    for key, opts in numbers.items():
        if key in d:
            v = problems.number(d[key], loc.key(key), **opts)
            if v is not MISSING:
                kw[key] = v
    for key in ("duration_median", "min_duration", "max_duration"):
        if key in d:
            v = problems.duration(d[key], loc.key(key), positive=True)
            if v is not MISSING:
                kw[f"{key}_s"] = v
    if kw.get("min_duration_s", 0) and kw.get("max_duration_s") and kw["min_duration_s"] > kw["max_duration_s"]:
        problems.add(loc.key("min_duration"), "is longer than max_duration", "make min_duration <= max_duration")
    for key in ("sizes", "debug_sizes"):
        if key in d:
            kw[key] = _parse_sizes(d[key], loc.key(key), problems)
    if "debug_duration" in d:
        dl = loc.key("debug_duration")
        seq = problems.sequence(d["debug_duration"], dl, "a list [shortest, longest]")
        if seq is not MISSING:
            if len(seq) != 2:
                problems.add(dl, f"expected 2 durations [shortest, longest], got {len(seq)}", "write e.g. [1m, 15m]")
            else:
                lo = problems.duration(seq[0], dl.idx(0), positive=True)
                hi = problems.duration(seq[1], dl.idx(1), positive=True)
                if lo is not MISSING and hi is not MISSING:
                    if lo > hi:
                        problems.add(dl, "shortest is longer than longest", "write [shortest, longest]")
                    else:
                        kw["debug_duration_s"] = (lo, hi)
    leaves = project_names(config)
    if "teams" in d:
        seq = problems.sequence(d["teams"], loc.key("teams"))
        if seq is not MISSING:
            teams = []
            for i, t in enumerate(seq):
                s = problems.string(t, loc.key("teams").idx(i))
                if s is MISSING:
                    continue
                if s not in leaves:
                    problems.add(loc.key("teams").idx(i), f"{s!r} is not a project (a leaf of the org tree)",
                                 f"projects: {show_list(leaves)}")
                    continue
                teams.append(s)
            kw["teams"] = tuple(teams)
    kw.setdefault("teams", leaves)
    return kw


def _parse_sizes(value: Any, loc: Loc, problems: Problems) -> Mapping[int, float]:
    d = problems.mapping(value, loc, "a mapping gpus: probability")
    if d is MISSING:
        return gen.PHILLY_SIZES
    out = {}
    for k, p in d.items():
        kl = loc.key(str(k))
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            problems.add(kl, f"GPU count {k!r} is not a whole number >= 1", "write sizes like `8: 0.1`")
            continue
        v = problems.number(p, kl, minimum=0.0)
        if v is not MISSING:
            out[k] = v
    if d and sum(out.values()) <= 0:
        problems.add(loc, "no size has a positive probability", "give at least one size a probability > 0")
    return out


# --------------------------------------------------------------------------- building


def _build_workload(wl: dict, config: Config, sim: dict, source: str, base_dir: Path,
                    env: Mapping[str, str] | None, problems: Problems):
    src, loc, seed = wl["source"], wl["loc"], sim["seed"]
    start, end = wl["window"]
    if src == "jobs":
        jobs = tuple(sorted((_shifted(j, -sim["start"]) for j in config.jobs), key=lambda j: j.submit_time))
        if not jobs:
            problems.add(loc.key("source"), "source 'jobs' but the config has no `jobs:`", "add jobs or pick another source")
        return jobs, None, max((j.submit_time for j in jobs), default=0.0)
    raw = _read_raw(wl, config, sim, base_dir, env, problems)
    if raw is None:
        return (), None, 0.0
    if src != "synthetic":
        keep = raw.submit_time >= start
        if end is not None:
            keep &= raw.submit_time < end
        raw = raw.take(keep).shifted(-start)
        if wl["load_scale"] != 1.0:
            raw = raw.rescaled_arrivals(wl["load_scale"])
    if wl["sample"] < 1.0:
        raw = raw.take(stable_uniform(raw.job_id, "sample", seed) < wl["sample"])
    if wl["max_jobs"] is not None:
        raw = raw.take(np.arange(min(len(raw), wl["max_jobs"])))
    if len(raw) == 0:
        problems.add(loc, "no jobs left after window/sample/max_jobs", "widen workload.window or raise sample")
        return (), None, 0.0
    jobs, summary = build_jobs(raw, wl["mapping"], config, seed=seed, loc=loc.key("mapping"), problems=problems)
    return jobs, summary, float(raw.submit_time.max())


def _shifted(job: Job, offset: float) -> Job:
    if offset == 0:
        return job
    return replace(
        job,
        submit_time=job.submit_time + offset,
        start_time=None if job.start_time is None else job.start_time + offset,
    )


def _read_raw(wl: dict, config: Config, sim: dict, base_dir: Path, env, problems: Problems) -> RawJobs | None:
    src, loc = wl["source"], wl["loc"]
    if src == "synthetic":
        kw = dict(wl.get("synthetic", {}))
        spec = gen.SyntheticSpec(**kw)
        capacity = sum(n.gpus for n in config.nodes)
        horizon = sim["duration_s"]
        if horizon is None:
            w = wl["window"]
            horizon = (w[1] - w[0]) if w[1] is not None else None
        if horizon is None:
            problems.add(Loc(loc.source, "simulation.duration"), "a synthetic workload needs the simulated horizon",
                         "add `simulation: {duration: 7d}`")
            return None
        return gen.generate(replace(spec, max_gpus=capacity), capacity_gpus=capacity, horizon_s=horizon, seed=sim["seed"])
    try:
        if src == "itp":
            if "file" in wl:
                p = _resolve(wl["file"], base_dir, env)
            else:
                p = traces_dir(env) / "itp" / f"{wl['cluster']}.csv"
                if not p.exists():
                    have = sorted(q.stem for q in p.parent.glob("*.csv"))
                    problems.add(loc.key("cluster"), f"no trace {p}", f"ITP clusters there: {show_list(have)}")
                    return None
            return read_itp(p)
        if src == "philly":
            folder = _resolve(wl["file"], base_dir, env) if "file" in wl else traces_dir(env) / "philly-vc"
            teams = wl.get("teams")
            if teams:
                have = philly_teams(folder)
                bad = [t for t in teams if t not in have]
                if bad:
                    for i, t in enumerate(teams):
                        if t in bad:
                            problems.add(loc.key("teams").idx(i), f"no trace for team {t!r} in {folder}",
                                         f"teams there: {show_list(have)}")
                    return None
            tnames = tuple(g.name for g in config.gpu_types)
            base = wl.get("base_gpu_type", "v100" if "v100" in tnames else tnames[0])
            return read_philly(folder, teams, base_type=base, gpu_types=tnames)
    except ConfigError as err:
        for p in err.problems:
            problems.add(loc, p)
        return None
    return None


def _resolve(name: str, base_dir: Path, env) -> Path:
    p = Path(name).expanduser()
    if p.is_absolute():
        return p
    if (base_dir / p).exists() or not traces_available(env):
        return base_dir / p  # a missing file is reported by the reader
    return traces_dir(env) / p


# --------------------------------------------------------------------------- sizing a cluster


@dataclass(frozen=True)
class ClusterSize:
    nodes: int
    gpus: int
    demand_ratio: float
    tried: tuple[tuple[int, float], ...] = field(default_factory=tuple)  # (nodes, measured ratio)


def nodes_for_offered_load(jobs, target_load: float, gpus_per_node: int, horizon_s: float | None = None) -> int:
    """Nodes whose capacity the jobs load to `target_load` (a first guess for the search)."""
    from optalloc.sim.workload import offered_load

    load_per_gpu = offered_load(jobs, 1.0, horizon_s)  # = GPU demand in GPUs
    return max(1, math.ceil(load_per_gpu / target_load / gpus_per_node))


def scale_cluster_to_demand_ratio(
    measure: Callable[[int], float],
    *,
    gpus_per_node: int = 8,
    target: tuple[float, float] = (2.0, 3.0),
    start_nodes: int = 8,
    max_nodes: int = 4096,
    max_runs: int = 12,
) -> ClusterSize:
    """Find a node count whose *measured* demand ratio lies in `target` (DESIGN.md section 6).

    `measure(nodes)` runs a simulation on a cluster of that many nodes and returns the
    realised demand ratio (time-average of GPUs asked by queued + running jobs / capacity);
    the ratio falls as nodes grow. Doubles/halves from `start_nodes` (e.g.
    `nodes_for_offered_load(jobs, 0.95, 8)`) until the target is bracketed, then bisects.
    Returns the closest node count found within `max_runs` simulations."""
    lo_t, hi_t = target
    if not 0 < lo_t <= hi_t:
        raise ValueError("target must be (low, high) with 0 < low <= high")
    mid_t = 0.5 * (lo_t + hi_t)
    tried: list[tuple[int, float]] = []

    def run(n: int) -> float:
        r = float(measure(n))
        tried.append((n, r))
        return r

    n = max(1, start_nodes)
    r = run(n)
    small, big = None, None  # small: too few nodes (ratio > hi); big: too many (ratio < lo)
    while not (lo_t <= r <= hi_t) and len(tried) < max_runs:
        if r > hi_t:
            small = n
            n = (n + big) // 2 if big is not None else min(max_nodes, n * 2)
        else:
            big = n
            n = (n + small) // 2 if small is not None else max(1, n // 2)
        if any(t == n for t, _ in tried):
            break
        r = run(n)
    best_n, best_r = min(tried, key=lambda x: (not (lo_t <= x[1] <= hi_t), abs(x[1] - mid_t)))
    return ClusterSize(nodes=best_n, gpus=best_n * gpus_per_node, demand_ratio=best_r, tried=tuple(tried))


def with_horizon(sc: "Scenario", duration_s: float) -> "Scenario":
    """The scenario cut to its first `duration_s` seconds (never longer than it was): jobs
    submitted and node events due later are dropped."""
    d = min(float(duration_s), sc.duration_s)
    return replace(
        sc,
        duration_s=d,
        jobs=tuple(j for j in sc.jobs if j.submit_time < d),
        node_events=tuple(e for e in sc.node_events if e.time < d),
    )
