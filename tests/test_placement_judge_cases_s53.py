"""An outside judge's hand-worked placements (session 53): small clusters of 2-5 nodes, node
sizes 4/8/16, h100 and b200, drain and down nodes, running jobs inside and past their
protection, gangs of whole nodes (8+8 and 8+8+4), per-node gangs and single-node jobs. Each
case states the whole plan one epoch must return, worked out by hand from DESIGN.md section 8
and the README's shape rule (`optalloc/shape.py`): every job running after the epoch and
where (node, GPUs there), every preemption with its code and takers, every pending job's
code, the numbers its message states, and the drain report. `rules_hold` checks the
invariants besides (capacity per node, gang all-or-nothing, nothing new on drain/down nodes,
protected jobs kept).

Three faults found here, all fixed. (1) and (2): single-node jobs and a gang's remainder go
by best fit decreasing, and where that missed a packing the MIP had found (4, 3, 3, 2, 2, 2 on
two empty 8-GPU nodes; an 8+8+4 gang's 4 taking the 5-GPU hole a 5-GPU job needed) a chosen
start was dropped and waited `GangDoesNotFit` beside idle GPUs: the model's slots were the
fallback, but best fit had used them up. A solution with a start that does not place is now
placed again with the model's packing first (optalloc/plan/outcome.py, `slots_first` in
optalloc/plan/place.py), and the better plan by the scheme's order kept. (3) An allocated
start that must evict unallocated work took the lowest-index node with room, whatever it
cleared: an 8-GPU job beside 1 unallocated GPU on n01 and 4 on n00 evicted the 4
(optalloc/plan/nodepool.py `best_fit`; a whole-node gang likewise, optalloc/plan/fit.py); now
the node where the fewest GPUs must go comes first (README, "How an epoch decides", item 8).

Not a fault of the code: `rules_hold` (tests/test_epoch_properties.py:152) counts a new
whole-node gang's nodes as `req.pieces` without the remainder node, so it rejects every new
8+8+4 start; the two cases with one skip it and state their whole plan."""

from __future__ import annotations

import json
import textwrap
from collections import Counter

import pytest

from optalloc.cli import main
from optalloc.config import load_config
from optalloc.epoch import run_epoch
from optalloc.sim.policies import make_policy
from optalloc.snapshot import build_snapshot
from optalloc.types import Job, Node, NodeState, Policy

from test_epoch_properties import rules_hold
from test_epoch_toy import H, flat_org, messages, nodes_of, pending_codes, placed_on
from test_epoch_toy import preempted, running, snapshot

NOW = 10 * H
AB = flat_org({"A": 1, "B": 1})
ABC = flat_org({"A": 1, "B": 1, "C": 1})
DRAIN, DOWN = NodeState.DRAIN, NodeState.DOWN


def q(jid, project, gpus, submit, mr=H, **kw) -> Job:
    return Job(jid, project, gpus, min_runtime_s=mr, submit_time=float(submit), **kw)


def prot(jid, project, allocs, gpu_type="h100", **kw) -> Job:
    """Running, started half an hour ago, protected for 2 h (until NOW + 1.5 h)."""
    return running(jid, project, gpu_type, allocs, NOW - H / 2, 2 * H, **kw)


def past(jid, project, allocs, gpu_type="h100", **kw) -> Job:
    """Running for 3 h, protected for 1 h: past its protection."""
    return running(jid, project, gpu_type, allocs, NOW - 3 * H, H, **kw)


def ilp(snap, rules: bool = True):
    """The epoch's plan, with `rules_hold` checked. `rules=False` for a new 8+8+4 placement:
    that helper (tests/test_epoch_properties.py:152) counts a whole-node gang's nodes as
    `req.pieces`, without the remainder node, so it rejects every such start; these cases
    state their whole plan instead."""
    plan = run_epoch(snap)
    assert plan.degraded is None
    if rules:
        rules_hold(snap, plan)
    return plan


def greedy(snap):
    return make_policy("greedy").decide(snap)


def drains(plan) -> dict:
    return {d.node: (d.staying, d.leaving, d.ready) for d in plan.drains}


def per_node(plan) -> dict[str, Counter]:
    """Per node the multiset of chunk sizes placed there (which job is which is free)."""
    out: dict[str, Counter] = {}
    for p in plan.placements:
        for a in p.nodes:
            out.setdefault(a.node, Counter())[len(a.gpus)] += 1
    return out


