"""From trace rows to the `Job`s of a scenario: the mapping rules.

A trace says when a job came, how much work it had, how many GPUs it used and (Philly) which
team sent it. The contract fields a scheduler needs (project, min_runtime, resumable,
checkpoint interval) come from rules, each deterministic so that a scenario always replays the
same workload:

* **project**: the team (through `team_map`, else the team name itself) when the trace has one;
  otherwise a stable hash of the job id picks a project with probability proportional to
  `projects` weights (default: each project's entitlement, mean over gpu_types). The hash of a
  job id does not depend on the other jobs, so adding or removing jobs moves no one.
* **debug jobs**: work shorter than `debug_below` (default 15 min) -> min_runtime
  `debug_min_runtime` (default 15 min, at most 15 min: the DESIGN's debug class).
* **other jobs**: min_runtime `min_runtime` (default: the policy's cap), capped at the cap; a
  seeded share `unallocated_share` of them (by hash) are unallocated (min_runtime 0).
* **resumable**: a seeded fraction `resumable_fraction` (by hash).
* **checkpoint interval**: `checkpoint_interval` (default: the policy's).
* **gang shape**: a job larger than the biggest node and not a multiple of it gets
  `gpus_per_node` = the largest divisor of its GPU count that fits a node (12 GPUs on 8-GPU
  nodes -> 2 x 6) when the cluster has nodes for those pieces; else it keeps whole nodes plus
  a remainder node (`optalloc.shape`: 9 GPUs on two 8-GPU nodes -> 8 + 1, not 3 x 3 on three
  nodes). Neither changes its GPU-hours.
* **per-type speed** (Philly): allowed gpu_types are the config's types the job runs on
  (speedup > 0); `Job.speedup` holds the relative speeds.

Jobs that cannot run on this cluster at all (more GPUs than all nodes of their allowed types,
no allowed type present, or no gang shape that the nodes of its types hold at once) are left
out and counted in `WorkloadSummary.dropped`.

Hashes: u(job, salt) = first 8 bytes of blake2b("{seed}/{salt}/{job_id}") / 2^64, uniform in [0, 1).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from optalloc.config.problems import MISSING, Loc, Problems, show_list
from optalloc.org import OrgTree
from optalloc.shape import fits_up
from optalloc.sim.traces import RawJobs
from optalloc.types import Config, Job, frozen_map
from optalloc.units import MAX_SHARE

DEBUG_MAX_MIN_RUNTIME_S = 15 * 60.0  # DESIGN.md section 6: debug = min_runtime <= 15 min

MAPPING_KEYS = (
    "projects",
    "team_map",
    "debug_below",
    "debug_min_runtime",
    "min_runtime",
    "unallocated_share",
    "resumable_fraction",
    "checkpoint_interval",
)


@dataclass(frozen=True)
class MappingRules:
    projects: Mapping[str, float] = field(default_factory=frozen_map)  # empty: entitlements
    team_map: Mapping[str, str] = field(default_factory=frozen_map)
    debug_below_s: float = 15 * 60.0
    debug_min_runtime_s: float = 15 * 60.0
    min_runtime_s: float | None = None  # None: the policy's min_runtime_cap
    unallocated_share: float = 0.1
    resumable_fraction: float = 0.9
    checkpoint_interval_s: float | None = None  # None: the policy's default


@dataclass(frozen=True)
class WorkloadSummary:
    n_jobs: int
    n_debug: int
    n_unallocated: int
    n_resumable: int
    gpu_hours: float  # work at speed 1.0
    dropped: Mapping[str, int] = field(default_factory=frozen_map)  # reason -> count
    reshaped: int = 0  # gangs given a gpus_per_node to fit whole nodes


# --------------------------------------------------------------------------- hashing


def stable_uniform(job_ids: Sequence[str] | np.ndarray, salt: str, seed: int = 0) -> np.ndarray:
    """(n,) uniform [0, 1) numbers that depend only on (seed, salt, job_id)."""
    out = np.empty(len(job_ids), dtype=np.float64)
    prefix = f"{seed}/{salt}/".encode()
    for i, jid in enumerate(job_ids):
        h = hashlib.blake2b(prefix + str(jid).encode(), digest_size=8).digest()
        out[i] = int.from_bytes(h, "big")
    return out / 2.0**64


def assign_projects(
    job_ids: Sequence[str] | np.ndarray, weights: Mapping[str, float], seed: int = 0
) -> np.ndarray:
    """(n,) project names picked by a stable hash of each job id, P(project) ∝ weight."""
    names = list(weights)
    w = np.array([float(weights[p]) for p in names])
    if len(names) == 0 or w.sum() <= 0 or np.any(w < 0):
        raise ValueError("project weights must be >= 0 with a positive sum")
    cum = np.cumsum(w / w.sum())
    cum[-1] = 1.0
    u = stable_uniform(job_ids, "project", seed)
    idx = np.searchsorted(cum, u, side="right")
    return np.asarray(names, dtype=object)[np.minimum(idx, len(names) - 1)]


def default_project_weights(config: Config) -> dict[str, float]:
    """Each project's entitlement (mean over gpu_types): demand tracks the budgets."""
    tree = OrgTree.build(config.org, [g.name for g in config.gpu_types])
    ent = tree.entitlement.mean(axis=1)
    return {tree.names[i]: float(ent[i]) for i in np.flatnonzero(tree.is_leaf)}


