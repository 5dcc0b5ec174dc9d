"""A running job's `placement:`: known nodes of one gpu_type, GPU indices in range and listed
once, the job's GPUs exactly, and the job's shape (optalloc.shape) when it sets gpus_per_node."""

from __future__ import annotations

from typing import Any

from optalloc.config.job_context import JobContext
from optalloc.config.job_fields import known_type
from optalloc.config.problems import MISSING, Loc, Problems, closest
from optalloc.types import NodeAlloc, Placement

PLACEMENT_KEYS = ("gpu_type", "nodes")
ALLOC_KEYS = ("node", "gpus")


def parse_placement(
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
        gtype = known_type(d["gpu_type"], loc.key("gpu_type"), ctx, problems)
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
        per_node = None if gpn in (None, MISSING) else min(gpn, gpus)  # gpn >= gpus: one node
        if per_node is not None and len(idx) != per_node:
            problems.add(
                al.key("gpus"),
                f"{len(idx)} GPU{'s' if len(idx) != 1 else ''} on node {name!r} but the job has "
                f"gpus_per_node {gpn}",
                f"give it exactly {per_node} GPUs on each node",
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