# --------------------------------------------------------------------------- packing, gangs

def test_a_per_node_gang_takes_the_half_free_node_so_a_whole_node_job_starts_beside_it():
    # 3 x 8; B's protected R holds 4 of n00. A queues G (8 GPUs, 4 per node: two distinct
    # nodes) and S (8 GPUs, one node). Free: n00 4, n01 8, n02 8. Only G on n00 + n01 (or
    # n00 + n02) leaves a whole node for S; best fit takes the tightest (n00, then n01).
    snap = snapshot(nodes_of(3, 8), AB, [prot("R", "B", [("n00", range(4))]),
                                         q("G", "A", 8, 1, gpus_per_node=4), q("S", "A", 8, 2)])
    want = {"R": (("n00", 4),), "G": (("n00", 4), ("n01", 4)), "S": (("n02", 8),)}
    for plan in (ilp(snap), greedy(snap)):
        assert placed_on(plan) == want
        assert preempted(plan) == {} and pending_codes(plan) == {}


def test_an_8_8_4_gang_takes_the_two_empty_nodes_and_its_remainder_beside_a_protected_job():
    # 3 x 8; R holds 4 of n01. G: 20 GPUs, no gpus_per_node, largest up node 8: two whole
    # nodes (n00, n02, the only empty ones) + 4 on a third distinct node (n01's free 4).
    snap = snapshot(nodes_of(3, 8), AB, [prot("R", "B", [("n01", range(4))]),
                                         q("G", "A", 20, 1)])
    want = {"R": (("n01", 4),), "G": (("n00", 8), ("n02", 8), ("n01", 4))}
    for plan in (ilp(snap, rules=False), greedy(snap)):
        assert placed_on(plan) == want
        assert pending_codes(plan) == {}


def test_a_whole_node_gang_waits_when_its_free_gpus_are_spread_four_per_node():
    # 4 x 8, each with a protected 4-GPU job of B: 16 free GPUs, no node entirely free. A's
    # 16-GPU gang needs two whole nodes: GangDoesNotFit, and the message's numbers are these.
    snap = snapshot(nodes_of(4, 8), AB, [prot(f"R{i}", "B", [(f"n0{i}", range(4))])
                                         for i in range(4)] + [q("G", "A", 16, 1)])
    plan = ilp(snap)
    assert placed_on(plan) == {f"R{i}": ((f"n0{i}", 4),) for i in range(4)}
    assert pending_codes(plan) == {"G": "GangDoesNotFit"}
    msg = messages(plan)["G"]
    for part in ("needs 16 GPUs as whole-node gang", "16 free GPUs", "largest free node has 4",
                 "0 nodes are entirely free"):
        assert part in msg, (part, msg)
    g = greedy(snap)
    assert pending_codes(g) == {"G": "GangDoesNotFit"} and preempted(g) == {}


def test_a_two_per_node_gang_uses_the_two_holes_so_the_whole_node_job_keeps_an_empty_node():
    # 4 x 8; R0, R1 hold 6 of n00 and n01 (2 free each). G: 6 GPUs, 2 per node (three
    # distinct nodes); S: 8 GPUs on one node. The plan that starts both: G on n00, n01 and one
    # of the empty nodes; S on the other empty node. (Both empty nodes are equivalent.)
    snap = snapshot(nodes_of(4, 8), AB, [prot("R0", "B", [("n00", range(6))]),
                                         prot("R1", "B", [("n01", range(6))]),
                                         q("G", "A", 6, 1, gpus_per_node=2), q("S", "A", 8, 2)])
    for plan in (ilp(snap), greedy(snap)):
        got = placed_on(plan)
        assert set(got) == {"R0", "R1", "G", "S"} and pending_codes(plan) == {}
        g_nodes = {n for n, k in got["G"]}
        assert all(k == 2 for _, k in got["G"]) and {"n00", "n01"} < g_nodes
        third = (g_nodes - {"n00", "n01"}).pop()
        assert got["S"] == ((({"n02", "n03"} - {third}).pop(), 8),)


