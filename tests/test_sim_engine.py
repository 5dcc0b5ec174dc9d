"""The simulation engine on tiny hand-checkable traces: every run interval and every job's
record is asserted (the timeline in each case's comment is worked out by hand)."""

from __future__ import annotations

import dataclasses

import pytest

from optalloc.sim.engine import check_conservation, simulate
from optalloc.sim.scenario import NodeEvent, Scenario
from optalloc.sim.policies import make_policy
from optalloc.sim.result import JobRecord
from optalloc.types import Config, GpuType, Job, Node, NodeState, OrgNode, Policy

H = 3600.0


def scenario(jobs, *, nodes=1, grace=0.0, ckpt=600.0, early=True, events=(), types=("h100",), duration=None):
    cfg = Config(
        gpu_types=tuple(GpuType(t) for t in types),
        nodes=tuple(Node(f"n{i + 1}", types[i % len(types)], 8) for i in range(nodes)),
        org=OrgNode("root", children=(OrgNode("A"), OrgNode("B"))),
        policy=Policy(grace_s=grace, epoch_s=300.0, checkpoint_interval_s=ckpt),
    )
    return Scenario("tiny", cfg, tuple(jobs), duration_s=duration, early_solve=early, node_events=tuple(events))


TRAIN = Job("train", "A", 8, min_runtime_s=H, submit_time=0.0, duration_s=2 * H)
DEBUG = Job("debug", "B", 8, min_runtime_s=1800.0, submit_time=100.0, duration_s=1800.0)


def timeline(res):
    return [(iv.job_id, iv.start, iv.end) for iv in res.intervals]


def records(res):
    return {r.job_id: (r.first_start, r.end_time, r.completed, r.preemptions, r.lost_gpu_s) for r in res.jobs}


CASES = [
    pytest.param(
        # train is protected for 1h, then B (no usage) ranks above A: train is preempted at
        # 3600 (a checkpoint boundary: nothing lost), debug runs 30 min, train resumes.
        "greedy", dict(jobs=[TRAIN, DEBUG]),
        [("train", 0, 3600), ("debug", 3600, 5400), ("train", 5400, 9000)],
        {"train": (0, 9000, True, 1, 0.0), "debug": (3600, 5400, True, 0, 0.0)},
        id="greedy-time-slices-after-min-runtime",
    ),
    pytest.param(
        # the old system: train opted out of preemption, so debug waits for the whole run.
        "priority", dict(jobs=[TRAIN, DEBUG]),
        [("train", 0, 7200), ("debug", 7200, 9000)],
        {"train": (0, 7200, True, 0, 0.0), "debug": (7200, 9000, True, 0, 0.0)},
        id="priority-lets-opt-out-jobs-squat",
    ),
    pytest.param(
        # checkpoints every 1500 s: preempted at 3600, the 600 s since the 3000 s checkpoint are
        # lost (8 GPUs x 600 s); 4200 s of work remain after the restart at 5400.
        "greedy", dict(jobs=[TRAIN, DEBUG], ckpt=1500.0),
        [("train", 0, 3600), ("debug", 3600, 5400), ("train", 5400, 9600)],
        {"train": (0, 9600, True, 1, 4800.0), "debug": (3600, 5400, True, 0, 0.0)},
        id="preemption-loses-work-since-the-last-checkpoint",
    ),
    pytest.param(
        # 60 s grace: notice at 3600, GPUs free at 3660 where debug starts; debug ends at 5460,
        # the next epoch tick 5700 restarts train with 7200 - 3600 s of work (60 s lost).
        "greedy", dict(jobs=[TRAIN, DEBUG], grace=60.0),
        [("train", 0, 3660), ("debug", 3660, 5460), ("train", 5700, 9300)],
        {"train": (0, 9300, True, 1, 480.0), "debug": (3660, 5460, True, 0, 0.0)},
        id="grace-period-delays-the-successor",
    ),
    pytest.param(
        # a non-resumable job that is preempted ends there and loses its whole run.
        "greedy", dict(jobs=[dataclasses.replace(TRAIN, resumable=False), DEBUG]),
        [("train", 0, 3600), ("debug", 3600, 5400)],
        {"train": (0, 3600, False, 1, 8 * 3600.0), "debug": (3600, 5400, True, 0, 0.0)},
        id="non-resumable-preempted-job-ends",
    ),
    pytest.param(
        # early solve starts a debug job at its submission, not at the next tick.
        "greedy", dict(jobs=[Job("d", "B", 2, min_runtime_s=900.0, submit_time=130.0, duration_s=60.0)]),
        [("d", 130, 190)],
        {"d": (130, 190, True, 0, 0.0)},
        id="early-solve-starts-at-submission",
    ),
    pytest.param(
        "greedy", dict(jobs=[Job("d", "B", 2, min_runtime_s=900.0, submit_time=130.0, duration_s=60.0)], early=False),
        [("d", 300, 360)],
        {"d": (300, 360, True, 0, 0.0)},
        id="without-early-solve-a-job-waits-for-the-tick",
    ),
    pytest.param(
        # two types: b200 twice as fast; 2h of work takes 1h there.
        "greedy", dict(
            jobs=[Job("fast", "A", 8, min_runtime_s=H, duration_s=2 * H, speedup={"b200": 2.0})],
            nodes=2, types=("h100", "b200"),
        ),
        [("fast", 0, 3600)],
        {"fast": (0, 3600, True, 0, 0.0)},
        id="jobs-run-at-the-speed-of-their-gpu-type",
    ),
    pytest.param(
        # node down at 1000 kills the job (400 s since the 600 s checkpoint lost); back up at
        # 2000, the next tick (2100) restarts it with 3000 - 600 s of work.
        "priority", dict(
            jobs=[Job("j", "A", 8, min_runtime_s=H, duration_s=3000.0)],
            events=[NodeEvent(1000.0, ("n1",), NodeState.DOWN), NodeEvent(2000.0, ("n1",), NodeState.UP)],
        ),
        [("j", 0, 1000), ("j", 2100, 4500)],
        {"j": (0, 4500, True, 1, 3200.0)},
        id="node-down-kills-and-requeues",
    ),
    pytest.param(
        # drain at 1000: the job is past its 600 s protection, so greedy moves it off at the
        # next tick (1200) and restarts it on n2 at the tick after (1500); work lost 0 (ckpt 600).
        "greedy", dict(
            jobs=[Job("j", "A", 8, min_runtime_s=600.0, duration_s=3000.0)], nodes=2,
            events=[NodeEvent(1000.0, ("n1",), NodeState.DRAIN)],
        ),
        [("j", 0, 1200), ("j", 1500, 3300)],
        {"j": (0, 3300, True, 1, 0.0)},
        id="greedy-empties-a-drained-node",
    ),
    pytest.param(
        # ... while priority lets it finish there.
        "priority", dict(
            jobs=[Job("j", "A", 8, min_runtime_s=600.0, duration_s=3000.0)], nodes=2,
            events=[NodeEvent(1000.0, ("n1",), NodeState.DRAIN)],
        ),
        [("j", 0, 3000)],
        {"j": (0, 3000, True, 0, 0.0)},
        id="priority-lets-a-job-finish-on-a-drained-node",
    ),
    pytest.param(
        # an unallocated job fills the idle node and yields at once to allocated demand.
        "greedy", dict(jobs=[
            Job("free", "A", 8, min_runtime_s=0.0, duration_s=2 * H),
            Job("paid", "B", 8, min_runtime_s=H, submit_time=1000.0, duration_s=600.0),
        ]),
        [("free", 0, 1000), ("paid", 1000, 1600), ("free", 1800, 8400)],
        {"free": (0, 8400, True, 1, 8 * 400.0), "paid": (1000, 1600, True, 0, 0.0)},
        id="unallocated-fills-and-yields",
    ),
]