# --------------------------------------------------------------------------- parsing


def parse_mapping(value: Any, loc: Loc, config: Config, problems: Problems) -> MappingRules:
    """Validate a `workload.mapping` section; problems are recorded (MISSING fields default)."""
    if value is None:
        return MappingRules()
    data = problems.mapping(value, loc)
    if data is MISSING:
        return MappingRules()
    problems.known_keys(data, loc, MAPPING_KEYS)
    leaves = project_names(config)
    cap = config.policy.min_runtime_cap_s
    kw: dict[str, Any] = {}

    if "projects" in data:
        pl = loc.key("projects")
        m = problems.mapping(data["projects"], pl, "a mapping project: weight")
        if m is not MISSING:
            weights = {}
            for name, w in m.items():
                wl = pl.key(str(name))
                if str(name) not in leaves:
                    _unknown_project(problems, wl, str(name), leaves)
                    continue
                wv = problems.number(w, wl, minimum=0.0, maximum=MAX_SHARE)  # a finite sum
                if wv is not MISSING:
                    weights[str(name)] = wv
            if weights and sum(weights.values()) <= 0:
                problems.add(pl, "all project weights are 0", "give at least one project a positive weight")
            elif not m:
                problems.add(pl, "is empty", "list projects with weights, or remove the key to use entitlements")
            kw["projects"] = frozen_map(weights)
    if "team_map" in data:
        tl = loc.key("team_map")
        m = problems.mapping(data["team_map"], tl, "a mapping team: project")
        if m is not MISSING:
            tm = {}
            for team, proj in m.items():
                pl = tl.key(str(team))
                p = problems.string(proj, pl, allow_int=True)
                if p is MISSING:
                    continue
                if p not in leaves:
                    _unknown_project(problems, pl, p, leaves)
                    continue
                tm[str(team)] = p
            kw["team_map"] = frozen_map(tm)

    def dur(key: str, **kws):
        if key in data:
            v = problems.duration(data[key], loc.key(key), **kws)
            return v
        return MISSING

    v = dur("debug_below")
    if v is not MISSING:
        kw["debug_below_s"] = v
    v = dur("debug_min_runtime", positive=True)
    if v is not MISSING:
        if v > DEBUG_MAX_MIN_RUNTIME_S:
            problems.add(
                loc.key("debug_min_runtime"),
                f"must be at most 15m (a debug job's min_runtime), got {data['debug_min_runtime']!r}",
                "use 15m or less",
            )
        elif v > cap:
            problems.add(loc.key("debug_min_runtime"), f"exceeds policy.min_runtime_cap ({cap:g}s)", "lower it")
        else:
            kw["debug_min_runtime_s"] = v
    v = dur("min_runtime", positive=True)
    if v is not MISSING:
        if v > cap:
            problems.add(
                loc.key("min_runtime"),
                f"{data['min_runtime']!r} exceeds policy.min_runtime_cap ({cap:g}s)",
                "lower it to the cap or raise policy.min_runtime_cap",
            )
        else:
            kw["min_runtime_s"] = v
    for key in ("unallocated_share", "resumable_fraction"):
        if key in data:
            f = problems.number(data[key], loc.key(key), minimum=0.0, maximum=1.0)
            if f is not MISSING:
                kw[key] = f
    v = dur("checkpoint_interval", positive=True)
    if v is not MISSING:
        kw["checkpoint_interval_s"] = v
    return MappingRules(**kw)


