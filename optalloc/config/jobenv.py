"""The `job_env` section: what real runners pass on to jobs from optalloc's environment.

    job_env:
      allow: [HF_HOME, WANDB_*, LD_LIBRARY_PATH]   # names; a trailing * allows a prefix
      set: {OMP_NUM_THREADS: 8}                      # fixed values

Jobs get a clean environment: the runner's default allow-list (optalloc.runners.local_proc),
these additions, and optalloc's own OPTALLOC_* / CUDA_VISIBLE_DEVICES variables, which a config
can neither allow from outside nor override.
"""

from __future__ import annotations

import re
from typing import Any

from optalloc.config.problems import MISSING, Loc, Problems, type_name
from optalloc.types import JobEnv, frozen_map

JOB_ENV_KEYS = ("allow", "set")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_ENV_VALUE_BYTES = 32 * 1024


def reserved_env_name(name: str) -> bool:
    """Names optalloc sets for every job itself."""
    return name.startswith("OPTALLOC_") or name == "CUDA_VISIBLE_DEVICES"


def parse_job_env(value: Any, loc: Loc, problems: Problems) -> JobEnv:
    if value is None:
        return JobEnv()
    d = problems.mapping(value, loc, "a mapping like {allow: [HF_HOME], set: {OMP_NUM_THREADS: 8}}")
    if d is MISSING:
        return JobEnv()
    problems.known_keys(d, loc, JOB_ENV_KEYS)
    allow: list[str] = []
    if d.get("allow") is not None:
        al = loc.key("allow")
        items = problems.sequence(d["allow"], al, "a list of variable names like [HF_HOME, WANDB_*]")
        for i, item in enumerate(items or ()):
            il = al.idx(i)
            if not isinstance(item, str):
                problems.add(il, f"expected a variable name, got {type_name(item)}", "quote it")
                continue
            prefix = item.endswith("*")
            stem = item[:-1] if prefix else item
            if not _NAME.match(stem):
                problems.add(il, f"{item!r} is not an environment variable name (or NAME_*)",
                             "use letters, digits and _, optionally ending in * for a prefix")
                continue
            if reserved_env_name(stem) or prefix and (
                    "OPTALLOC_".startswith(stem) or "CUDA_VISIBLE_DEVICES".startswith(stem)):
                problems.add(il, f"{item!r} would pass optalloc's own variables through",
                             "optalloc sets OPTALLOC_* and CUDA_VISIBLE_DEVICES for each job; "
                             "remove it")
                continue
            allow.append(item)
    fixed: dict[str, str] = {}
    if d.get("set") is not None:
        sl = loc.key("set")
        m = problems.mapping(d["set"], sl, "a mapping like {OMP_NUM_THREADS: 8}")
        for k, v in (m or {}).items():
            kl = sl.key(str(k))
            if not isinstance(k, str) or not _NAME.match(k):
                problems.add(kl, f"{k!r} is not an environment variable name",
                             "use letters, digits and _")
                continue
            if reserved_env_name(k):
                problems.add(kl, f"{k} is set by optalloc for each job", "remove it")
                continue
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                problems.add(kl, f"expected a string or number, got {type_name(v)}", "quote it")
                continue
            text = str(v)
            if "\0" in text or len(text.encode("utf-8", "surrogatepass")) > MAX_ENV_VALUE_BYTES:
                problems.add(kl, "the value holds a NUL byte or is longer than 32 KiB",
                             "shorten it")
                continue
            fixed[k] = text
    return JobEnv(allow=tuple(allow), set=frozen_map(fixed))
