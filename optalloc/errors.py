"""Exceptions that the CLI turns into a clear message and a non-zero exit, never a traceback."""

from __future__ import annotations


class OptallocError(Exception):
    """Base class: `str(err)` is the complete human message (what, where, what to do)."""

    exit_code = 2


class ConfigError(OptallocError):
    """One or more problems in YAML input. `problems` holds each located message
    ("FILE: key.path: what is wrong; fix")."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        n = len(self.problems)
        head = f"{n} problem{'s' if n != 1 else ''} found in the configuration:"
        super().__init__("\n".join([head] + [f"  - {p}" for p in self.problems]))


class StateError(OptallocError):
    """The state database is unusable (wrong schema version, locked too long, ...)."""


class LockBusy(OptallocError):
    """Another optalloc process holds the state lock."""

    exit_code = 75  # EX_TEMPFAIL: cron may simply retry next time