def test_single_node_jobs_4_3_3_2_2_2_all_start_on_two_empty_8_gpu_nodes():
    # 16 GPUs, 16 GPUs of demand, one project (B has none). The only packing: {4, 2, 2} on
    # one node and {3, 3, 2} on the other. Best fit decreasing puts 4 + 3 on one node, 3 + 2 +
    # 2 on the other, and the last 2-GPU job finds 1 + 1 free: it waited GangDoesNotFit
    # although the MIP had packed all six (fixed: optalloc/plan/outcome.py, slots_first).
    jobs = [q(f"J{i}", "A", g, i) for i, g in enumerate([4, 3, 3, 2, 2, 2])]
    plan = ilp(snapshot(nodes_of(2, 8), AB, jobs))
    assert pending_codes(plan) == {} and preempted(plan) == {}
    assert sorted(sorted(c.elements()) for c in per_node(plan).values()) == \
        [[2, 2, 4], [2, 3, 3]]
    assert plan.report.status == "optimal"


def test_the_same_six_jobs_submitted_smallest_first_all_start_too():
    # Same packing; before the fix the 4-GPU job (last in its team's order) was the one given
    # back and waited.
    jobs = [q(f"J{i}", "A", g, i) for i, g in enumerate([2, 2, 2, 3, 3, 4])]
    plan = ilp(snapshot(nodes_of(2, 8), AB, jobs))
    assert pending_codes(plan) == {}
    assert sorted(sorted(c.elements()) for c in per_node(plan).values()) == \
        [[2, 2, 4], [2, 3, 3]]


def test_an_8_8_4_gangs_remainder_leaves_the_5_gpu_hole_to_the_5_gpu_job():
    # 4 x 8; B's protected jobs hold 3 of n02 (5 free) and 2 of n03 (6 free). A queues G (20:
    # 8 + 8 + 4), S5 (5) and S2 (2): 27 GPUs of demand on 27 free. G's whole nodes must be
    # n00 and n01 (the only empty ones). Its 4 on n02 leaves 1 there and S5 takes n03 (1
    # left): S2 fits nowhere. Its 4 on n03 leaves 2 for S2, and S5 fills n02: the only plan
    # that starts all three. Best fit put the remainder on n02 (tighter) and S2 waited.
    snap = snapshot(nodes_of(4, 8), AB, [
        prot("R2", "B", [("n02", range(3))]), prot("R3", "B", [("n03", range(2))]),
        q("G", "A", 20, 1), q("S5", "A", 5, 2), q("S2", "A", 2, 3)])
    plan = ilp(snap, rules=False)
    assert placed_on(plan) == {"R2": (("n02", 3),), "R3": (("n03", 2),),
                               "G": (("n00", 8), ("n01", 8), ("n03", 4)),
                               "S5": (("n02", 5),), "S2": (("n03", 2),)}
    assert pending_codes(plan) == {} and preempted(plan) == {}


def test_a_per_node_gang_on_four_nodes_leaves_no_node_for_the_later_single_jobs():
    # Same cluster; G: 16 GPUs, 4 per node: four distinct nodes, so one piece on each of the
    # 4 nodes (n02: 5 -> 1 free, n03: 6 -> 2 free, n00/n01: 4 free). S5 and S6 (submitted
    # after G, A's own order) fit nowhere: GangDoesNotFit with 11 free, largest free node 4.
    snap = snapshot(nodes_of(4, 8), AB, [
        prot("R2", "B", [("n02", range(3))]), prot("R3", "B", [("n03", range(2))]),
        q("G", "A", 16, 1, gpus_per_node=4), q("S5", "A", 5, 2), q("S6", "A", 6, 3)])
    plan = ilp(snap)
    assert placed_on(plan)["G"] == (("n00", 4), ("n01", 4), ("n02", 4), ("n03", 4))
    assert pending_codes(plan) == {"S5": "GangDoesNotFit", "S6": "GangDoesNotFit"}
    for jid in ("S5", "S6"):
        assert "11 free GPUs" in messages(plan)[jid]
        assert "largest free node has 4" in messages(plan)[jid]


# ----------------------------------------------------------------------- node sizes, types

