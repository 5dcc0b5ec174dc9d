"""The cron turn when the config no longer has what jobs name, and when the runner repeats
itself after a crash: the epoch goes on for everyone else, held jobs say why, nothing is
charged twice, every ended job has one end event."""

from __future__ import annotations

import dataclasses

import pytest

from optalloc.clock import FixedClock
from optalloc.cycle import run_cycle
from optalloc.errors import OptallocError
from optalloc.runners import base
from optalloc.runners.base import ApplyResult, EventKind, JobEvent, Observation
from optalloc.types import (
    Config,
    GpuType,
    Job,
    JobState,
    Node,
    NodeAlloc,
    OrgNode,
    Placement,
    Policy,
    ReasonCode,
    SolverSettings,
)

from test_cycle import H, job, store  # noqa: F401,E402  (store: the state DB fixture)


def cluster(projects=("a", "b"), types=("h100", "b200")) -> Config:
    return Config(
        gpu_types=tuple(GpuType(t) for t in types),
        nodes=tuple(Node(f"{t}-{i}", t, 8) for t in types for i in range(2)),
        org=OrgNode("root", children=tuple(OrgNode(p) for p in projects)),
        policy=Policy(solver=SolverSettings(backend="highs", time_limit_s=10)),
    )


class Runner(base.Runner):
    """Authoritative; starts what is placed; `repeat` makes observe hand out its last events
    again (a runner whose acknowledgement was lost to a crash)."""

    name = "scripted"
    authoritative = True

    def __init__(self):
        self.running: dict[str, tuple[Placement, float]] = {}
        self.events: list[JobEvent] = []
        self.last: tuple[JobEvent, ...] = ()
        self.repeat = False

    def end(self, job_id, t, kind=EventKind.FINISHED):
        placement, start = self.running.pop(job_id)
        self.events.append(JobEvent(job_id, kind, t, placement, 0, "", run_start=start))

    def observe(self, now):
        if not self.repeat:
            self.last, self.events = tuple(self.events), []
        return Observation(now=now, running=dict(self.running), events=self.last)

    def apply(self, plan, jobs, now):
        started = []
        for p in plan.placements:
            if p.job_id not in self.running:
                self.running[p.job_id] = (p, now)
                started.append(p.job_id)
        return ApplyResult(started=tuple(started))


def held(plan) -> dict[str, tuple[ReasonCode, str]]:
    return {p.job_id: (p.code, p.message) for p in plan.pending
            if p.code in (ReasonCode.UNKNOWN_PROJECT, ReasonCode.UNKNOWN_GPU_TYPE)}


@pytest.mark.parametrize(
    "case, queued, later_config, expected_held, expected_placed",
    [
        ("a job of a removed project is held, the others run",
         [job("x1", "gone"), job("a1")], cluster(), {
             "x1": (ReasonCode.UNKNOWN_PROJECT,
                    "held: its project 'gone' is not in the org tree any more; it waits until "
                    "the config has the project again, or cancel it")}, {"a1"}),
        ("a job whose project became an inner node is held",
         [job("x1", "a")],
         dataclasses.replace(cluster(), org=OrgNode("root", children=(
             OrgNode("a", children=(OrgNode("a-new"),)), OrgNode("b")))), {
             "x1": (ReasonCode.UNKNOWN_PROJECT,
                    "held: its project 'a' is an inner node of the org tree now, not a "
                    "project; it waits until the config has the project again, or cancel it")},
         set()),
        ("a job allowing only a removed gpu_type is held",
         [job("t1", gpu_types=("b200",)), job("a1", gpu_types=("h100",))],
         cluster(types=("h100",)), {
             "t1": (ReasonCode.UNKNOWN_GPU_TYPE,
                    "held: none of its gpu_types (b200) is configured any more; it waits until "
                    "the config has one of them again, or cancel it")}, {"a1"}),
        ("a job allowing a removed and a kept gpu_type runs on the kept one",
         [job("t1", gpu_types=("b200", "h100"), speedup={"b200": 2.0})],
         cluster(types=("h100",)), {}, {"t1"}),
    ],
)
def test_jobs_the_config_no_longer_fits_are_held_and_the_epoch_goes_on(
        store, case, queued, later_config, expected_held, expected_placed):
    for j in queued:
        store.add_job(j)
    res = run_cycle(later_config, store, Runner(), FixedClock(0.0))
    assert held(res.plan) == expected_held
    assert {p.job_id for p in res.plan.placements} == expected_placed
    stored = {j.id: j for j in store.list_jobs()}
    for job_id in expected_held:  # kept queued, unchanged, with the reason in the epoch record
        assert stored[job_id] == next(j for j in queued if j.id == job_id)
        assert stored[job_id].state is JobState.QUEUED
    pending = {p["job_id"]: p["code"] for p in store.last_epoch()["plan"]["pending"]}
    assert {k: v for k, v in pending.items() if k in expected_held} == {
        k: v[0].value for k, v in expected_held.items()}


def test_a_held_job_runs_once_the_config_has_its_project_again(store):
    store.add_job(job("x1", "gone"))
    runner = Runner()
    assert held(run_cycle(cluster(), store, runner, FixedClock(0.0)).plan).keys() == {"x1"}
    res = run_cycle(cluster(projects=("a", "b", "gone")), store, runner, FixedClock(60.0))
    assert [p.job_id for p in res.plan.placements] == ["x1"] and held(res.plan) == {}


