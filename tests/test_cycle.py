"""The cron turn (optalloc.cycle.run_cycle): queue, observe, reconcile, ledger, decide, record,
apply. A scripted runner stands in for the machines; the store is a real SQLite file."""

from __future__ import annotations

import dataclasses

import pytest

from optalloc.clock import FixedClock
from optalloc.cycle import run_cycle
from optalloc.state import StateStore
from optalloc.runners.base import ApplyResult, EventKind, JobEvent, Observation, Runner
from optalloc.types import (
    Config,
    GpuType,
    Job,
    JobState,
    Node,
    NodeAlloc,
    OrgNode,
    Placement,
    Plan,
    Policy,
    SolverSettings,
)

H = 3600.0


def cluster(jobs=(), nodes=2) -> Config:
    return Config(
        gpu_types=(GpuType("h100"),),
        nodes=tuple(Node(f"n{i}", "h100", 8) for i in range(nodes)),
        org=OrgNode("root", children=(OrgNode("a", share=1), OrgNode("b", share=1))),
        policy=Policy(solver=SolverSettings(backend="highs", time_limit_s=10)),
        jobs=tuple(jobs),
    )


class ScriptedRunner(Runner):
    """Authoritative runner whose observations are scripted; it starts whatever is placed."""

    name = "scripted"
    authoritative = True

    def __init__(self):
        self.running: dict[str, tuple[Placement, float]] = {}
        self.pending_events: list[JobEvent] = []
        self.applied: list[Plan] = []

    def finish(self, job_id: str, t: float, kind=EventKind.FINISHED):
        placement, start = self.running.pop(job_id)
        self.pending_events.append(JobEvent(job_id, kind, t, placement, 0, "", run_start=start))

    def observe(self, now):
        events, self.pending_events = tuple(self.pending_events), []
        return Observation(now=now, running=dict(self.running), events=events)

    def apply(self, plan, jobs, now):
        self.applied.append(plan)
        started = []
        for p in plan.placements:
            if p.job_id not in self.running:
                self.running[p.job_id] = (p, now)
                started.append(p.job_id)
        for pre in plan.preemptions:
            placement, start = self.running.pop(pre.job_id)
            kind = EventKind.REQUEUED if jobs[pre.job_id].resumable else EventKind.PREEMPTED
            self.pending_events.append(JobEvent(pre.job_id, kind, now, placement, run_start=start))
        return ApplyResult(started=tuple(started))


@pytest.fixture
def store(tmp_path):
    s = StateStore(tmp_path / "state.db")
    yield s
    s.close()


def job(id, project="a", gpus=8, **kw) -> Job:
    return Job(id=id, project=project, gpus=gpus, min_runtime_s=kw.pop("min_runtime_s", H), **kw)


def test_config_jobs_enter_the_queue_and_placed_ones_run_after_the_first_epoch(store):
    cfg = cluster([job("a1"), job("b1", "b")])
    runner = ScriptedRunner()
    res = run_cycle(cfg, store, runner, FixedClock(0.0))
    assert {p.job_id for p in res.plan.placements} == {"a1", "b1"}
    stored = {j.id: j for j in store.list_jobs()}
    assert {k: (j.state, j.start_time) for k, j in stored.items()} == {
        "a1": (JobState.RUNNING, 0.0),
        "b1": (JobState.RUNNING, 0.0),
    }
    assert stored["a1"].placement == runner.running["a1"][0]
    assert store.last_epoch()["time"] == 0.0


def test_a_finished_job_is_charged_exactly_its_run_interval(store):
    cfg = cluster([job("a1", gpus=4)])
    runner = ScriptedRunner()
    run_cycle(cfg, store, runner, FixedClock(0.0))
    runner.finish("a1", 2 * H)
    run_cycle(cfg, store, runner, FixedClock(2 * H + 60))
    ivs = store.intervals()
    assert [(iv.job_id, iv.gpus, iv.start, iv.end, iv.allocated) for iv in ivs] == [
        ("a1", 4, 0.0, 2 * H, True)
    ]
    assert store.job_status("a1") == "finished"
    assert store.list_jobs() == []
    # conservation: the ledger charges exactly the interval's GPU-hours
    snap_tree = run_cycle(cfg, store, runner, FixedClock(3 * H)).snapshot.org
    led = store.ledger(cfg.gpu_types, snap_tree, cfg.policy)
    assert led.usage(3 * H)[snap_tree.index["a"]] == pytest.approx(8.0)


