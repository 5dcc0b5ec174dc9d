"""Could the job ever run? A job that no nodes of an allowed gpu_type could hold at once is a
config error, not a wait. The shape is the one rule of optalloc/shape.py (the epoch model and
the baselines use it too): a 20-GPU job on 8-GPU nodes is 8 + 8 + 4 on three nodes; a per-node
gang (`gpus_per_node` below the node size) takes distinct nodes. A job runs on one gpu_type, so
each allowed type is checked on its own."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from optalloc.config.job_context import JobContext
from optalloc.config.problems import Loc, MISSING, Problems, show_list
from optalloc.shape import PIECES, WHOLE, fits_nodes, shapes


def _on_type(gpus: int, gpn: int | None, sizes: Mapping[int, int]):
    """(shape, size, pieces, rem, fits) of the job on nodes of one type ({GPUs: count})."""
    node_gpus = np.repeat(np.fromiter(sizes, dtype=np.int64), list(sizes.values()))
    shape, size, pieces, rem, valid = shapes([gpus], [gpn or 0], [int(node_gpus.max())])
    ok = bool(valid[0, 0] and fits_nodes(size[0, 0], pieces[0, 0], rem[0, 0], node_gpus))
    return int(shape[0, 0]), int(size[0, 0]), int(pieces[0, 0]), int(rem[0, 0]), ok


def check_fits(
    loc: Loc, gpus: int, gpn: Any, allowed: tuple, ctx: JobContext, problems: Problems
) -> None:
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
    on = {t: _on_type(gpus, gpn, sz) for t, sz in sizes.items()}
    if any(v[-1] for v in on.values()):
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
        return
    if gpn is not None and gpn > biggest:
        problems.add(
            loc.key("gpus_per_node"),
            f"gpus_per_node {gpn} is more than any allowed node has ({biggest})",
            f"use gpus_per_node <= {biggest}",
        )
        return
    t = max(caps, key=caps.get)  # the largest allowed type: the closest to fitting
    shape, size, pieces, rem, _ = on[t]
    counts = ", ".join(f"{k} of {s} GPUs" for s, k in sorted(sizes[t].items(), reverse=True))
    if shape == PIECES:
        problems.add(
            loc.key("gpus_per_node"),
            f"{pieces} nodes with {size} GPUs each do not fit on any allowed gpu_type (a "
            f"per-node gang takes distinct nodes; {t} has {counts})",
            "use a larger gpus_per_node or fewer GPUs",
        )
    elif shape == WHOLE:
        more = f" and one more node for the other {rem}" if rem else ""
        problems.add(
            loc.key("gpus"),
            f"{gpus} GPUs take {pieces} whole nodes of {size} GPUs{more}, more than any allowed "
            f"gpu_type has ({t} has {counts})",
            "ask for fewer GPUs, or set gpus_per_node to spread the gang over smaller pieces",
        )
    else:  # pragma: no cover - a single-node shape fits the type's largest node
        sz = show_list(sorted({s for v in sizes.values() for s in v}))
        problems.add(loc.key("gpus"), f"{gpus} GPUs fit on no node (node sizes: {sz})",
                     "ask for fewer GPUs")
