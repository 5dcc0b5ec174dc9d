"""The `simulation:` and `workload:` sections of a scenario file, parsed and checked with every
problem located (file, key path, fix), all at once."""

from __future__ import annotations

import datetime
from typing import Any, Mapping

from optalloc.config.nodes import expand_node_names
from optalloc.config.policy import epoch_too_short
from optalloc.config.problems import MISSING, Loc, Problems, show_list, type_name
from optalloc.sim import generate as gen
from optalloc.sim.scenario.spec import NodeEvent
from optalloc.sim.workload import MappingRules, parse_mapping, project_names
from optalloc.types import Config, NodeState
from optalloc.units import MAX_JOB_GPUS, MAX_SEED, MAX_TIME_S, MIN_EPOCH_S, parse_duration, parse_time

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
MAX_SIZE_WEIGHT = 1e9  # a synthetic size's relative probability (they are normalized)
MAX_JOBS = 10_000_000  # workload.max_jobs
# the workload's numbers: (lowest, lowest allowed itself, highest, what the value means); past
# these a simulation only grows without end (memory), overflows or says nothing new
RANGES = {
    "load_scale": (0.01, True, 100.0, "trace submit times are divided by it"),
    "offered_load": (0.0, False, 10.0, "GPU time asked for over the cluster's: 1 fills it, "
                                       "10 asks ten times what it can run"),
    "duration_sigma": (0.0, True, 10.0, "the log-normal spread of training durations"),
    "team_skew": (0.0, True, 10.0, "the Zipf exponent of jobs per team: 10 gives the first "
                                   "team nearly all of them"),
}



def parse_simulation(value: Any, loc: Loc, config: Config, problems: Problems) -> dict:
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
            if v is not MISSING and key == "epoch" and v < MIN_EPOCH_S:
                problems.add(loc.key(key), epoch_too_short(v), f"give at least {MIN_EPOCH_S:g}s, e.g. 5m")
            elif v is not MISSING:
                out[field_name] = v
    if "early_solve" in data:
        v = problems.boolean(data["early_solve"], loc.key("early_solve"))
        if v is not MISSING:
            out["early_solve"] = v
    if "seed" in data:
        v = problems.integer(data["seed"], loc.key("seed"), minimum=0, maximum=MAX_SEED)
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
            raw_at = d["at"]
            shown = raw_at.isoformat() if isinstance(raw_at, datetime.datetime) else repr(raw_at)
            problems.add(il.key("at"), f"{shown} is before simulation.start ({-at:g} s before)",
                         "give a time inside the simulation")
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



def parse_workload(value: Any, loc: Loc, config: Config, problems: Problems) -> dict:
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
            _no_repeats(teams, loc.key("teams"), problems)  # a team read twice repeats its job ids
            out["teams"] = tuple(t for t in teams if t is not MISSING)
            if not seq:
                problems.add(loc.key("teams"), "is empty", "list team names, or remove the key to read every team")
    if "window" in data:
        out["window"] = _parse_window(data["window"], loc.key("window"), problems)
    if "load_scale" in data:
        v = _ranged(data["load_scale"], loc.key("load_scale"), "load_scale", problems)
        if v is not MISSING:
            out["load_scale"] = v
    if "sample" in data:
        v = problems.number(data["sample"], loc.key("sample"), positive=True, maximum=1.0)
        if v is not MISSING:
            out["sample"] = v
    if "max_jobs" in data:
        v = problems.integer(data["max_jobs"], loc.key("max_jobs"), minimum=1, maximum=MAX_JOBS)
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
    start = _window_point(d["start"], loc.key("start"), problems) if "start" in d else 0.0
    end = _window_point(d["end"], loc.key("end"), problems) if "end" in d else None
    if start is MISSING:
        start = 0.0
    if end is MISSING:
        end = None
    if end is not None and end <= start:
        problems.add(loc.key("end"), f"must be after start ({start:g}s), got {end:g}s", "make end later than start")
        end = None
    return (float(start), end)


def _window_point(value: Any, loc: Loc, problems: Problems) -> float | Any:
    """A point on the trace's clock: a duration after its time 0 (22d) or, as trace submit
    times may be Unix seconds, seconds or an ISO time, 0 to 2100 (the range of submit times)."""
    try:
        v = parse_duration(value)
    except (ValueError, TypeError):
        try:
            v = parse_time(value)
        except (ValueError, TypeError, OverflowError):
            problems.add(loc, f"expected a duration or a time, got {type_name(value)}",
                         "write e.g. 22d, or 1700000000 / 2023-11-14T22:13:20Z for a trace in Unix seconds")
            return MISSING
    if not 0.0 <= v <= MAX_TIME_S:
        problems.add(loc, f"{value!r} is out of range (the trace's submit times run from 0 to "
                     f"{MAX_TIME_S:.0f} s, 2100)", "give a point of the trace's clock inside that range")
        return MISSING
    return v


