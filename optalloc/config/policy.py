"""The `policy` section -> Policy / SolverSettings (durations via optalloc.units)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from optalloc.config.problems import MISSING, Loc, Problems
from optalloc.types import Policy, SolverSettings, UsageMode
from optalloc.units import (MAX_EXACT_COLUMNS, MAX_THREADS, MAX_WAIT_S, MIN_EPOCH_S,
                            format_duration)

MAX_TIME_LIMIT_S = MAX_WAIT_S  # a day, as `epoch --time-limit` allows

#: Solver backends a config may name. The one list: optalloc.solve maps each to an implementation.
# The one list of backend names a config may use; optalloc.solve.BACKENDS must match it
# (tests/test_backend_names.py). Config cannot import solve (imports point one way).
SOLVER_BACKENDS = ("highs", "scip", "cpsat", "cbc", "lp", "glop-lp")

USAGE_MODES = tuple(m.value for m in UsageMode)

# YAML key -> (Policy field, must be > 0)
_POLICY_DURATIONS = {
    "lookback": ("lookback_s", True),
    "half_life": ("half_life_s", True),
    "min_runtime_cap": ("min_runtime_cap_s", True),
    "epoch": ("epoch_s", True),
    "grace": ("grace_s", False),
    "restart_overhead": ("restart_overhead_s", False),
    "checkpoint_interval": ("checkpoint_interval_s", True),
    "idle_after": ("idle_after_s", True),
    "debug_protection": ("debug_protection_s", False),
}
POLICY_KEYS = tuple(_POLICY_DURATIONS) + ("usage_mode", "solver", "idle_util_below",
                                          "debug_allowance", "max_reservations")
MAX_RESERVATIONS = 64  # more waiting gangs holding nodes at once would idle most clusters
#: YAML solver key -> SolverSettings field (whatif --set uses it too)
SOLVER_FIELDS = {"backend": "backend", "time_limit": "time_limit_s", "mip_gap": "mip_gap",
                 "threads": "threads", "exact_up_to": "exact_up_to"}
SOLVER_KEYS = tuple(SOLVER_FIELDS)
#: YAML policy key -> Policy field, for every key but `solver` (whatif --set uses it too)
POLICY_FIELDS = {key: fld for key, (fld, _) in _POLICY_DURATIONS.items()} | {
    "usage_mode": "usage_mode", "idle_util_below": "idle_util_pct",
    "debug_allowance": "debug_allowance", "max_reservations": "max_reservations"}


def epoch_too_short(seconds: float) -> str:
    return (f"an epoch of {seconds:g}s is shorter than {MIN_EPOCH_S:g}s (how often the scheduler "
            "decides; a shorter one only makes a simulation endless)")


def debug_protection_problem(debug_s: float, cap_s: float) -> str | None:
    """Why a debug_protection at or past min_runtime_cap cannot be (a debug job is one
    protected no longer than it: every allocated job would be one); None where it is below.
    The config's policy section and `whatif --set` both ask."""
    if debug_s < cap_s:
        return None
    return (f"debug_protection ({format_duration(debug_s)}) is not below min_runtime_cap "
            f"({format_duration(cap_s)}): every allocated job would count as a debug job")


def parse_policy(value: Any, loc: Loc, problems: Problems) -> Policy:
    """Policy from the `policy` mapping; defaults for what it omits (the published ones)."""
    policy = Policy()
    if value is None:
        return policy
    d = problems.mapping(value, loc)
    if d is MISSING:
        return policy
    problems.known_keys(d, loc, POLICY_KEYS)
    changes: dict[str, Any] = {}
    for key, (fld, positive) in _POLICY_DURATIONS.items():
        if key in d:
            v = problems.duration(d[key], loc.key(key), positive=positive)
            if v is not MISSING:
                changes[fld] = v
    if changes.get("epoch_s", MIN_EPOCH_S) < MIN_EPOCH_S:
        problems.add(loc.key("epoch"), epoch_too_short(changes.pop("epoch_s")),
                     f"give at least {MIN_EPOCH_S:g}s, e.g. 5m")
    # a debug job is one protected no longer than debug_protection (contract.short_jobs): at
    # or past the cap on protections, every allocated job would be one (stop 58's judge)
    dbg = changes.get("debug_protection_s", policy.debug_protection_s)
    cap = changes.get("min_runtime_cap_s", policy.min_runtime_cap_s)
    if ("debug_protection" in d or "min_runtime_cap" in d) and (
            what := debug_protection_problem(dbg, cap)):
        problems.add(loc.key("debug_protection" if "debug_protection" in d
                             else "min_runtime_cap"), what,
                     "give a debug_protection of minutes (15m by default) below the cap")
    if "usage_mode" in d:
        m = problems.choice(d["usage_mode"], loc.key("usage_mode"), USAGE_MODES, "usage_mode")
        if m is not MISSING:
            changes["usage_mode"] = UsageMode(m)
    if "solver" in d:
        changes["solver"] = parse_solver(d["solver"], loc.key("solver"), problems)
    if "idle_util_below" in d:  # percent of GPU utilization, as nvidia-smi shows it
        v = problems.number(d["idle_util_below"], loc.key("idle_util_below"), minimum=0.0,
                            maximum=100.0)
        if v is not MISSING:
            changes["idle_util_pct"] = v
    if "debug_allowance" in d:  # fraction of a project's entitlement its short jobs may add
        v = problems.number(d["debug_allowance"], loc.key("debug_allowance"), minimum=0.0,
                            maximum=1.0)
        if v is not MISSING:
            changes["debug_allowance"] = v
    if "max_reservations" in d:  # waiting gangs that may hold reserved nodes at once (0: off)
        v = problems.integer(d["max_reservations"], loc.key("max_reservations"), minimum=0,
                             maximum=MAX_RESERVATIONS)
        if v is not MISSING:
            changes["max_reservations"] = v
    return replace(policy, **changes)


def parse_solver(value: Any, loc: Loc, problems: Problems) -> SolverSettings:
    settings = SolverSettings()
    if value is None:
        return settings
    d = problems.mapping(value, loc, "a mapping like {backend: highs, time_limit: 10s}")
    if d is MISSING:
        return settings
    problems.known_keys(d, loc, SOLVER_KEYS)
    changes: dict[str, Any] = {}
    if "backend" in d:
        b = problems.choice(d["backend"], loc.key("backend"), SOLVER_BACKENDS, "solver backend")
        if b is not MISSING:
            changes["backend"] = b
    if "time_limit" in d:
        v = problems.duration(d["time_limit"], loc.key("time_limit"), positive=True)
        if v is not MISSING and v > MAX_TIME_LIMIT_S:  # as `epoch --time-limit`
            problems.add(loc.key("time_limit"), f"{format_duration(v)} is more than a day",
                         "give a solver time limit of seconds to minutes, at most 1d")
        elif v is not MISSING:
            changes["time_limit_s"] = v
    if "mip_gap" in d:
        v = problems.number(d["mip_gap"], loc.key("mip_gap"), minimum=0.0, maximum=1.0)
        if v is not MISSING:
            changes["mip_gap"] = v
    if "threads" in d:
        v = problems.integer(d["threads"], loc.key("threads"), minimum=1, maximum=MAX_THREADS)
        if v is not MISSING:
            changes["threads"] = v
    if "exact_up_to" in d:
        v = problems.integer(d["exact_up_to"], loc.key("exact_up_to"), minimum=0,
                             maximum=MAX_EXACT_COLUMNS)
        if v is not MISSING:
            changes["exact_up_to"] = v
    return replace(settings, **changes)