def test_a_16_gpu_job_is_8_plus_8_when_the_only_16_gpu_node_drains():
    # h100: big (16, drain), n00, n01 (8). The shape reads the largest *up* node (8), so 16
    # GPUs are a whole-node gang of two 8s; nothing starts on big, which is empty: ready.
    snap = snapshot([Node("big", "h100", 16, DRAIN), Node("n00", "h100", 8),
                     Node("n01", "h100", 8)], AB, [q("Q", "A", 16, 1)])
    for plan in (ilp(snap), greedy(snap)):
        assert placed_on(plan) == {"Q": (("n00", 8), ("n01", 8))}
        assert drains(plan) == {"big": ((), (), True)}


def test_a_16_gpu_job_is_one_node_when_a_16_gpu_node_is_up_and_waits_while_it_is_part_used():
    # big (16, up) holds B's protected 4; n00, n01 empty. 16 <= largest up node: one node.
    # 28 free GPUs, the largest free node 12, 2 nodes entirely free: GangDoesNotFit.
    snap = snapshot([Node("big", "h100", 16), Node("n00", "h100", 8), Node("n01", "h100", 8)],
                    AB, [prot("R", "B", [("big", range(4))]), q("Q", "A", 16, 1)],
                    usage={"A": 0.1, "B": 0.5})
    plan = ilp(snap)
    assert placed_on(plan) == {"R": (("big", 4),)}
    assert pending_codes(plan) == {"Q": "GangDoesNotFit"} and preempted(plan) == {}
    for part in ("needs 16 GPUs as one node", "28 free GPUs", "largest free node has 12",
                 "2 nodes are entirely free"):
        assert part in messages(plan)["Q"]
    assert pending_codes(greedy(snap)) == {"Q": "GangDoesNotFit"}


def test_a_per_node_gang_keeps_off_the_16_gpu_node_that_a_16_gpu_job_needs():
    # big (16), n00, n01 (8), all empty. A: G 8 GPUs 4 per node; B: S 16 (one node: big).
    # Both start only with G on n00 + n01.
    snap = snapshot([Node("big", "h100", 16), Node("n00", "h100", 8), Node("n01", "h100", 8)],
                    AB, [q("G", "A", 8, 1, gpus_per_node=4), q("S", "B", 16, 2)])
    for plan in (ilp(snap), greedy(snap)):
        assert placed_on(plan) == {"G": (("n00", 4), ("n01", 4)), "S": (("big", 16),)}


def test_an_8_gpu_job_allowed_both_types_runs_as_4_plus_4_on_the_small_b200_nodes():
    # h0 (h100, 8) full with B's protected job; b0, b1 (b200, 4 each) empty. A's 8-GPU job may
    # use h100 or b200: on b200 (largest node 4) it is a whole-node gang of two 4s.
    snap = snapshot([Node("h0", "h100", 8), Node("b0", "b200", 4), Node("b1", "b200", 4)], AB,
                    [prot("R", "B", [("h0", range(8))]),
                     q("Q", "A", 8, 1, gpu_types=("h100", "b200"))], types=("h100", "b200"))
    for plan in (ilp(snap), greedy(snap)):
        assert placed_on(plan) == {"R": (("h0", 8),), "Q": (("b0", 4), ("b1", 4))}
        assert next(p for p in plan.placements if p.job_id == "Q").gpu_type == "b200"


def test_a_b200_only_job_waits_for_its_full_b200_node_with_the_h100_node_idle():
    snap = snapshot([Node("b00", "b200", 8), Node("n00", "h100", 8)], AB,
                    [prot("P", "B", [("b00", range(8))], gpu_type="b200"),
                     q("Q", "A", 4, 1, gpu_types=("b200",))], types=("h100", "b200"))
    for plan in (ilp(snap), greedy(snap)):
        assert placed_on(plan) == {"P": (("b00", 8),)}
        assert pending_codes(plan) == {"Q": "WaitingForCapacity"} and preempted(plan) == {}
    assert "0 free" in messages(ilp(snap))["Q"]


@pytest.mark.parametrize("state,ready", [(DOWN, None), (DRAIN, True)])
def test_a_b200_only_job_whose_only_b200_node_is_down_or_draining_waits_node_draining(
        state, ready):
    snap = snapshot([Node("b00", "b200", 8, state), Node("n00", "h100", 8)], AB,
                    [q("Q", "A", 4, 1, gpu_types=("b200",))], types=("h100", "b200"))
    want_drains = {} if ready is None else {"b00": ((), (), True)}
    for plan in (ilp(snap), greedy(snap)):
        assert placed_on(plan) == {} and pending_codes(plan) == {"Q": "NodeDraining"}
        assert drains(plan) == want_drains


