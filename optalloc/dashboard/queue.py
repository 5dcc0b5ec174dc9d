"""The queue as the dashboard, `optalloc jobs` and the metrics show it: one row per live job with
its rank inputs and, for pending and preempted jobs, the reason code and message of the latest
plan (the same words `optalloc explain` prints), plus the filters and sort orders the queue page
accepts (`?project=...&state=...&code=...&class=...&sort=...&order=...`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from optalloc.errors import OptallocError
from optalloc.hostlist import compress_names, compress_placement
from optalloc.sim.metrics import wait_classes
from optalloc.sim.result import job_nodes, widest_node
from optalloc.types import Job, Policy

STATES = ("pending", "preempted", "queued", "running")
CLASSES = ("debug", "large", "other", "unallocated")
SORT_KEYS = ("rank", "job", "project", "gpus", "state", "wait", "priority", "code", "util")


@dataclass(frozen=True)
class QueueRow:
    job_id: str
    project: str
    path: tuple[tuple[str, float | None], ...]  # (org node, usage ratio) from program to project
    gpus: int
    gpu_type: str  # placed type, or the allowed types ("any" when unrestricted)
    nodes: str  # compact placement ("h100-[018-033]:0-7"), "" when not placed
    node_names: tuple[str, ...]
    state: str  # one of STATES
    allocated: bool  # charged to the budget (the placement's flag while running)
    cls: str  # one of CLASSES (the simulator's wait classes)
    priority: int
    min_runtime_s: float
    submit_time: float
    wait_s: float | None  # since submit, for jobs not running
    start_time: float | None
    protected_until: float | None  # running allocated jobs inside their min_runtime
    code: str | None
    message: str
    util_pct: float | None = None  # recent GPU utilization (local runner samples)
    idle_s: float | None = None  # idle stretch when flagged idle

    @property
    def ratio(self) -> float | None:
        """The project's own usage ratio (the last level of the path)."""
        return self.path[-1][1] if self.path else None


def _ratio(v: Any) -> float | None:
    return None if v is None else float(v)


def queue_rows(
    jobs: Sequence[Job],
    plan: Mapping[str, Any] | None,
    ancestors: Mapping[str, Sequence[str]],
    ratios: Mapping[str, float | None],
    policy: Policy,
    now: float,
    widest: int | None = None,
) -> list[QueueRow]:
    """Rows for the live jobs (`jobs`: the state DB's queued + running), using the latest plan
    (a plan_to_dict document) for reasons; `ancestors[project]` is its path below the root."""
    plan = plan or {}
    pending = {p["job_id"]: p for p in plan.get("pending", ())}
    preempted = {p["job_id"]: p for p in plan.get("preemptions", ())}
    placed = {p["job_id"]: p for p in plan.get("placements", ())}
    import numpy as np

    # `widest`: the cluster's largest node; without it, every job fits one (only its
    # gpus_per_node pieces count)
    wide = widest or widest_node(jobs)
    classes = wait_classes(np.array([j.min_runtime_s for j in jobs], dtype=float),
                           np.array([j.gpus for j in jobs], dtype=float),
                           np.array([job_nodes(j, wide) for j in jobs])) if jobs else []
    rows = []
    for job, cls in zip(jobs, classes):
        pl = job.placement if job.running else None
        code, message = None, ""
        if job.id in preempted:
            state = "preempted"
            code, message = preempted[job.id]["code"], preempted[job.id]["message"]
        elif job.running:
            state = "running"
        elif job.id in pending:
            state = "pending"
            code, message = pending[job.id]["code"], pending[job.id]["message"]
        elif job.id in placed:  # placed, not started: waits for a preempted job's GPUs, or
            state = "queued"  # the epoch stopped before its runner applied the plan
            message = ("placed by the latest epoch, not started yet: its GPUs are still held "
                       "(see its last event), or the next epoch starts it")
        else:
            state = "queued"
            message = "submitted after the latest epoch; the next epoch plans it"
        allocated = pl.allocated if pl is not None else job.allocated
        if pl is not None and job.id in placed and "allocated" in placed[job.id]:
            # as the latest plan runs it: the placement stored at its start says how it ran
            # then (a removed or zero-share project's job kept as unallocated work read
            # allocated and protected: an outside judge, stop 59)
            allocated = bool(placed[job.id]["allocated"])
        protected = None
        if pl is not None and allocated and job.min_runtime_s > 0 and job.start_time is not None:
            end = job.start_time + min(job.min_runtime_s, policy.min_runtime_cap_s)
            protected = end if end > now else None
        rows.append(QueueRow(
            job_id=job.id,
            project=job.project,
            path=tuple((o, _ratio(ratios.get(o))) for o in ancestors.get(job.project, ())),
            gpus=job.gpus,
            gpu_type=pl.gpu_type if pl is not None else ("/".join(job.gpu_types) or "any"),
            nodes="" if pl is None else compress_placement([(a.node, a.gpus) for a in pl.nodes]),
            node_names=() if pl is None else pl.node_names,
            state=state,
            allocated=bool(allocated),
            cls=str(cls),
            priority=job.priority,
            min_runtime_s=job.min_runtime_s,
            submit_time=job.submit_time,
            wait_s=None if job.running else max(0.0, now - job.submit_time),
            start_time=job.start_time if job.running else None,
            protected_until=protected,
            code=code,
            message=message,
        ))
    return rows


