"""The simulated runner releases GPUs when a job really ends: a job that finishes inside its
grace period frees its GPUs then, and a successor waiting for them starts at once, unless
another stopping job still holds some of its GPUs (then it starts when the last one does)."""

from __future__ import annotations

from optalloc.runners.base import EventKind
from optalloc.sim.runner import SimulatedRunner
from optalloc.types import Job, Node, NodeAlloc, NodeState, Placement, Plan, Preemption, ReasonCode

NODES = [Node("n1", "h100", 8, NodeState.UP), Node("n2", "h100", 8, NodeState.UP)]


def _pl(jid, *nodes):
    return Placement(jid, "h100", tuple(NodeAlloc(n, tuple(range(8))) for n in nodes))


def _pre(jid):
    return Preemption(jid, ReasonCode.PREEMPTED_FAIR_SHARE, "fair share", 300.0)


def _started(events):
    return [(e.job_id, e.time) for e in events if e.kind is EventKind.STARTED]


def test_a_gang_waits_for_the_last_of_two_stopping_jobs_not_the_first():
    # a1 (n1) finishes at 3700 inside its grace; a2 (n2) runs to its stop at 3900: the gang
    # that needs both nodes starts at 3900, not at 3700
    r = SimulatedRunner(NODES, grace_s=300.0)
    jobs = {"a1": Job("a1", "A", 8, duration_s=3700.0), "a2": Job("a2", "A", 8),
            "g": Job("g", "B", 16, duration_s=3600.0)}
    r.apply(Plan(0.0, placements=(_pl("a1", "n1"), _pl("a2", "n2"))), jobs, 0.0)
    res = r.apply(Plan(3600.0, placements=(_pl("g", "n1", "n2"),),
                       preemptions=(_pre("a1"), _pre("a2"))), jobs, 3600.0)
    assert _started(res.events) == [("g", 3900.0)]
    obs = r.observe(3800.0)
    assert [(e.job_id, e.kind) for e in obs.events] == [("a1", EventKind.FINISHED)]
    assert obs.running["g"][1] == 3900.0  # still waits for a2's GPUs
    obs = r.observe(8000.0)
    assert [(e.job_id, e.kind, e.time) for e in obs.events] == [
        ("a2", EventKind.REQUEUED, 3900.0), ("g", EventKind.FINISHED, 7500.0)]


def test_a_successor_on_one_node_starts_when_its_predecessor_finishes_in_its_grace():
    # a (n1) has 3700 s of work, notice at 3600 with 300 s grace: it finishes at 3700 and b,
    # planned for 3900, starts at 3700 (a STARTED event says so) and finishes an hour later
    r = SimulatedRunner(NODES, grace_s=300.0)
    jobs = {"a": Job("a", "A", 8, duration_s=3700.0), "b": Job("b", "B", 8, duration_s=3600.0)}
    r.apply(Plan(0.0, placements=(_pl("a", "n1"),)), jobs, 0.0)
    res = r.apply(Plan(3600.0, placements=(_pl("b", "n1"),), preemptions=(_pre("a"),)), jobs, 3600.0)
    assert _started(res.events) == [("b", 3900.0)]
    obs = r.observe(3700.0)
    assert [(e.job_id, e.kind, e.time) for e in obs.events] == [
        ("a", EventKind.FINISHED, 3700.0), ("b", EventKind.STARTED, 3700.0)]
    assert obs.running == {"b": (_pl("b", "n1"), 3700.0)}
    obs = r.observe(8000.0)
    assert [(e.job_id, e.kind, e.time) for e in obs.events] == [("b", EventKind.FINISHED, 7300.0)]
    assert r.stats["b"].ran_gpu_s == 8 * 3600.0 and r.stats["b"].runs == 1