# ----------------------------------------------------------------------- drain and down

def test_a_gang_past_its_protection_across_a_drain_node_restarts_on_two_free_nodes():
    # d00 (drain) + n00 hold A's 16-GPU gang, 3 h in, 1 h protection, resumable. It must leave
    # d00, so the whole gang leaves; n01 and n02 are free now (n00's GPUs free only after the
    # preemption: used last): Moved to n01 + n02. Greedy requeues it (PreemptedNodeDrain).
    snap = snapshot([Node("d00", "h100", 8, DRAIN)] + nodes_of(3, 8), AB,
                    [past("G", "A", [("d00", range(8)), ("n00", range(8))])])
    plan = ilp(snap)
    assert placed_on(plan) == {"G": (("n01", 8), ("n02", 8))}
    assert preempted(plan) == {"G": ("Moved", ())}
    assert "node d00 is draining and the job is past its protection" in messages(plan)["G"]
    assert drains(plan) == {"d00": ((), ("G",), False)}
    g = greedy(snap)
    assert placed_on(g) == {} and preempted(g) == {"G": ("PreemptedNodeDrain", ())}


def test_a_job_leaving_a_drain_node_restarts_in_the_hole_and_leaves_two_whole_nodes_to_a_gang():
    # d00 drains: A's R (4 GPUs) is past its protection and resumable; n00 holds B's
    # protected 4 (4 free); n01, n02 empty; C waits with a 16-GPU gang. The gang takes the two
    # empty nodes, R restarts at once in n00's hole (Moved). Greedy requeues R instead; the
    # gang starts the same.
    snap = snapshot([Node("d00", "h100", 8, DRAIN)] + nodes_of(3, 8), ABC, [
        past("R", "A", [("d00", range(4))]), prot("P", "B", [("n00", range(4))]),
        q("G", "C", 16, 1)])
    plan = ilp(snap)
    assert placed_on(plan) == {"P": (("n00", 4),), "R": (("n00", 4),),
                               "G": (("n01", 8), ("n02", 8))}
    assert preempted(plan) == {"R": ("Moved", ())} and pending_codes(plan) == {}
    assert "restarts on h100 (n00)" in messages(plan)["R"]
    assert drains(plan) == {"d00": ((), ("R",), False)}
    g = greedy(snap)
    assert placed_on(g) == {"P": (("n00", 4),), "G": (("n01", 8), ("n02", 8))}
    assert preempted(g) == {"R": ("PreemptedNodeDrain", ())}


def test_a_protected_gang_across_a_drain_node_stays_whole_and_a_new_job_avoids_the_drain():
    snap = snapshot([Node("d00", "h100", 8, DRAIN)] + nodes_of(3, 8), AB,
                    [prot("G", "A", [("d00", range(8)), ("n00", range(8))]),
                     q("Q", "B", 8, 1)])
    for plan in (ilp(snap), greedy(snap)):
        assert placed_on(plan) == {"G": (("d00", 8), ("n00", 8)), "Q": (("n01", 8),)}
        assert preempted(plan) == {} and pending_codes(plan) == {}
        assert drains(plan) == {"d00": (("G",), (), False)}


def test_a_protected_job_on_a_down_node_restarts_at_once_when_its_project_ranks_first():
    # x00 down holds A's protected 4-GPU job; n00 (8) is the only up node. A (usage 0.1)
    # ranks before B (0.5); floors 4/4. G restarts on n00 (Moved); B's 8-GPU job does not fit
    # beside it and waits below its floor: WaitingForCapacity, 4 free.
    snap = snapshot([Node("x00", "h100", 8, DOWN), Node("n00", "h100", 8)], AB,
                    [prot("G", "A", [("x00", range(4))]), q("Q", "B", 8, 1)],
                    usage={"A": 0.1, "B": 0.5})
    plan = ilp(snap)
    assert placed_on(plan) == {"G": (("n00", 4),)}
    assert preempted(plan) == {"G": ("Moved", ())}
    assert pending_codes(plan) == {"Q": "WaitingForCapacity"}
    assert "4 free" in messages(plan)["Q"] and "node x00 is down" in messages(plan)["G"]


# ------------------------------------------------------------------------ preemption choice