# the optimizer, checked at every decision like the baselines, on the cases whose timeline
# does not depend on how a policy ranks (the same hand-worked timelines)
ILP_SAME = ("early-solve-starts-at-submission", "without-early-solve-a-job-waits-for-the-tick",
            "jobs-run-at-the-speed-of-their-gpu-type", "node-down-kills-and-requeues",
            "unallocated-fills-and-yields")
CASES += [pytest.param("ilp", *c.values[1:], id=f"ilp:{c.id}") for c in CASES if c.id in ILP_SAME]
CASES.append(pytest.param(
    # drain at 1000: the job is past its protection, so the ilp moves it off at the next tick
    # (1200) and restarts it on n2 in the same plan (a job leaving a drain node restarts as a
    # queued job would), where greedy requeues it and starts it at the tick after (1500)
    "ilp", dict(
        jobs=[Job("j", "A", 8, min_runtime_s=600.0, duration_s=3000.0)], nodes=2,
        events=[NodeEvent(1000.0, ("n1",), NodeState.DRAIN)],
    ),
    [("j", 0, 1200), ("j", 1200, 3000)],
    {"j": (0, 3000, True, 1, 0.0)},
    id="ilp:restarts-a-job-that-leaves-a-drained-node-in-the-same-plan",
))
CASES.append(pytest.param(
    # 20 GPUs on 8-GPU nodes: 8 + 8 + 4 on three nodes (optalloc/shape.py), under each policy;
    # the 4 GPUs left on the third node take a 4-GPU job at once
    "ilp", dict(jobs=[Job("gang", "A", 20, min_runtime_s=H, duration_s=H),
                      Job("four", "B", 4, min_runtime_s=H, duration_s=H)], nodes=3),
    [("four", 0, 3600), ("gang", 0, 3600)],
    {"gang": (0, 3600, True, 0, 0.0), "four": (0, 3600, True, 0, 0.0)},
    id="ilp:a-20-gpu-gang-is-8-8-4",
))
CASES += [pytest.param(p, *CASES[-1].values[1:], id=f"{p}:a-20-gpu-gang-is-8-8-4")
          for p in ("greedy", "priority")]


