"""Drain progress from the latest plan, as `optalloc jobs` and `optalloc gpus --state` print it:
per drain node, the protected jobs that stay (until when), the jobs leaving, and when it is
empty, or that it is ready for repair (optalloc.types.DrainStatus)."""

from __future__ import annotations

import time
from typing import Any, Mapping


def _when(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(float(t)))


def drain_lines(plan: Mapping[str, Any], nodes: set[str] | None = None) -> list[str]:
    """One line per drain node of the plan (only `nodes` when given)."""
    out = []
    for d in plan.get("drains") or ():
        if nodes is not None and d.get("node") not in nodes:
            continue
        if d.get("ready"):
            out.append(f"drain {d['node']}: empty, ready for repair")
            continue
        parts = []
        if d.get("staying"):
            parts.append(f"{len(d['staying'])} protected job(s) stay: {', '.join(d['staying'])}")
        if d.get("leaving"):
            parts.append(f"leaving after their notice: {', '.join(d['leaving'])}")
        parts.append(f"empty by {_when(d.get('empty_at'))}")
        out.append(f"drain {d['node']}: " + "; ".join(parts))
    return out
