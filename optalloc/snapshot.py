"""The immutable, array-backed input of one scheduling epoch.

A Snapshot freezes everything a policy may read: the cluster (nodes and their state), the
org tree with entitlements, the queue (queued and running jobs) and the ledger's usage ratio of
every org node at `now`. Policies (the ILP, the greedy and priority baselines) only read it.

Coordinates: jobs `j` (order of `jobs`), gpu_types `t` (order of `gpu_types`), nodes `n`
(order of `nodes`), org nodes `o` (order of `org.names`, root = 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping, Sequence

import numpy as np

from optalloc.contract import protection_s
from optalloc.org import OrgTree
from optalloc.types import (
    Config,
    GpuType,
    Job,
    JobState,
    Node,
    NodeState,
    Policy,
    Reservation,
    ReservationIdle,
)


@dataclass(frozen=True, eq=False)
class Snapshot:
    now: float
    policy: Policy
    gpu_types: tuple[GpuType, ...]
    nodes: tuple[Node, ...]
    org: OrgTree
    jobs: tuple[Job, ...]
    usage_ratio: np.ndarray  # (O,) usage / entitled over the lookback window, per org node
    # --- nodes
    node_type: np.ndarray  # (N,) int index into gpu_types
    node_gpus: np.ndarray  # (N,) int GPUs on the node
    node_up: np.ndarray  # (N,) bool: accepts new placements (state up)
    node_present: np.ndarray  # (N,) bool: not down (running jobs may stay on drain)
    node_drain: np.ndarray  # (N,) bool: state drain (takes nothing new; its jobs leave)
    # --- jobs
    job_gpus: np.ndarray  # (J,) int
    job_project: np.ndarray  # (J,) int index into org.names (a leaf)
    job_allowed: np.ndarray  # (J, T) bool allowed gpu_types
    job_speed: np.ndarray  # (J, T) float speedup per type (1.0 default)
    job_running: np.ndarray  # (J,) bool
    job_allocated: np.ndarray  # (J,) bool (min_runtime > 0)
    job_tier1: np.ndarray  # (J, T) bool: allocated work on t (min_runtime > 0, project share > 0)
    job_run_type: np.ndarray  # (J,) int type of a running job's placement (-1: none/unknown)
    job_protected: np.ndarray  # (J,) bool running as allocated work, inside its protection
    job_protect_end: np.ndarray  # (J,) float end of the run's protection (nan: none)
    job_on_drain: np.ndarray  # (J,) bool running with a GPU on a drain node
    job_gpn: np.ndarray  # (J,) int gpus_per_node (0: not given)
    job_min_runtime: np.ndarray  # (J,) float seconds
    job_priority: np.ndarray  # (J,) int
    job_submit: np.ndarray  # (J,) float
    job_index: Mapping[str, int]
    node_index: Mapping[str, int]
    type_names: tuple[str, ...] = ()  # gpu_types' names, in order
    # the reservations of the previous plan (optalloc.model.reservations keeps them stable and
    # says why one ends); empty when the caller has no previous plan
    previous_reservations: tuple[Reservation, ...] = ()
    # the idle GPU-hours of reservations that ended (the previous plan's `reservation_idle`)
    reservation_idle: tuple[ReservationIdle, ...] = ()
    # GPU-hours owed over the window and not delivered, per org node name (Ledger.owed_shortfall;
    # the floors' debt tilt): a mapping, or a callable giving one, asked for once and only by
    # a policy that reads it (greedy does not); None: no ledger history, read as zeros
    shortfall: Mapping[str, float] | Callable[[], Mapping[str, float]] | None = None
    # the same against each node's fair share, an idle sibling's share flowing to the others
    # (Ledger.shortfalls' second; targets.lifted_floors reads whether it is owed)
    fair_shortfall: Mapping[str, float] | Callable[[], Mapping[str, float]] | None = None

    @property
    def owed_shortfall(self) -> np.ndarray:
        """(O,) the `shortfall` input per org node, zeros where the caller gave none."""
        return self.derived(_owed_shortfall)

    @property
    def fair_owed_shortfall(self) -> np.ndarray:
        """(O,) the `fair_shortfall` input per org node, zeros where the caller gave none."""
        return self.derived(_fair_shortfall)

    def derived(self, fn):
        """fn(self), computed once per snapshot and kept beside it (the snapshot is read-only,
        so what is derived from it alone never changes: the jobs' places in their projects'
        order, the Fair-Tree rank, ... are asked for by several phases of one epoch). Arrays
        come back read-only, tuples of arrays likewise."""
        memo = self.__dict__.setdefault("_derived", {})
        out = memo.get(fn)
        if out is None:
            out = fn(self)
            for a in out if isinstance(out, tuple) else (out,):
                if isinstance(a, np.ndarray):
                    a.setflags(write=False)
            memo[fn] = out
        return out

    def allowed_code(self) -> np.ndarray:
        """(J,) each job's allowed gpu_types as one non-negative integer, once per snapshot:
        jobs allowed the same types get the same number (the ranked pass and the pending
        reasons group jobs by it)."""
        return self.derived(_allowed_code)

    def relative_speed(self) -> np.ndarray:
        """(J, T) each job's speed on each type over its best allowed type's, 0 where it is
        not allowed, once per snapshot: what the work tier values a GPU by (srel), and what
        makes two running jobs interchangeable or a type worth routing a project onto."""
        return self.derived(_relative_speed)

    def capacity_by_type(self, *, up_only: bool = True) -> np.ndarray:
        """(T,) GPUs per type on nodes that are up (or, with up_only=False, not down)."""
        mask = self.node_up if up_only else self.node_present
        return np.bincount(
            self.node_type[mask], weights=self.node_gpus[mask], minlength=len(self.gpu_types)
        ).astype(np.int64)

    def protected_until(self, job: Job) -> float | None:
        """End of the job's protected minimum runtime, or None if it has none (not running,
        unallocated, or running on a type where its project has no share)."""
        k = self.job_index.get(job.id)
        if k is None or not job.running:
            return None
        end = float(self.job_protect_end[k])
        return None if np.isnan(end) else end


def _allowed_code(snap: Snapshot) -> np.ndarray:
    """Snapshot.allowed_code: type_set_codes of the jobs' allowed types."""
    return type_set_codes(snap.job_allowed)


