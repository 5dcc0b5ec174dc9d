"""The cluster map: every node with each GPU's job and project, drain progress and reservations.

Node states come from the latest epoch's recorded inputs (which carry what the runner reported,
e.g. Slurm drains), else from the config. Drain progress comes from the plan's `drains` when the
optimizer wrote them (`optalloc.types.DrainStatus`: jobs staying under protection, jobs leaving,
when it will be empty, ready); otherwise it is derived here from what still runs on the node:
the jobs left, the latest end of their protection, and ready-for-repair once empty. Reservations come
from the plan's `reservations` when present. Both plan fields are read tolerantly (their absence,
or a key spelled another way, never breaks the page).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from optalloc.contract import protected_until
from optalloc.types import Job, Node, NodeState, Policy


@dataclass(frozen=True)
class GpuCell:
    index: int
    job_id: str | None = None
    project: str | None = None
    allocated: bool | None = None
    reserved_for: str | None = None


@dataclass(frozen=True)
class Drain:
    node: str
    state: str  # drain | down
    jobs_left: tuple[str, ...]
    n_left: int  # jobs still on the node (a plan may give only the count)
    empty_at: float | None  # when it empties: the last protection end of the jobs left + grace
    ready: bool  # empty: ready for repair
    source: str  # "plan" (the optimizer's drains) or "derived" (from what runs)
    leaving: tuple[str, ...] = ()  # of jobs_left: preempted off it by the plan (gone after grace)


@dataclass(frozen=True)
class Reservation:
    job_id: str
    nodes: tuple[str, ...]
    expected_start: float | None
    gpu_type: str | None = None


@dataclass(frozen=True)
class NodeView:
    name: str
    gpu_type: str
    gpus: int
    state: str
    cells: tuple[GpuCell, ...]
    drain: Drain | None = None

    @property
    def used(self) -> int:
        return sum(c.job_id is not None for c in self.cells)


def effective_nodes(config_nodes: Sequence[Node], plan: Mapping[str, Any] | None) -> list[Node]:
    """Nodes with the states the latest epoch used (its recorded inputs), else the config's."""
    recorded = ((plan or {}).get("inputs") or {}).get("nodes")
    if not recorded:
        return list(config_nodes)
    states = {d["name"]: d.get("state", "up") for d in recorded}
    out = []
    for n in config_nodes:
        s = states.get(n.name, n.state.value)
        try:
            out.append(Node(n.name, n.gpu_type, n.gpus, NodeState(s)))
        except ValueError:
            out.append(n)
    return out


def _first(d: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return default


def _names(value: Any) -> tuple[str, ...]:
    """Job or node names from a list of names, of {node|job_id|id|name: ...} dicts, or a count."""
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            if isinstance(v, Mapping):
                v = _first(v, "job_id", "node", "id", "name", default="")
            out.append(str(v))
        return tuple(out)
    return ()


def _time(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def plan_drains(plan: Mapping[str, Any] | None, states: Mapping[str, str]) -> dict[str, Drain]:
    out = {}
    for d in (plan or {}).get("drains") or ():
        if not isinstance(d, Mapping) or not _first(d, "node", "name"):
            continue
        node = str(_first(d, "node", "name"))
        if "staying" in d or "leaving" in d:  # optalloc.types.DrainStatus
            leaving = _names(d.get("leaving") or ())
            jobs = _names(d.get("staying") or ()) + leaving
            left: Any = jobs
        else:
            leaving = ()
            left = _first(d, "jobs_left", "jobs", default=())
            jobs = _names(left)
        n_left = len(jobs) if jobs else (int(left) if isinstance(left, (int, float)) else 0)
        ready = _first(d, "ready", "ready_for_repair", default=None)
        out[node] = Drain(
            node=node,
            state=states.get(node, "drain"),
            jobs_left=jobs,
            n_left=n_left,
            empty_at=_time(_first(d, "empty_at", "protected_until", "until")),
            ready=bool(ready) if ready is not None else n_left == 0,
            source="plan",
            leaving=leaving,
        )
    return out


def plan_reservations(plan: Mapping[str, Any] | None) -> list[Reservation]:
    out = []
    for r in (plan or {}).get("reservations") or ():
        if not isinstance(r, Mapping) or not _first(r, "job_id", "job"):
            continue
        out.append(Reservation(
            job_id=str(_first(r, "job_id", "job")),
            nodes=_names(_first(r, "nodes", default=())),
            expected_start=_time(_first(r, "expected_start", "start", "start_time", "at")),
            gpu_type=_first(r, "gpu_type"),
        ))
    return out


def _protection_end(job: Job, policy: Policy) -> float | None:
    pl = job.placement
    if pl is None:
        return None
    return protected_until(job.start_time, job.min_runtime_s, policy.min_runtime_cap_s,
                           pl.allocated)


def node_views(
    nodes: Iterable[Node],
    running: Iterable[Job],
    plan: Mapping[str, Any] | None,
    policy: Policy,
) -> tuple[list[NodeView], list[Drain], list[Reservation]]:
    nodes = list(nodes)
    states = {n.name: n.state.value for n in nodes}
    by_gpu: dict[tuple[str, int], Job] = {}
    on_node: dict[str, list[Job]] = {}
    for job in running:
        if job.placement is None:
            continue
        for a in job.placement.nodes:
            on_node.setdefault(a.node, []).append(job)
            for g in a.gpus:
                by_gpu[(a.node, g)] = job
    reservations = plan_reservations(plan)
    reserved = {n: r.job_id for r in reservations for n in r.nodes}
    drains = plan_drains(plan, states)
    for n in nodes:
        if n.state is NodeState.UP or n.name in drains:
            continue
        jobs = on_node.get(n.name, [])
        ends = [e for e in (_protection_end(j, policy) for j in jobs) if e is not None]
        drains[n.name] = Drain(n.name, n.state.value, tuple(j.id for j in jobs), len(jobs),
                               # a staying job gets notice at its protection end and keeps its
                               # GPUs through the grace period (as the plan's drains count it)
                               max(ends) + policy.grace_s if ends else None, not jobs,
                               "derived")
    views = []
    for n in nodes:
        cells = []
        for g in range(n.gpus):
            job = by_gpu.get((n.name, g))
            cells.append(GpuCell(
                index=g,
                job_id=None if job is None else job.id,
                project=None if job is None else job.project,
                allocated=None if job is None else bool(job.placement.allocated),
                reserved_for=reserved.get(n.name) if job is None else None,
            ))
        views.append(NodeView(n.name, n.gpu_type, n.gpus, n.state.value, tuple(cells),
                              drains.get(n.name)))
    order = {n.name: i for i, n in enumerate(nodes)}
    drain_list = sorted(drains.values(), key=lambda d: order.get(d.node, len(order)))
    return views, drain_list, reservations
