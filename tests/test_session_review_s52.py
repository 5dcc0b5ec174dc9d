"""An outside review of stop 52's session (placeable demand for the fair measure, the simulated
runner's early starts, runner refusals held by the cron path, the reason-message fixes).

Each case's expectation is worked out by hand from DESIGN.md section 8 in its comment; the
day-long cases use the idle-share judges' helpers (3 x 8 h100 + 1 x 8 a100, 1800 s epochs,
grace 0, lookback 24 h, one-hour protected jobs). Strict xfails are faults, each with its
diagnosis (file:line as of this review).
"""

from __future__ import annotations

import dataclasses

import pytest

from optalloc.clock import SimClock
from optalloc.cycle import run_cycle
from optalloc.demand import Demand
from optalloc.epoch import run_epoch
from optalloc.ledger import Ledger
from optalloc.org import OrgTree
from optalloc.runners.base import EventKind
from optalloc.sim.engine import simulate
from optalloc.sim.invariants import check_plan
from optalloc.sim.policies import make_policy
from optalloc.sim.policies.greedy import GreedyScheduler
from optalloc.sim.runner import SimulatedRunner
from optalloc.sim.scenario import NodeEvent
from optalloc.state import StateStore
from optalloc.types import (Config, GpuType, Interval, Job, Node, NodeAlloc, NodeState, OrgNode,
                            Placement, Plan, Policy, Preemption, ReasonCode, SolverSettings)
from tests.test_epoch_toy import queued, snapshot
from tests.test_fairness_over_time_judge_cases import _window, endless, flat
from tests.test_idle_share_judge_cases import only, typed

H = 3600.0
TYPES = (GpuType("h100"), GpuType("a100"))


def _job(jid, project, gpus, types=(), min_h=1.0, **kw):
    return Job(jid, project, gpus, min_runtime_s=min_h * H, gpu_types=tuple(types),
               duration_s=H, **kw)


def _nodes(a100=NodeState.UP, h3=NodeState.UP):
    return (Node("n1", "h100", 8), Node("n2", "h100", 8), Node("n3", "h100", 8, state=h3),
            Node("n4", "a100", 8, state=a100))


def _org(*names):
    return OrgTree.build(flat(**{n: 1 for n in names}), [g.name for g in TYPES])


def _cluster(jobs, org, events=(), hours=24.0):
    sc = typed(jobs, org, (("h100", 8), ("h100", 8), ("h100", 8), ("a100", 8)), TYPES)
    return dataclasses.replace(sc, node_events=tuple(events), duration_s=hours * H)


def _day(sc, policy, projects):
    res = simulate(sc, make_policy(policy), check=True)
    return {p: _window(res, p, 0.0, 24 * H) for p in projects}


# =========================================================== 1. placeable demand, the rule


def test_a_running_job_on_a_drain_node_counts_as_placeable_only_if_its_shape_fits_an_up_node():
    # n4 (a100) and n3 (h100) drain. C's a100-only 2-GPU job runs on n4: no up a100 node, so
    # it is leaving (rule 5) and wants nothing of the up capacity: not placeable. B's any-type
    # 8-GPU job runs on n3: n1, n2 are up h100 nodes that hold it: placeable. Owed demand keeps
    # both (C 2, B 8)
    c = dataclasses.replace(_job("c", "C", 2, ("a100",)), placement=Placement(
        "c", "a100", (NodeAlloc("n4", (0, 1)),)))
    b = dataclasses.replace(_job("b", "B", 8), placement=Placement(
        "b", "h100", (NodeAlloc("n3", tuple(range(8))),)))
    nodes = _nodes(NodeState.DRAIN, NodeState.DRAIN)
    d = Demand.of([c, b], _org("A", "B", "C"), nodes)
    assert d.by_project() == {"B": 8, "C": 2}
    assert d.placeable_by_project() == {"B": 8}


