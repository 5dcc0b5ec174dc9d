"""Session review s54: hand-worked cases for the stop-54 changes."""

from __future__ import annotations

import dataclasses

from optalloc.sim.invariants import check_plan
from optalloc.sim.policies import make_policy
from optalloc.snapshot import build_snapshot
from optalloc.types import (
    Config, GpuType, Job, JobState, Node, NodeAlloc, OrgNode, Placement, Policy, ReasonCode,
)

H = 3600.0
ORG = OrgNode("root", children=(OrgNode("P"), OrgNode("Q", share_by_type={"b200": 0.0})))
RATIOS = {"P": 0.9, "Q": 0.1}


def _cfg():
    return Config(gpu_types=(GpuType("h100"), GpuType("b200")),
                  nodes=(Node("h1", "h100", 8), Node("b1", "b200", 8)), org=ORG,
                  policy=Policy(grace_s=30))


def _job(jid, project, submit=0.0, types=("h100", "b200")):
    return Job(jid, project, 8, min_runtime_s=H, submit_time=submit, gpu_types=types)


def _running(j, node, gpu_type, start):
    pl = Placement(j.id, gpu_type, (NodeAlloc(node, tuple(range(j.gpus))),), allocated=True)
    return dataclasses.replace(j, state=JobState.RUNNING, start_time=start, placement=pl)


def test_a_job_walked_twice_that_waits_is_named_first_of_its_project_not_its_junior():
    # both nodes hold P's protected jobs; Q ranks first. q1 (submit 0, h100+b200, share of
    # h100 only) ranks above q2 (submit 5, h100 only). Both wait. q2 waits behind q1, and q1
    # waits for capacity. Before the fix q1 was appended to pending at its second (unallocated)
    # entry, after q2, so greedy's explain named q2 as the job q1 waits behind.
    now = 10 * H
    jobs = [_running(_job("p0", "P", types=("h100",)), "h1", "h100", now - 600),
            _running(_job("p1", "P", types=("b200",)), "b1", "b200", now - 600),
            _job("q1", "Q"), _job("q2", "Q", submit=5.0, types=("h100",))]
    snap = build_snapshot(_cfg(), now, jobs, RATIOS)
    plan = make_policy("greedy").decide(snap)
    check_plan(snap, plan)
    pend = {p.job_id: (p.code, p.message) for p in plan.pending}
    assert set(pend) == {"q1", "q2"}
    assert pend["q1"][0] == ReasonCode.WAITING_FOR_CAPACITY
    assert pend["q2"] == (ReasonCode.LOWER_PRIORITY_IN_PROJECT,
                          "q1 of the same project ranks above it and is waiting too")


def _drain_before_begin(policy):
    from optalloc.sim.scenario.spec import NodeEvent
    from optalloc.types import NodeState
    from tests.test_sim_judge_cases_s51 import _run, _sc

    # as test_contract_judge_cases_s54's drain case: grace 300; n1 h100, n2 a100. 3600:
    # notice to a (past protection), b planned onto n1 from 3900. n1 drains at 3700, before b
    # begins: b goes back to the queue unbegun and (h100 only) never runs.
    jobs = [Job("a", "A", 8, gpu_types=("h100",), min_runtime_s=H, duration_s=3 * H),
            Job("b", "B", 8, gpu_types=("h100",), min_runtime_s=H, duration_s=H,
                submit_time=600.0)]
    ev = (NodeEvent(3700.0, ("n1",), NodeState.DRAIN),)
    return _run(_sc(jobs, nodes=(("h100", 8), ("a100", 8)), types=("h100", "a100"),
                    grace_s=300.0, events=ev, duration=4 * H), policy)


import pytest  # noqa: E402


@pytest.mark.parametrize("policy", ["greedy", "ilp"])
def test_a_start_sent_back_unbegun_by_a_drain_is_no_preemption_and_loses_nothing(policy):
    # a was preempted once (notice at 3600, stopped 3900, 300 s x 8 lost); b never ran, so it
    # was never preempted and lost nothing: one preemption in all, 2400 GPU-s lost.
    res, m, _ = _drain_before_begin(policy)
    recs = {r.job_id: r for r in res.jobs}
    assert (recs["a"].preemptions, recs["a"].lost_gpu_s) == (1, 2400.0)
    assert (recs["b"].preemptions, recs["b"].lost_gpu_s, recs["b"].first_start) == (0, 0.0, None)
    assert sum(r.preemptions for r in res.jobs) == 1