def test_a_higher_ranked_8_gpu_job_preempts_the_8_gpu_job_not_the_16_gpu_gang():
    # 3 x 8 all B's, past protection: gang BG (n00 + n01) and BS (n02). A (0.1) ranks before B
    # (0.5) and wants 8. Preempting BS frees exactly 8; the gang would free 16, 8 idle.
    snap = snapshot(nodes_of(3, 8), AB, [
        past("BG", "B", [("n00", range(8)), ("n01", range(8))]),
        past("BS", "B", [("n02", range(8))]), q("Q", "A", 8, 1)], usage={"A": 0.1, "B": 0.5})
    for plan in (ilp(snap), greedy(snap)):
        assert placed_on(plan) == {"BG": (("n00", 8), ("n01", 8)), "Q": (("n02", 8),)}
        assert preempted(plan) == {"BS": ("PreemptedForFairShare", ("Q",))}


def test_an_allocated_gang_evicts_the_unallocated_job_on_the_node_it_needs():
    # n00: A's unallocated U (2 GPUs); n01 free; n02: B's protected 8. C's 16-GPU gang needs
    # two whole nodes: n00 + n01, U preempted for it.
    snap = snapshot(nodes_of(3, 8), ABC, [running("U", "A", "h100", [("n00", range(2))],
                                                  NOW - H / 2, 0.0),
                                          prot("R", "B", [("n02", range(8))]),
                                          q("G", "C", 16, 1)])
    for plan in (ilp(snap), greedy(snap)):
        assert placed_on(plan) == {"R": (("n02", 8),), "G": (("n00", 8), ("n01", 8))}
        assert preempted(plan) == {"U": ("PreemptedUnallocated", ("G",))}


@pytest.mark.parametrize("small_on", ["n00", "n01"])
def test_an_allocated_whole_node_job_evicts_the_smaller_unallocated_job(small_on):
    # Two nodes, each with one unallocated job of A: 1 GPU on one, 4 on the other. C's 8-GPU
    # job needs a whole node: evicting the 1-GPU job loses least (README item 8: placement
    # preempts as little as it can); the 4-GPU job stays. Before (optalloc/plan/nodepool.py
    # best_fit): the node of lower index was cleared whatever it held, so with the 1-GPU job
    # on n01 the 4-GPU job on n00 was evicted (and the plan's objective was lower).
    big_on = {"n00": "n01", "n01": "n00"}[small_on]
    snap = snapshot(nodes_of(2, 8), ABC, [
        running("U1", "A", "h100", [(small_on, range(1))], NOW - H / 2, 0.0),
        running("U4", "A", "h100", [(big_on, range(4))], NOW - H / 2, 0.0),
        q("G", "C", 8, 1)])
    plan = ilp(snap)
    assert placed_on(plan) == {"U4": ((big_on, 4),), "G": ((small_on, 8),)}
    assert preempted(plan) == {"U1": ("PreemptedUnallocated", ("G",))}


def test_a_whole_node_gang_evicts_one_unallocated_gpu_rather_than_four():
    # n00: A's unallocated 4 GPUs; n01: A's unallocated 1 GPU; n02 empty. C's 16-GPU gang
    # needs two whole nodes: n02 and, of the two it may clear, n01 (1 GPU evicted, not 4).
    # Before: the lower index, n00, and U4's four GPUs of work lost.
    snap = snapshot(nodes_of(3, 8), ABC, [
        running("U4", "A", "h100", [("n00", range(4))], NOW - H / 2, 0.0),
        running("U1", "A", "h100", [("n01", range(1))], NOW - H / 2, 0.0),
        q("G", "C", 16, 1)])
    plan = ilp(snap)
    assert placed_on(plan) == {"U4": (("n00", 4),), "G": (("n02", 8), ("n01", 8))}
    assert preempted(plan) == {"U1": ("PreemptedUnallocated", ("G",))}


# ---------------------------------------------------------------------------- lookahead

