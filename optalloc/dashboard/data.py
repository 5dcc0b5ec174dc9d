"""Everything the dashboard shows, gathered once from the config and the state DB.

`gather(config, store)` reads (never writes) the state DB at the time of its latest epoch (so
the pages describe what that epoch decided, and a rebuilt page shows the same numbers) and
returns a frozen `Dashboard`: the org tree with the ledger's figures and the GPUs each node
holds, the queue, the cluster map, utilization, and the epoch history. The pages, `serve` and
the Prometheus metrics all render this one object. Nothing here reads a job's command or
environment.
"""

from __future__ import annotations

import re
import time
import hashlib
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from optalloc.dashboard.cluster import Drain, NodeView, Reservation, effective_nodes, node_views
from optalloc.dashboard.history import HistoryRow, history_rows
from optalloc.dashboard.queue import QueueRow, queue_rows, with_utilization
from optalloc.dashboard.utilization import (
    JobUtil,
    ProjectUtil,
    job_utilization,
    project_utilization,
)
from optalloc.ledger import build_report, running_intervals
from optalloc.ledger.report import ReportRow, owed_window
from optalloc.org import OrgTree
from optalloc.sim.result import widest_node
from optalloc.types import Config, NodeState, Policy, UsageMode, frozen_map

DEFAULT_HISTORY = 288  # epochs on the history page: a day of 5-minute epochs


def slug(name: str) -> str:
    """A file-name-safe, unique page name for an org node."""
    if re.fullmatch(r"[A-Za-z0-9_-]{1,80}", name):
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    return (re.sub(r"[^A-Za-z0-9_-]", "_", name)[:60] or "node") + "-" + digest


@dataclass(frozen=True)
class OrgRow:
    report: ReportRow  # the ledger's figures (share, usage, ratio, owed, delivered, met, ...)
    parent: str | None
    path: tuple[str, ...]  # from the root's child down to this node
    slug: str
    entitled_gpus: Mapping[str, float]  # entitlement x GPUs up now, per gpu_type
    held: Mapping[str, int]  # allocated GPUs held now, per gpu_type
    unallocated: Mapping[str, int]  # unallocated GPUs held now, per gpu_type
    running: int
    waiting: int  # pending, preempted or queued

    @property
    def name(self) -> str:
        return self.report.name


@dataclass(frozen=True)
class EpochInfo:
    id: int
    time: float
    backend: str | None
    status: str | None
    gap: float | None
    objective: float | None
    bound: float | None
    solve_s: float | None
    degraded: str | None
    floor_violations: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Dashboard:
    now: float  # the latest epoch's time (or the clock when there is none)
    cluster: str  # the org tree's root
    gpu_types: tuple[str, ...]
    capacity_up: Mapping[str, int]  # GPUs on up nodes, per gpu_type
    capacity_all: Mapping[str, int]
    policy: Policy
    epoch: EpochInfo | None
    org: tuple[OrgRow, ...]
    queue: tuple[QueueRow, ...]
    nodes: tuple[NodeView, ...]
    drains: tuple[Drain, ...]
    reservations: tuple[Reservation, ...]
    utilization: tuple[JobUtil, ...]
    project_util: tuple[ProjectUtil, ...]
    history: tuple[HistoryRow, ...]
    tracked_since: float | None  # owed/delivered are tracked from here
    window_start: float
    owed_edges: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (H + 1,)
    owed_projects: tuple[str, ...] = ()
    owed_h: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (P, H)
    delivered_h: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (P, H)
    notes: tuple[str, ...] = ()

    def org_row(self, name: str) -> OrgRow | None:
        return next((r for r in self.org if r.name == name), None)

    def subtree(self) -> dict[str, set[str]]:
        """Projects under each org node."""
        out: dict[str, set[str]] = {}
        for r in self.org:
            if r.report.is_project:
                for a in (self.cluster, *r.path):
                    out.setdefault(a, set()).add(r.name)
        return out

    @property
    def codes(self) -> tuple[str, ...]:
        """Reason codes present in the queue, sorted."""
        return tuple(sorted({r.code for r in self.queue if r.code}))


