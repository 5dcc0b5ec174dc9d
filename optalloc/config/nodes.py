"""The cluster sections: `gpu_types` and `nodes` (with compact node ranges like h100-[001-128])."""

from __future__ import annotations

import itertools
import re
from typing import Any, Sequence

from optalloc.config.problems import MISSING, Loc, Piece, Problems, closest, show_list
from optalloc.types import GpuType, Node, NodeState
from optalloc.units import MAX_BILLING_WEIGHT, MAX_NODE_GPUS, MAX_NODES

MAX_EXPANDED_NODES = 100_000
_GROUP_RE = re.compile(r"\[([^\[\]]*)\]")
_ITEM_RE = re.compile(r"^\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?$")  # ASCII digits only


def _expand_group(body: str, whole: str) -> list[str]:
    out: list[str] = []
    for item in body.split(","):
        m = _ITEM_RE.match(item)
        if not m:
            raise ValueError(
                f"bad range {item.strip()!r} in {whole!r}; write ranges like [001-128] or [1-3,7]"
            )
        lo_s, hi_s = m.group(1), m.group(2)
        width = len(lo_s) if len(lo_s) > 1 and lo_s.startswith("0") else 0
        if hi_s is None:
            out.append(lo_s)
            continue
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise ValueError(
                f"range {lo_s}-{hi_s} in {whole!r} runs backwards; write it low to high"
            )
        if hi - lo + 1 > MAX_EXPANDED_NODES:
            raise ValueError(f"range {lo_s}-{hi_s} in {whole!r} is {hi - lo + 1} names, more "
                             f"than {MAX_EXPANDED_NODES} (the most nodes of a cluster)")
        out.extend(str(i).zfill(width) for i in range(lo, hi + 1))
    return out


def expand_node_names(pattern: str) -> list[str]:
    """Expand a compact node name into the names it stands for.

    ``h100-[001-128]`` -> h100-001 ... h100-128 (zero padding of the lower bound kept),
    ``a[1-3,7]`` -> a1, a2, a3, a7; several bracket groups expand as a product
    (``r[1-2]n[1-2]`` -> r1n1, r1n2, r2n1, r2n2); a name without brackets is itself.
    Raises ValueError for malformed or backwards ranges.
    """
    if not isinstance(pattern, str):
        raise ValueError(f"a node name must be a string, got {pattern!r}")
    parts = _GROUP_RE.split(pattern)  # literal, group, literal, group, ..., literal
    literals, groups = parts[0::2], parts[1::2]
    if any("[" in lit or "]" in lit for lit in literals):
        raise ValueError(f"unbalanced brackets in {pattern!r}; write ranges like name-[001-128]")
    if not groups:
        return [pattern]
    choices = [_expand_group(g, pattern) for g in groups]
    total = 1
    for c in choices:
        total *= len(c)
    if total > MAX_EXPANDED_NODES:
        raise ValueError(f"{pattern!r} expands to {total} names, more than {MAX_EXPANDED_NODES}")
    names = []
    for combo in itertools.product(*choices):
        pieces = [literals[0]]
        for value, lit in zip(combo, literals[1:]):
            pieces.append(value)
            pieces.append(lit)
        names.append("".join(pieces))
    return names


# --------------------------------------------------------------------------- sections


GPU_TYPE_KEYS = ("name", "billing_weight")
NODE_KEYS = ("name", "gpu_type", "gpus", "state")
NODE_STATES = tuple(s.value for s in NodeState)


def _entries(pieces: Sequence[Piece], section: str, problems: Problems, what: str, example: str):
    """(location, mapping) of every well-formed entry of a list section across the config's
    files; malformed lists and entries are recorded as problems and skipped."""
    for piece in pieces:
        loc0 = Loc(piece.source, section)
        items = problems.sequence(piece.value, loc0, what)
        if items is MISSING:
            continue
        for i, item in enumerate(items):
            loc = loc0.idx(i)
            d = problems.mapping(item, loc, example)
            if d is not MISSING:
                yield loc, d


