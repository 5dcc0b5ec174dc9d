"""Floors down the tree (optalloc.model.targets.nested_floors): a child's floor is its share of
its parent's floor, what a sibling does not want going to the others (DESIGN.md rule 2). Each
child on its own (min(demand, entitled GPUs)) left an idle sibling's share to the parent's
floor alone: a program of two projects, one of them idle, met its floor with its project's
8-GPU job (4 GPUs) but only 2 of that project's, where a one-project program's job met 4 and
4 (floors are counted at every level), and took a contested node from the better-ranked
program (rule 1). Each case asserts the whole outcome, beside greedy's (the published sort)."""

from __future__ import annotations

from optalloc.epoch import run_epoch
from optalloc.model.build import build_model
from optalloc.sim.invariants import check_plan
from optalloc.sim.policies.greedy import GreedyScheduler
from optalloc.types import OrgNode
from tests.test_epoch_toy import H, nodes_of, pending_codes, queued, running, snapshot


def two_programs(p1: tuple[str, ...], p2: tuple[str, ...]) -> OrgNode:
    """root -> P1 (projects p1), P2 (projects p2), equal shares everywhere."""
    return OrgNode("root", children=(
        OrgNode("P1", children=tuple(OrgNode(n) for n in p1)),
        OrgNode("P2", children=tuple(OrgNode(n) for n in p2))))


def _decide(nodes, org, jobs, usage):
    snap = snapshot(nodes, org, jobs, usage=usage)
    plan = run_epoch(snap)
    check_plan(snap, plan)
    greedy = GreedyScheduler().decide(snap)
    return (sorted(p.job_id for p in plan.placements), sorted(p.job_id for p in plan.preemptions),
            sorted(p.job_id for p in greedy.placements))


def test_a_better_ranked_program_whose_other_project_is_idle_gets_the_contested_node():
    """One 8-GPU node; P1 {a1, a2} (ratio 0.2, a2 wants nothing) and P2 {b1} (ratio 0.8) each
    want it for an 8-GPU job. a1's floor is all of P1's (4): the two jobs meet as many floor
    GPUs, and P1 ranks first, so a1's job runs, as under greedy. Before, b1's ran (its 8 GPUs
    met P2's floor of 4 and b1's of 4, a1's met P1's 4 and a1's own 2)."""
    jobs = queued("a1", 1, 8) + queued("b1", 1, 8)
    usage = {"P1": 0.2, "a1": 0.2, "a2": 0.2, "P2": 0.8, "b1": 0.8}
    org = two_programs(("a1", "a2"), ("b1",))
    got, pre, greedy = _decide(nodes_of(1, 8), org, jobs, usage)
    assert (got, pre) == (["a100"], [])
    assert greedy == got
    em = build_model(snapshot(nodes_of(1, 8), org, jobs, usage=usage))
    floors = {n: float(em.floor[i, 0]) for i, n in enumerate(em.snap.org.names)}
    assert floors == {"root": 0.0, "P1": 4.0, "a1": 4.0, "a2": 0.0, "P2": 4.0, "b1": 4.0}


def test_where_both_projects_of_the_program_want_it_the_better_ranked_program_still_runs():
    """The same with a2 wanting the node too: P1's floor (4) is a1's 2 and a2's 2, so a1's job
    meets 2 of its project's floor (and 4 of P1's) where b1's meets 4 (and 4 of P2's). P1 ranks
    first, and its floor comes first whatever the sizes (rule 1; optalloc.plan.score's floors
    by rank): a1's job runs, as under greedy. Until stop 37 the floor GPUs were counted and
    b1's job ran."""
    jobs = queued("a1", 1, 8) + queued("a2", 1, 8) + queued("b1", 1, 8)
    usage = {"P1": 0.2, "a1": 0.2, "a2": 0.2, "P2": 0.8, "b1": 0.8}
    got, pre, greedy = _decide(nodes_of(1, 8), two_programs(("a1", "a2"), ("b1",)), jobs, usage)
    assert (got, pre) == (["a100"], [])
    assert greedy == got


def test_the_better_ranked_one_project_program_gets_it_the_other_way_round():
    jobs = queued("a1", 1, 8) + queued("a2", 1, 8) + queued("b1", 1, 8)
    usage = {"P1": 0.8, "a1": 0.8, "a2": 0.8, "P2": 0.2, "b1": 0.2}
    got, pre, greedy = _decide(nodes_of(1, 8), two_programs(("a1", "a2"), ("b1",)), jobs, usage)
    assert (got, pre) == (["b100"], [])
    assert greedy == got


def test_the_programs_order_comes_before_its_projects_own_ratios():
    """P1 (0.2) ranks above P2 (0.3) though P1's a1 (0.4) has a higher ratio than P2's b1
    (0.0): one 8-GPU node goes to a1."""
    jobs = queued("a1", 1, 8) + queued("b1", 1, 8) + queued("b2", 1, 8)
    usage = {"P1": 0.2, "a1": 0.4, "a2": 0.0, "P2": 0.3, "b1": 0.0, "b2": 0.6}
    got, pre, greedy = _decide(nodes_of(1, 8), two_programs(("a1", "a2"), ("b1", "b2")), jobs,
                               usage)
    assert (got, pre) == (["a100"], [])
    assert greedy == got