def _parse_synthetic(value: Any, loc: Loc, config: Config, problems: Problems) -> dict:
    d = {} if value is None else problems.mapping(value, loc)
    if d is MISSING:
        return {}
    problems.known_keys(d, loc, SYNTHETIC_KEYS)
    kw: dict[str, Any] = {}
    for key in ("offered_load", "duration_sigma", "debug_fraction", "team_skew"):
        if key in d:
            v = (problems.number(d[key], loc.key(key), minimum=0.0, maximum=1.0)
                 if key == "debug_fraction" else _ranged(d[key], loc.key(key), key, problems))
            if v is not MISSING:
                kw[key] = v
    for key in ("duration_median", "min_duration", "max_duration"):
        if key in d:
            v = problems.duration(d[key], loc.key(key), positive=True)
            if v is not MISSING:
                kw[f"{key}_s"] = v
    if kw.get("min_duration_s", 0) and kw.get("max_duration_s") and kw["min_duration_s"] > kw["max_duration_s"]:
        problems.add(loc.key("min_duration"), "is longer than max_duration", "make min_duration <= max_duration")
    capacity = sum(n.gpus for n in config.nodes)
    for key in ("sizes", "debug_sizes"):
        if key in d:
            kw[key] = _parse_sizes(d[key], loc.key(key), capacity, problems)
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
        if seq is not MISSING and not seq:  # it was told to "fit the sizes to the cluster"
            first = (list(leaves) or ["A1"])[0]
            problems.add(loc.key("teams"), "is empty: no project would submit work",
                         f"name projects (leaves of the org tree), e.g. [{first}], or leave "
                         "`teams` out for all of them")
        elif seq is not MISSING:
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
            _no_repeats(list(seq), loc.key("teams"), problems)  # a repeat skews the Zipf draw
            kw["teams"] = tuple(teams)
    kw.setdefault("teams", leaves)
    return kw


def _no_repeats(names: list, loc: Loc, problems: Problems) -> None:
    """A problem for every name of a list that an earlier item already gave."""
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        if not isinstance(name, str):  # MISSING, or a bad value reported already
            continue
        if name in first:
            problems.add(loc.idx(i), f"team {name!r} is listed twice (also at "
                         f"{loc.path}[{first[name]}])", "list each team once")
        else:
            first[name] = i


def _ranged(value: Any, loc: Loc, key: str, problems: Problems) -> float | Any:
    """A number in RANGES[key]; else a problem giving the range and what the number means."""
    v = problems.number(value, loc)
    if v is MISSING:
        return v
    lo, lo_ok, hi, meaning = RANGES[key]
    if not ((v >= lo if lo_ok else v > lo) and v <= hi):
        problems.add(loc, f"{v:g} is out of range ({meaning})",
                     f"give {lo:g} {'<=' if lo_ok else '<'} {key} <= {hi:g}")
        return MISSING
    return v


def _parse_sizes(value: Any, loc: Loc, capacity: int, problems: Problems) -> Mapping[int, float]:
    """gpus: relative probability; GPU counts 1..MAX_JOB_GPUS, probabilities 0..MAX_SIZE_WEIGHT
    (normalized: their sum stays finite), and some size that fits the cluster (the generator
    drops sizes above its `capacity` GPUs) must have a positive probability."""
    d = problems.mapping(value, loc, "a mapping gpus: probability")
    if d is MISSING:
        return gen.PHILLY_SIZES
    out = {}
    for k, p in d.items():
        kl = loc.key(str(k))
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            problems.add(kl, f"GPU count {k!r} is not a whole number >= 1", "write sizes like `8: 0.1`")
            continue
        if k > MAX_JOB_GPUS:
            problems.add(kl, f"GPU count {k} is more than {MAX_JOB_GPUS} (the most a job may ask "
                         "for)", f"give sizes up to the cluster's {capacity} GPUs")
            continue
        v = problems.number(p, kl, minimum=0.0, maximum=MAX_SIZE_WEIGHT)
        if v is not MISSING:
            out[k] = v
    if len(out) < len(d):
        pass  # each bad size is reported; a sum over the rest would only confuse
    elif d and sum(out.values()) <= 0:
        problems.add(loc, "no size has a positive probability", "give at least one size a probability > 0")
    elif out and capacity > 0 and sum(v for k, v in out.items() if k <= capacity) <= 0:
        problems.add(loc, f"no size of at most the cluster's {capacity} GPUs has a positive "
                     "probability (larger sizes are dropped)",
                     f"give a size of at most {capacity} GPUs a probability > 0")
    return out