def test_cron_counting_at_once_and_the_simulator_counting_job_by_job_agree_through_drain_and_down():
    # the cron path counts the queue at once (Demand.of) each epoch, the simulator keeps it
    # up to date (add / set_nodes): the same placeable demand whatever the node states
    jobs = [_job("a", "A", 16), _job("b", "B", 1), _job("c1", "C", 1, ("a100",)),
            _job("c2", "C", 8, ("a100",)), _job("g", "B", 24, ("h100",))]
    org = _org("A", "B", "C")
    d = Demand(org, _nodes())
    for j in jobs:
        d.add(j)
    for a100, h3 in [(NodeState.DOWN, NodeState.UP), (NodeState.DRAIN, NodeState.DOWN),
                     (NodeState.UP, NodeState.DRAIN), (NodeState.UP, NodeState.UP)]:
        d.set_nodes(_nodes(a100, h3))
        assert d.placeable_by_project() == Demand.of(jobs, org, _nodes(a100, h3)) \
            .placeable_by_project()
    # hand-worked, n3 down and n4 draining: A's 16-GPU gang fits n1 + n2; B's 24-GPU h100
    # gang needs 3 h100 nodes (2 up): only b; C's a100 jobs: none. A and B, both confined to
    # the 16 up h100 GPUs, want 17 of them together: B its 1, A the other 15 (optalloc.
    # confined; the fair measure's shares are the same either way)
    d.set_nodes(_nodes(NodeState.DRAIN, NodeState.DOWN))
    assert d.placeable_by_project() == {"A": 15, "B": 1}


def test_a_sibling_whose_jobs_fit_only_a_draining_type_leaves_its_share_as_a_down_one_does():
    # the judge's case with n4 draining all day instead of down (rule 5: a drain node takes
    # no new work): C wants nothing that can run, its 8 split: A 12, B 12 an hour; A's
    # 16-GPU gang and B's 8 take turns with B's 24: 288 / 288 (stop 51's code: 384 / 192)
    sc = _cluster(endless("A", 60, gpus=16) + endless("B", 600)
                  + only(("a100",), endless("C", 100)), flat(A=1, B=1, C=1),
                  (NodeEvent(0.0, ("n4",), NodeState.DRAIN),))
    for policy in ("ilp", "greedy"):
        got = _day(sc, policy, "ABC")
        assert got == {p: pytest.approx(v, abs=16.0) for p, v in
                       {"A": 288.0, "B": 288.0, "C": 0.0}.items()}, policy


def _shared_ledger():
    """24 h100 + 8 a100 up; A, B, C, D equal shares (8 each). A and B ask 100 GPUs of h100;
    C and D 100 each, confined to the one a100 node: 4 each, as Demand gives (A and B,
    confined to h100, 12 each: optalloc.confined; stop 52 gave 24, 24, 8, 8)."""
    org = _org("A", "B", "C", "D")
    jobs = ([_job(f"a{i}", "A", 1, ("h100",)) for i in range(100)]
            + [_job(f"b{i}", "B", 1, ("h100",)) for i in range(100)]
            + [_job(f"c{i}", "C", 1, ("a100",)) for i in range(100)]
            + [_job(f"d{i}", "D", 1, ("a100",)) for i in range(100)])
    d = Demand.of(jobs, org, _nodes())
    assert d.placeable_by_project() == {"A": 12, "B": 12, "C": 4, "D": 4}
    led = Ledger(TYPES, org, Policy(lookback_s=24 * H))
    led.record_capacity(0.0, {"h100": 24, "a100": 8})
    led.record_demand(0.0, d.by_project(), d.placeable_by_project())
    led.record_intervals([Interval("a", "A", "h100", 16, 0.0, 2 * H, True),
                          Interval("b", "B", "h100", 8, 0.0, 2 * H, True),
                          Interval("c", "C", "a100", 4, 0.0, 2 * H, True),
                          Interval("d", "D", "a100", 4, 0.0, 2 * H, True)])
    return led


def test_two_projects_confined_to_one_small_type_cannot_both_claim_it_in_the_fair_measure():
    # hand-worked (rule 2): C and D can hold 8 GPUs between them (one a100 node): 4 each;
    # what they cannot use goes to A and B: 12 each. Over 2 h B got 8 an hour: short 8;
    # A got 16 (> 12): nothing; C, D got their 4: nothing
    _, fair = _shared_ledger().shortfalls(2 * H)
    assert fair == pytest.approx({"root": 0.0, "A": 0.0, "B": 8.0, "C": 0.0, "D": 0.0})


def test_two_projects_confined_to_one_small_type_greedy_gives_the_gang_and_singles_turns():
    # the day-long form: A 16-GPU h100 gangs, B 1-GPU h100 jobs, C and D 1-GPU a100 jobs.
    # Fair: C 4, D 4 (one a100 node), A 12, B 12: A's gang and B's 8 take turns with B's 24
    # three hours in four: A 288, B 288, C 96, D 96. Greedy (the Fair-Tree sort) gives it
    sc = _shared_day()
    assert _day(sc, "greedy", "ABCD") == {p: pytest.approx(v, abs=16.0) for p, v in
                                          {"A": 288.0, "B": 288.0, "C": 96.0,
                                           "D": 96.0}.items()}


