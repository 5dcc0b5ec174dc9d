"""explain(): outcome, rank inputs up the tree, and what would have to change."""

from __future__ import annotations

import pytest

from optalloc.epoch import run_epoch
from optalloc.errors import OptallocError
from optalloc.plan.explain import explain, format_explanation
from optalloc.types import Job, OrgNode
from test_epoch_toy import H, flat_org, nodes_of, queued, running, snapshot


def _two_level_snapshot():
    org = OrgNode("root", children=(
        OrgNode("P", share=1, children=(OrgNode("A", share=1), OrgNode("B", share=1))),
        OrgNode("Q", share=1, children=(OrgNode("C", share=1),)),
    ))
    jobs = (queued("A", 3, 8) + queued("C", 3, 8)
            + [Job("G", "B", 32, min_runtime_s=H),
               running("Bold", "B", "h100", [("n03", range(8))], start=2 * H)])
    return snapshot(nodes_of(4, 8), org, jobs, usage={"P": 1.5, "A": 0.5, "B": 2.0, "Q": 0.2})


def test_a_pending_job_gets_its_path_ratios_targets_and_the_changes_that_would_start_it():
    snap = _two_level_snapshot()
    plan = run_epoch(snap)
    d = explain(snap, plan, "A02")
    assert d["outcome"] == "pending"
    assert d["code"] == "OverShare"
    assert [(lvl["org"], lvl["usage_ratio"]) for lvl in d["rank_inputs"]["path"]] == [
        ("P", 1.5), ("A", 0.5)]
    # Fair Tree: Q (0.2) before P (1.5); inside P, A (0.5) before B (2.0): A ranks 2nd of 3
    assert (d["rank_inputs"]["fair_tree_rank"], d["rank_inputs"]["projects"]) == (2, 3)
    assert d["details"]["targets"]["h100"] == [
        {"org": "P", "got": 16.0, "target": 16.0, "floor": 16.0},
        {"org": "A", "got": 8.0, "target": 8.0, "floor": 8.0}]
    assert any("P's h100 fair-share target must grow by 8 GPUs" in c for c in d["changes"])
    assert any("GPUs of h100 must free up" in c for c in d["changes"])
    text = format_explanation(d)
    assert "OverShare" in text and "P: usage ratio 1.500 (h100: holds 16 of target 16)" in text


def test_a_gang_that_does_not_fit_says_how_many_whole_nodes_must_free_up():
    snap = _two_level_snapshot()
    plan = run_epoch(snap)
    d = explain(snap, plan, "G")
    assert d["outcome"] == "pending"
    assert any("4 more h100 nodes with 8 free GPUs must free up" in c for c in d["changes"])


def test_a_preempted_job_names_the_jobs_that_took_its_gpus():
    jobs = [running("Bold", "B", "h100", [("n00", range(8)), ("n01", range(8))], start=5 * H,
                    min_runtime_s=2 * H)] + queued("A", 4, 8)
    snap = snapshot(nodes_of(4, 8), flat_org({"A": 9, "B": 1}), jobs, usage={"B": 3.0})
    plan = run_epoch(snap)
    pre = {p.job_id: p for p in plan.preemptions}
    assert "Bold" in pre
    d = explain(snap, plan, "Bold")
    assert d["outcome"] == "preempted"
    assert d["code"] == "PreemptedForFairShare"
    assert d["needed_by"] == list(pre["Bold"].needed_by)


def test_a_started_job_shows_its_nodes_and_gpus():
    snap = _two_level_snapshot()
    plan = run_epoch(snap)
    started = next(p for p in plan.placements if p.job_id == "C00")
    d = explain(snap, plan, "C00")
    assert d["outcome"] == "started"
    assert d["placement"] == {"gpu_type": "h100",
                              "nodes": {a.node: list(a.gpus) for a in started.nodes}}


def test_an_unknown_job_is_a_clear_error():
    snap = _two_level_snapshot()
    with pytest.raises(OptallocError, match="not in this epoch's queue"):
        explain(snap, run_epoch(snap), "nope")