def parse_gpu_types(pieces: Sequence[Piece], problems: Problems) -> tuple[GpuType, ...]:
    out: list[GpuType] = []
    first_seen: dict[str, Loc] = {}
    for loc, d in _entries(pieces, "gpu_types", problems, "a list of gpu types",
                           "a mapping like {name: h100, billing_weight: 1.0}"):
        problems.known_keys(d, loc, GPU_TYPE_KEYS, required=("name",))
        name = problems.string(d["name"], loc.key("name")) if "name" in d else MISSING
        weight = (
            problems.number(d["billing_weight"], loc.key("billing_weight"), positive=True,
                            maximum=MAX_BILLING_WEIGHT)
            if "billing_weight" in d
            else 1.0
        )
        if name is MISSING:
            continue
        if name in first_seen:
            problems.add(
                loc.key("name"),
                f"duplicate gpu_type {name!r} (first defined at {first_seen[name]})",
                "give each gpu_type a unique name",
            )
            continue
        first_seen[name] = loc
        # a bad weight is recorded; the name still counts so references to it are checked
        out.append(GpuType(name=name, billing_weight=1.0 if weight is MISSING else weight))
    return tuple(out)


def parse_nodes(
    pieces: Sequence[Piece], gpu_types: Sequence[str], problems: Problems
) -> tuple[Node, ...]:
    """Nodes with compact names expanded. `gpu_types` are the known type names."""
    out: list[Node] = []
    first_seen: dict[str, Loc] = {}
    over_cap = False
    for loc, d in _entries(pieces, "nodes", problems, "a list of nodes",
                           "a mapping like {name: h100-[001-128], gpu_type: h100, gpus: 8}"):
        problems.known_keys(d, loc, NODE_KEYS, required=("name", "gpu_type", "gpus"))
        names: list[str] | Any = MISSING
        if "name" in d:
            raw = problems.string(d["name"], loc.key("name"))
            if raw is not MISSING and any(ch.isspace() for ch in raw):
                problems.add(loc.key("name"), f"{raw!r} contains white space",
                             "node names are host names: no spaces (a list of names is a "
                             "range like h100-[001-128] or separate entries)")
                raw = MISSING
            if raw is not MISSING and not over_cap:
                try:
                    names = expand_node_names(raw)
                except ValueError as err:
                    problems.add(loc.key("name"), str(err))
        gtype: Any = MISSING
        if "gpu_type" in d:
            gtype = problems.string(d["gpu_type"], loc.key("gpu_type"))
            if gtype is not MISSING and gtype not in gpu_types:
                near = closest(gtype, gpu_types)
                hint = f"did you mean {near!r}? " if near else ""
                problems.add(
                    loc.key("gpu_type"),
                    f"unknown gpu_type {gtype!r}",
                    f"{hint}use one of the gpu_types: {show_list(gpu_types)}, or add it to gpu_types",
                )
                gtype = MISSING
        gpus: Any = MISSING
        if "gpus" in d:
            gpus = problems.integer(d["gpus"], loc.key("gpus"), maximum=MAX_NODE_GPUS)
            if gpus is not MISSING and gpus <= 0:
                problems.add(
                    loc.key("gpus"),
                    f"a node must have at least 1 GPU, got {gpus}",
                    "give its GPU count, or remove the node (use state: down for a dead one)",
                )
                gpus = MISSING
        state: Any = NodeState.UP
        if "state" in d:
            s = problems.choice(d["state"], loc.key("state"), NODE_STATES, "node state")
            state = MISSING if s is MISSING else NodeState(s)
        if names is MISSING:
            continue
        if len(first_seen) + len(names) > MAX_NODES:  # ranges split over entries add up
            problems.add(loc.key("name"), f"the cluster would have more than {MAX_NODES} nodes "
                         f"({len(first_seen)} before this entry, {len(names)} in it)",
                         "check the ranges; a config describes one cluster")
            over_cap = True  # later entries are not expanded (nor reported) at all
            continue
        dups: dict[str, list[str]] = {}
        for name in names:
            if name in first_seen:
                dups.setdefault(str(first_seen[name]), []).append(name)
                continue
            first_seen[name] = loc
            if gtype is not MISSING and gpus is not MISSING:
                st = NodeState.UP if state is MISSING else state
                out.append(Node(name=name, gpu_type=gtype, gpus=gpus, state=st))
        for where, dup in dups.items():
            what = "duplicate node name" + ("s " if len(dup) > 1 else " ")
            problems.add(
                loc.key("name"),
                f"{what}{show_list(dup, 4)} (also defined at {where})",
                "each node name must appear once after range expansion",
            )
    return tuple(out)