def test_a_requeued_job_returns_to_the_queue_and_its_run_is_charged(store):
    cfg = cluster([job("a1")])
    runner = ScriptedRunner()
    run_cycle(cfg, store, runner, FixedClock(0.0))
    runner.finish("a1", H, kind=EventKind.REQUEUED)
    res = run_cycle(cfg, store, runner, FixedClock(H), dry_run=True)  # decide only
    assert res.intervals[0].end == H
    assert [j.state for j in res.snapshot.jobs] == [JobState.QUEUED]


def test_a_dry_run_writes_and_starts_nothing(store):
    cfg = cluster([job("a1")])
    runner = ScriptedRunner()
    res = run_cycle(cfg, store, runner, FixedClock(0.0), dry_run=True)
    assert [p.job_id for p in res.plan.placements] == ["a1"]
    assert runner.applied == [] and runner.running == {}
    assert store.list_jobs() == [] and store.last_epoch() is None


def test_a_job_the_db_thinks_runs_but_the_runner_never_started_is_queued_again(store):
    cfg = cluster()
    ghost = dataclasses.replace(
        job("a1"),
        state=JobState.RUNNING,
        start_time=0.0,
        placement=Placement("a1", "h100", (NodeAlloc("n0", tuple(range(8))),)),
    )
    store.upsert_job(ghost)
    runner = ScriptedRunner()  # knows nothing about a1

    class Frozen(ScriptedRunner):
        def apply(self, plan, jobs, now):  # start nothing, to look at the reconciled queue
            return ApplyResult()

    res = run_cycle(cfg, store, Frozen(), FixedClock(60.0))
    assert [j.state for j in res.snapshot.jobs] == [JobState.QUEUED]
    assert store.intervals() == []  # it never ran: nothing charged
    del runner


def test_a_crash_while_recording_leaves_the_previous_state_intact(store, monkeypatch):
    cfg = cluster([job("a1")])
    runner = ScriptedRunner()
    run_cycle(cfg, store, runner, FixedClock(0.0))
    before = (store.list_jobs(), store.intervals(), store.last_epoch()["id"])
    runner.finish("a1", H)

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(store, "record_epoch", boom)
    with pytest.raises(RuntimeError):
        run_cycle(cfg, store, runner, FixedClock(H + 60))
    assert (store.list_jobs(), store.intervals(), store.last_epoch()["id"]) == before


def test_node_states_reported_by_the_runner_override_the_config(store):
    from optalloc.types import NodeState

    cfg = cluster([job("a1"), job("b1", "b")])

    class Draining(ScriptedRunner):
        def observe(self, now):
            obs = super().observe(now)
            return dataclasses.replace(obs, node_states={"n0": NodeState.DRAIN})

    res = run_cycle(cfg, store, Draining(), FixedClock(0.0))
    assert [p.nodes[0].node for p in res.plan.placements] == ["n1"]
    assert len(res.plan.pending) == 1


def test_the_epoch_records_what_each_project_was_owed_and_not_delivered(store):
    """a's 16-GPU job holds both nodes from t=0, protected for 8 h (the scripted runner never
    ends it); b's
    4-GPU job arrives at 60 s and waits: from the epoch at 60 s to 7200 s b was owed 4 GPUs
    (its demand, below its share of 8) and got none: 4 x 7140 / 3600 GPU-hours. a was owed
    8 and got 16: nothing short, and neither is the root (it got all 16 GPUs)."""
    b1 = dataclasses.replace(job("b1", "b", gpus=4), submit_time=60.0)
    cfg = cluster([job("a1", gpus=16, min_runtime_s=8 * H), b1])
    runner = ScriptedRunner()
    for t in (0.0, 60.0, H, 2 * H):
        run_cycle(cfg, store, runner, FixedClock(t))
    assert set(runner.running) == {"a1"}
    inputs = store.last_epoch()["plan"]["inputs"]
    assert inputs["shortfall"] == {"b": pytest.approx(4 * 7140 / H)}