@pytest.mark.parametrize("c_protection_h,c_starts", [(1, True), (3, False)])
def test_a_gang_reserves_the_two_soonest_free_nodes_and_their_free_gpus_take_only_short_work(
        c_protection_h, c_starts):
    # max_reservations 1. B's protected jobs: 8 on n00 (protection ends in 1 h), 8 on n01
    # (3 h), 4 on n02 (2 h; 4 free). A (usage 0) ranks first and queues a 16-GPU gang: the two
    # nodes that free first are n00 (1 h) and n02 (2 h): reserved, clear at NOW + 2 h, when
    # B2 (and C1, there past its protection) get notice: expected start NOW + 2 h + 60 s.
    # C's 4-GPU job fits n02's free 4: protected 1 h it is preemptible before the gang's
    # start and backfills; protected 3 h it would outlast it: HeldForReservation.
    snap = snapshot(nodes_of(3, 8), ABC, [
        running("B0", "B", "h100", [("n00", range(8))], NOW - 7 * H, 8 * H),
        running("B1", "B", "h100", [("n01", range(8))], NOW - 5 * H, 8 * H),
        running("B2", "B", "h100", [("n02", range(4))], NOW - 6 * H, 8 * H),
        q("G", "A", 16, 0, mr=8 * H), q("C1", "C", 4, 1, mr=c_protection_h * H)],
        usage={"A": 0.0, "B": 0.5, "C": 0.5}, policy=Policy(max_reservations=1))
    plan = ilp(snap)
    want = {"B0": (("n00", 8),), "B1": (("n01", 8),), "B2": (("n02", 4),)}
    if c_starts:
        want["C1"] = (("n02", 4),)
    assert placed_on(plan) == want and preempted(plan) == {}
    assert pending_codes(plan) == ({"G": "Reserved"} if c_starts else
                                   {"G": "Reserved", "C1": "HeldForReservation"})
    assert {r.job_id: (set(r.nodes), r.expected_start) for r in plan.reservations} == \
        {"G": ({"n00", "n02"}, NOW + 2 * H + 60.0)}
    assert "expected start t=43260" in messages(plan)["G"]
    if not c_starts:
        assert "held for job G's reservation" in messages(plan)["C1"]


# ----------------------------------------------------------------------------------- CLI

CONFIG = textwrap.dedent("""
    gpu_types: [{name: h100}]
    nodes:
      - {name: "n[00-01]", gpu_type: h100, gpus: 8}
      - {name: d00, gpu_type: h100, gpus: 8, state: drain}
      - {name: x00, gpu_type: h100, gpus: 8, state: down}
    org:
      name: root
      children: [{name: A, share: 1}, {name: B, share: 1}]
    policy: {solver: {backend: highs, time_limit: 10s}}
    jobs:
      - {id: J0, project: A, gpus: 4, min_runtime: 1h, submit_time: 0}
      - {id: J1, project: A, gpus: 3, min_runtime: 1h, submit_time: 1}
      - {id: J2, project: A, gpus: 3, min_runtime: 1h, submit_time: 2}
      - {id: J3, project: A, gpus: 2, min_runtime: 1h, submit_time: 3}
      - {id: J4, project: A, gpus: 2, min_runtime: 1h, submit_time: 4}
      - {id: J5, project: A, gpus: 2, min_runtime: 1h, submit_time: 5}
      - {id: BQ, project: B, gpus: 16, min_runtime: 1h, submit_time: 6}
      - id: P
        project: B
        gpus: 8
        min_runtime: 2h
        state: running
        start_time: 34200
        placement: {gpu_type: h100, nodes: [{node: d00, gpus: [0,1,2,3,4,5,6,7]}]}
    """)


