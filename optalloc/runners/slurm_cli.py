"""Slurm's command line, as plain functions: argv lists with timeouts (never a shell), parsers
for what the commands print (squeue --json of 22.05 and later, sinfo, hostlists, gres detail),
and the optalloc comment convention.

Every failure is a `SlurmError` whose message names the command and what Slurm said, so the
runner can put it in `ApplyResult.errors` instead of raising.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from optalloc.errors import OptallocError
from optalloc.types import NodeState

COMMENT_PREFIX = "optalloc:"

# Slurm job states: those after which the job holds no resources
TERMINAL = frozenset({
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
    "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT",
})
ACTIVE = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED", "RESIZING",
                    "SIGNALING", "STAGE_OUT"})
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})


class SlurmError(OptallocError):
    """A Slurm command failed (message: the command and Slurm's own words)."""


@dataclass(frozen=True)
class SlurmCli:
    """Runs Slurm client commands with SLURM_CONF (when given) and a timeout each."""

    slurm_conf: str | None = None
    timeout_s: float = 30.0

    def run(self, argv: Sequence[str], input: str | None = None) -> str:
        env = dict(os.environ)
        if self.slurm_conf:
            env["SLURM_CONF"] = str(self.slurm_conf)
        try:
            proc = subprocess.run(list(argv), input=input, capture_output=True, text=True,
                                  timeout=self.timeout_s, env=env)
        except FileNotFoundError:
            raise SlurmError(f"`{argv[0]}` is not installed or not on PATH (install slurm-client)"
                             ) from None
        except subprocess.TimeoutExpired:
            raise SlurmError(f"`{' '.join(argv)}` did not answer within {self.timeout_s:g}s "
                             "(is slurmctld running?)") from None
        if proc.returncode != 0:
            said = (proc.stderr.strip() or proc.stdout.strip() or "no message").splitlines()
            raise SlurmError(f"`{' '.join(argv)}` failed (exit {proc.returncode}): "
                             f"{' / '.join(said[-3:])}")
        return proc.stdout

    # ------------------------------------------------------------------ queries
    def jobs(self) -> list["SlurmJob"]:
        """Every job Slurm still knows (squeue --json; 22.05 ignores -t/-j, so no filters)."""
        out = self.run(["squeue", "--json"])
        try:
            data = json.loads(out)
        except json.JSONDecodeError as err:
            raise SlurmError(f"`squeue --json` printed something that is not JSON: {err}") from None
        return [parse_job(j) for j in data.get("jobs", [])]

    def node_states(self, partition: str | None) -> dict[str, NodeState]:
        argv = ["sinfo", "-h", "-N", "-o", "%N|%T"]
        if partition:
            argv[1:1] = ["-p", partition]
        return parse_sinfo(self.run(argv))


@dataclass(frozen=True)
class SlurmJob:
    """What optalloc needs of one squeue entry, normalized across Slurm versions."""

    slurm_id: str
    name: str
    state: str  # RUNNING, PENDING, COMPLETED, ... (base state, flags dropped)
    reason: str
    nodes: tuple[str, ...]
    gpu_idx: tuple[tuple[int, ...], ...]  # per node of `nodes`, GPU indices allocated
    gpu_type: str | None  # from the allocation's gres (gpu:h100:2) when Slurm names a type
    gpus_per_node: int  # requested
    node_count: int
    start_time: float | None
    end_time: float | None
    submit_time: float | None
    exit_code: int | None
    restarts: int
    comment: str
    user: str
    partition: str

    @property
    def held(self) -> bool:
        return self.state == "PENDING" and self.reason in HELD_REASONS

    @property
    def optalloc_fields(self) -> dict[str, str] | None:
        return parse_comment(self.comment)


def _num(v: Any) -> float | None:
    """22.05 gives plain numbers; 23.02+ gives {"set": bool, "infinite": bool, "number": n}."""
    if isinstance(v, Mapping):
        if not v.get("set", True) or v.get("infinite"):
            return None
        v = v.get("number")
    if v is None or isinstance(v, bool):
        return None
    return float(v)


def parse_job(j: Mapping[str, Any]) -> SlurmJob:
    state = j.get("job_state")
    if isinstance(state, list):  # 23.02+: ["RUNNING", "REQUEUED", ...]
        state = state[0] if state else "UNKNOWN"
    nodes = expand_hostlist(j.get("nodes") or "")
    detail = [parse_gres_detail(d) for d in (j.get("gres_detail") or [])]
    ec = j.get("exit_code")
    if isinstance(ec, Mapping):  # 23.02+: {"status": [...], "return_code": {...}}
        ec = _num(ec.get("return_code"))
    elif ec is not None and not isinstance(ec, bool):  # 22.05: the raw wait status
        ec = _exit_code(int(ec))
    start, end = _num(j.get("start_time")), _num(j.get("end_time"))
    tres = str(j.get("tres_per_node") or "")
    m = re.search(r"gpu(?::[^:,]+)?:(\d+)", tres)
    return SlurmJob(
        slurm_id=str(j.get("job_id")),
        name=str(j.get("name") or ""),
        state=str(state).split()[0],
        reason=str(j.get("state_reason") or ""),
        nodes=tuple(nodes),
        gpu_idx=tuple(d[1] for d in detail),
        gpu_type=next((d[0] for d in detail if d[0]), None),
        gpus_per_node=int(m.group(1)) if m else 0,
        node_count=int(_num(j.get("node_count")) or 1),
        start_time=start or None,
        end_time=end or None,
        submit_time=_num(j.get("submit_time")),
        exit_code=None if ec is None else int(ec),
        restarts=int(_num(j.get("restart_cnt")) or 0),
        comment=str(j.get("comment") or ""),
        user=str(j.get("user_name") or ""),
        partition=str(j.get("partition") or ""),
    )


def _exit_code(status: int) -> int:
    """22.05's `exit_code` is the wait status (exit 3 -> 768): the exit code, or 128 + the
    signal that killed the batch script (as a shell reports it)."""
    sig = status & 0x7F
    return 128 + sig if sig else (status >> 8) & 0xFF


def parse_gres_detail(s: str) -> tuple[str | None, tuple[int, ...]]:
    """'gpu:h100:3(IDX:0-2)' -> ('h100', (0, 1, 2)); 'gpu:2(IDX:1,3)' -> (None, (1, 3))."""
    m = re.match(r"gpu(?::([^:(]+))?:(\d+)\(IDX:([^)]*)\)", s.strip())
    if not m:
        return None, ()
    return m.group(1), tuple(_expand_ranges(m.group(3)))


def _expand_ranges(spec: str) -> list[int]:
    out: list[int] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        elif part.isdigit():
            out.append(int(part))
    return out


def expand_hostlist(s: str) -> list[str]:
    """'node[1-3,5],gpu-a01' -> ['node1', 'node2', 'node3', 'node5', 'gpu-a01'] (zero padding
    kept: 'n[01-02]' -> ['n01', 'n02'])."""
    out: list[str] = []
    for prefix, body, plain in re.findall(r"([^,\[]+)\[([^\]]*)\]|([^,\[\]]+)", s):
        if plain:
            out.append(plain.strip())
            continue
        for part in body.split(","):
            if "-" in part:
                lo, hi = part.split("-", 1)
                width = len(lo)
                out.extend(f"{prefix}{i:0{width}d}" for i in range(int(lo), int(hi) + 1))
            else:
                out.append(f"{prefix}{part}")
    return out


def compress_hostlist(names: Sequence[str]) -> str:
    """Comma-separated node names (Slurm accepts the plain list anywhere a hostlist goes)."""
    return ",".join(names)


_DOWN = ("down", "fail", "failing", "maint", "future", "power_down", "powered_down", "unknown",
         "not_responding", "inval")


def slurm_node_state(state: str) -> NodeState:
    """sinfo %T -> NodeState: drain/draining/drained -> drain; down, fail, not responding
    ('*' suffix) and the like -> down; idle/mixed/allocated/completing -> up."""
    s = state.strip().lower()
    if s.endswith("*") or any(s.startswith(d) for d in _DOWN):
        return NodeState.DOWN
    if "drain" in s:
        return NodeState.DRAIN
    return NodeState.UP


def parse_sinfo(out: str) -> dict[str, NodeState]:
    states: dict[str, NodeState] = {}
    for line in out.splitlines():
        if "|" not in line:
            continue
        name, state = line.split("|", 1)
        for n in expand_hostlist(name.strip()):
            states[n] = slurm_node_state(state)
    return states


# ---------------------------------------------------------------------- comment convention


def format_comment(fields: Mapping[str, object]) -> str:
    """optalloc's fields in a Slurm --comment: `optalloc:project=A1;min_runtime=3600;...`."""
    parts = []
    for k, v in fields.items():
        text = str(v)
        if re.search(r"[;=\s]", text) or re.search(r"[;=\s]", k):
            raise ValueError(f"comment field {k}={text!r} may not contain ';', '=' or spaces")
        parts.append(f"{k}={text}")
    return COMMENT_PREFIX + ";".join(parts)


def parse_comment(comment: str) -> dict[str, str] | None:
    """The optalloc fields of a Slurm comment, or None if it is not an optalloc comment."""
    c = (comment or "").strip()
    if not c.startswith(COMMENT_PREFIX):
        return None
    out = {}
    for part in c[len(COMMENT_PREFIX):].split(";"):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
    return out