@pytest.mark.parametrize("policy", ["greedy", "ilp"])
def test_a_job_sent_back_unbegun_twice_has_no_first_start(policy):
    from optalloc.sim.scenario.spec import NodeEvent
    from optalloc.types import NodeState
    from tests.test_sim_judge_cases_s51 import _ivs, _run, _sc

    # grace 300, n1 and n2 (h100). a (A, protected 1 h) on n1 and c (A, protected 2 h) on n2
    # from 0; b (B, usage 0) from 600. 3600: a gets notice, b planned on n1 from 3900; n1
    # drains at 3700: b goes back unbegun. 7200: c's protection ends: c gets notice, b planned
    # on n2 from 7500; n2 drains at 7300: b goes back unbegun again. b never ran: no interval,
    # no first start, no preemption.
    jobs = [Job("a", "A", 8, min_runtime_s=H, duration_s=10 * H),
            Job("c", "A", 8, min_runtime_s=2 * H, duration_s=10 * H),
            Job("b", "B", 8, min_runtime_s=H, duration_s=H, submit_time=600.0)]
    ev = (NodeEvent(3700.0, ("n1",), NodeState.DRAIN), NodeEvent(7300.0, ("n2",), NodeState.DRAIN))
    res, m, w = _run(_sc(jobs, nodes=(("h100", 8), ("h100", 8)), grace_s=300.0, events=ev,
                         duration=9000.0), policy)
    b = {r.job_id: r for r in res.jobs}["b"]
    assert _ivs(res, "b") == []
    assert (b.first_start, b.preemptions, b.lost_gpu_s) == (None, 0, 0.0)


def test_a_moved_jobs_explanation_says_it_restarts_on_its_new_node_not_that_it_is_requeued():
    from optalloc.plan.explain import explain, format_explanation
    from tests.test_epoch_toy import flat_org, nodes_of, running
    from tests.test_scheme_judge_cases_s51 import decide, pre, snap

    # 2 x 8; A's a1 (4, n00, past protection) and a2 (4, n01, protected); B's b (8) ranks
    # first: a1 is Moved to n01's free half (notice 60 s, stops by 10 h + 60 s) and restarts
    # there at once. The notice line must say it restarts on n01, not that it is requeued.
    a1 = running("a1", "A", "h100", [("n00", range(4))], start=8 * H)
    s = snap(nodes_of(2, 8), flat_org({"A": 1, "B": 1}),
             [a1, running("a2", "A", "h100", [("n01", range(4))], start=9.5 * H),
              Job("b", "B", 8, min_runtime_s=H)], usage={"A": 1.0, "B": 0.0})
    plan = decide(s)
    assert pre(plan) == {"a1": ("Moved", ("b",))}
    text = format_explanation(explain(s, plan, "a1"))
    assert "  notice now, 60 s grace: it stops by t=36060, then restarts on n01" in text.splitlines()


def test_a_job_waiting_at_both_entries_is_told_that_the_type_without_share_takes_only_idle_gpus():
    from tests.test_greedy_share_types import cfg, job, plan_of, running as running_on

    # as test_greedy_share_types' first case: h1 full with P's protected p0; Q's q1 (share of
    # h100 only) ranks first but takes b200 only as unallocated work, and P's p2 (ranked below
    # q1, allocated on b200) takes b1. q1 waits; p2 is a lower-ranked job holding b200, so
    # "no lower-ranked job can make room" alone is untrue: the message says why b200 is closed.
    busy = running_on(job("p0", "P", types=("h100",)), "h1", "h100", start=9.5 * H)
    snap = build_snapshot(cfg(), 10 * H, [busy, job("q1", "Q"), job("p2", "P", submit=5.0)],
                          RATIOS)
    plan = make_policy("greedy").decide(snap)
    assert [(p.job_id, p.code, p.message) for p in plan.pending] == [(
        "q1", ReasonCode.WAITING_FOR_CAPACITY,
        "it needs 8 GPUs of one type (h100: 0 free; b200: 0 free); no lower-ranked job can "
        "make room on h100, and its project has no share of b200, where it takes only GPUs "
        "nobody ranked above it wants")]