def test_the_cli_plan_file_has_the_placements_of_run_epoch_and_explain_agrees(tmp_path, capsys):
    # up: n00, n01 (16 GPUs); d00 drains with B's P protected until 41400 (stays); x00 down.
    # A's six jobs pack n00/n01 exactly. B holds 8 (P, charged since 34200: B ranks after
    # A); targets 12/12 of the 24 GPUs the targets count (the up 16 and P's protected 8);
    # B's 16-GPU gang would take B to 24: OverShare (it would not fit beside A's floor of 8
    # either), and explain says the same.
    cfg, db, out = tmp_path / "c.yaml", tmp_path / "s.db", tmp_path / "plan.json"
    cfg.write_text(CONFIG)
    assert main(["epoch", "--config", str(cfg), "--state", str(db), "--now", str(NOW),
                 "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    got = {p["job_id"]: tuple((a["node"], tuple(a["gpus"])) for a in p["nodes"])
           for p in doc["placements"]}
    plan = run_epoch(build_snapshot(load_config(cfg), now=NOW))
    assert got == {p.job_id: tuple((a.node, tuple(a.gpus)) for a in p.nodes)
                   for p in plan.placements}
    assert set(got) == {"P", "J0", "J1", "J2", "J3", "J4", "J5"}
    assert got["P"] == (("d00", tuple(range(8))),)
    assert {p["job_id"]: p["code"] for p in doc["pending"]} == {"BQ": "OverShare"}
    msg = doc["pending"][0]["message"]
    assert "B holds 8 h100 GPUs" in msg and "this 16-GPU job would exceed it" in msg
    assert doc["preemptions"] == []
    assert [(d["node"], d["staying"], d["leaving"], d["ready"], d["empty_at"])
            for d in doc["drains"]] == [("d00", ["P"], [], False, NOW + 1.5 * H + 60)]  # protection end + grace
    capsys.readouterr()
    assert main(["explain", "BQ", "--config", str(cfg), "--state", str(db), "--json"]) == 0
    assert "OverShare" in capsys.readouterr().out


MOVE_CONFIG = textwrap.dedent("""
    gpu_types: [{name: h100}]
    nodes:
      - {name: "n[00-02]", gpu_type: h100, gpus: 8}
      - {name: d00, gpu_type: h100, gpus: 8, state: drain}
    org:
      name: root
      children: [{name: A, share: 1}, {name: B, share: 1}]
    policy: {solver: {backend: highs, time_limit: 10s}}
    jobs:
      - id: G
        project: A
        gpus: 16
        min_runtime: 1h
        state: running
        start_time: 25200
        placement:
          gpu_type: h100
          nodes: [{node: d00, gpus: [0,1,2,3,4,5,6,7]}, {node: n00, gpus: [0,1,2,3,4,5,6,7]}]
      - {id: Q, project: B, gpus: 8, min_runtime: 1h, submit_time: 100}
    """)


def test_the_cli_moves_a_gang_off_a_drain_node_as_run_epoch_does_and_the_drain_node_empties(
        tmp_path, capsys):
    # A's 16-GPU gang on d00 (drain) + n00, 3 h in, protection 1 h, resumable: it leaves d00
    # whole and restarts on two up nodes at once (Moved, 60 s notice); B's 8-GPU job takes the
    # third up node: 24 of 24 up GPUs busy. The next epoch (10 min later) runs G where the
    # plan put it, keeps Q, and reports d00 empty and ready for repair.
    cfg, db, out = tmp_path / "c.yaml", tmp_path / "s.db", tmp_path / "plan.json"
    cfg.write_text(MOVE_CONFIG)
    assert main(["epoch", "--config", str(cfg), "--state", str(db), "--now", str(NOW),
                 "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    got = {p["job_id"]: tuple((a["node"], tuple(a["gpus"])) for a in p["nodes"])
           for p in doc["placements"]}
    plan = run_epoch(build_snapshot(load_config(cfg), now=NOW))
    assert got == {p.job_id: tuple((a.node, tuple(a.gpus)) for a in p.nodes)
                   for p in plan.placements}
    assert {n for n, _ in got["G"]} | {n for n, _ in got["Q"]} == {"n00", "n01", "n02"}
    assert all(len(g) == 8 for _, g in got["G"] + got["Q"]) and len(got["G"]) == 2
    assert [(p["job_id"], p["code"], p["grace_s"]) for p in doc["preemptions"]] == \
        [("G", "Moved", 60.0)]
    assert doc["pending"] == []
    assert [(d["node"], d["staying"], d["leaving"], d["ready"]) for d in doc["drains"]] == \
        [("d00", [], ["G"], False)]
    assert main(["epoch", "--config", str(cfg), "--state", str(db), "--now", str(NOW + 600),
                 "--out", str(out)]) == 0
    doc2 = json.loads(out.read_text())
    got2 = {p["job_id"]: tuple((a["node"], tuple(a["gpus"])) for a in p["nodes"])
            for p in doc2["placements"]}
    assert sorted(got2["G"]) == sorted(got["G"]) and got2["Q"] == got["Q"]
    assert doc2["preemptions"] == [] and doc2["pending"] == []
    assert [(d["node"], d["staying"], d["leaving"], d["ready"]) for d in doc2["drains"]] == \
        [("d00", [], [], True)]
