"""`optalloc validate PATH [--json]`: check a config (file or directory) and summarize it.

On success prints the GPU types, nodes and GPUs per type and state, the org tree with each
node's share and entitlement per gpu_type, the policy and the jobs; exit 0. A scenario (a
config with `workload:` / `simulation:`) is checked as the simulator reads it: its trace read
and checked ($OPTALLOC_TRACES), or its synthetic workload generated, and the workload
summarized (jobs, GPU-hours, the trace jobs the cluster cannot run); until stop 43 a scenario
whose trace was missing or broken passed here and failed only in `optalloc sim`. On problems
the dispatcher prints every one of them (ConfigError, OptallocError) and exits 2.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from optalloc.config import load_document
from optalloc.org import OrgTree
from optalloc.types import Config, JobState, NodeState
from optalloc.units import format_duration


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="check a YAML config (file or directory) and print a summary",
        description=(
            "Validate a config or scenario: every problem is reported with its file, key path "
            "and a fix (exit 2); a valid config prints a summary (exit 0)."
        ),
    )
    p.add_argument("path", help="YAML config file or directory of *.yaml files")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    config, extras = load_document(args.path)
    summary = summarize(config, extras)
    if "workload" in extras or "simulation" in extras:
        summary["scenario"] = scenario_summary(args.path, config, extras)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(render(summary))
    return 0


def summarize(config: Config, extras: dict | None = None) -> dict[str, Any]:
    """A JSON-ready summary of a valid config."""
    types = [g.name for g in config.gpu_types]
    tree = OrgTree.build(config.org, types)
    nodes: dict[str, dict[str, Any]] = {}
    for t in types:
        on = [n for n in config.nodes if n.gpu_type == t]
        nodes[t] = {
            "nodes": len(on),
            "gpus": sum(n.gpus for n in on),
            "gpus_by_state": {
                s.value: sum(n.gpus for n in on if n.state is s) for s in NodeState
            },
            "nodes_by_state": {s.value: sum(1 for n in on if n.state is s) for s in NodeState},
        }
    org = []
    for i, name in enumerate(tree.names):
        org.append(
            {
                "name": name,
                "depth": int(tree.depth[i]),
                "leaf": bool(tree.is_leaf[i]),
                "share": {t: float(tree.share[i, k]) for k, t in enumerate(types)},
                "entitlement": {t: float(tree.entitlement[i, k]) for k, t in enumerate(types)},
            }
        )
    p = config.policy
    policy = {
        "lookback": format_duration(p.lookback_s),
        "usage_mode": p.usage_mode.value,
        "half_life": format_duration(p.half_life_s),
        "min_runtime_cap": format_duration(p.min_runtime_cap_s),
        "epoch": format_duration(p.epoch_s),
        "grace": format_duration(p.grace_s),
        "restart_overhead": format_duration(p.restart_overhead_s),
        "checkpoint_interval": format_duration(p.checkpoint_interval_s),
        "solver": {
            "backend": p.solver.backend,
            "time_limit": format_duration(p.solver.time_limit_s),
            "mip_gap": p.solver.mip_gap,
            "threads": p.solver.threads,
            "exact_up_to": p.solver.exact_up_to,
        },
    }
    jobs: dict[str, Any] = {}
    for st in JobState:
        sel = [j for j in config.jobs if j.state is st]
        jobs[st.value] = {
            "jobs": len(sel),
            "gpus": sum(j.gpus for j in sel),
            "unallocated": sum(1 for j in sel if not j.allocated),
        }
    return {
        "sources": list(config.sources),
        "gpu_types": [{"name": g.name, "billing_weight": g.billing_weight} for g in config.gpu_types],
        "nodes": nodes,
        "org": org,
        "policy": policy,
        "jobs": jobs,
        "extra_sections": sorted(extras or {}),
    }


def render(s: dict[str, Any]) -> str:
    lines = [f"OK: {', '.join(s['sources'])}"]
    lines.append("gpu types: " + ", ".join(f"{g['name']} (billing {g['billing_weight']:g})" for g in s["gpu_types"]))
    lines.append("nodes:")
    for t, n in s["nodes"].items():
        states = ", ".join(
            f"{st} {n['nodes_by_state'][st]} nodes/{n['gpus_by_state'][st]} GPUs"
            for st in n["gpus_by_state"]
            if n["nodes_by_state"][st]
        )
        lines.append(f"  {t}: {n['nodes']} nodes, {n['gpus']} GPUs ({states or 'none'})")
    types = [g["name"] for g in s["gpu_types"]]
    title = "org tree: share / entitlement"
    labels = ["  " * o["depth"] + o["name"] + ("" if o["leaf"] else "/") for o in s["org"]]
    width = max(len(title), *(len(x) for x in labels)) + 2
    lines.append(f"{title:<{width + 2}}" + "".join(f"{t:>16}" for t in types))
    for label, o in zip(labels, s["org"]):
        cells = "".join(
            f"{_share(o['share'][t]) + ' / ' + format(100 * o['entitlement'][t], '.1f') + '%':>16}"
            for t in types
        )
        lines.append(f"  {label:<{width}}{cells}")
    p = s["policy"]
    mode = p["usage_mode"] + (f" (half-life {p['half_life']})" if p["usage_mode"] == "decay" else "")
    lines.append(
        f"policy: lookback {p['lookback']} {mode}, min_runtime cap {p['min_runtime_cap']}, "
        f"epoch {p['epoch']}, grace {p['grace']}, restart overhead {p['restart_overhead']}, "
        f"checkpoint {p['checkpoint_interval']}"
    )
    sv = p["solver"]
    lines.append(
        f"solver: {sv['backend']}, time limit {sv['time_limit']}, mip gap {sv['mip_gap']:g}, "
        f"threads {sv['threads']}, exact up to {sv['exact_up_to']} integer columns"
    )
    q, r = s["jobs"]["queued"], s["jobs"]["running"]
    lines.append(
        f"jobs: {q['jobs']} queued ({q['gpus']} GPUs, {q['unallocated']} unallocated), "
        f"{r['jobs']} running ({r['gpus']} GPUs, {r['unallocated']} unallocated)"
    )
    sc = s.get("scenario")
    if sc:
        lines.append(
            f"scenario: {sc['workload']} workload, {sc['jobs']:,} jobs ({sc['debug']:,} debug, "
            f"{sc['unallocated']:,} unallocated, {sc['gpu_hours']:,.0f} GPU-hours of work), "
            f"duration {sc['duration']}, epoch {sc['epoch']}, seed {sc['seed']}"
            + (f", {sc['node_events']} node events" if sc["node_events"] else ""))
        from optalloc.sim.report_tables import dropped_line

        line = dropped_line(sc["dropped"])
        if line:
            lines.append(line)
    elif s["extra_sections"]:
        lines.append(f"scenario sections (checked by the simulator): {', '.join(s['extra_sections'])}")
    return "\n".join(lines)


def scenario_summary(path: str, config: Config, extras: dict) -> dict[str, Any]:
    """The scenario as the simulator reads it (optalloc.sim.scenario: every problem of its
    `workload` / `simulation` sections, or a trace that cannot be read, raises), summarized."""
    from pathlib import Path

    from optalloc.sim.scenario import scenario_from_parts

    p = Path(path)
    sc = scenario_from_parts(config, extras, str(p), name=p.stem,
                             base_dir=p if p.is_dir() else p.parent)
    w = sc.workload
    jobs = sc.jobs
    return {
        "workload": str((extras.get("workload") or {}).get("source", "jobs")),
        "jobs": len(jobs),
        "debug": w.n_debug if w is not None else 0,
        "unallocated": sum(1 for j in jobs if not j.allocated),
        "gpu_hours": (w.gpu_hours if w is not None
                      else sum(j.gpus * (j.duration_s or 0.0) for j in jobs) / 3600.0),
        "dropped": dict(w.dropped) if w is not None else {},
        "duration": format_duration(sc.duration_s),
        "epoch": format_duration(sc.epoch_s),
        "seed": sc.seed,
        "node_events": len(sc.node_events),
    }


def _share(x: float) -> str:
    return f"{x:g}"