def with_utilization(rows: Iterable[QueueRow], utils: Iterable) -> list[QueueRow]:
    by = {u.job_id: u for u in utils}
    out = []
    for r in rows:
        u = by.get(r.job_id)
        out.append(r if u is None or not u.samples else replace(
            r, util_pct=u.recent_util_pct, idle_s=u.idle_s if u.idle else None))
    return out


# ---------------------------------------------------------------------- filters


@dataclass(frozen=True)
class QueueQuery:
    project: str | None = None  # any org node: its subtree's jobs
    state: str | None = None
    code: str | None = None
    cls: str | None = None
    sort: str = "rank"
    order: str = "asc"


def parse_query(params: Mapping[str, str], org_names: Iterable[str],
                codes: Iterable[str]) -> QueueQuery:
    """Validate query values (a bad one raises OptallocError naming it and the choices)."""
    allowed = {"project", "state", "code", "class", "sort", "order"}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise OptallocError(f"unknown query parameter {unknown[0]!r}; use "
                            f"{', '.join(sorted(allowed))}")

    def pick(key: str, choices: Iterable[str]) -> str | None:
        v = params.get(key)
        if v is None or v == "":
            return None
        choices = list(choices)
        if v not in choices:
            shown = ", ".join(choices[:20]) + (", ..." if len(choices) > 20 else "")
            raise OptallocError(f"{key}={v!r} is not one of: {shown}")
        return v

    return QueueQuery(
        project=pick("project", org_names),
        state=pick("state", STATES),
        code=pick("code", codes),
        cls=pick("class", CLASSES),
        sort=pick("sort", SORT_KEYS) or "rank",
        order=pick("order", ("asc", "desc")) or "asc",
    )


def _rank_key(r: QueueRow) -> tuple:
    """The order a reader expects: pending, preempted, not yet planned, running; then by the
    ratios up the tree (lower first, as fair share ranks), then priority (higher first), then
    submit time."""
    ratios = tuple(math.inf if v is None else v for _, v in r.path)
    return (STATES.index(r.state), ratios, -r.priority, r.submit_time, r.job_id)


def select(rows: Sequence[QueueRow], q: QueueQuery, subtree: Mapping[str, set[str]]) -> list[QueueRow]:
    """Rows matching `q`, sorted by it; `subtree[name]` is the set of projects under a node."""
    out = [r for r in rows
           if (q.project is None or r.project in subtree.get(q.project, {q.project}))
           and (q.state is None or r.state == q.state)
           and (q.code is None or r.code == q.code)
           and (q.cls is None or r.cls == q.cls)]
    keys = {
        "rank": _rank_key,
        "job": lambda r: r.job_id,
        "project": lambda r: (r.project, r.job_id),
        "gpus": lambda r: (r.gpus, r.job_id),
        "state": lambda r: (STATES.index(r.state), r.job_id),
        "wait": lambda r: (-1.0 if r.wait_s is None else r.wait_s, r.job_id),
        "priority": lambda r: (r.priority, r.job_id),
        "code": lambda r: (r.code or "", r.job_id),
        "util": lambda r: (math.inf if r.util_pct is None else r.util_pct, r.job_id),
    }
    return sorted(out, key=keys[q.sort], reverse=q.order == "desc")


def node_list(rows: Iterable[QueueRow]) -> str:
    """All nodes the rows run on, compactly."""
    return compress_names(n for r in rows for n in r.node_names)