def _shared_day():
    return _cluster(only(("h100",), endless("A", 60, gpus=16))
                    + only(("h100",), endless("B", 600))
                    + only(("a100",), endless("C", 300)) + only(("a100",), endless("D", 300)),
                    flat(A=1, B=1, C=1, D=1))


def test_two_projects_confined_to_one_small_type_ilp_gives_the_gang_and_singles_turns():
    assert _day(_shared_day(), "ilp", "ABCD") == {
        p: pytest.approx(v, abs=16.0) for p, v in
        {"A": 288.0, "B": 288.0, "C": 96.0, "D": 96.0}.items()}


def _mixed_day():
    # C: two 30-hour any-type 1-GPU jobs (placeable) and a100-only jobs (n4 down all day)
    c = only(("a100",), endless("C", 100)) + [
        Job(f"Cl{i}", "C", 1, min_runtime_s=H, duration_s=30 * H) for i in range(2)]
    return _cluster(endless("A", 60, gpus=16) + endless("B", 600) + c, flat(A=1, B=1, C=1),
                    (NodeEvent(0.0, ("n4",), NodeState.DOWN),))


MIXED = {"A": 264.0, "B": 264.0, "C": 48.0}


def test_a_project_with_a_few_placeable_jobs_and_many_unplaceable_greedy_shares_the_rest():
    # 24 h100 up. C's placeable demand is its 2 long jobs: fair C 2, and the 6 of its share it
    # cannot use split A 11, B 11. A's 16-GPU gang + B 6 in a fraction f of hours, B 22
    # otherwise: 16 f = 11 -> A 264, B 22 - 16 f = 11 -> 264; C 2 x 24 = 48
    assert _day(_mixed_day(), "greedy", "ABC") == {
        p: pytest.approx(v, abs=16.0) for p, v in MIXED.items()}


def test_a_project_with_a_few_placeable_jobs_and_many_unplaceable_ilp_shares_the_rest():
    assert _day(_mixed_day(), "ilp", "ABC") == {
        p: pytest.approx(v, abs=16.0) for p, v in MIXED.items()}


def _tilt_case(a100):
    """One 8-GPU h100 node (n1) and one 8-GPU a100 node (n2). Shares per type: A 5 and B 3
    of h100 (A's and B's floors 5 and 3), C only a100. A (usage ratio 2.0) wants the h100
    node for one 8-GPU job, B (0.1) for a 3-GPU job: they do not fit together. C (ratio 0,
    ranked first) has one 2-GPU a100 job."""
    nodes = [Node("n1", "h100", 8), Node("n2", "a100", 8, a100)]
    org = OrgNode("root", children=(
        OrgNode("A", share=5, share_by_type={"a100": 0.0}),
        OrgNode("B", share=3, share_by_type={"a100": 0.0}),
        OrgNode("C", share=1, share_by_type={"h100": 0.0})))
    jobs = (queued("A", 1, 8, gpu_types=("h100",)) + queued("B", 1, 3, gpu_types=("h100",))
            + queued("C", 1, 2, gpu_types=("a100",)))
    return snapshot(nodes, org, jobs, usage={"A": 2.0, "B": 0.1, "C": 0.0},
                    types=("h100", "a100"))


def test_a_sibling_whose_only_type_is_down_takes_no_place_in_the_rank_tilt():
    # n2 down: C's job can run nowhere (it holds no floor this epoch: the session's own
    # projects_with_placeable_work). A and B are then the two projects that compete, B first:
    # B's 3 floor GPUs at twice the weight (6) beat A's 5, so B's job runs, as greedy runs it
    # and as it does with C absent. Before the fix, C (ratio 0) took the first place, B's
    # factor fell to 1.5 (4.5 < 5) and A's job ran: a type being down reordered A and B
    # (optalloc/model/objective/impact.py tilt_position read projects_with_work)
    snap = _tilt_case(NodeState.DOWN)
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert sorted(p.job_id for p in plan.placements) == ["B00"]
    assert sorted(p.job_id for p in GreedyScheduler().decide(snap).placements) == ["B00"]


# =========================================================== 2. the simulated runner


NODES = [Node("n1", "h100", 8), Node("n2", "h100", 8)]


def _pl(jid, *nodes, gpus=range(8)):
    return Placement(jid, "h100", tuple(NodeAlloc(n, tuple(gpus)) for n in nodes))


