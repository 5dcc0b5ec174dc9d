"""`optalloc gpus`: this machine's GPUs (NVML, else the config node's), with health and use, and
with --state the node's drain progress from the latest plan."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from optalloc.errors import OptallocError


def _render(table: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1] for row in table)


def gpu_rows(inventory, node) -> tuple[str, list[dict[str, Any]]]:
    """(source, rows): NVML's GPUs with health and utilization, else the config node's."""
    from optalloc.runners.nvml import config_gpus

    if inventory.available:
        samples = {s.index: s for s in inventory.sample()}
        out = []
        for g in inventory.gpus():
            s = samples.get(g.index)
            out.append({**dataclasses.asdict(g), "healthy": g.healthy,
                        "gpu_util_pct": None if s is None else s.gpu_util_pct,
                        "memory_used_bytes": None if s is None else s.memory_used_bytes,
                        "processes": [] if s is None else [p.pid for p in s.processes]})
        return "nvml", out
    if node is None:
        raise OptallocError(f"no NVIDIA GPUs visible ({inventory.reason}); pass --config "
                            "to show the GPUs the config declares for this machine")
    return f"config node {node.name}", [
        {**dataclasses.asdict(g), "healthy": True, "gpu_util_pct": None,
         "memory_used_bytes": None, "processes": []} for g in config_gpus(node)]


def cmd_gpus(args: argparse.Namespace) -> int:
    from optalloc.runners import resolve_local_node
    from optalloc.runners.nvml import GpuInventory

    inv = GpuInventory.open()
    try:
        node = None
        if not inv.available and args.config:
            from optalloc.config import load_config

            node = resolve_local_node(load_config(args.config), inv, args.node)
        source, rows = gpu_rows(inv, node)
    finally:
        inv.close()
    drains: list[str] = []
    if args.state:
        from optalloc.cli.drains import drain_lines
        from optalloc.dashboard.readonly import ReadOnlyStore

        names = {node.name} if node is not None else None  # by NVML: every drain
        with ReadOnlyStore(args.state) as store:
            plan = (store.last_epoch() or {}).get("plan") or {}
        drains = drain_lines(plan, names)
        if not drains and names:
            drains = [f"drain: {', '.join(sorted(names))} not draining in the latest plan"]
    if args.json:
        print(json.dumps({"source": source, "gpus": rows, "drains": drains}, indent=2))
        return 0
    table = [["GPU", "TYPE", "MODEL", "MEMORY", "UTIL", "UUID", "HEALTH"]]
    for r in rows:
        mem = "-" if r["memory_total_bytes"] is None else f"{r['memory_total_bytes'] / 2**30:.0f}GiB"
        util = "-" if r["gpu_util_pct"] is None else f"{r['gpu_util_pct']:.0f}%"
        health = "ok" if r["healthy"] else "; ".join(r["problems"])
        table.append([str(r["index"]), r["gpu_type"], r["model"], mem, util, r["uuid"] or "-",
                      health])
    print(f"# source: {source}", file=sys.stderr)
    print(_render(table))
    for line in drains:
        print(line)
    return 0
