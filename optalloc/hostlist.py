"""Compact, Slurm-style lists of node names and GPU indices, for tables people read.

    compress_names(["h100-018", ..., "h100-033", "b200-01"]) -> "h100-[018-033],b200-01"
    compress_indices([0, 1, 2, 3, 5])                          -> "0-3,5"
    compress_placement({"h100-018": [0..7], ..., "h100-001": [1, 2]})
                                                 -> "h100-[018-033]:0-7 h100-001:1-2"

`compress_names` is the inverse of `optalloc.config.nodes.expand_node_names` (which reads the
same syntax in the config): expanding its output gives the same names, each once. Names are
grouped by everything around their last run of digits and by that run's length, so zero padding
survives: h100-099 and h100-100 join as h100-[099-100], n9 and n10 stay apart as n9,n10. A name
with a bracket or comma in it is left as it is.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Sequence

_LAST_DIGITS = re.compile(r"^(.*?)(\d+)(\D*)$")


def _ranges(numbers: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted unique numbers -> maximal runs (lo, hi)."""
    out: list[tuple[int, int]] = []
    for n in numbers:
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def compress_indices(indices: Iterable[int]) -> str:
    """GPU indices as runs: [0, 1, 2, 3, 5] -> "0-3,5"; empty -> ""."""
    nums = sorted(set(int(i) for i in indices))
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in _ranges(nums))


def compress_names(names: Iterable[str]) -> str:
    """Node names as Slurm writes them: groups in order of first appearance, numbers sorted."""
    groups: dict[tuple, list[tuple[int, str]]] = {}
    for name in dict.fromkeys(names):
        m = _LAST_DIGITS.match(name)
        if m is None or any(c in name for c in "[],"):
            groups.setdefault(("", name, None), [])
            continue
        prefix, digits, suffix = m.groups()
        groups.setdefault((prefix, suffix, len(digits)), []).append((int(digits), digits))
    parts = []
    for (prefix, suffix, width), members in groups.items():
        if width is None:
            parts.append(suffix)  # the literal name
            continue
        members.sort()
        if len(members) == 1:
            parts.append(f"{prefix}{members[0][1]}{suffix}")
            continue
        runs = _ranges([n for n, _ in members])
        body = ",".join(
            str(a).zfill(width) if a == b else f"{str(a).zfill(width)}-{str(b).zfill(width)}"
            for a, b in runs
        )
        parts.append(f"{prefix}[{body}]{suffix}")
    return ",".join(parts)


def compress_placement(nodes: Mapping[str, Sequence[int]] | Sequence[tuple[str, Sequence[int]]]) -> str:
    """Nodes with their GPU indices, nodes that hold the same indices written together:
    "h100-[018-033]:0-7 h100-001:1-4". Groups in order of first appearance."""
    items = nodes.items() if isinstance(nodes, Mapping) else nodes
    by_gpus: dict[str, list[str]] = {}
    for node, gpus in items:
        by_gpus.setdefault(compress_indices(gpus), []).append(node)
    return " ".join(f"{compress_names(ns)}:{g}" for g, ns in by_gpus.items())