def _pre(jid, grace=300.0):
    return Preemption(jid, ReasonCode.PREEMPTED_FAIR_SHARE, "fair share", grace)


def _events(evs):
    return [(e.job_id, e.kind, e.time, e.run_start) for e in evs]


@pytest.mark.parametrize("resumable", [True, False])
def test_a_node_going_down_while_a_successor_waits_starts_nothing_and_loses_no_job(resumable):
    # a (n1) gets its notice at 3600 (stop 3900); b is placed on a's GPUs for 3900. n1 goes
    # down at 3700: a is killed (requeued); b never started: no STARTED event for a run on a
    # dead node (before the fix, a's end moved b's start to 3700 and said "started (its GPUs
    # were released early)" on the node going down, then killed it), and b, which did no work,
    # goes back to the queue even where it is not resumable (before: PREEMPTED, the job ended
    # and was lost without ever running; optalloc/sim/runner.py _end)
    r = SimulatedRunner(NODES, grace_s=300.0)
    jobs = {"a": Job("a", "A", 8, duration_s=99999.0),
            "b": Job("b", "B", 8, duration_s=3600.0, resumable=resumable)}
    r.apply(Plan(0.0, placements=(_pl("a", "n1"),)), jobs, 0.0)
    res = r.apply(Plan(3600.0, placements=(_pl("b", "n1"),), preemptions=(_pre("a"),)),
                  jobs, 3600.0)
    assert [(e.job_id, e.time) for e in res.events] == [("b", 3900.0)]
    assert sorted(r.set_node_state("n1", NodeState.DOWN, 3700.0)) == ["a", "b"]
    obs = r.observe(3700.0)
    assert _events(obs.events) == [("a", EventKind.REQUEUED, 3700.0, 0.0),
                                   ("b", EventKind.REQUEUED, 3700.0, 3900.0)]
    assert obs.running == {}
    st = r.stats["b"]
    assert (st.ran_gpu_s, st.lost_gpu_s, st.remaining, st.completed) == (0.0, 0.0, 3600.0, False)


def test_a_moved_job_restarts_at_its_own_stop_when_the_job_it_replaces_ends_early():
    # x (n1) is moved to n2 where y is preempted (stop 3900); z takes n1 when x leaves it.
    # y finishes at 3700 inside its grace: n2 is free, but x still runs on n1 until its own
    # stop (3900, its MOVED notice), so x restarts on n2 at 3900 and z starts on n1 at 3900:
    # no GPU held twice, no start moved before the GPUs it needs are free
    r = SimulatedRunner(NODES, grace_s=300.0)
    jobs = {"x": Job("x", "X", 8, duration_s=99999.0), "y": Job("y", "Y", 8, duration_s=3700.0),
            "z": Job("z", "Z", 8, duration_s=3600.0)}
    r.apply(Plan(0.0, placements=(_pl("x", "n1"), _pl("y", "n2"))), jobs, 0.0)
    r.apply(Plan(3600.0, placements=(_pl("x", "n2"), _pl("z", "n1")),
                 preemptions=(_pre("y"),)), jobs, 3600.0)
    obs = r.observe(3750.0)
    assert _events(obs.events) == [("y", EventKind.FINISHED, 3700.0, 0.0)]
    assert {j: s for j, (_, s) in obs.running.items()} == {"x": 0.0, "z": 3900.0}
    obs = r.observe(3900.0)
    assert _events(obs.events) == [("x", EventKind.REQUEUED, 3900.0, 0.0),
                                   ("x", EventKind.STARTED, 3900.0, None)]
    assert {j: (p.node_names, s) for j, (p, s) in obs.running.items()} == {
        "x": (("n2",), 3900.0), "z": (("n1",), 3900.0)}


def test_two_successors_on_halves_of_one_stopping_job_both_start_when_it_ends():
    # a (n1, 8 GPUs) is preempted at 3600 (stop 3900) and finishes at 3700; b and c each take
    # 4 of its GPUs: both start at 3700, each with its own STARTED event, and finish an hour on
    r = SimulatedRunner(NODES, grace_s=300.0)
    jobs = {"a": Job("a", "A", 8, duration_s=3700.0), "b": Job("b", "B", 4, duration_s=3600.0),
            "c": Job("c", "C", 4, duration_s=3600.0)}
    r.apply(Plan(0.0, placements=(_pl("a", "n1"),)), jobs, 0.0)
    r.apply(Plan(3600.0, placements=(_pl("b", "n1", gpus=range(4)),
                                     _pl("c", "n1", gpus=range(4, 8))),
                 preemptions=(_pre("a"),)), jobs, 3600.0)
    obs = r.observe(3700.0)
    assert _events(obs.events) == [("a", EventKind.FINISHED, 3700.0, 0.0),
                                   ("b", EventKind.STARTED, 3700.0, None),
                                   ("c", EventKind.STARTED, 3700.0, None)]
    obs = r.observe(9000.0)
    assert _events(obs.events) == [("b", EventKind.FINISHED, 7300.0, 3700.0),
                                   ("c", EventKind.FINISHED, 7300.0, 3700.0)]