def project_names(config: Config) -> tuple[str, ...]:
    out = []
    stack = [config.org]
    while stack:
        n = stack.pop()
        if n.is_leaf:
            out.append(n.name)
        stack.extend(reversed(n.children))
    return tuple(out)


def _unknown_project(problems: Problems, loc: Loc, name: str, leaves: Sequence[str]) -> None:
    from optalloc.config.problems import closest

    near = closest(name, leaves)
    fix = f"did you mean {near!r}?" if near else f"projects (org tree leaves): {show_list(leaves)}"
    problems.add(loc, f"{name!r} is not a project (a leaf of the org tree)", fix)


# --------------------------------------------------------------------------- building jobs


def build_jobs(
    raw: RawJobs,
    rules: MappingRules,
    config: Config,
    *,
    seed: int = 0,
    loc: Loc | None = None,
    problems: Problems | None = None,
) -> tuple[tuple[Job, ...], WorkloadSummary]:
    """Apply the mapping rules to trace rows: Jobs sorted by submit time (all queued, duration_s
    = work at speed 1.0) and a summary. Unknown teams are reported at `loc` (`team_map`)."""
    own = problems is None
    problems = problems if problems is not None else Problems()
    loc = loc or Loc("<workload>", "workload.mapping")
    n = len(raw)
    leaves = project_names(config)
    cap = config.policy.min_runtime_cap_s

    # --- project
    if raw.team is not None:
        teams = np.asarray(raw.team).astype(str)
        project = np.array([rules.team_map.get(t, t) for t in teams], dtype=object)
        unknown = sorted(set(project[~np.isin(project, leaves)].tolist())) if n else []
        if unknown:
            problems.add(
                loc.key("team_map"),
                f"team(s) {show_list(unknown)} are not projects of the org tree",
                "map each team to a project under workload.mapping.team_map, or name org leaves after the teams",
            )
            if own:
                problems.raise_if_any()
            return (), WorkloadSummary(0, 0, 0, 0, 0.0)
    else:
        weights = dict(rules.projects) or default_project_weights(config)
        project = assign_projects(raw.job_id, weights, seed)

    # --- contract fields
    debug = raw.duration_s < rules.debug_below_s
    unalloc = (~debug) & (stable_uniform(raw.job_id, "unallocated", seed) < rules.unallocated_share)
    other_mr = min(cap, rules.min_runtime_s if rules.min_runtime_s is not None else cap)
    debug_mr = min(rules.debug_min_runtime_s, cap)
    min_runtime = np.where(debug, debug_mr, np.where(unalloc, 0.0, other_mr))
    resumable = stable_uniform(raw.job_id, "resumable", seed) < rules.resumable_fraction

    # --- per-type speed and allowed types
    type_names = [g.name for g in config.gpu_types]
    node_max = {t: 0 for t in type_names}
    type_cap = {t: 0 for t in type_names}
    for nd in config.nodes:
        node_max[nd.gpu_type] = max(node_max[nd.gpu_type], nd.gpus)
        type_cap[nd.gpu_type] += nd.gpus
    present = [t for t in type_names if type_cap[t] > 0]
    if raw.speedup:
        known = [t for t in present if t in raw.speedup]
        speed = np.stack([np.asarray(raw.speedup[t], dtype=float) for t in known], axis=1) if known else np.zeros((n, 0))
    else:
        known = present
        speed = np.ones((n, len(known)))
    allowed = speed > 0  # (n, K)
    caps = np.array([type_cap[t] for t in known], dtype=np.int64)
    maxes = np.array([node_max[t] for t in known], dtype=np.int64)
    fits_somewhere = allowed & (raw.gpus[:, None] <= caps[None, :])
    no_type = ~allowed.any(axis=1)
    too_big = (~no_type) & (~fits_somewhere.any(axis=1))
    # node size for gang shaping: the biggest node among the types the job may use
    node_size = np.where(allowed, maxes[None, :], 0).max(axis=1) if len(known) else np.zeros(n, dtype=np.int64)
    gpn = _gang_pieces(raw.gpus, node_size)
    sizes = [np.array([nd.gpus for nd in config.nodes if nd.gpu_type == t], dtype=np.int64) for t in known]
    # the divisor shape only where its pieces fit the nodes (9 GPUs as 3 x 3 needs 3 nodes);
    # else whole nodes + a remainder node (optalloc.shape: 9 = 8 + 1); neither fits: dropped
    fits_pieces = fits_up(raw.gpus, gpn, allowed, sizes).any(axis=1)
    fits_plain = fits_up(raw.gpus, np.zeros(n, dtype=np.int64), allowed, sizes).any(axis=1)
    gpn = np.where(fits_pieces, gpn, 0)
    no_shape = ~(no_type | too_big) & ~(fits_pieces | fits_plain)
    keep = ~(no_type | too_big | no_shape)

    order = np.lexsort((np.arange(n), raw.submit_time))
    jobs: list[Job] = []
    reshaped = 0
    restrict = len(known) < len(type_names) or bool(raw.speedup)
    for i in order:
        if not keep[i]:
            continue
        g = int(raw.gpus[i])
        reshaped += int(gpn[i] > 0)
        ok = allowed[i]
        types = tuple(t for t, a in zip(known, ok) if a) if restrict and not ok.all() else ()
        sp = {t: float(s) for t, s, a in zip(known, speed[i], ok) if a and s != 1.0} if raw.speedup else {}
        jobs.append(
            Job(
                id=str(raw.job_id[i]),
                project=str(project[i]),
                gpus=g,
                gpus_per_node=int(gpn[i]) or None,
                gpu_types=types,
                speedup=frozen_map(sp),
                min_runtime_s=float(min_runtime[i]),
                resumable=bool(resumable[i]),
                submit_time=float(raw.submit_time[i]),
                duration_s=float(raw.duration_s[i]),
                checkpoint_interval_s=rules.checkpoint_interval_s,
            )
        )
    dropped = {}
    if no_type.any():
        dropped["no allowed gpu_type in the cluster"] = int(no_type.sum())
    if too_big.any():
        dropped["more GPUs than the cluster has of its types"] = int(too_big.sum())
    if no_shape.any():
        dropped["no gang shape fits the nodes of its types"] = int(no_shape.sum())
    summary = WorkloadSummary(
        n_jobs=len(jobs),
        n_debug=int((debug & keep).sum()),
        n_unallocated=int((unalloc & keep).sum()),
        n_resumable=int((resumable & keep).sum()),
        gpu_hours=float(np.sum((raw.gpus * raw.duration_s)[keep]) / 3600.0),
        dropped=frozen_map(dropped),
        reshaped=reshaped,
    )
    return tuple(jobs), summary