def gather(config: Config, store, *, history: int = DEFAULT_HISTORY,
           known_history: Mapping[int, HistoryRow] | None = None,
           now: float | None = None) -> Dashboard:
    """The dashboard at the latest epoch (or at `now`), from a (read-only) StateStore."""
    last = store.last_epoch()
    plan = (last or {}).get("plan") or None
    if now is None:
        now = float(last["time"]) if last else time.time()
    policy = config.policy
    type_names = tuple(g.name for g in config.gpu_types)
    tree = OrgTree.build(config.org, type_names)
    nodes = effective_nodes(config.nodes, plan)
    cap_up = {t: sum(n.gpus for n in nodes if n.gpu_type == t and n.state is NodeState.UP)
              for t in type_names}
    cap_all = {t: sum(n.gpus for n in nodes if n.gpu_type == t) for t in type_names}
    notes: list[str] = []

    jobs = store.list_jobs(states=("queued", "running"))
    running = [j for j in jobs if j.running]
    open_ivs = running_intervals(running, now)
    since = now - policy.lookback_s if policy.usage_mode is UsageMode.WINDOW else None
    led = store.ledger(config.gpu_types, tree, policy, since=since)
    if led.entitled(now)[0] == 0:
        led.record_capacity(now, cap_up)
        notes.append(f"no capacity recorded in the state DB: using the config's up nodes {cap_up}")
    report = build_report(led, now, open_ivs)
    tracked, od, _ = owed_window(led, now, open_ivs)

    ancestors = {nm: tuple(tree.path(nm)[1:]) for nm in tree.names}
    recorded = (plan or {}).get("inputs", {}).get("usage_ratio")
    ratios = (dict(recorded) if recorded is not None
              else {r.name: (None if not np.isfinite(r.ratio) else r.ratio) for r in report})
    starts = [j.start_time for j in running if j.start_time is not None]
    first = max(now - policy.lookback_s, min(starts, default=now))  # samples of current runs
    samples = store.utilization_samples(first) if hasattr(store, "utilization_samples") else []
    utils = job_utilization(samples, running, policy)
    rows = with_utilization(queue_rows(jobs, plan, ancestors, ratios, policy, now,
                                       widest_node(config.nodes)), utils)
    views, drains, reservations = node_views(nodes, running, plan, policy)

    org = _org_rows(tree, report, running, rows, cap_up, ancestors)
    config_up = sum(cap_up.values())
    hist = history_rows(store, history, config_up, known_history) if hasattr(
        store, "epoch_ids") else []
    epoch = None
    if last:
        rep = last.get("report") or {}
        epoch = EpochInfo(
            id=int(last["id"]), time=float(last["time"]), backend=rep.get("backend"),
            status=rep.get("status"), gap=rep.get("gap"), objective=rep.get("objective"),
            bound=rep.get("bound"), solve_s=rep.get("solve_s"), degraded=last.get("degraded"),
            floor_violations=tuple((plan or {}).get("floor_violations", ())),
        )
    else:
        notes.append("no epoch recorded yet: run `optalloc epoch` (the queue shows no reasons)")
    return Dashboard(
        now=now, cluster=tree.names[0], gpu_types=type_names,
        capacity_up=frozen_map(cap_up), capacity_all=frozen_map(cap_all), policy=policy,
        epoch=epoch, org=tuple(org), queue=tuple(rows), nodes=tuple(views),
        drains=tuple(drains), reservations=tuple(reservations), utilization=tuple(utils),
        project_util=tuple(project_utilization(utils)), history=tuple(hist),
        tracked_since=tracked, window_start=now - policy.lookback_s,
        owed_edges=np.zeros(0) if od is None else od.edges,
        owed_projects=() if od is None else od.projects,
        owed_h=np.zeros((0, 0)) if od is None else od.owed_h,
        delivered_h=np.zeros((0, 0)) if od is None else od.delivered_h,
        notes=tuple(notes),
    )


def _org_rows(tree: OrgTree, report, running, rows, cap_up, ancestors) -> list[OrgRow]:
    types = tree.gpu_types
    held = {nm: dict.fromkeys(types, 0) for nm in tree.names}
    unalloc = {nm: dict.fromkeys(types, 0) for nm in tree.names}
    n_running = dict.fromkeys(tree.names, 0)
    n_waiting = dict.fromkeys(tree.names, 0)
    for job in running:
        if job.placement is None or job.project not in tree.index:
            continue
        target = held if job.placement.allocated else unalloc
        for a in (tree.names[0], *ancestors[job.project]):
            if job.placement.gpu_type in target[a]:
                target[a][job.placement.gpu_type] += job.placement.gpus
    for r in rows:
        if r.project not in tree.index:
            continue
        counter = n_running if r.state == "running" else n_waiting
        for a in (tree.names[0], *ancestors[r.project]):
            counter[a] += 1
    out = []
    for o, rep in enumerate(report):
        nm = rep.name
        p = int(tree.parent[o])
        out.append(OrgRow(
            report=rep,
            parent=None if p < 0 else tree.names[p],
            path=ancestors[nm],
            slug=slug(nm),
            entitled_gpus=frozen_map({t: float(tree.entitlement[o, i] * cap_up[t])
                                      for i, t in enumerate(types)}),
            held=frozen_map(held[nm]),
            unallocated=frozen_map(unalloc[nm]),
            running=n_running[nm],
            waiting=n_waiting[nm],
        ))
    return out