# =========================================================== 3. runner refusals (cron)


class Refusing(SimulatedRunner):
    """The simulated cluster, refusing the jobs in `refused` (asked ids kept per turn)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.refused: dict[str, str] = {}
        self.asked: list[set] = []

    def refuses(self, jobs):
        jobs = list(jobs)
        self.asked.append({j.id for j in jobs})
        return {j.id: self.refused[j.id] for j in jobs if j.id in self.refused}


@pytest.mark.parametrize("policy", ["greedy", "ilp"])
def test_a_refused_job_is_held_not_counted_and_asked_again_every_epoch(tmp_path, policy):
    # one 8-GPU node, a = b. ghost (a, 8 GPUs) is refused; real (b, 8) fits: real starts at
    # once (rule 6), ghost is pending RunnerRefused with the runner's words (rule 7) and a
    # asks nothing in the demand samples (owed and placeable alike: a job the runner cannot
    # start is no demand). At 300 s the refusal is gone: ghost is planned again and waits
    # with a normal reason (real's protection holds the node, to 3600), a asks 8; real, now
    # running, is not asked about
    cfg = Config(gpu_types=(GpuType("h100"),), nodes=(Node("n1", "h100", 8),),
                 org=flat(a=1, b=1),
                 policy=Policy(epoch_s=300.0, grace_s=0.0, lookback_s=2 * H,
                               solver=SolverSettings(backend="highs", time_limit_s=10.0)))
    store = StateStore(tmp_path / "state.db")
    runner = Refusing(cfg.nodes, grace_s=0.0)
    runner.refused = {"ghost": "no program 'xyz' on its PATH"}
    store.add_job(Job("ghost", "a", 8, min_runtime_s=H, submit_time=0.0, duration_s=H))
    store.add_job(Job("real", "b", 8, min_runtime_s=H, submit_time=0.0, duration_s=H))
    clock = SimClock(0.0)
    r = run_cycle(cfg, store, runner, clock, scheduler=make_policy(policy))
    assert [p.job_id for p in r.plan.placements] == ["real"]
    assert [(p.job_id, p.code.value, p.message) for p in r.plan.pending] == [(
        "ghost", "RunnerRefused", "held: the simulated runner cannot start it: no program "
        "'xyz' on its PATH; the runner is asked again at every epoch (or cancel it)")]
    runner.refused = {}
    clock.advance_to(300.0)
    r = run_cycle(cfg, store, runner, clock, scheduler=make_policy(policy))
    assert [p.job_id for p in r.plan.placements] == ["real"]
    (ghost,) = r.plan.pending
    assert (ghost.job_id, ghost.code.value) == ("ghost", "WaitingForCapacity")
    assert "0 free" in ghost.message
    assert store.demand_samples() == [(0.0, {"b": 8}), (300.0, {"a": 8, "b": 8})]
    assert store.placeable_demand_samples() == store.demand_samples()
    assert runner.asked == [{"ghost", "real"}, {"ghost"}]
    store.close()


# =========================================================== 4. reasons


def test_a_gang_whose_only_nodes_of_its_shape_are_down_is_told_so_by_greedy_and_ilp():
    # two h100 nodes, n2 down: a 16-GPU gang needs both. It is not impossible (a down node
    # comes back: the epoch's requirements say NodeDraining); greedy used to call it
    # impossible (NoMatchingGpuType). Both now: NodeDraining, "draining or down" for greedy
    nodes = [Node("n1", "h100", 8), Node("n2", "h100", 8, NodeState.DOWN)]
    snap = snapshot(nodes, flat(A=1), queued("A", 1, 16))
    g = GreedyScheduler().decide(snap)
    assert [(p.job_id, p.code.value, p.message) for p in g.pending] == [(
        "A00", "NodeDraining", "the nodes that can hold this gang are draining or down")]
    plan = run_epoch(snap)
    assert [(p.job_id, p.code.value) for p in plan.pending] == [("A00", "NodeDraining")]
