"""The simulator runs the cron epoch's code. The same short workload goes through the cron path
(`run_cycle` with a real state DB, a clock the test moves from epoch to epoch, and the simulated
cluster as its runner) and through the simulator: the plans and the ledger are the same, epoch
by epoch.

"The same" is exact for the plans (placements, preemptions, pending reasons) and for the
queue each decision saw, the run intervals the ledger charged, and the capacity and demand the
ledger holds at every epoch; usage ratios agree to rounding (the cron ledger is reloaded from
SQLite, so its sums run in another order). Both ledgers take a demand sample at each epoch
and at each end of a job the last epoch knew (its exact time, reported by the runner); the
simulator's metrics also sample demand at each arrival, which cron cannot see; at the epochs
the two agree. The simulator
skips epochs where nothing waits; cron decides at every one, and those plans change nothing.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from optalloc.clock import SimClock
from optalloc.cycle import run_cycle
from optalloc.sim.engine import simulate
from optalloc.sim.policies import make_policy
from optalloc.sim.runner import SimulatedRunner
from optalloc.sim.scenario import NodeEvent, Scenario
from optalloc.sim.tick_demand import TickDemand
from optalloc.state import StateStore
from optalloc.turn import interval
from optalloc.types import (
    Config,
    GpuType,
    Job,
    Node,
    NodeState,
    OrgNode,
    Policy,
    SolverSettings,
)

EPOCH = 300.0
END = 6 * 3600.0


def config(grace_s: float) -> Config:
    return Config(
        gpu_types=(GpuType("h100", 1.0), GpuType("b200", 1.5)),
        nodes=(Node("h1", "h100", 8), Node("h2", "h100", 8), Node("h3", "h100", 8),
               Node("b1", "b200", 8)),
        org=OrgNode("root", children=(
            OrgNode("A", share=2.0, children=(OrgNode("A1"), OrgNode("A2"))),
            OrgNode("B", share=1.0, children=(OrgNode("B1"),)),
        )),
        policy=Policy(epoch_s=EPOCH, grace_s=grace_s, checkpoint_interval_s=600.0,
                      min_runtime_cap_s=3600.0, lookback_s=3 * 3600.0,
                      solver=SolverSettings(backend="highs", time_limit_s=10.0)),
    )


def job(jid, project, gpus, submit, duration, min_runtime=1800.0, **kw) -> Job:
    return Job(jid, project, gpus, min_runtime_s=min_runtime, submit_time=submit,
               duration_s=duration, **kw)


JOBS = (  # submitted between epochs, a 20-GPU gang (8 + 8 + 4), unallocated and debug work
    job("a1-big", "A1", 20, 10.0, 5400.0, gpu_types=("h100",)),
    job("b1-train", "B1", 8, 40.0, 7200.0, speedup={"b200": 2.0}),
    job("a2-debug", "A2", 1, 130.0, 400.0, min_runtime=600.0),
    job("b1-fill", "B1", 4, 200.0, 9000.0, min_runtime=0.0),
    job("a2-train", "A2", 8, 620.0, 6000.0, resumable=False),
    job("a1-small", "A1", 2, 1000.0, 2500.0, gpus_per_node=1),
    job("b1-late", "B1", 16, 2500.0, 3000.0),
    job("a1-late", "A1", 8, 4000.0, 1800.0, min_runtime=600.0),
)
EVENTS = (  # a node fails and returns; another drains (its non-resumable job ends) and returns
    NodeEvent(1800.0, ("h3",), NodeState.DOWN), NodeEvent(3600.0, ("h1",), NodeState.DRAIN),
    NodeEvent(5400.0, ("h3",), NodeState.UP), NodeEvent(7200.0, ("h1",), NodeState.UP),
)


class Recording:
    """A scheduler that keeps what it saw and what it decided."""

    def __init__(self, inner):
        self.inner, self.name, self.seen = inner, inner.name, []

    def decide(self, snapshot):
        plan = self.inner.decide(snapshot)
        self.seen.append((snapshot, plan))
        return plan


def through_cron(tmp_path, cfg: Config, policy: str):
    """Epoch after epoch through run_cycle: jobs are submitted to the state DB as they arrive
    (like `optalloc submit`), node changes happen on the simulated cluster."""
    store = StateStore(tmp_path / "state.db")
    pol = cfg.policy
    runner = SimulatedRunner(cfg.nodes, grace_s=pol.grace_s,
                             checkpoint_interval_s=pol.checkpoint_interval_s)
    clock = SimClock(0.0)
    rec = Recording(make_policy(policy))
    todo = sorted(JOBS, key=lambda j: (j.submit_time, j.id))
    t = 0.0
    while t <= END:
        clock.advance_to(t)
        for ev in EVENTS:
            if ev.time == t:
                for name in ev.nodes:
                    runner.set_node_state(name, ev.state, t)
        while todo and todo[0].submit_time <= t:
            store.add_job(todo.pop(0))
        run_cycle(cfg, store, runner, clock, scheduler=rec)
        t += EPOCH
    return rec, store


def plan_parts(plan):
    return (plan.placements, plan.preemptions,
            tuple((p.job_id, p.code, p.message, dict(p.details)) for p in plan.pending))


def step_at(samples, t):
    """The value of a step function [(time, value), ...] at t."""
    return [v for s, v in samples if s <= t][-1]


@pytest.mark.parametrize("policy", ["greedy", "ilp"])
@pytest.mark.parametrize("grace_s", [0.0, 60.0], ids=["no grace", "60 s grace"])
def test_the_cron_path_and_the_simulator_make_the_same_plans_and_ledger(
        tmp_path, monkeypatch, policy, grace_s):
    cfg = config(grace_s)
    cron, store = through_cron(tmp_path, cfg, policy)
    sim = Recording(make_policy(policy))
    ledger_demand = []  # the samples the simulator's decision ledger took (t, owed, placeable)
    record = TickDemand._record

    def keep(self, t):
        record(self, t)
        ledger_demand.append((t, self.demand.by_project(), self.demand.placeable_by_project()))
    monkeypatch.setattr(TickDemand, "_record", keep)
    sc = Scenario("same", cfg, JOBS, duration_s=END, early_solve=False, node_events=EVENTS)
    result = simulate(sc, sim, check=True, refresh_s=EPOCH)

    by_time = {snap.now: (snap, plan) for snap, plan in cron.seen}
    assert len(sim.seen) >= 10
    for snap, plan in sim.seen:  # every decision the simulator made, cron made the same
        assert snap.now in by_time, f"the simulator decided at {snap.now}, between epochs"
        csnap, cplan = by_time.pop(snap.now)
        assert csnap.jobs == snap.jobs, f"t={snap.now}: the queues differ"
        np.testing.assert_allclose(csnap.usage_ratio, snap.usage_ratio, rtol=1e-9, atol=1e-12)
        for short in ("owed_shortfall", "fair_owed_shortfall"):  # the debt and the lift
            np.testing.assert_allclose(getattr(csnap, short), getattr(snap, short), atol=1e-9)
        assert plan_parts(cplan) == plan_parts(plan), f"t={snap.now}: the plans differ"
    for t, (csnap, cplan) in by_time.items():  # the epochs the simulator skipped change nothing
        running = {j.id: j.placement for j in csnap.jobs if j.running}
        assert cplan.preemptions == () and cplan.pending == (), f"t={t}"
        assert {p.job_id: p for p in cplan.placements} == running, f"t={t}"

    # the ledger: the same run intervals, capacity and demand at every epoch
    still = [interval(j, END) for j in store.list_jobs(states=("running",))]
    charged = sorted([*store.intervals(), *[iv for iv in still if iv]],
                     key=lambda iv: (iv.start, iv.end, iv.job_id))
    assert charged == list(result.intervals)
    assert all(j.end_time is not None for j in result.jobs)  # the workload ran to its end
    sim_demand = [(d.time, dict(d.allocated_by_project)) for d in result.demand]
    sim_capacity = [(c.time, dict(c.by_type)) for c in result.capacity]
    ends = 0
    for t, demand in store.demand_samples():
        assert demand == step_at([(s, d) for s, d, _ in ledger_demand], t), f"demand at t={t}"
        if t % EPOCH == 0:  # at an epoch, what the simulator's metrics hold too
            assert demand == step_at(sim_demand, t), f"demand at t={t}"
        else:  # a job's end between epochs, of the jobs the last epoch knew
            ends += 1
    assert ends >= 2
    # and what of it could run (optalloc.demand): a1-big (20 GPUs, 8 + 8 + 4 on h100) cannot
    # while h3 is down
    sim_fit = [(d.time, dict(d.placeable_by_project)) for d in result.demand]
    for t, fit in store.placeable_demand_samples():
        assert fit == step_at([(s, f) for s, _, f in ledger_demand], t), f"placeable at t={t}"
        if t % EPOCH == 0:
            assert fit == step_at(sim_fit, t), f"placeable demand at t={t}"
    for t, capacity in store.capacity_samples():
        assert capacity == step_at(sim_capacity, t), f"capacity at t={t}"
    assert math.isclose(
        sum(iv.gpus * (iv.end - iv.start) for iv in charged if iv.allocated),
        sum(iv.gpus * (iv.end - iv.start) for iv in result.intervals if iv.allocated))
    store.close()