def test_a_project_below_its_floor_still_takes_its_siblings_gpus_past_their_protection():
    """2 x 8 GPUs, P1 {a1, a2} and P2 {b1}: a1 runs two 4-GPU jobs past their protection
    (all of P1's 8), b1 a protected 8-GPU job; a2 (floor 4) waits with a 4-GPU job. Inside
    P1 the floors are met through the targets: one of a1's jobs gives way to a2's (either:
    both lose the same work, 300 s of restart, and the model ranks running jobs of one
    priority alike)."""
    jobs = [running("A0", "a1", "h100", [("n00", range(4))], start=5 * H, submit_time=0.0),
            running("A1", "a1", "h100", [("n00", range(4, 8))], start=6 * H, submit_time=1.0),
            running("B0", "b1", "h100", [("n01", range(8))], start=9.5 * H, min_runtime_s=4 * H),
            ] + queued("a2", 1, 4)
    snap = snapshot(nodes_of(2, 8), two_programs(("a1", "a2"), ("b1",)), jobs,
                    usage={"P1": 0.5, "a1": 0.5, "a2": 0.5, "P2": 0.5, "b1": 0.5})
    plan = run_epoch(snap)
    check_plan(snap, plan)
    (gone,) = [p.job_id for p in plan.preemptions]
    assert gone in ("A0", "A1")
    assert sorted(p.job_id for p in plan.placements) == sorted(
        {"A0", "A1", "B0", "a200"} - {gone})
    assert pending_codes(plan) == {}


def test_nested_floors_share_a_parents_floor_among_the_children_that_want_it():
    """Table: (parent floor from min(D, E) at the top), children's demand and entitlement ->
    their floors. An idle child's share goes to its siblings in proportion to theirs; a child
    never gets more than it wants; the parent's floor is never exceeded; whole GPUs."""
    import numpy as np

    from optalloc.org import OrgTree
    from optalloc.model.targets import nested_floors

    org = OrgTree.build(OrgNode("root", children=(
        OrgNode("P", children=(OrgNode("x", share=1), OrgNode("y", share=1),
                               OrgNode("z", share=2))),
        OrgNode("Q"))), ["h100"])
    names = list(org.names)

    def floors(demand: dict, ent: dict) -> dict:
        D = np.array([[demand.get(n, 0.0)] for n in names])
        E = np.array([[ent.get(n, 0.0)] for n in names])
        D[names.index("P")] = sum(demand.get(c, 0.0) for c in "xyz")
        E[names.index("P")] = sum(ent.get(c, 0.0) for c in "xyz")
        F = nested_floors(org, D, E)
        return {n: float(F[i, 0]) for i, n in enumerate(names) if n in "Pxyz"}

    ent = {"x": 2, "y": 2, "z": 4}
    assert floors({"x": 8, "y": 8, "z": 8}, ent) == {"P": 8, "x": 2, "y": 2, "z": 4}
    assert floors({"x": 8, "y": 0, "z": 8}, ent) == {"P": 8, "x": 2, "y": 0, "z": 5}
    assert floors({"x": 8, "y": 0, "z": 0}, ent) == {"P": 8, "x": 8, "y": 0, "z": 0}
    assert floors({"x": 1, "y": 8, "z": 8}, ent) == {"P": 8, "x": 1, "y": 2, "z": 4}
    assert floors({"x": 1, "y": 1, "z": 1}, ent) == {"P": 3, "x": 1, "y": 1, "z": 1}


def test_a_project_under_the_root_weighs_as_much_as_a_programs_project():
    """X, a project directly under the root (ratio 0.2), and P2's only project b1 (0.8) want
    one 8-GPU node: X ranks first, so X's job runs, as under greedy; the other way round b1's.
    Before, b1's GPUs counted at P2 and at b1 (two floor and target rows) where X's counted
    once, and b1's job ran whatever the ratios. A shallow project's rows now weigh what the
    levels it lacks would (impact.tier_weights)."""
    org = OrgNode("root", children=(OrgNode("X"), OrgNode("P2", children=(OrgNode("b1"),))))
    jobs = queued("X", 1, 8) + queued("b1", 1, 8)
    for ux, up, want in ((0.2, 0.8, ["X00"]), (0.8, 0.2, ["b100"])):
        got, pre, greedy = _decide(nodes_of(1, 8), org, jobs, {"X": ux, "P2": up, "b1": up})
        assert (got, pre) == (want, [])
        assert greedy == want


def test_a_floor_tie_goes_to_the_better_ranked_subtree_whatever_its_projects_ratios():
    """Equal floors on one contested node: the tie-break follows the Fair-Tree order level by
    level (order.tree_position), not the sum of the ratios on each path. X (0.2) under the
    root against P2 (0.25) whose b1 has 0.0: X's job runs; X (0.3) against P2 (0.2) whose b1
    has 1.0: b1's; P1 (0.2) {a1: 1.0} against P2 (0.25) {b1: 0.0}: a1's. As greedy each time.
    Before, 1 / (1 + ratio) summed over each path decided the other way (found by a
    hand-written case)."""
    shallow = OrgNode("root", children=(OrgNode("X"), OrgNode("P2", children=(OrgNode("b1"),))))
    deep = OrgNode("root", children=(OrgNode("P1", children=(OrgNode("a1"),)),
                                     OrgNode("P2", children=(OrgNode("b1"),))))
    cases = [
        (shallow, queued("X", 1, 8) + queued("b1", 1, 8), {"X": 0.2, "P2": 0.25, "b1": 0.0},
         ["X00"]),
        (shallow, queued("X", 1, 8) + queued("b1", 1, 8), {"X": 0.3, "P2": 0.2, "b1": 1.0},
         ["b100"]),
        (deep, queued("a1", 1, 8) + queued("b1", 1, 8),
         {"P1": 0.2, "a1": 1.0, "P2": 0.25, "b1": 0.0}, ["a100"]),
    ]
    for org, jobs, usage, want in cases:
        got, pre, greedy = _decide(nodes_of(1, 8), org, jobs, usage)
        assert (got, pre, greedy) == (want, [], want)
