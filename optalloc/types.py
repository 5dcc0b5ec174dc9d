"""Frozen value types shared by every layer of optalloc.

No logic lives here beyond trivial derived properties: these are the nouns of the glossary
(DESIGN.md section 3). Times are float seconds (UNIX epoch in production, scenario-relative
seconds in the simulator); durations are float seconds. GPU counts are ints.

Imports point one way: types <- org <- config <- ledger <- snapshot <- model <- solve <- plan
<- epoch <- runners / sim / cli.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, Mapping


def frozen_map(m: Mapping | None = None) -> Mapping:
    """A read-only mapping (used for dict-valued fields of frozen dataclasses)."""
    return MappingProxyType(dict(m or {}))


# --------------------------------------------------------------------------- cluster


class NodeState(str, Enum):
    UP = "up"
    DRAIN = "drain"  # running jobs may finish; no new placements
    DOWN = "down"  # no capacity at all


@dataclass(frozen=True)
class GpuType:
    name: str
    billing_weight: float = 1.0  # normalized cost of one GPU-hour of this type


@dataclass(frozen=True)
class Node:
    name: str
    gpu_type: str
    gpus: int
    state: NodeState = NodeState.UP


# --------------------------------------------------------------------------- org tree


@dataclass(frozen=True)
class OrgNode:
    """One node of the org tree. Leaves are projects.

    `share` is relative among siblings; `share_by_type` overrides it for one gpu_type.
    Names are unique across the whole tree (jobs name their project by leaf name).
    """

    name: str
    share: float = 1.0
    share_by_type: Mapping[str, float] = field(default_factory=frozen_map)
    children: tuple["OrgNode", ...] = ()

    @property
    def is_leaf(self) -> bool:
        return not self.children


# --------------------------------------------------------------------------- policy


@dataclass(frozen=True)
class SolverSettings:
    backend: str = "highs"  # see optalloc.solve.BACKENDS
    time_limit_s: float = 10.0  # a solve past this returns its best incumbent
    mip_gap: float = 0.005  # relative gap at which a MIP solve may stop
    threads: int = 1
    # an epoch whose MIP has at most this many integer columns is solved to EXACT_GAP (HiGHS's
    # own default) when mip_gap is looser: there the MIP proves it in tens of milliseconds,
    # and a 0.5% gap of a whole cluster's objective can hide a gang start the scheme asks
    # for (optalloc.solve.base.effective_settings); 0 turns it off
    exact_up_to: int = 2000

    def __post_init__(self) -> None:
        if self.exact_up_to < 0:
            raise ValueError("exact_up_to must be >= 0")


EXACT_GAP = 1e-4  # the gap of `SolverSettings.exact_up_to` (HiGHS's mip_rel_gap default)


class UsageMode(str, Enum):
    WINDOW = "window"  # published default: sum of usage in the lookback window
    DECAY = "decay"  # Slurm-style exponential decay with a half-life


@dataclass(frozen=True)
class Policy:
    lookback_s: float = 7 * 86400.0
    usage_mode: UsageMode = UsageMode.WINDOW
    half_life_s: float = 7 * 86400.0  # only for usage_mode=decay
    min_runtime_cap_s: float = 8 * 3600.0
    epoch_s: float = 300.0
    grace_s: float = 60.0  # notice between SIGTERM and SIGKILL on preemption
    restart_overhead_s: float = 300.0  # cost of restarting a preempted job (model objective)
    checkpoint_interval_s: float = 3600.0  # default when a job does not say
    # the contract's cheap grant: jobs protected for at most debug_protection_s (debug jobs)
    # may run beyond their project's fair-share target, up to debug_allowance x its entitlement
    debug_protection_s: float = 900.0
    debug_allowance: float = 0.25
    # lookahead for large gangs (optalloc.model.reservations): at most this many waiting gangs
    # hold reserved nodes at once (one per project); 0, the default, turns the lookahead off:
    # measured on the ITP traces and the gang-heavy scenario it cost fairness (owed hourly -0.3
    # to -5.7 points, worst project up to -12.7) and small jobs' waits, and shortened large
    # gangs' waits on one trace of four (results/gangs.md)
    max_reservations: int = 0
    solver: SolverSettings = field(default_factory=SolverSettings)
    # utilization (reported, never enforced): a job holding GPUs at under idle_util_pct percent
    # mean utilization for longer than idle_after_s is flagged idle (dashboard, jobs, metrics)
    idle_util_pct: float = 5.0
    idle_after_s: float = 1800.0


# --------------------------------------------------------------------------- jobs and plans


class JobState(str, Enum):
    QUEUED = "queued"
    RUNNING = "running"


@dataclass(frozen=True)
class NodeAlloc:
    """GPUs of one node given to a job: node name and GPU indices on that node."""

    node: str
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class Placement:
    job_id: str
    gpu_type: str
    nodes: tuple[NodeAlloc, ...]
    allocated: bool = True  # False: unallocated (min_runtime 0), never charged

    @property
    def gpus(self) -> int:
        return sum(len(a.gpus) for a in self.nodes)

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(a.node for a in self.nodes)

    @property
    def gpu_keys(self) -> tuple[tuple[str, int], ...]:
        """((node, GPU index), ...): every GPU the placement holds."""
        return tuple((a.node, g) for a in self.nodes for g in a.gpus)


@dataclass(frozen=True)
class Job:
    id: str
    project: str  # a leaf of the org tree
    gpus: int
    gpus_per_node: int | None = None  # None: one node if it fits, else whole nodes
    gpu_types: tuple[str, ...] = ()  # allowed gpu_types; empty = any
    speedup: Mapping[str, float] = field(default_factory=frozen_map)  # per type, default 1.0
    min_runtime_s: float = 0.0  # 0 = unallocated
    resumable: bool = True
    priority: int = 0  # orders jobs within a project only; higher first
    submit_time: float = 0.0
    duration_s: float | None = None  # expected work at speed 1.0, if known
    checkpoint_interval_s: float | None = None  # None: policy default
    state: JobState = JobState.QUEUED
    start_time: float | None = None  # start of the current run (running jobs)
    placement: Placement | None = None  # running jobs
    command: tuple[str, ...] = ()  # argv for real runners; never a shell string

    @property
    def allocated(self) -> bool:
        return self.min_runtime_s > 0

    @property
    def running(self) -> bool:
        return self.state is JobState.RUNNING


class ReasonCode(str, Enum):
    """Machine-readable outcome for every job that is not simply placed (Kueue style)."""

    # pending
    WAITING_FOR_CAPACITY = "WaitingForCapacity"  # no free GPUs of an allowed type
    OVER_SHARE = "OverShare"  # project or an ancestor ranks below others for the GPUs
    LOWER_PRIORITY_IN_PROJECT = "LowerPriorityInProject"
    GANG_DOES_NOT_FIT = "GangDoesNotFit"  # enough GPUs, but not in free whole nodes
    NO_MATCHING_GPU_TYPE = "NoMatchingGpuType"  # no up node of an allowed type is big enough
    NODE_DRAINING = "NodeDraining"  # capacity of its type is draining/down
    UNALLOCATED_YIELDS = "UnallocatedYields"  # unallocated job waits for idle capacity
    SOLVER_DEGRADED = "SolverDegraded"  # solve failed/timed out; plan kept as it was
    # preemptions
    PREEMPTED_FAIR_SHARE = "PreemptedForFairShare"  # past min_runtime, a higher-ranked job needs it
    PREEMPTED_UNALLOCATED = "PreemptedUnallocated"  # unallocated, allocated demand needs it
    PREEMPTED_NODE_DRAIN = "PreemptedNodeDrain"  # its node went down/drain (past min_runtime)
    MOVED = "Moved"  # restarted elsewhere (counts as a preemption)
    # held: the config no longer has what the job names (kept queued until it returns)
    UNKNOWN_PROJECT = "UnknownProject"  # its project is not a leaf of the org tree any more
    UNKNOWN_GPU_TYPE = "UnknownGpuType"  # none of its allowed gpu_types is configured any more
    RUNNER_REFUSED = "RunnerRefused"  # the runner cannot start it as it is (program not found)
    # lookahead (reservations for large gangs)
    RESERVED = "Reserved"  # a waiting gang holds reserved nodes and an expected start
    HELD_FOR_RESERVATION = "HeldForReservation"  # free GPUs are held for another gang's start


@dataclass(frozen=True)
class Preemption:
    job_id: str
    code: ReasonCode
    message: str
    grace_s: float
    needed_by: tuple[str, ...] = ()  # job ids that take the GPUs


@dataclass(frozen=True)
class PendingReason:
    job_id: str
    code: ReasonCode
    message: str
    details: Mapping[str, Any] = field(default_factory=frozen_map)


@dataclass(frozen=True)
class FloorViolation:
    """A share floor that could not be met this epoch (soft constraint)."""

    org_node: str
    gpu_type: str
    floor_gpus: float
    got_gpus: float


@dataclass(frozen=True)
class DrainStatus:
    """Progress of one drain node after a plan: it takes nothing new, and each job on it leaves
    as soon as its protection ends (unallocated work at once). `ready` when nothing runs there
    any more: the node can go to repair."""

    node: str
    staying: tuple[str, ...] = ()  # protected jobs still on it after this plan
    leaving: tuple[str, ...] = ()  # jobs preempted off it by this plan (gone after the grace)
    empty_at: float | None = None  # when it will be empty (latest protection end or now, + grace)
    ready: bool = False  # empty now: ready for repair


@dataclass(frozen=True)
class Reservation:
    """Nodes held for a waiting gang (the lookahead, models/formulation.md "Reservations"):
    the gang starts there once the protections of the jobs on them have ended (`details`'
    clear_at, the latest of the nodes' free times: no new job whose protection, or expected
    end if sooner, outlasts it is placed on `nodes`). `expected_start` adds the notice of the
    jobs still there then: they keep their GPUs through `policy.grace_s` unless they end
    sooner on their own. `since`: the epoch the reservation was first made; `idle_gpus`: GPUs
    of its nodes nobody uses after this plan (held idle for the gang)."""

    job_id: str
    gpu_type: str
    nodes: tuple[str, ...]
    expected_start: float
    project: str = ""
    gpus: int = 0
    since: float | None = None
    idle_gpus: int = 0
    message: str = ""
    details: Mapping[str, Any] = field(default_factory=frozen_map)
    at: float | None = None  # the time of the plan that holds it
    idle_gpu_h: float = 0.0  # GPU-hours its nodes have been held idle so far (plan by plan)


@dataclass(frozen=True)
class ReservationEnd:
    """A reservation that ended in this epoch: `outcome` started (kept: its gang starts now,
    on its nodes or elsewhere), or why it was dropped: cancelled (the job left the queue),
    outranked (its project no longer has room for the gang in its fair-share target, or the cap
    of reservations is taken by others), order (a job of its project ahead of it waits),
    unplaceable (its shape fits no up nodes any more), off (the policy turned lookahead off)."""

    job_id: str
    gpu_type: str
    nodes: tuple[str, ...]
    expected_start: float
    outcome: str
    message: str = ""
    since: float | None = None


@dataclass(frozen=True)
class ReservationIdle:
    """The GPU-hours a reservation that has ended held idle for its gang, charged to its
    project in the lookahead's budget test for the lookback window after it (models/
    formulation.md "Fair-share accounting"), whether its gang started or it was dropped: a
    project that drops and remakes a reservation pays for every idle hour, not only the last
    reservation's. `start`..`end`: when it held its nodes; `gpu_h` is spread evenly over them."""

    job_id: str
    project: str
    gpu_type: str
    start: float
    end: float
    gpu_h: float