def test_greedys_placement_at_a_jobs_second_entry_maps_to_a_model_candidate():
    from optalloc.model.build import build_model
    from optalloc.plan.incumbent import greedy_placed
    from tests.test_greedy_share_types import cfg, job, running as running_on

    # two b200 nodes: p2 takes b1 (allocated), q1 takes b2 at its second entry (unallocated
    # on b200): both are new starts with a model candidate, p0 is kept.
    busy = running_on(job("p0", "P", types=("h100",)), "h1", "h100", start=9.5 * H)
    snap = build_snapshot(cfg(2), 10 * H, [busy, job("q1", "Q"), job("p2", "P", submit=5.0)],
                          RATIOS)
    g = greedy_placed(build_model(snap))
    assert g is not None
    assert sorted((snap.jobs[j].id, p.gpu_type, p.allocated) for j, p in g.placements.items()) \
        == [("p2", "b200", True), ("q1", "b200", False)]
    assert g.kept.tolist() == [True]


from tests.test_runner_judge_cases_s54 import T0, _epoch, _runs, _submit, box  # noqa: E402,F401


@pytest.mark.parametrize("damage", ["[1]", '"x"', "7"])
def test_a_stored_plan_that_is_json_but_not_an_object_is_a_clear_error_with_exit_2(box, damage):
    # as the runner judge's damaged-plan case, but the damaged record still parses as JSON
    # (a list, a string, a number): the next epoch reads it for its reservations; it must
    # exit 2 naming the DB and "damaged", not die with a traceback, and start nothing.
    import sqlite3

    from tests.conftest import kill_local_runs

    _submit("j1", "sleep", "30", now=T0 - 10)
    code, _, err = _epoch("--now", T0)
    assert code == 0, err
    kill_local_runs(box / "st.db")
    with sqlite3.connect("st.db") as conn:
        conn.execute("UPDATE epochs SET plan = ?", (damage,))
    conn.close()
    _submit("j2", "sleep", "30", project="b", gpus=1, now=T0 + 1)
    code, out, err = _epoch("--now", T0 + 60)
    assert (code, "Traceback" in err, "st.db" in err, "damaged" in err) == (2, False, True, True)
    assert [r[0] for r in _runs("st.db")] == ["j1"]


def test_a_job_stopped_without_grace_is_told_it_is_stopped_now_not_given_notice():
    # a node that went down kills its jobs at once: greedy stops A's g (4 GPUs, resumable,
    # on the down x00) with no grace (plan.ranked.rank_pass, step 1); "notice now, 0 s
    # grace" was no notice at all. It is stopped now and requeued
    from optalloc.plan.explain import explain, format_explanation
    from optalloc.sim.policies import make_policy
    from optalloc.types import Node, NodeState
    from tests.test_epoch_toy import flat_org, nodes_of, running
    from tests.test_scheme_judge_cases_s51 import snap

    # (the up node holds 2 GPUs: since stop 55 greedy restarts such a job at once where it
    # fits, tests/test_down_node_no_grace_s55.py)
    nodes = (Node("x00", "h100", 8, NodeState.DOWN), Node("n00", "h100", 2))
    g = running("g", "A", "h100", [("x00", range(4))], start=9.5 * H)
    s = snap(nodes, flat_org({"A": 1, "B": 1}), [g], usage={"A": 0.5, "B": 0.5})
    plan = make_policy("greedy").decide(s)
    assert [(p.job_id, p.code.value, p.grace_s) for p in plan.preemptions] == [
        ("g", "PreemptedNodeDrain", 0.0)]
    lines = format_explanation(explain(s, plan, "g")).splitlines()
    assert "  stopped now, no grace period; then requeued" in lines
    assert not any("notice now" in line for line in lines)


def test_a_fractional_schema_version_is_damaged_not_read_as_its_integer_part():
    # schema_version stored as the REAL 1.9: int() read it as 1, this optalloc's own
    import pytest as _pytest

    from optalloc.errors import StateError
    from optalloc.state.check import schema_version_of

    assert schema_version_of("st.db", 1) == 1 and schema_version_of("st.db", "1") == 1
    assert schema_version_of("st.db", 1.0) == 1
    with _pytest.raises(StateError, match=r"schema_version '1\.9', which is not an integer"):
        schema_version_of("st.db", 1.9)
