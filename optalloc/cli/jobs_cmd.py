"""`optalloc submit`, `optalloc jobs` and `optalloc gpus`: the user's side of the queue.

    optalloc submit --config C --state DB JOBS.yaml                     [--runner local|slurm]
    optalloc submit --config C --state DB --project A1 --gpus 8 [--gpu-type h100]
                    [--min-runtime 2h] [--resumable|--no-resumable] [--priority K] [--id ID]
                    -- python train.py --lr 3e-4                          [--runner local|slurm]
    optalloc jobs --state DB [--json] [--all]
    optalloc gpus [--config C] [--node NAME] [--json]

A submitted job is validated against the config exactly like a `jobs:` entry (same errors),
then added to the state DB as queued; the next `optalloc epoch` plans it. With `--runner slurm`
it is also submitted to Slurm held (`sbatch -H`, optalloc's fields in --comment) so Slurm users
see it in squeue; the Slurm runner releases it when a plan places it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import secrets
import sys
import time
from typing import Any

from optalloc.errors import OptallocError


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "submit",
        help="add a job to the queue (a job file, or flags plus `-- CMD ARGS...`)",
        description="Validate a job against the config and queue it in the state DB. Give a "
                    "job file, or --project/--gpus and the command after `--`.",
    )
    s.add_argument("--config", required=True, help="YAML config (file or directory)")
    s.add_argument("--state", required=True, help="state DB (SQLite)")
    s.add_argument("--project", help="leaf of the org tree the job is charged to")
    s.add_argument("--gpus", type=int, help="number of GPUs (a gang: all at once)")
    s.add_argument("--gpu-type", action="append", dest="gpu_types", metavar="T",
                   help="allowed GPU type (repeat for several; default any)")
    s.add_argument("--gpus-per-node", type=int)
    s.add_argument("--min-runtime", default="0",
                   help="protected minimum runtime, e.g. 15m or 2h (0 = unallocated)")
    s.add_argument("--resumable", action=argparse.BooleanOptionalAction, default=True,
                   help="can be preempted and requeued (default: yes)")
    s.add_argument("--priority", type=int, default=0, help="order within the project")
    s.add_argument("--checkpoint-interval", help="how often the job checkpoints, e.g. 30m")
    s.add_argument("--duration", help="expected work, e.g. 10h (optional)")
    s.add_argument("--id", dest="job_id", help="job id (default: PROJECT-TIME-RANDOM)")
    s.add_argument("--runner", choices=("local", "slurm"), default="local",
                   help="where it will run (slurm: also `sbatch -H` it now)")
    s.add_argument("--partition", help="slurm: partition")
    s.add_argument("--slurm-conf", help="slurm: SLURM_CONF for the Slurm commands")
    s.add_argument("--now", help="submit time, seconds or ISO-8601 (default: now)")
    s.add_argument("--json", action="store_true", help="print the queued jobs as JSON")
    s.add_argument("rest", nargs="*", metavar="FILE | -- CMD ARGS",
                   help="a job file, or (with --project) the command after `--`")
    s.set_defaults(func=cmd_submit)

    j = sub.add_parser("jobs", help="list queued and running jobs (with --all, ended ones too)")
    j.add_argument("--state", required=True, help="state DB (SQLite)")
    j.add_argument("--all", action="store_true", help="include finished/failed/cancelled jobs")
    j.add_argument("--json", action="store_true")
    j.set_defaults(func=cmd_jobs)

    g = sub.add_parser("gpus", help="this machine's GPUs: model, type, memory, health, use")
    g.add_argument("--config", help="config: used when no NVIDIA driver is present")
    g.add_argument("--node", help="which config node this machine is (default: by hostname)")
    g.add_argument("--json", action="store_true")
    g.set_defaults(func=cmd_gpus)


# ---------------------------------------------------------------------- submit


def _flag_job(args: argparse.Namespace, now: float) -> dict[str, Any]:
    if args.gpus is None:
        raise OptallocError("--gpus N is required with --project (or give a job file)")
    if not args.rest:
        raise OptallocError("give the command after `--`, e.g. "
                            "`optalloc submit ... --project A1 --gpus 8 -- python train.py`")
    d: dict[str, Any] = {
        "id": args.job_id or f"{args.project}-{int(now)}-{secrets.token_hex(2)}",
        "project": args.project,
        "gpus": args.gpus,
        "min_runtime": args.min_runtime,
        "resumable": args.resumable,
        "priority": args.priority,
        "submit_time": now,
        "command": list(args.rest),
    }
    for key, value in (("gpu_types", args.gpu_types), ("gpus_per_node", args.gpus_per_node),
                       ("checkpoint_interval", args.checkpoint_interval),
                       ("duration", args.duration)):
        if value is not None:
            d[key] = value
    return d


def cmd_submit(args: argparse.Namespace) -> int:
    from optalloc.cli.epoch_cmd import parse_now
    from optalloc.config import load_config, load_jobs, parse_jobs
    from optalloc.ledger.store import StateStore, check_state_file

    now = time.time() if args.now is None else parse_now(args.now)
    config = load_config(args.config)
    check_state_file(args.state)
    if args.project:
        jobs = parse_jobs(_flag_job(args, now), config, "<command line>")
    else:
        if len(args.rest) != 1:
            raise OptallocError("give one job file, or --project/--gpus and the command "
                                "after `--`")
        if args.job_id:
            raise OptallocError("--id applies to a command-line job; a job file names "
                                "its jobs with `id:`")
        jobs = load_jobs(args.rest[0], config)
        jobs = tuple(j if j.submit_time else dataclasses.replace(j, submit_time=now)
                     for j in jobs)
    missing = [j.id for j in jobs if not j.command]
    if missing:
        raise OptallocError(f"{', '.join(missing)} has no `command:`; the {args.runner} "
                            "runner needs an argv list to run")
    with StateStore(args.state) as store:
        taken = [j.id for j in jobs if store.get_job(j.id) is not None]
        if taken:
            raise OptallocError(f"job id {', '.join(taken)} already exists in "
                                f"{args.state}; choose a new id")
        slurm_ids: dict[str, str] = {}
        if args.runner == "slurm":
            from optalloc.runners import make_runner

            runner = make_runner("slurm", config=config, state_path=args.state,
                                 partition=args.partition, slurm_conf=args.slurm_conf)
            try:
                for job in jobs:
                    slurm_ids[job.id] = runner.submit(job)
            finally:
                runner.close()
        with store.transaction():
            for job in jobs:
                store.add_job(job)
                store.record_event(now, job.id, "submitted",
                                   f"via {args.runner}" + (f" (slurm job {slurm_ids[job.id]})"
                                                           if job.id in slurm_ids else ""))
    if args.json:
        print(json.dumps([{"id": j.id, "slurm_id": slurm_ids.get(j.id)} for j in jobs]))
    else:
        for j in jobs:
            extra = f", slurm job {slurm_ids[j.id]} (held)" if j.id in slurm_ids else ""
            print(f"queued {j.id}: project {j.project}, {j.gpus} GPUs, "
                  f"{_contract(j)}{extra}")
    return 0


def _contract(job) -> str:
    from optalloc.units import format_duration

    mr = "unallocated" if not job.min_runtime_s else f"min_runtime {format_duration(job.min_runtime_s)}"
    return f"{mr}, {'resumable' if job.resumable else 'not resumable'}"


# ---------------------------------------------------------------------- jobs


def job_rows(store, include_ended: bool) -> list[dict[str, Any]]:
    """One dict per job: id, project, gpus, state, start, placement, reason (last pending
    reason of the latest epoch, else the job's last event)."""
    states = ("queued", "running", "finished") if include_ended else ("queued", "running")
    jobs = store.list_jobs(states=states)
    last = store.last_epoch()
    pending = {p["job_id"]: p for p in ((last or {}).get("plan") or {}).get("pending", [])}
    rows = []
    for j in jobs:
        status = store.job_status(j.id) if include_ended else j.state.value
        if j.id in pending and status == "queued":
            p = pending[j.id]
            reason = f"{p['code']}: {p['message']}"
        else:
            ev = store.events(j.id, limit=1)
            reason = f"{ev[-1]['kind']}: {ev[-1]['message']}" if ev else ""
        rows.append({
            "id": j.id,
            "project": j.project,
            "gpus": j.gpus,
            "state": status,
            "start": j.start_time,
            "placement": None if j.placement is None else [
                {"node": a.node, "gpus": list(a.gpus)} for a in j.placement.nodes],
            "gpu_type": None if j.placement is None else j.placement.gpu_type,
            "reason": reason,
        })
    return rows


def cmd_jobs(args: argparse.Namespace) -> int:
    from optalloc.ledger.store import StateStore

    with StateStore(args.state) as store:
        rows = job_rows(store, args.all)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no jobs" + ("" if args.all else " queued or running (--all shows ended ones)"))
        return 0
    table = [["ID", "PROJECT", "GPUS", "STATE", "START", "PLACEMENT", "REASON"]]
    for r in rows:
        start = "-" if r["start"] is None else time.strftime(
            "%Y-%m-%d %H:%M:%S", time.gmtime(r["start"]))
        where = "-" if not r["placement"] else " ".join(
            f"{a['node']}:{','.join(map(str, a['gpus']))}" for a in r["placement"])
        table.append([r["id"], r["project"], str(r["gpus"]), r["state"], start, where,
                      r["reason"]])
    print(_render(table))
    return 0


def _render(table: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1] for row in table)


# ---------------------------------------------------------------------- gpus


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
    if args.json:
        print(json.dumps({"source": source, "gpus": rows}, indent=2))
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
    return 0