def _gang_pieces(gpus: np.ndarray, node_size: np.ndarray) -> np.ndarray:
    """(n,) gpus_per_node for jobs larger than their biggest node and not a multiple of it:
    the largest divisor of the GPU count that fits the node (12 on 8 -> 6); 0 for the others."""
    out = np.zeros(len(gpus), dtype=np.int64)
    odd = (node_size > 0) & (gpus > node_size) & (gpus % np.maximum(node_size, 1) != 0)
    for i in np.flatnonzero(odd):
        out[i] = _largest_divisor_at_most(int(gpus[i]), int(node_size[i]))
    return out


def _largest_divisor_at_most(g: int, limit: int) -> int:
    for d in range(min(g, limit), 0, -1):
        if g % d == 0:
            return d
    return 1


# --------------------------------------------------------------------------- load


def offered_load(jobs: Sequence[Job], capacity_gpus: float, horizon_s: float | None = None) -> float:
    """GPU-hours submitted per hour / capacity: sum(gpus * duration_s) / (capacity * horizon).

    `horizon_s` defaults to the span of submit times (last - first). This is the *offered* load,
    not the demand ratio (DESIGN.md section 6); on the ITP traces 0.9-1.0 gives a demand ratio
    of 2-4."""
    if not jobs:
        return 0.0
    gpus = np.array([j.gpus for j in jobs], dtype=np.float64)
    dur = np.array([j.duration_s or 0.0 for j in jobs], dtype=np.float64)
    if horizon_s is None:
        sub = np.array([j.submit_time for j in jobs])
        horizon_s = float(sub.max() - sub.min())
    if horizon_s <= 0 or capacity_gpus <= 0:
        raise ValueError("offered_load needs capacity_gpus > 0 and a horizon > 0")
    return float(np.sum(gpus * dur) / (capacity_gpus * horizon_s))
