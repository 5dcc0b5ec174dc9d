"""Named fault points: where the fault-injection suite kills optalloc with SIGKILL.

    OPTALLOC_FAULT=runner.after_spawn optalloc epoch ...      # die at the first spawn
    OPTALLOC_FAULT=runner.after_spawn:2 optalloc epoch ...    # ... at the second one

`fault_point(name)` marks a place in the cron path (see POINTS). Unarmed, which is always the
case in production, it is one comparison of a module global with None. Armed (by the
environment variable at import, or `arm()` in a forked test child), the process sends itself
SIGKILL the n-th time it reaches the named point: no cleanup, no finally blocks, no atexit,
exactly like `kill -9` or a power cut at that instruction.

Runners pass a clean environment to jobs, so OPTALLOC_FAULT never reaches a job.
"""

from __future__ import annotations

import os
import signal

POINTS = {
    "runner.after_intent": "a start intent is committed; the process is not spawned yet",
    "runner.after_spawn": "the job's process runs; its pid is not recorded yet",
    "runner.after_notice_intent": "a preemption is committed; the notice is not sent yet",
    "runner.after_notice": "the notice signal was sent; it is not confirmed yet",
    "cycle.after_observe": "runner events are read; nothing of them is recorded yet",
    "cycle.between_transactions": "the epoch's record is committed; the plan is not applied",
    "cycle.after_apply": "the runner applied the plan; its starts are not recorded yet",
    "cycle.before_ack": "everything is recorded; the runner's events are not acknowledged",
    "epoch.before_plan_write": "the epoch is complete; the plan file is not written yet",
}

_armed: tuple[str, int] | None = None
_hits = 0


def arm(spec: str | None) -> None:
    """Arm one point: "name" or "name:n" (the n-th hit, default 1); None disarms."""
    global _armed, _hits
    _hits = 0
    if not spec:
        _armed = None
        return
    name, _, nth = spec.partition(":")
    if name not in POINTS:
        raise ValueError(f"unknown fault point {name!r}; known: {', '.join(POINTS)}")
    if nth and not (nth.isdigit() and int(nth) >= 1):
        raise ValueError(f"{spec!r}: the hit after ':' must be a whole number from 1")
    _armed = (name, int(nth) if nth else 1)


def check_env() -> None:
    """OptallocError (exit status 2, no traceback) when OPTALLOC_FAULT named no fault point:
    `optalloc epoch` refuses to run rather than run unarmed by a typo."""
    if _bad_env is not None:
        from optalloc.errors import OptallocError

        raise OptallocError(f"OPTALLOC_FAULT={os.environ.get('OPTALLOC_FAULT')!r}: {_bad_env}; "
                            "unset it for a normal epoch")


def fault_point(name: str) -> None:
    """SIGKILL this process here if the armed point is `name` (and this is its n-th hit)."""
    if _armed is None:
        return
    global _hits
    if _armed[0] == name:
        _hits += 1
        if _hits == _armed[1]:
            os.kill(os.getpid(), signal.SIGKILL)


_bad_env: str | None = None
try:
    arm(os.environ.get("OPTALLOC_FAULT"))
except ValueError as _err:  # every command would die importing this; `epoch` says why
    _bad_env = str(_err)