@pytest.mark.parametrize("policy, kw, intervals, recs", CASES)
def test_whole_timeline_of_a_tiny_trace(policy, kw, intervals, recs):
    res = simulate(scenario(**kw), make_policy(policy), check=True)
    assert timeline(res) == [(j, float(s), float(e)) for j, s, e in intervals]
    assert records(res) == recs
    check_conservation(res)


def test_a_finite_horizon_cuts_intervals_and_leaves_unfinished_jobs_open():
    res = simulate(scenario([TRAIN, DEBUG], duration=3000.0), make_policy("priority"), check=True)
    assert timeline(res) == [("train", 0.0, 3000.0)]
    assert res.end == 3000.0
    assert set(res.jobs) == {
        JobRecord("train", "A", 8, H, 0.0, 0.0, None, False),
        JobRecord("debug", "B", 8, 1800.0, 100.0, None, None, False),
    }


def test_demand_and_capacity_samples_follow_the_queue_and_the_nodes():
    sc = scenario([TRAIN, DEBUG], nodes=2, events=[NodeEvent(500.0, ("n2",), NodeState.DRAIN)])
    res = simulate(sc, make_policy("greedy"), check=True)
    assert [(c.time, dict(c.by_type)) for c in res.capacity] == [(0.0, {"h100": 16}), (500.0, {"h100": 8})]
    assert [(d.time, dict(d.allocated_by_project), d.total_gpus) for d in res.demand] == [
        (0.0, {"A": 8}, 8),
        (100.0, {"A": 8, "B": 8}, 16),
        (1900.0, {"A": 8}, 8),
        (7200.0, {}, 0),
    ]
    assert timeline(res) == [("train", 0.0, 7200.0), ("debug", 100.0, 1900.0)]  # by start


def test_epoch_records_say_what_each_decision_did():
    res = simulate(scenario([TRAIN, DEBUG]), make_policy("greedy"), check=True)
    got = [(e.time, e.n_queued, e.n_running, e.n_started, e.n_preempted, e.status) for e in res.epochs]
    assert got == [
        (0.0, 1, 0, 1, 0, "heuristic"),  # train starts
        (100.0, 1, 1, 0, 0, "heuristic"),  # early solve for debug: train is protected
        (3600.0, 1, 1, 1, 1, "heuristic"),  # expiry: train out (grace 0), debug in
        (3900.0, 1, 1, 0, 0, "heuristic"),  # train's requeue is a change: it finds no room
        (5400.0, 1, 0, 1, 0, "heuristic"),  # debug done: train back
        # train done at 9000: nothing waits, so no decision; the run ends
    ]


def test_node_event_for_an_unknown_node_is_a_located_error():
    from optalloc.errors import OptallocError

    sc = scenario([TRAIN], events=[NodeEvent(10.0, ("nope",), NodeState.DOWN)])
    with pytest.raises(OptallocError, match="nope"):
        simulate(sc, make_policy("greedy"))


def test_the_simulated_runner_is_a_runner():
    from optalloc.runners.base import Runner
    from optalloc.sim.runner import SimulatedRunner

    assert isinstance(SimulatedRunner([]), Runner)


class _Broken:
    """Wraps a policy and breaks its plans in one way, to prove the checks catch it."""

    name = "broken"

    def __init__(self, how):
        self.inner = make_policy("greedy")
        self.how = how

    def decide(self, snapshot):
        from optalloc.types import Preemption, ReasonCode

        plan = self.inner.decide(snapshot)
        running = [j for j in snapshot.jobs if j.running]
        if self.how == "preempt-protected" and running:
            victim = running[0]
            return dataclasses.replace(
                plan,
                placements=tuple(p for p in plan.placements if p.job_id != victim.id),
                preemptions=plan.preemptions + (Preemption(victim.id, ReasonCode.PREEMPTED_FAIR_SHARE, "x", 0.0),),
            )
        if self.how == "double-book" and running and plan.pending:
            waiting = next(j for j in snapshot.jobs if j.id == plan.pending[0].job_id)
            pl = dataclasses.replace(running[0].placement, job_id=waiting.id)
            return dataclasses.replace(plan, placements=plan.placements + (pl,), pending=plan.pending[1:])
        if self.how == "forget-queued" and plan.pending:
            return dataclasses.replace(plan, pending=plan.pending[1:])
        return plan


@pytest.mark.parametrize(
    "how, message",
    [
        ("preempt-protected", "protected job train is preempted inside its min_runtime"),
        ("double-book", "is given to both train and debug"),
        ("forget-queued", "queued job debug must be either placed or pending, not neither"),
    ],
)
def test_checks_catch_a_policy_that_breaks_the_rules(how, message):
    from optalloc.sim.invariants import SimulationInvariantError

    with pytest.raises(SimulationInvariantError, match=message):
        simulate(scenario([TRAIN, DEBUG]), _Broken(how), check=True)


def test_the_progress_bar_changes_nothing_but_stderr(capsys):
    sc = scenario([TRAIN, DEBUG], duration=4 * H)
    quiet = simulate(sc, make_policy("greedy"))
    shown = simulate(sc, make_policy("greedy"), progress=True)
    assert shown.intervals == quiet.intervals and shown.jobs == quiet.jobs
    assert "simulated hours" in capsys.readouterr().err