def job_resumable(snap: "Snapshot") -> np.ndarray:
    """(J,) bool, read-only: each job restarts where it is stopped (Job.resumable); read once
    per snapshot (the model's candidates, the restart cost and the give-way rows ask)."""
    return snap.derived(_resumable)


def _resumable(snap: "Snapshot") -> np.ndarray:
    return np.fromiter((j.resumable for j in snap.jobs), bool, len(snap.jobs))


def type_set_codes(rows: np.ndarray) -> np.ndarray:
    """(R,) one non-negative integer per (R, T) bool row, rows alike getting one: bit t set where
    type t is in the row's set, or, past 62 types (an int64 holds no more bits), the row's
    place among the distinct rows (codes then compare only within one call)."""
    rows = np.asarray(rows, dtype=bool)
    T = rows.shape[1]
    if T <= 62:
        return rows.astype(np.int64) @ (1 << np.arange(T, dtype=np.int64))
    return np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _relative_speed(snap: Snapshot) -> np.ndarray:
    """Snapshot.relative_speed."""
    speed = np.where(snap.job_allowed, snap.job_speed, 0.0)
    best = speed.max(axis=1, keepdims=True)
    return np.divide(speed, best, out=np.zeros_like(speed), where=best > 0)


def build_snapshot(
    config: Config,
    now: float,
    jobs: Sequence[Job] | None = None,
    usage_ratio: Mapping[str, float] | None = None,
    nodes: Sequence[Node] | None = None,
    reservations: Sequence[Reservation] | None = None,
    reservation_idle: Sequence[ReservationIdle] | None = None,
    shortfall: Mapping[str, float] | Callable[[], Mapping[str, float]] | None = None,
    fair_shortfall: Mapping[str, float] | Callable[[], Mapping[str, float]] | None = None,
) -> Snapshot:
    """Freeze inputs for one epoch. `jobs` defaults to `config.jobs`, `nodes` to `config.nodes`;
    `usage_ratio` maps org node names to their ratio (missing = 0: no usage yet);
    `reservations`: the previous plan's (`Plan.reservations`), if the caller has one, and
    `reservation_idle` its `Plan.reservation_idle`; `shortfall` maps org node names to the
    GPU-hours owed and not delivered over the window (Ledger.owed_shortfall; missing = 0), or
    is a callable that gives that mapping when first asked; `fair_shortfall` the same against
    each node's fair share (Ledger.shortfalls)."""
    jobs = tuple(config.jobs if jobs is None else jobs)
    nodes = tuple(config.nodes if nodes is None else nodes)
    gpu_types = tuple(config.gpu_types)
    tnames = [g.name for g in gpu_types]
    tidx = {n: i for i, n in enumerate(tnames)}
    org = OrgTree.build(config.org, tnames)
    policy = config.policy
    T, J = len(gpu_types), len(jobs)

    ratio = _by_name(org, usage_ratio)

    node_type = np.fromiter((tidx[n.gpu_type] for n in nodes), dtype=np.int64, count=len(nodes))
    node_gpus = np.fromiter((n.gpus for n in nodes), dtype=np.int64, count=len(nodes))
    node_up = np.fromiter((n.state is NodeState.UP for n in nodes), dtype=bool, count=len(nodes))
    node_present = np.fromiter(
        (n.state is not NodeState.DOWN for n in nodes), dtype=bool, count=len(nodes)
    )

    job_gpus = np.fromiter((j.gpus for j in jobs), dtype=np.int64, count=J)
    job_project = np.fromiter((org.index[j.project] for j in jobs), dtype=np.int64, count=J)
    job_allowed = np.ones((J, T), dtype=bool)
    job_speed = np.ones((J, T))
    for k, j in enumerate(jobs):
        if j.gpu_types:
            job_allowed[k] = False
            for g in j.gpu_types:
                job_allowed[k, tidx[g]] = True
        for g, s in j.speedup.items():
            job_speed[k, tidx[g]] = float(s)
    job_running = np.fromiter((j.state is JobState.RUNNING for j in jobs), dtype=bool, count=J)
    job_allocated = np.fromiter((j.min_runtime_s > 0 for j in jobs), dtype=bool, count=J)
    job_tier1 = job_allocated[:, None] & (org.entitlement[job_project] > 0)
    node_index = {n.name: k for k, n in enumerate(nodes)}
    node_drain = np.fromiter((n.state is NodeState.DRAIN for n in nodes), dtype=bool,
                             count=len(nodes))
    run_type = np.full(J, -1, dtype=np.int64)
    on_drain = np.zeros(J, dtype=bool)
    for k in np.flatnonzero(job_running):
        pl = jobs[k].placement
        if pl is None:
            continue
        run_type[k] = tidx.get(pl.gpu_type, -1)
        on_drain[k] = any(node_drain[node_index[a.node]] for a in pl.nodes if a.node in node_index)
    cap = policy.min_runtime_cap_s
    min_rt = np.fromiter((j.min_runtime_s for j in jobs), dtype=np.float64, count=J)
    start = np.fromiter(
        (j.start_time if j.start_time is not None else np.nan for j in jobs), np.float64, J
    )
    runs_tier1 = job_running & (run_type >= 0) & np.isfinite(start)
    runs_tier1[runs_tier1] = job_tier1[runs_tier1, run_type[runs_tier1]]
    protect_end = np.where(runs_tier1, start + protection_s(min_rt, cap), np.nan)
    job_protected = runs_tier1 & (now < protect_end)
    arrays = dict(
        usage_ratio=ratio, node_type=node_type, node_gpus=node_gpus, node_up=node_up,
        node_present=node_present, node_drain=node_drain, job_gpus=job_gpus,
        job_project=job_project, job_allowed=job_allowed, job_speed=job_speed,
        job_running=job_running, job_allocated=job_allocated, job_tier1=job_tier1,
        job_run_type=run_type, job_protected=job_protected, job_protect_end=protect_end,
        job_on_drain=on_drain,
        job_gpn=np.fromiter((j.gpus_per_node or 0 for j in jobs), dtype=np.int64, count=J),
        job_min_runtime=min_rt,
        job_priority=np.fromiter((j.priority for j in jobs), dtype=np.int64, count=J),
        job_submit=np.fromiter((j.submit_time for j in jobs), dtype=np.float64, count=J),
    )
    for a in arrays.values():
        a.setflags(write=False)  # the snapshot is read-only: policies never write into it
    return Snapshot(
        now=float(now),
        policy=policy,
        gpu_types=gpu_types,
        nodes=nodes,
        org=org,
        jobs=jobs,
        job_index=MappingProxyType({j.id: k for k, j in enumerate(jobs)}),
        node_index=MappingProxyType(node_index),
        type_names=tuple(tnames),
        previous_reservations=tuple(reservations or ()),
        reservation_idle=tuple(reservation_idle or ()),
        shortfall=shortfall,
        fair_shortfall=fair_shortfall,
        **arrays,
    )


def _by_name(org: OrgTree, values: Mapping[str, float] | None) -> np.ndarray:
    """(O,) values by org node name; names the tree does not know are left out, missing = 0."""
    out = np.zeros(org.n)
    for name, x in (values or {}).items():
        if name in org.index:
            out[org.index[name]] = float(x)
    return out


def _shortfall_of(snap: Snapshot, src) -> np.ndarray:
    """(O,) a shortfall input (a mapping, or a callable giving one) per org node, at least 0."""
    return np.maximum(_by_name(snap.org, src() if callable(src) else src), 0.0)


def _owed_shortfall(snap: Snapshot) -> np.ndarray:
    return _shortfall_of(snap, snap.shortfall)


def _fair_shortfall(snap: Snapshot) -> np.ndarray:
    return _shortfall_of(snap, snap.fair_shortfall)
