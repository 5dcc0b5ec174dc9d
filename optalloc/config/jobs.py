"""The `jobs` section (and job files for `optalloc submit`), validated against the cluster,
the org tree and the policy: projects are leaves, gangs take a shape the nodes can hold (the one
rule of optalloc/shape.py), running jobs hold valid, non-overlapping placements."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from optalloc.config.job_context import JobContext
from optalloc.config.job_fields import (
    command_field,
    gpu_type_list,
    gpus_per_node,
    min_runtime_field,
    project_field,
    speedup_field,
)
from optalloc.config.job_fit import check_fits
from optalloc.config.job_placement import parse_placement
from optalloc.config.problems import MISSING, Loc, Piece, Problems, show_list
from optalloc.types import Job, JobState, frozen_map
from optalloc.units import MAX_JOB_GPUS, MAX_PRIORITY

__all__ = ["JOB_KEYS", "JobContext", "parse_job", "parse_job_pieces", "without_run_keys"]

JOB_KEYS = (
    "id", "project", "gpus", "gpus_per_node", "nodes", "gpu_types", "speedup", "min_runtime",
    "resumable", "priority", "submit_time", "duration", "checkpoint_interval", "command",
    "state", "start_time", "placement",
)  # fmt: skip
JOB_STATES = tuple(s.value for s in JobState)


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


def without_run_keys(value: Any, source: str, problems: Problems) -> Any:
    """A submitted job file's content (a `jobs` list or one job mapping) with the keys of a
    job that already runs (state other than queued, start_time, placement) taken out, each one
    reported: `submit` only queues jobs; a runner starts them when a plan places them."""
    if isinstance(value, Mapping):
        located = [(value, Loc(source))]
    elif isinstance(value, list):
        located = [(item, Loc(source, "jobs").idx(i)) for i, item in enumerate(value)]
    else:
        return value  # parse_job_pieces reports the shape
    out = []
    for item, loc in located:
        if not isinstance(item, Mapping):
            out.append(item)
            continue
        bad = [k for k in ("state", "start_time", "placement") if k in item
               and not (k == "state" and item[k] == JobState.QUEUED.value)]
        who = _raw_id(item)
        for key in bad:
            problems.add(loc.key(key), f"job {who!r} sets `{key}:`" if who else f"sets `{key}:`",
                         "remove it: submit only queues jobs (a runner starts them when a plan "
                         "places them)")
        out.append({k: v for k, v in item.items() if k not in bad})
    return out[0] if isinstance(value, Mapping) else out


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
    project = project_field(d, loc, ctx, problems)
    gpus = (problems.integer(d["gpus"], loc.key("gpus"), maximum=MAX_JOB_GPUS)
            if "gpus" in d else MISSING)
    if gpus is not MISSING and gpus <= 0:
        problems.add(loc.key("gpus"), f"a job needs at least 1 GPU, got {gpus}", "set gpus: 1 or more")
        gpus = MISSING
    allowed = gpu_type_list(d, loc, ctx, problems)
    gpn = gpus_per_node(d, loc, gpus, problems)
    speedup = speedup_field(d, loc, ctx, problems)
    min_runtime = min_runtime_field(d, loc, ctx.policy, problems)
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
    command = command_field(d, loc, problems)
    state = JobState.QUEUED
    if "state" in d:
        s = problems.choice(d["state"], loc.key("state"), JOB_STATES, "job state")
        state = MISSING if s is MISSING else JobState(s)
    if gpus is not MISSING and allowed is not MISSING and ctx.nodes_complete:
        check_fits(loc, gpus, gpn, allowed, ctx, problems)
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
            placement = parse_placement(
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
