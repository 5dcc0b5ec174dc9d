"""The fields of one job mapping, each parsed and checked on its own (optalloc.config.jobs puts
them together)."""

from __future__ import annotations

from typing import Any, Mapping

from optalloc.config.job_context import JobContext
from optalloc.config.problems import MISSING, Loc, Problems, closest, show_list, type_name
from optalloc.types import Policy
from optalloc.units import (
    MAX_ARGV_BYTES,
    MAX_ARGV_ITEMS,
    MAX_JOB_GPUS,
    MAX_NODE_GPUS,
    MAX_SPEEDUP,
    format_duration,
)


def project_field(d: Mapping, loc: Loc, ctx: JobContext, problems: Problems) -> str | Any:
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


def known_type(t: Any, loc: Loc, ctx: JobContext, problems: Problems) -> str | Any:
    t = problems.string(t, loc)
    if t is MISSING:
        return MISSING
    if t not in ctx.gpu_types:
        near = closest(t, ctx.gpu_types)
        hint = f"did you mean {near!r}? " if near else ""
        problems.add(loc, f"unknown gpu_type {t!r}", f"{hint}use one of: {show_list(ctx.gpu_types)}")
        return MISSING
    return t


def gpu_type_list(d: Mapping, loc: Loc, ctx: JobContext, problems: Problems) -> tuple | Any:
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
        t = known_type(t, tl.idx(i), ctx, problems)
        if t is MISSING:
            return MISSING
        if t not in out:
            out.append(t)
    return tuple(out)


def gpus_per_node(d: Mapping, loc: Loc, gpus: Any, problems: Problems) -> int | None | Any:
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
    # gpus_per_node at or above the job's GPUs is a single-node job (optalloc/shape.py); below
    # it, the job is a per-node gang and gpus_per_node must divide it
    if gpn is not None and gpus is not MISSING and gpn < gpus and gpus % gpn:
        problems.add(
            loc.key("gpus_per_node"),
            f"{gpus} GPUs are not a multiple of gpus_per_node {gpn}",
            f"ask for a multiple of {gpn} GPUs, or change gpus_per_node",
        )
        return MISSING
    return gpn



def speedup_field(d: Mapping, loc: Loc, ctx: JobContext, problems: Problems) -> dict | Any:
    if d.get("speedup") is None:
        return {}
    sl = loc.key("speedup")
    m = problems.mapping(d["speedup"], sl, "a mapping like {b200: 1.8}")
    if m is MISSING:
        return MISSING
    out = {}
    for t, v in m.items():
        tl = sl.key(str(t))
        if known_type(t, tl, ctx, problems) is MISSING:
            continue
        s = problems.number(v, tl, positive=True, maximum=MAX_SPEEDUP)
        if s is not MISSING:
            out[t] = s
    return out


def min_runtime_field(d: Mapping, loc: Loc, policy: Policy, problems: Problems) -> float | Any:
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


def command_field(d: Mapping, loc: Loc, problems: Problems) -> tuple | Any:
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
    if out and not out[0].strip():
        problems.add(cl.idx(0), "the program to run is empty",
                     "name the program first, e.g. [python, train.py]")
        return MISSING
    if size > MAX_ARGV_BYTES:
        problems.add(cl, f"the command is {size} bytes long, more than {MAX_ARGV_BYTES}",
                     "put long inputs in a file and pass its path (the command is stored with "
                     "the job and passed to exec, which limits it too)")
        return MISSING
    return tuple(out)