def _running(job_id, project, node, start=0.0, gpus=8) -> Job:
    placement = Placement(job_id, node.split("-")[0], (NodeAlloc(node, tuple(range(gpus))),))
    return dataclasses.replace(job(job_id, project, gpus), state=JobState.RUNNING,
                               start_time=start, placement=placement)


def test_a_running_job_of_a_removed_project_keeps_its_gpus_until_a_shared_project_needs_them(store):
    runner = Runner()
    r1 = _running("r1", "gone", "h100-0")
    store.upsert_job(r1)
    runner.running["r1"] = (r1.placement, 0.0)
    store.add_job(job("a0", gpu_types=("h100",)))  # a wants 8 of the 16 h100 GPUs: r1 stays
    one = run_cycle(cluster(), store, runner, FixedClock(60.0))
    assert "r1" in {p.job_id for p in one.plan.placements}
    assert not [p for p in one.plan.placements if p.job_id == "r1"][0].allocated  # not charged
    used = [(a.node, g) for p in one.plan.placements for a in p.nodes for g in a.gpus]
    assert len(used) == len(set(used))  # nobody was placed on r1's GPUs
    for i in range(1, 3):  # now a wants 24: a project with no share is unallocated work and
        store.add_job(job(f"a{i}", gpu_types=("h100",)))  # yields at once (never protected)
    two = run_cycle(cluster(), store, runner, FixedClock(120.0))
    assert [(p.job_id, p.code.value) for p in two.plan.preemptions] == [
        ("r1", "PreemptedUnallocated")]


def test_a_running_job_on_a_removed_node_is_left_running_and_charged_when_it_ends(store):
    runner = Runner()
    r1 = _running("r1", "a", "b200-0")
    store.upsert_job(r1)
    runner.running["r1"] = (r1.placement, 0.0)
    small = cluster(types=("h100",))  # the b200 nodes (and type) are gone from the config
    res = run_cycle(small, store, runner, FixedClock(60.0))
    assert "r1" not in {j.id for j in res.snapshot.jobs}
    assert store.get_job("r1").state is JobState.RUNNING
    runner.end("r1", H)
    run_cycle(small, store, runner, FixedClock(H + 60))
    assert store.job_status("r1") == "finished"
    assert [(iv.job_id, iv.gpu_type, iv.start, iv.end) for iv in store.intervals()] == [
        ("r1", "b200", 0.0, H)]


def test_every_ended_job_gets_exactly_one_end_event(store):
    runner = Runner()
    for j in (job("a1"), job("b1", "b", resumable=False)):
        store.add_job(j)
    run_cycle(cluster(types=("h100",)), store, runner, FixedClock(0.0))
    runner.end("a1", H)
    runner.end("b1", H, EventKind.PREEMPTED)
    run_cycle(cluster(types=("h100",)), store, runner, FixedClock(H + 60))
    kinds = [(e["job_id"], e["kind"]) for e in store.events(limit=100)
             if e["kind"] not in ("started",)]
    assert sorted(kinds) == [("a1", "finished"), ("b1", "cancelled")]


def test_events_repeated_after_a_crash_are_neither_charged_nor_recorded_twice(store):
    runner = Runner()
    for j in (job("a1"), job("a2", resumable=True)):
        store.add_job(j)
    run_cycle(cluster(types=("h100",)), store, runner, FixedClock(0.0))
    runner.end("a1", H)
    runner.end("a2", H, EventKind.REQUEUED)
    run_cycle(cluster(types=("h100",)), store, runner, FixedClock(H + 60))
    first = (store.intervals(), store.events(limit=100))
    runner.repeat = True  # the acknowledgement was lost: the same events again, twice
    run_cycle(cluster(types=("h100",)), store, runner, FixedClock(H + 120))
    run_cycle(cluster(types=("h100",)), store, runner, FixedClock(H + 180))
    assert store.intervals() == first[0]
    assert [(iv.job_id, iv.start, iv.end) for iv in first[0]] == [("a1", 0.0, H), ("a2", 0.0, H)]
    ends = [e for e in store.events(limit=100) if e["kind"] in ("finished", "requeued")]
    assert sorted((e["job_id"], e["kind"]) for e in ends) == [("a1", "finished"),
                                                             ("a2", "requeued")]


def test_the_end_of_a_run_whose_start_was_never_recorded_is_charged(store):
    """A crash after the runner started a job and before the epoch recorded the start: the
    runner's end event carries the run, and the ledger gets it."""
    runner = Runner()
    store.add_job(job("a1"))
    placement = Placement("a1", "h100", (NodeAlloc("h100-0", tuple(range(8))),))
    runner.events.append(JobEvent("a1", EventKind.FINISHED, 2 * H, placement, 0, "exited 0",
                                  run_start=600.0))
    run_cycle(cluster(types=("h100",)), store, runner, FixedClock(2 * H + 60))
    assert store.job_status("a1") == "finished"
    assert [(iv.job_id, iv.start, iv.end, iv.gpus) for iv in store.intervals()] == [
        ("a1", 600.0, 2 * H, 8)]


def test_an_epoch_earlier_than_the_last_one_is_refused_and_writes_nothing(store):
    runner = Runner()
    store.add_job(job("a1"))
    run_cycle(cluster(), store, runner, FixedClock(H))
    before = (store.list_jobs(), store.intervals(), store.epochs(limit=10))
    with pytest.raises(OptallocError, match="is earlier than the last recorded epoch"):
        run_cycle(cluster(), store, runner, FixedClock(H - 1))
    assert (store.list_jobs(), store.intervals(), store.epochs(limit=10)) == before
    run_cycle(cluster(), store, runner, FixedClock(H))  # the same time again (a retry) is fine
