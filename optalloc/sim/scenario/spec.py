"""The scenario the simulator runs: a config (cluster, org tree, policy), the jobs it submits,
and how the simulation goes (horizon, epoch, checkpoints, early solves, seed, node events).
Loaded from a file (optalloc.sim.scenario.load_scenario) or built in code (tests, notebooks):
one type either way, every field the engine reads is a field here."""

from __future__ import annotations

from dataclasses import dataclass, replace

from optalloc.sim.workload import WorkloadSummary
from optalloc.types import Config, Job, NodeState


@dataclass(frozen=True)
class NodeEvent:
    """At `time` (seconds after scenario time 0) the named nodes change state."""

    time: float
    nodes: tuple[str, ...]
    state: NodeState


@dataclass(frozen=True)
class Scenario:
    name: str
    config: Config
    jobs: tuple[Job, ...]  # submitted at their submit_time (one declared running starts queued)
    duration_s: float | None = None  # None: until every job has ended
    epoch_s: float | None = None  # None: config.policy.epoch_s
    checkpoint_interval_s: float | None = None  # None: config.policy.checkpoint_interval_s
    early_solve: bool = True  # also decide when a job is submitted, not only at epoch ticks
    seed: int | None = None
    node_events: tuple[NodeEvent, ...] = ()
    source_path: str | None = None
    workload: WorkloadSummary | None = None
    start_time: float = 0.0  # wall-clock seconds that scenario time 0 stands for (simulation.start)

    @property
    def capacity_gpus(self) -> int:
        return sum(n.gpus for n in self.config.nodes)


def with_horizon(sc: Scenario, duration_s: float) -> Scenario:
    """The scenario cut to its first `duration_s` seconds (never longer than it was): jobs
    submitted and node events due later are dropped."""
    d = float(duration_s) if sc.duration_s is None else min(float(duration_s), sc.duration_s)
    return replace(
        sc,
        duration_s=d,
        jobs=tuple(j for j in sc.jobs if j.submit_time < d),
        node_events=tuple(e for e in sc.node_events if e.time < d),
    )
