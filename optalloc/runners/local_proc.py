"""Process control for the local runner: the wrapper a job runs under, its clean environment,
and how a process is recognised again after optalloc restarts (pid + kernel start time, or the
wrapper's own command line for a start whose pid was never recorded). Linux only (/proc).
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
from pathlib import Path
from typing import Mapping

from optalloc.config.jobenv import reserved_env_name
from optalloc.types import JobEnv

SHELL = "/bin/sh"

# The wrapper keeps the job's exit status on disk so a restarted optalloc (no longer the
# parent) still learns it. It is argv-safe ("$@"), and its own traps only make it outlive the
# notice signal; the job itself gets default dispositions (handlers reset on exec). POSIX:
# a trap runs after the foreground command completes and leaves $? unchanged. Its argv
# ([sh, -c, WRAPPER, exit file, job argv...]) names the run's exit file, which is how a start
# that crashed before its pid was recorded is found again.
WRAPPER = (
    'trap ":" HUP INT TERM USR1 USR2; "$@"; rc=$?; '
    '(umask 077; echo "$rc" > "$0.tmp") && mv -f "$0.tmp" "$0"'
)

# Variables of optalloc's own environment that a job gets (the config's `job_env.allow` adds
# more); everything else, an operator's tokens included, stays behind.
DEFAULT_ENV_ALLOW = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*",
                     "TZ", "TERM", "TMPDIR")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def job_environment(outside: Mapping[str, str], job_env: JobEnv,
                    own: Mapping[str, str]) -> dict[str, str]:
    """A job's whole environment: allow-listed variables of `outside` (optalloc's), the
    config's fixed `job_env.set` values, then optalloc's own variables for the job (`own`:
    CUDA_VISIBLE_DEVICES, OPTALLOC_*), which nothing can override or leak in."""
    allow = DEFAULT_ENV_ALLOW + tuple(job_env.allow)
    env = {k: v for k, v in outside.items()
           if not reserved_env_name(k) and any(fnmatch.fnmatchcase(k, a) for a in allow)}
    env.setdefault("PATH", DEFAULT_PATH)
    env.update(job_env.set)
    env.update(own)
    return env


def spawn(argv: tuple[str, ...], exit_path: str, log_fd: int, cwd: str,
          env: Mapping[str, str]) -> subprocess.Popen:
    """Start the job under the wrapper, in its own session (process group = wrapper pid),
    stdin from /dev/null, stdout and stderr to the log."""
    return subprocess.Popen(
        [SHELL, "-c", WRAPPER, exit_path, *argv],
        stdin=subprocess.DEVNULL, stdout=log_fd, stderr=subprocess.STDOUT,
        cwd=cwd, env=dict(env), start_new_session=True, close_fds=True,
    )


def process_start_ticks(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot), or None if no live
    process has that pid (zombies count as dead)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = data[data.rfind(")") + 2:].split()
    if not fields or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def find_wrapper(exit_path: str) -> int | None:
    """The pid of the live wrapper of the run whose exit file is `exit_path`, if any (a scan
    of /proc; used only for starts whose pid was never recorded)."""
    head, path = [SHELL.encode(), b"-c"], os.fsencode(exit_path)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        # (the wrapper text itself is not compared: an upgraded optalloc may word it anew)
        if argv[:2] == head and argv[3:4] == [path] and \
                process_start_ticks(int(entry.name)) is not None:
            return int(entry.name)
    return None


def killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"
