"""The `jobs` section (and job files for `optalloc submit`), validated against the cluster,
the org tree and the policy: projects are leaves, gangs divide evenly, running jobs hold valid,
non-overlapping placements."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from optalloc.config.problems import MISSING, Loc, Piece, Problems, closest, show_list, type_name
from optalloc.types import Config, Job, JobState, Node, NodeAlloc, OrgNode, Placement, Policy, frozen_map
from optalloc.units import (
    MAX_ARGV_BYTES,
    MAX_ARGV_ITEMS,
    MAX_JOB_GPUS,
    MAX_NODE_GPUS,
    MAX_PRIORITY,
    MAX_SPEEDUP,
    format_duration,
)

JOB_KEYS = (
    "id", "project", "gpus", "gpus_per_node", "nodes", "gpu_types", "speedup", "min_runtime",
    "resumable", "priority", "submit_time", "duration", "checkpoint_interval", "command",
    "state", "start_time", "placement",
)  # fmt: skip
PLACEMENT_KEYS = ("gpu_type", "nodes")
ALLOC_KEYS = ("node", "gpus")
JOB_STATES = tuple(s.value for s in JobState)


@dataclass(frozen=True)
class JobContext:
    """What a job is checked against."""

    gpu_types: tuple[str, ...]
    nodes: Mapping[str, Node]
    leaves_under: Mapping[str, tuple[str, ...]]  # org node name -> leaf names below (itself if leaf)
    policy: Policy
    leaves: tuple[str, ...]
    nodes_complete: bool = True  # False: the nodes section had problems (skip node lookups)
    # gpu_type -> {GPUs per node: how many nodes}, for the can-it-ever-fit check
    node_sizes: Mapping[str, Mapping[int, int]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        gpu_types: Iterable[str],
        nodes: Iterable[Node],
        org: OrgNode | None,
        policy: Policy,
        nodes_complete: bool = True,
    ) -> "JobContext":
        under: dict[str, tuple[str, ...]] = {}
        if org is not None:
            _collect_leaves(org, under)
        leaves = tuple(n for n, ls in under.items() if ls == (n,))
        node_map = {n.name: n for n in nodes}
        sizes: dict[str, Counter] = {}
        for n in node_map.values():
            sizes.setdefault(n.gpu_type, Counter())[n.gpus] += 1
        return cls(tuple(gpu_types), node_map, under, policy, leaves, nodes_complete, sizes)

    @classmethod
    def of_config(cls, config: Config) -> "JobContext":
        return cls.of((g.name for g in config.gpu_types), config.nodes, config.org, config.policy)


def _collect_leaves(node: OrgNode, under: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    if node.is_leaf:
        got = (node.name,)
    else:
        got = tuple(leaf for c in node.children for leaf in _collect_leaves(c, under))
    under[node.name] = got
    return got


def parse_job_pieces(
    pieces: Sequence[Piece],
    ctx: JobContext,
    problems: Problems,
    existing: Sequence[Job] = (),
    single: bool = False,
) -> tuple[Job, ...]:
    """Jobs from one `jobs` list per file (with `single`, a piece may also be one job mapping).
    `existing` jobs (already accepted, e.g. a config's queue when reading a job file) count for
    duplicate ids and overlapping placements."""
    ids: dict[str, str] = {j.id: "the configuration" for j in existing}
    parsed: list[tuple[Job, Loc]] = []
    located: list[tuple[Any, Loc]] = []
    for piece in pieces:
        if single and isinstance(piece.value, Mapping):  # a job file holding one job
            located.append((piece.value, Loc(piece.source)))
            continue
        loc0 = Loc(piece.source, "jobs")
        items = problems.sequence(piece.value, loc0, "a list of jobs")
        if items is not MISSING:
            located.extend((item, loc0.idx(i)) for i, item in enumerate(items))
    for item, loc in located:
        job = parse_job(item, loc, ctx, problems)
        job_id = _raw_id(item)
        if job_id is not None:  # ids count even for jobs with other problems
            if job_id in ids:
                problems.add(
                    loc.key("id"),
                    f"duplicate job id {job_id!r} (also at {ids[job_id]})",
                    "give each job a unique id",
                )
                continue
            ids[job_id] = str(loc)
        if job is not MISSING:
            parsed.append((job, loc))
    _check_overlaps([(j, None) for j in existing] + parsed, problems)
    return tuple(j for j, _ in parsed)


def _raw_id(item: Any) -> str | None:
    if not isinstance(item, Mapping):
        return None
    v = item.get("id")
    if isinstance(v, str) and v.strip() or isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    return None


def _check_overlaps(jobs: Sequence[tuple[Job, Loc | None]], problems: Problems) -> None:
    """Two running jobs may not hold the same GPU of the same node."""
    owner: dict[tuple[str, int], tuple[Job, Loc | None]] = {}
    for job, loc in jobs:
        if job.placement is None:
            continue
        clashes: dict[str, tuple[Job, Loc | None, list[str]]] = {}
        for alloc in job.placement.nodes:
            for g in alloc.gpus:
                key = (alloc.node, g)
                if key in owner:
                    other, oloc = owner[key]
                    clashes.setdefault(other.id, (other, oloc, []))[2].append(f"{alloc.node}:{g}")
                else:
                    owner[key] = (job, loc)
        for other, oloc, gpus in clashes.values():
            where = f" ({oloc.path})" if oloc is not None else " (in the configuration)"
            problems.add(
                (loc or Loc("<jobs>")).key("placement"),
                f"running jobs {job.id!r} and {other.id!r}{where} overlap on GPUs "
                f"{show_list(gpus, 4)}",
                "give each running job its own GPUs",
            )


def parse_job(d: Any, loc: Loc, ctx: JobContext, problems: Problems) -> Job | Any:
    """One job mapping -> Job, or MISSING (its problems recorded)."""
    d = problems.mapping(d, loc, "a job mapping like {id: j1, project: A1, gpus: 8}")
    if d is MISSING:
        return MISSING
    n0 = len(problems)
    problems.known_keys(d, loc, JOB_KEYS, required=("id", "project", "gpus"))
    job_id = problems.string(d["id"], loc.key("id"), allow_int=True) if "id" in d else MISSING
    project = _project(d, loc, ctx, problems)
    gpus = (problems.integer(d["gpus"], loc.key("gpus"), maximum=MAX_JOB_GPUS)
            if "gpus" in d else MISSING)
    if gpus is not MISSING and gpus <= 0:
        problems.add(loc.key("gpus"), f"a job needs at least 1 GPU, got {gpus}", "set gpus: 1 or more")
        gpus = MISSING
    allowed = _gpu_type_list(d, loc, ctx, problems)
    gpn = _gpus_per_node(d, loc, gpus, problems)
    speedup = _speedup(d, loc, ctx, problems)
    min_runtime = _min_runtime(d, loc, ctx.policy, problems)
    resumable = problems.boolean(d["resumable"], loc.key("resumable")) if "resumable" in d else True
    priority = (
        problems.integer(d["priority"], loc.key("priority"), minimum=-MAX_PRIORITY,
                         maximum=MAX_PRIORITY)
        if "priority" in d
        else 0
    )
    submit = problems.time(d["submit_time"], loc.key("submit_time")) if "submit_time" in d else 0.0
    duration = (
        problems.duration(d["duration"], loc.key("duration"), positive=True)
        if d.get("duration") is not None
        else None
    )
    ckpt = (
        problems.duration(d["checkpoint_interval"], loc.key("checkpoint_interval"), positive=True)
        if d.get("checkpoint_interval") is not None
        else None
    )
    command = _command(d, loc, problems)
    state = JobState.QUEUED
    if "state" in d:
        s = problems.choice(d["state"], loc.key("state"), JOB_STATES, "job state")
        state = MISSING if s is MISSING else JobState(s)
    if gpus is not MISSING and allowed is not MISSING and ctx.nodes_complete:
        _check_fits(loc, gpus, gpn, allowed, ctx, problems)
    start_time: Any = None
    placement: Any = None
    if state is JobState.RUNNING:
        if d.get("start_time") is None:
            problems.add(loc, "running job has no start_time", "add `start_time:` (when its current run began)")
        else:
            start_time = problems.time(d["start_time"], loc.key("start_time"))
            if start_time is not MISSING and submit is not MISSING and start_time < submit:
                problems.add(
                    loc.key("start_time"),
                    "start_time is before submit_time",
                    "a job cannot start before it was submitted; fix one of the two",
                )
        if d.get("placement") is None:
            problems.add(loc, "running job has no placement", "add `placement:` with its gpu_type and node GPUs")
        elif job_id is not MISSING and gpus is not MISSING and allowed is not MISSING:
            placement = _placement(
                d["placement"], loc.key("placement"), job_id, gpus, gpn, allowed,
                min_runtime, ctx, problems,
            )  # fmt: skip
    elif state is JobState.QUEUED:
        for key in ("placement", "start_time"):
            if d.get(key) is not None:
                problems.add(
                    loc.key(key),
                    f"a queued job has no {key}",
                    f"remove `{key}:`, or set state: running",
                )
    values = (job_id, project, gpus, allowed, gpn, speedup, min_runtime, resumable, priority,
              submit, duration, ckpt, command, state, start_time, placement)  # fmt: skip
    if len(problems) > n0 or any(v is MISSING for v in values):
        return MISSING
    return Job(
        id=job_id,
        project=project,
        gpus=gpus,
        gpus_per_node=gpn,
        gpu_types=allowed,
        speedup=frozen_map(speedup),
        min_runtime_s=min_runtime,
        resumable=resumable,
        priority=priority,
        submit_time=submit,
        duration_s=duration,
        checkpoint_interval_s=ckpt,
        state=state,
        start_time=start_time,
        placement=placement,
        command=command,
    )


# --------------------------------------------------------------------------- fields


def _project(d: Mapping, loc: Loc, ctx: JobContext, problems: Problems) -> str | Any:
    if "project" not in d:
        return MISSING
    pl = loc.key("project")
    project = problems.string(d["project"], pl)
    if project is MISSING:
        return MISSING
    if not ctx.leaves_under:  # the org tree itself is unusable (already reported)
        return project
    under = ctx.leaves_under.get(project)
    if under is None:
        near = closest(project, ctx.leaves)
        hint = f"did you mean {near!r}? " if near else ""
        problems.add(
            pl,
            f"unknown project {project!r}",
            f"{hint}use one of the org tree's leaves: {show_list(ctx.leaves)}",
        )
        return MISSING
    if under != (project,):
        problems.add(
            pl,
            f"{project!r} is an inner node of the org tree, not a project",
            f"jobs belong to a leaf; use one of its leaves: {show_list(under)}",
        )
        return MISSING
    return project


def _known_type(t: Any, loc: Loc, ctx: JobContext, problems: Problems) -> str | Any:
    t = problems.string(t, loc)
    if t is MISSING:
        return MISSING
    if t not in ctx.gpu_types:
        near = closest(t, ctx.gpu_types)
        hint = f"did you mean {near!r}? " if near else ""
        problems.add(loc, f"unknown gpu_type {t!r}", f"{hint}use one of: {show_list(ctx.gpu_types)}")
        return MISSING
    return t


def _gpu_type_list(d: Mapping, loc: Loc, ctx: JobContext, problems: Problems) -> tuple | Any:
    if d.get("gpu_types") is None:
        return ()
    tl = loc.key("gpu_types")
    raw = d["gpu_types"]
    if isinstance(raw, str):
        raw = [raw]
    items = problems.sequence(raw, tl, "a list of gpu_types like [h100, b200]")
    if items is MISSING:
        return MISSING
    out = []
    for i, t in enumerate(items):
        t = _known_type(t, tl.idx(i), ctx, problems)
        if t is MISSING:
            return MISSING
        if t not in out:
            out.append(t)
    return tuple(out)


def _gpus_per_node(d: Mapping, loc: Loc, gpus: Any, problems: Problems) -> int | None | Any:
    gpn = None
    if d.get("gpus_per_node") is not None:
        gpn = problems.integer(d["gpus_per_node"], loc.key("gpus_per_node"), minimum=1,
                               maximum=MAX_NODE_GPUS)
        if gpn is MISSING:
            return MISSING
    if d.get("nodes") is not None:
        n = problems.integer(d["nodes"], loc.key("nodes"), minimum=1, maximum=MAX_JOB_GPUS)
        if n is MISSING or gpus is MISSING:
            return MISSING
        if gpus % n:
            problems.add(
                loc.key("nodes"),
                f"{gpus} GPUs do not divide evenly over {n} nodes",
                f"ask for a multiple of {n} GPUs, or change nodes",
            )
            return MISSING
        if gpn is not None and gpn * n != gpus:
            problems.add(
                loc.key("nodes"),
                f"nodes ({n}) x gpus_per_node ({gpn}) != gpus ({gpus})",
                "give only one of nodes / gpus_per_node",
            )
            return MISSING
        return gpus // n
    if gpn is not None and gpus is not MISSING and gpus % gpn:
        problems.add(
            loc.key("gpus_per_node"),
            f"{gpus} GPUs are not a multiple of gpus_per_node {gpn}",
            f"ask for a multiple of {gpn} GPUs, or change gpus_per_node",
        )
        return MISSING
    return gpn


def _type_fits(gpus: int, gpn: int | None, sizes: Mapping[int, int]) -> bool:
    """Could nodes of one gpu_type ({GPUs per node: node count}) ever hold the job at once?"""
    if gpn is not None:
        return sum(k * (s // gpn) for s, k in sizes.items()) * gpn >= gpus
    if gpus <= max(sizes):
        return True
    return any(gpus % s == 0 and k * s >= gpus for s, k in sizes.items())


def _check_fits(
    loc: Loc, gpus: int, gpn: Any, allowed: tuple, ctx: JobContext, problems: Problems
) -> None:
    """A job that no nodes of an allowed type could ever hold is a config error, not a wait.
    A job runs on one gpu_type, so each type is checked on its own."""
    if gpn is MISSING:
        return
    types = allowed or ctx.gpu_types
    sizes = {t: ctx.node_sizes[t] for t in types if t in ctx.node_sizes}
    if not sizes:
        if allowed:
            problems.add(
                loc.key("gpu_types"),
                f"no node has gpu_types {', '.join(types)}",
                "allow a gpu_type that has nodes",
            )
        return
    if any(_type_fits(gpus, gpn, sz) for sz in sizes.values()):
        return
    caps = {t: sum(s * k for s, k in sz.items()) for t, sz in sizes.items()}
    biggest = max(max(sz) for sz in sizes.values())
    if gpus > max(caps.values()):
        have = ", ".join(f"{t}: {c}" for t, c in caps.items())
        problems.add(
            loc.key("gpus"),
            f"needs {gpus} GPUs but no allowed gpu_type has that many ({have})",
            "a job runs on one gpu_type; ask for fewer GPUs or allow a larger type",
        )
    elif gpn is not None and gpn > biggest:
        problems.add(
            loc.key("gpus_per_node"),
            f"gpus_per_node {gpn} is more than any allowed node has ({biggest})",
            f"use gpus_per_node <= {biggest}",
        )
    elif gpn is not None:
        problems.add(
            loc.key("gpus_per_node"),
            f"{gpus // gpn} nodes with {gpn} GPUs each do not fit on any allowed gpu_type",
            "use a smaller gpus_per_node or fewer GPUs",
        )
    else:
        sz = show_list(sorted({s for v in sizes.values() for s in v}))
        problems.add(
            loc.key("gpus"),
            f"{gpus} GPUs neither fit on one node nor fill whole nodes (node sizes: {sz})",
            "ask for a multiple of the node size, or set gpus_per_node",
        )


def _speedup(d: Mapping, loc: Loc, ctx: JobContext, problems: Problems) -> dict | Any:
    if d.get("speedup") is None:
        return {}
    sl = loc.key("speedup")
    m = problems.mapping(d["speedup"], sl, "a mapping like {b200: 1.8}")
    if m is MISSING:
        return MISSING
    out = {}
    for t, v in m.items():
        tl = sl.key(str(t))
        if _known_type(t, tl, ctx, problems) is MISSING:
            continue
        s = problems.number(v, tl, positive=True, maximum=MAX_SPEEDUP)
        if s is not MISSING:
            out[t] = s
    return out


def _min_runtime(d: Mapping, loc: Loc, policy: Policy, problems: Problems) -> float | Any:
    if d.get("min_runtime") is None:
        return 0.0
    ml = loc.key("min_runtime")
    v = problems.duration(d["min_runtime"], ml)
    if v is not MISSING and v > policy.min_runtime_cap_s:
        cap = format_duration(policy.min_runtime_cap_s)
        problems.add(
            ml,
            f"min_runtime {format_duration(v)} is above policy.min_runtime_cap {cap}",
            f"use at most {cap} (or raise policy.min_runtime_cap)",
        )
        return MISSING
    return v


def _command(d: Mapping, loc: Loc, problems: Problems) -> tuple | Any:
    if d.get("command") is None:
        return ()
    cl = loc.key("command")
    if isinstance(d["command"], str):
        problems.add(
            cl,
            "a command is an argv list, not a shell string",
            "write it as a list, e.g. [python, train.py, --lr, '3e-4']",
        )
        return MISSING
    items = problems.sequence(d["command"], cl, "an argv list like [python, train.py]")
    if items is MISSING:
        return MISSING
    if len(items) > MAX_ARGV_ITEMS:
        problems.add(cl, f"the command has {len(items)} arguments, more than {MAX_ARGV_ITEMS}",
                     "put long inputs in a file and pass its path")
        return MISSING
    out, size = [], 0
    for i, a in enumerate(items):
        if isinstance(a, bool) or not isinstance(a, (str, int, float)):
            problems.add(cl.idx(i), f"expected a string, got {type_name(a)}", "quote the argument")
            return MISSING
        a = str(a)
        if "\0" in a or any(0xD800 <= ord(ch) <= 0xDFFF for ch in a):
            problems.add(cl.idx(i), "the argument is not valid UTF-8 text (or holds a NUL byte)",
                         "pass file names and data that are not UTF-8 in a file")
            return MISSING
        size += len(a.encode("utf-8")) + 1
        out.append(a)
    if size > MAX_ARGV_BYTES:
        problems.add(cl, f"the command is {size} bytes long, more than {MAX_ARGV_BYTES}",
                     "put long inputs in a file and pass its path (the command is stored with "
                     "the job and passed to exec, which limits it too)")
        return MISSING
    return tuple(out)


def _placement(
    value: Any, loc: Loc, job_id: str, gpus: int, gpn: Any, allowed: tuple,
    min_runtime: Any, ctx: JobContext, problems: Problems,
) -> Placement | Any:  # fmt: skip
    d = problems.mapping(value, loc, "a mapping like {gpu_type: h100, nodes: [{node: n1, gpus: [0, 1]}]}")
    if d is MISSING:
        return MISSING
    n0 = len(problems)
    problems.known_keys(d, loc, PLACEMENT_KEYS, required=("nodes",))
    gtype: Any = None
    if d.get("gpu_type") is not None:
        gtype = _known_type(d["gpu_type"], loc.key("gpu_type"), ctx, problems)
    nl = loc.key("nodes")
    items = problems.sequence(d.get("nodes"), nl, "a list like [{node: n1, gpus: [0, 1]}]") if "nodes" in d else MISSING
    if items is MISSING or gtype is MISSING:
        return MISSING
    allocs: list[NodeAlloc] = []
    seen_nodes: set[str] = set()
    for i, item in enumerate(items):
        al = nl.idx(i)
        a = problems.mapping(item, al, "a mapping like {node: n1, gpus: [0, 1]}")
        if a is MISSING:
            continue
        problems.known_keys(a, al, ALLOC_KEYS, required=ALLOC_KEYS)
        if "node" not in a or "gpus" not in a:
            continue
        name = problems.string(a["node"], al.key("node"))
        if name is MISSING:
            continue
        node = ctx.nodes.get(name)
        if node is None and not ctx.nodes_complete:
            return MISSING  # the node's own definition is what is wrong (already reported)
        if node is None:
            near = closest(name, list(ctx.nodes))
            hint = f"did you mean {near!r}? " if near else ""
            problems.add(al.key("node"), f"unknown node {name!r}", f"{hint}use a node from the nodes section")
            continue
        if name in seen_nodes:
            problems.add(al.key("node"), f"node {name!r} appears twice in the placement", "list each node once")
            continue
        seen_nodes.add(name)
        if gtype is None:
            gtype = node.gpu_type
        if node.gpu_type != gtype:
            problems.add(
                al.key("node"),
                f"node {name!r} is a {node.gpu_type} node but the placement's gpu_type is {gtype}",
                f"place the job on {gtype} nodes only",
            )
            continue
        idx = problems.sequence(a["gpus"], al.key("gpus"), "a list of GPU indices like [0, 1]")
        if idx is MISSING:
            continue
        good = []
        for k, g in enumerate(idx):
            g = problems.integer(g, al.key("gpus").idx(k))
            if g is MISSING:
                continue
            if not 0 <= g < node.gpus:
                problems.add(
                    al.key("gpus").idx(k),
                    f"GPU index {g} is out of range for node {name!r} with {node.gpus} GPUs",
                    f"use indices 0..{node.gpus - 1}",
                )
                continue
            if g in good:
                problems.add(al.key("gpus").idx(k), f"GPU index {g} listed twice", "list each GPU once")
                continue
            good.append(g)
        if gpn not in (None, MISSING) and len(idx) != gpn:
            problems.add(
                al.key("gpus"),
                f"{len(idx)} GPU{'s' if len(idx) != 1 else ''} on node {name!r} but the job has "
                f"gpus_per_node {gpn}",
                f"give it exactly {gpn} GPUs on each node",
            )
        allocs.append(NodeAlloc(name, tuple(sorted(good))))
    if len(problems) > n0:
        return MISSING
    if allowed and gtype not in allowed:
        problems.add(
            loc.key("gpu_type"),
            f"placed on {gtype} but the job allows only {', '.join(allowed)}",
            "place it on an allowed gpu_type or widen its gpu_types",
        )
        return MISSING
    total = sum(len(a.gpus) for a in allocs)
    if total != gpus:
        problems.add(
            nl,
            f"placement holds {total} GPUs but the job asks for {gpus}",
            "make the placement hold exactly the job's GPUs",
        )
        return MISSING
    allocated = True if min_runtime is MISSING else min_runtime > 0
    return Placement(job_id=job_id, gpu_type=gtype, nodes=tuple(allocs), allocated=allocated)