@dataclass(frozen=True)
class SolveReport:
    backend: str
    status: str  # optimal | feasible | infeasible | timeout | error | skipped
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None  # relative, |obj - bound| / max(1, |obj|)
    n_vars: int = 0
    n_cons: int = 0
    build_s: float = 0.0
    solve_s: float = 0.0
    place_s: float = 0.0
    message: str = ""
    source: str = ""  # which candidate plan won: lp-rounded | mip | greedy | fallback


@dataclass(frozen=True)
class Plan:
    """The outcome of one epoch. `placements` lists every job that runs after the epoch
    (kept running jobs and new starts); preempted running jobs are in `preemptions`;
    every queued job not placed has a `PendingReason`."""

    now: float
    placements: tuple[Placement, ...] = ()
    preemptions: tuple[Preemption, ...] = ()
    pending: tuple[PendingReason, ...] = ()
    floor_violations: tuple[FloorViolation, ...] = ()
    report: SolveReport | None = None
    degraded: str | None = None  # why the plan is a fallback, if it is
    drains: tuple[DrainStatus, ...] = ()  # every drain node's progress
    reservations: tuple[Reservation, ...] = ()  # nodes held for waiting gangs after this plan
    reservations_ended: tuple[ReservationEnd, ...] = ()  # started (kept) or dropped this epoch
    # idle GPU-hours of reservations that ended, still inside the lookback window (the next
    # epoch's lookahead charges them to their projects)
    reservation_idle: tuple[ReservationIdle, ...] = ()


# --------------------------------------------------------------------------- config and ledger


@dataclass(frozen=True)
class JobEnv:
    """What a real runner passes on to a job from optalloc's own environment, beyond its
    default allow-list (PATH, HOME, LANG, ...; see optalloc.runners.local_proc): variable
    names in `allow` (a trailing `*` allows a prefix, e.g. `WANDB_*`), and fixed values in
    `set`. Nothing else of optalloc's environment reaches a job."""

    allow: tuple[str, ...] = ()
    set: Mapping[str, str] = field(default_factory=frozen_map)


@dataclass(frozen=True)
class Config:
    gpu_types: tuple[GpuType, ...]
    nodes: tuple[Node, ...]
    org: OrgNode  # root
    policy: Policy = field(default_factory=Policy)
    jobs: tuple[Job, ...] = ()
    sources: tuple[str, ...] = ()  # files it was read from
    job_env: JobEnv = field(default_factory=JobEnv)


@dataclass(frozen=True)
class Interval:
    """One run interval of a job on GPUs of one type, as the ledger records it."""

    job_id: str
    project: str
    gpu_type: str
    gpus: int
    start: float
    end: float
    allocated: bool = True  # unallocated intervals are recorded but never charged
