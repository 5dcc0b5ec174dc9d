"""Review of the floors' debt (stop 49): three faults, each fixed where it arose.

* A project's debt beyond its siblings (what they owe it) sat on its floor row, which a trade
  against another program moves too: one 8-GPU node, P2 {B} ranked before P1 {A1, A2}, A1
  owed GPU-hours that A2 got (P1 owed nothing): A1's 6-GPU job took the node from B's 4-GPU
  job (rule 1; greedy runs B's). Now a node carries beyond its siblings at most its parent's
  own debt where the parent competes (impact.debt_tilt).
* Owed and delivered are one budget over every type; with per-type budgets (different billing
  weights) a project above its h100 share all day was 'owed' 72 GPU-h of a100 its jobs cannot
  use, and its debt took h100 from the better-ranked project. The debt now counts only where
  the budget is one (impact.debt_applies), and so does the holder's line.
* What ran before the first demand sample (imported history) was credited against what the
  project was owed after; the report counts the tracked hours only, and so does the debt now.
"""

from __future__ import annotations

from optalloc.epoch import run_epoch
from optalloc.ledger import Ledger
from optalloc.model.objective.impact import debt_tilt
from optalloc.org import OrgTree
from optalloc.sim.invariants import check_plan
from optalloc.snapshot import build_snapshot
from optalloc.types import Config, GpuType, Interval, Node, OrgNode, Policy
from tests.test_epoch_toy import flat_org, nodes_of, queued

H = 3600.0


def _decide(snap):
    plan = run_epoch(snap)
    check_plan(snap, plan)
    return (sorted(p.job_id for p in plan.placements),
            {r.job_id: r.code.value for r in plan.pending},
            {r.job_id: r.message for r in plan.pending})


def test_what_a_projects_sibling_owes_it_does_not_take_a_better_ranked_programs_floor():
    org = OrgNode("root", children=(
        OrgNode("P1", children=(OrgNode("A1"), OrgNode("A2"))),
        OrgNode("P2", children=(OrgNode("B"),))))
    jobs = queued("A1", 1, 6) + queued("A2", 1, 1) + queued("B", 1, 4)
    cfg = Config((GpuType("h100"),), tuple(nodes_of(1, 8)), org, Policy(), tuple(jobs))
    usage = {"P1": 1.0, "A1": 1.0, "A2": 1.0, "P2": 0.2, "B": 0.2}
    for owed in (10.0, 40.0):
        snap = build_snapshot(cfg, now=10 * H, usage_ratio=usage, shortfall={"A1": owed})
        assert not debt_tilt(snap, 8.0).any()
        placed, pending, _ = _decide(snap)
        assert (placed, pending) == (["A200", "B00"], {"A100": "WaitingForCapacity"})


def test_inside_a_program_owed_as_a_whole_its_projects_debts_still_count():
    # P1 owed 8 GPU-h of its 4-GPU share (2 h) beyond P2; inside it A1 owed 10 of its 2 (5 h)
    # beyond A2: A1's tilt is bounded by P1's 2
    org = OrgNode("root", children=(
        OrgNode("P1", children=(OrgNode("A1"), OrgNode("A2"))),
        OrgNode("P2", children=(OrgNode("B"),))))
    jobs = queued("A1", 1, 6) + queued("A2", 1, 1) + queued("B", 1, 4)
    cfg = Config((GpuType("h100"),), tuple(nodes_of(1, 8)), org, Policy(), tuple(jobs))
    snap = build_snapshot(cfg, now=10 * H, usage_ratio={}, shortfall={"P1": 8.0, "A1": 10.0})
    got = dict(zip(snap.org.names, debt_tilt(snap, 8.0)))
    assert got == {"root": 0.0, "P1": 2.0, "A1": 2.0, "A2": 0.0, "P2": 0.0, "B": 0.0}


def _per_type():
    types = (GpuType("h100", 2.0), GpuType("a100", 0.25))
    org = flat_org({"A": 1, "B": 1})
    led = Ledger(types, OrgTree.build(org, ["h100", "a100"]), Policy())
    led.record_capacity(0.0, {"h100": 8, "a100": 8})
    led.record_demand(0.0, {"A": 8, "B": 11})
    led.record_interval(Interval("a", "A", "h100", 5, 0.0, 24 * H))
    led.record_interval(Interval("b", "B", "h100", 3, 0.0, 24 * H))
    led.record_interval(Interval("b2", "B", "a100", 8, 0.0, 24 * H))
    jobs = queued("A", 1, 8, gpu_types=("h100",)) + queued("B", 1, 3, gpu_types=("h100",))
    cfg = Config(types, (Node("h0", "h100", 8), Node("a0", "a100", 8)), org, Policy(),
                 tuple(jobs))
    return build_snapshot(cfg, now=24 * H, usage_ratio=led.usage_ratios(24 * H),
                          shortfall=led.owed_shortfall(24 * H))


def test_with_per_type_budgets_a_project_above_its_share_of_a_type_is_not_owed_on_it():
    snap = _per_type()
    assert dict(zip(snap.org.names, snap.owed_shortfall))["A"] == 72.0  # the pooled metric
    placed, pending, msg = _decide(snap)
    assert (placed, pending) == (["B00"], {"A00": "WaitingForCapacity"})
    assert "owed and not delivered" not in msg["A00"]


def test_what_ran_before_optalloc_tracked_the_queue_does_not_cancel_what_is_owed_after():
    led = Ledger((GpuType("h100"),), OrgTree.build(flat_org({"A": 1, "B": 1}), ["h100"]),
                 Policy(lookback_s=24 * H))
    led.record_capacity(0.0, {"h100": 8})
    led.record_interval(Interval("imp", "A", "h100", 8, 0.0, 12 * H))  # imported history
    led.record_demand(12 * H, {"A": 8, "B": 8})  # the first epoch
    led.record_interval(Interval("b", "B", "h100", 8, 12 * H, 24 * H))
    assert led.owed_shortfall(24 * H) == {"root": 0.0, "A": 48.0, "B": 0.0}
    assert set(led.owed_shortfall(12 * H).values()) == {0.0}  # nothing tracked yet
