"""Two random clusters that fresh hypothesis draws found at stop 43, kept as fixed cases with
the whole expected plan. In both the epoch was right and the property's reference was not:

- a running job past its protection restarts on other GPUs of its own type so that a gang
  that needs its whole node starts (packing, README rule 8): the property had asserted that
  every move changes type;
- the epoch refuses to move a running job to another type for its own lower-priority
  teammate (its team row counts a same-type restart as running, not a move away), and the
  reference bound of `assert_true_bound_and_honest_status` had team rows for equal
  priorities only, so it allowed that move and came out above the epoch's true bound."""

from __future__ import annotations

from optalloc.epoch import run_epoch
from optalloc.types import Node, NodeState

from test_epoch_properties import _check_plan, assert_true_bound_and_honest_status
from test_epoch_toy import H, flat_org, pending_codes, preempted, queued, running, snapshot


def _nodes(spec):
    return [Node(n, t, g, NodeState.UP) for n, t, g in spec]


def _where(plan) -> dict[str, tuple[str, tuple]]:
    return {p.job_id: (p.gpu_type, tuple((a.node, a.gpus) for a in p.nodes))
            for p in plan.placements}


def test_a_job_restarts_on_its_own_type_so_that_a_gang_gets_two_whole_nodes():
    nodes = _nodes([("h0", "h100", 4), ("b0", "b200", 8), ("b1", "b200", 4),
                    ("b2", "b200", 8)])
    jobs = [running("r", "A", "b200", [("b0", [0])], start=7 * H, min_runtime_s=900.0,
                    gpu_types=("b200",)),
            queued("A", 1, 16, prefix="g", min_runtime_s=900.0)[0]]
    snap = snapshot(nodes, flat_org({"A": 1}), jobs, types=("h100", "b200"))
    plan = run_epoch(snap)
    _check_plan(snap, plan)
    where = _where(plan)
    assert where["r"] == ("b200", (("b1", (0,)),))
    assert where["g00"][0] == "b200" and {n for n, _ in where["g00"][1]} == {"b0", "b2"}
    assert preempted(plan) == {"r": ("Moved", ("g00",))}
    assert pending_codes(plan) == {}
    assert plan.report.status == "optimal"


def test_no_job_moves_to_another_type_for_its_own_lower_priority_teammate():
    nodes = _nodes([("h0", "h100", 8), ("h1", "h100", 4), ("b0", "b200", 4),
                    ("b1", "b200", 4)])
    jobs = ([running("r", "A", "h100", [("h0", [0])], start=7 * H, min_runtime_s=900.0,
                     priority=1, speedup={"b200": 1.5})]
            + queued("A", 1, 8, prefix="g", min_runtime_s=900.0, gpu_types=("h100",))
            + queued("A", 6, 1, prefix="u", min_runtime_s=0.0, speedup={"b200": 1.5}))
    snap = snapshot(nodes, flat_org({"A": 1}), jobs, types=("h100", "b200"))
    plan = run_epoch(snap)
    _check_plan(snap, plan)
    where = _where(plan)
    # r stays an h100 job: it restarts on h1 so that its teammate's 8-GPU job takes h0
    assert where["r"] == ("h100", (("h1", (0,)),))
    assert where["g00"] == ("h100", (("h0", tuple(range(8))),))
    assert {where[f"u{i:02d}"][0] for i in range(6)} == {"b200"}
    assert preempted(plan) == {"r": ("Moved", ("g00",))}
    assert pending_codes(plan) == {}
    assert_true_bound_and_honest_status(snap, run_epoch)
