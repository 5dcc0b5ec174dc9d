"""Pending jobs alike share one classification (optalloc.plan.reasons.pending_reasons): the
reason each job gets must be the one it would get classified alone, priority included where
the reason reads it (its project's own jobs ahead of it in line)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optalloc.model.build import build_model
from optalloc.model.objective.impact import compute_impact
from optalloc.model.requirements import compute_requirements
from optalloc.plan.place import place
from optalloc.plan.holdings import got_by_org
from optalloc.plan.reason_context import ReasonContext
from optalloc.plan.reasons import (
    _classify,
    free_by_type,
    path_ratios,
    pending_reasons,
    reserved_by_org,
)
from optalloc.snapshot import build_snapshot
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
)

from test_epoch_properties import instances


def _alone(em, placed) -> dict:
    """Each waiting job's (code, message, details), classified on its own."""
    snap, req = em.snap, em.req
    got = got_by_org(em, placed)
    ctx = ReasonContext(em, placed, got, reserved_by_org(em, placed))
    free_t = free_by_type(snap, placed.free)
    out = {}
    for j in np.flatnonzero(~np.asarray(snap.job_running)):
        if int(j) in placed.placements:
            continue
        types = [int(t) for t in req.cand_type[req.cand_job == j]]
        details = {"gpus": int(snap.job_gpus[j]), "project": snap.jobs[j].project,
                   "path": path_ratios(snap, int(snap.job_project[j])),
                   "free_by_type": {snap.type_names[t]: free_t[snap.type_names[t]]
                                    for t in types} or free_t}
        code, msg, _ = _classify(ctx, int(j), types, details)
        out[snap.jobs[j].id] = (code, msg, details)
    return out


def _check(snap) -> None:
    em = build_model(snap, compute_requirements(snap), compute_impact(snap))
    placed = place(em, None)  # keep what runs, start nothing: every queued job waits
    shared = {r.job_id: (r.code, r.message, dict(r.details))
              for r in pending_reasons(em, placed, None)}
    assert shared == _alone(em, placed)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_jobs=30))
def test_every_pending_job_gets_the_reason_it_would_get_alone(snap):
    _check(snap)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_jobs=12), st.integers(2, 5))
def test_copies_of_one_job_at_other_priorities_get_their_own_reasons(snap, copies):
    """Queued copies of each job at priorities 0-4: alike in everything the classification
    reads but the priority, so only the project's own jobs ahead of them set them apart."""
    queued = [j for j in snap.jobs if j.state is JobState.QUEUED]
    more = tuple(Job(**{**{f: getattr(j, f) for f in ("project", "gpus", "gpu_types",
                                                        "min_runtime_s", "speedup")},
                        "id": f"{j.id}-c{k}", "priority": k, "submit_time": j.submit_time})
                 for j in queued for k in range(copies))
    cfg = Config(snap.gpu_types, snap.nodes, snap.org.root, snap.policy, snap.jobs + more)
    _check(build_snapshot(cfg, now=snap.now, usage_ratio=dict(zip(
        snap.org.names, np.asarray(snap.usage_ratio).tolist()))))


def test_a_lower_priority_copy_is_told_its_projects_jobs_ahead_hold_the_target():
    """The hand-checked case behind the property: two queued copies that differ only in
    priority under a project whose running job of priority 2 holds its whole target."""
    nodes = (Node("n0", "h100", 8), Node("n1", "h100", 8))
    org = OrgNode("root", children=(OrgNode("a", share=1.0), OrgNode("b", share=1.0)))
    run = Job("a-run", "a", 8, priority=2, min_runtime_s=8 * 3600.0, state=JobState.RUNNING,
              start_time=0.0, placement=Placement("a-run", "h100", (NodeAlloc("n0", tuple(
                  range(8))),)))
    b_run = Job("b-run", "b", 8, priority=0, min_runtime_s=8 * 3600.0, state=JobState.RUNNING,
                start_time=0.0, placement=Placement("b-run", "h100", (NodeAlloc("n1", tuple(
                    range(8))),)))
    low = Job("a-low", "a", 4, priority=1, min_runtime_s=3600.0, submit_time=1.0)
    top = Job("a-top", "a", 4, priority=3, min_runtime_s=3600.0, submit_time=2.0)
    cfg = Config((GpuType("h100"),), nodes, org, Policy(), (run, b_run, low, top))
    snap = build_snapshot(cfg, now=600.0, usage_ratio={"a": 1.0, "b": 1.0})
    em = build_model(snap, compute_requirements(snap), compute_impact(snap))
    got = {r.job_id: r for r in pending_reasons(em, place(em, None), None)}
    assert got["a-low"].code is ReasonCode.LOWER_PRIORITY_IN_PROJECT
    assert "a-run" in got["a-low"].message
    assert got["a-top"].code is not ReasonCode.LOWER_PRIORITY_IN_PROJECT
    _check(snap)


def test_jobs_alike_but_for_their_shape_are_each_told_their_own_shape():
    """Two queued 4-GPU jobs of one project, one on a single node and one as two pieces of 2:
    alike in everything but the shape, which only a gang that does not fit reads. Four free
    GPUs, one per node: neither fits, and each message names the job's own shape."""
    nodes = tuple(Node(f"n{i}", "h100", 8) for i in range(4))
    org = OrgNode("root", children=(OrgNode("a", share=1.0), OrgNode("b", share=1.0)))
    running = tuple(
        Job(f"b-run{i}", "b", 7, min_runtime_s=8 * 3600.0, state=JobState.RUNNING,
            start_time=0.0, placement=Placement(f"b-run{i}", "h100", (NodeAlloc(
                f"n{i}", tuple(range(7))),)))
        for i in range(4))
    one = Job("a-one", "a", 4, min_runtime_s=3600.0, submit_time=1.0)
    two = Job("a-two", "a", 4, gpus_per_node=2, min_runtime_s=3600.0, submit_time=2.0)
    three = Job("a-one-again", "a", 4, min_runtime_s=3600.0, submit_time=3.0)
    cfg = Config((GpuType("h100"),), nodes, org, Policy(), running + (one, two, three))
    snap = build_snapshot(cfg, now=600.0, usage_ratio={"a": 1.0, "b": 1.0})
    em = build_model(snap, compute_requirements(snap), compute_impact(snap))
    got = {r.job_id: r for r in pending_reasons(em, place(em, None), None)}
    assert {got[j].code for j in ("a-one", "a-two", "a-one-again")} == {
        ReasonCode.GANG_DOES_NOT_FIT}
    assert "as one node" in got["a-one"].message
    assert "as one node" not in got["a-two"].message
    assert got["a-one-again"].message == got["a-one"].message
    _check(snap)
