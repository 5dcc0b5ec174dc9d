"""An outside judge's hand-worked single epochs (stop 58): each case's whole outcome (who
starts, who is preempted with which code and for whom, every pending job's code, and the
facts its message must state) worked out by hand from README "How an epoch decides" (rules
1-5) before the case was run. No lookahead (policy.max_reservations stays 0), no ledger
history (no debt, no lifted floors). Cluster numbers: H = 3600 s, now = 10 h = t=36000.

A case where the code disagrees with the hand outcome and the disagreement is a fault is a
strict xfail whose reason names the cause."""

from __future__ import annotations

from dataclasses import replace

import pytest

from optalloc.epoch import run_epoch
from optalloc.sim.invariants import check_plan
from optalloc.types import Job, Node, NodeState, OrgNode
from tests.test_epoch_toy import H, flat_org, nodes_of, running, snapshot

NOW = 10 * H
WFC, OVER, LPP, GANG = ("WaitingForCapacity", "OverShare", "LowerPriorityInProject",
                        "GangDoesNotFit")
UY, PFS, PU, PND, MOVED = ("UnallocatedYields", "PreemptedForFairShare", "PreemptedUnallocated",
                           "PreemptedNodeDrain", "Moved")


def q(jid, project, gpus, submit=0.0, mr=H, **kw) -> Job:
    return Job(jid, project, gpus, min_runtime_s=mr, submit_time=submit, **kw)


def decide(snap):
    """The whole outcome: runs {job: (type, sorted (node, GPUs) pairs)}, preempted {job:
    (code, needed_by)}, pending {job: code}; and every message by job id."""
    plan = run_epoch(snap)
    check_plan(snap, plan)
    out = {
        "runs": {p.job_id: (p.gpu_type, tuple(sorted((a.node, len(a.gpus)) for a in p.nodes)))
                 for p in plan.placements},
        "preempted": {p.job_id: (p.code.value, tuple(sorted(p.needed_by)))
                      for p in plan.preemptions},
        "pending": {r.job_id: r.code.value for r in plan.pending},
    }
    msg = {**{r.job_id: r.message for r in plan.pending},
           **{p.job_id: p.message for p in plan.preemptions}}
    return out, msg, plan


def gpus_of(out, snap) -> dict[str, int]:
    by: dict[str, int] = {}
    for jid, (_, pieces) in out["runs"].items():
        pr = snap.jobs[snap.job_index[jid]].project
        by[pr] = by.get(pr, 0) + sum(n for _, n in pieces)
    return by


# ----------------------------------------------------------------------------- 1. programs


def _programs_snap():
    """6 nodes x 8 = 48 GPUs. root -> P1 {a, b}, P2 {c, d}, P3 {e}, equal shares: each program
    entitled 16, each project of P1 and P2 8. Usage ratios: P1 1.2 (a 0.0, b 0.5), P2 0.4
    (c 0.9, d 0.3), P3 0.0 (e 0.0). a, b, c, d each want 8 x 4 GPUs, e one 4-GPU job."""
    org = OrgNode("root", children=(
        OrgNode("P1", children=(OrgNode("a"), OrgNode("b"))),
        OrgNode("P2", children=(OrgNode("c"), OrgNode("d"))),
        OrgNode("P3", children=(OrgNode("e"),))))
    jobs = [q(f"{p}{i:02d}", p, 4, submit=float(i)) for p in "abcd" for i in range(8)]
    jobs.append(q("e00", "e", 4))
    usage = {"P1": 1.2, "a": 0.0, "b": 0.5, "P2": 0.4, "c": 0.9, "d": 0.3, "P3": 0.0, "e": 0.0}
    return snapshot(nodes_of(6, 8), org, jobs, now=NOW, usage=usage)


def test_an_idle_programs_spare_goes_to_the_better_ranked_program_and_its_better_ranked_project():
    # floors: P1 16 (a 8, b 8), P2 16 (c 8, d 8), P3 4 (e's demand); spare 48 - 36 = 12.
    # Rule 2: the spare goes to the lower-ratio subtree first: P2 (0.4) before P1 (1.2), and
    # inside P2 to d (0.3) before c (0.9). a's ratio 0.0 is the lowest of all projects, but a
    # subtree's rank comes before anything inside it, so a keeps 8. Targets a 8, b 8, c 8,
    # d 20, e 4: two 4-GPU jobs each of a, b, c, five of d, e's one.
    snap = _programs_snap()
    out, msg, _ = decide(snap)
    starts = {f"{p}{i:02d}" for p, n in (("a", 2), ("b", 2), ("c", 2), ("d", 5)) for i in range(n)}
    starts.add("e00")
    assert set(out["runs"]) == starts
    assert gpus_of(out, snap) == {"a": 8, "b": 8, "c": 8, "d": 20, "e": 4}
    assert out["preempted"] == {}
    assert out["pending"] == {j.id: OVER for j in snap.jobs if j.id not in starts}
    # the level that stops a's and b's jobs is their program, at its 16 (a's 0.0 is no help)
    for jid in ("a02", "b07"):
        assert msg[jid].startswith(
            "P1 holds 16 h100 GPUs, its fair-share target this epoch is 16 (floor 16, entitled "
            "16.0, usage ratio 1.20); starting this 4-GPU job would exceed it"), msg[jid]
    for jid in ("c02", "d05"):
        assert msg[jid].startswith(
            "P2 holds 28 h100 GPUs, its fair-share target this epoch is 28 (floor 16, entitled "
            "16.0, usage ratio 0.40); starting this 4-GPU job would exceed it"), msg[jid]


# ----------------------------------------------------------------------------- 2. priorities


def _priority_epoch():
    """2 x 8, A = B: B's protected 8-GPU job on n01; A_lo (priority 0, 4 GPUs), A_mid (1, 4),
    A_hi (2, 6) and B_q (2 GPUs) queued."""
    b = running("B_run", "B", "h100", [("n01", range(8))], start=NOW - 600, min_runtime_s=4 * H)
    jobs = [b, q("A_lo", "A", 4, 0.0), replace(q("A_mid", "A", 4, 1.0), priority=1),
            replace(q("A_hi", "A", 6, 2.0), priority=2), q("B_q", "B", 2, 3.0)]
    return snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), jobs, now=NOW)


def test_a_higher_priority_job_starts_first_and_what_its_team_cannot_use_flows_to_the_sibling():
    # 2 x 8, A = B. B's protected 8-GPU job holds n01. A: A_lo (priority 0, 4 GPUs, first
    # submitted), A_mid (priority 1, 4), A_hi (priority 2, 6); B_q (2 GPUs). A's target 8 is
    # realized in A's order: A_hi 6, then A_mid's 4 would overshoot by as much as skipping
    # leaves (2), so it is skipped, as is A_lo: A is capped at 6 and the rest flows to B
    # (rule 2: "when its next jobs do not fit, the rest flows to its siblings rather than
    # to its lower-priority jobs"). A_lo + A_mid (8) would meet A's floor, but A_hi fits in
    # their place (rule 3): it starts, and B_q takes the 2 GPUs left.
    out, msg, _ = decide(_priority_epoch())
    assert out == {
        "runs": {"A_hi": ("h100", (("n00", 6),)), "B_q": ("h100", (("n00", 2),)),
                 "B_run": ("h100", (("n01", 8),))},
        "preempted": {},
        "pending": {"A_mid": LPP, "A_lo": LPP}}
    # what holds them: A's own higher-priority job (whatever the target reads, see below)
    assert msg["A_mid"].endswith(
        "GPUs and it holds 6, 6 of them in 1 of its jobs with a higher priority than 1 (A_hi), "
        "which a job behind them in the team's order does not displace; this job needs 4")
    assert "holds 6, 6 of them in 1 of its jobs with a higher priority than 0 (A_hi)" in \
        msg["A_lo"]


# Fixed at stop 61 (was a strict xfail): A_mid's overshoot (A_hi 6 then A_mid 4 on 8: 2 over,
# 2 under) was taken, so A was not capped at 6 and its jobs were told target 8 with 2 GPUs of
# room that went to B. B's protected 8 leave A at most 8 GPUs (inorder.overshoot_room): an
# overshoot to 10 cannot run, so A_mid is skipped and A capped at 6. A tie that can run is
# still taken (a tie no nearer broke six judges' cases of lumpy gangs: a 3:1 share of 2-node
# gangs got 384 / 384 GPU-hours a day where 576 / 192 is right).
def test_a_team_whose_next_jobs_do_not_fit_is_told_the_target_its_own_order_realizes():
    # the same epoch: by rule 2 and targets._inorder_fill's own docstring, A's target is
    # what its order realizes, 6 (A_mid's overshoot to 10 cannot run beside B's protected 8)
    _, msg, _ = decide(_priority_epoch())
    assert msg["A_mid"].startswith(
        "project A's h100 target this epoch is 6 GPUs and it holds 6, 6 of them in 1 of its "
        "jobs with a higher priority than 1 (A_hi)"), msg["A_mid"]


# ----------------------------------------------------------------------------- 3. debug


def test_a_debug_job_does_not_take_free_gpus_that_another_projects_target_claims():
    # 2 x 8, A = B (targets 8 + 8; A's debug allowance 0.25 x 8 = 2). A's protected 8 on n00;
    # B's protected 6 on n01 (its protection ends first, at 10h + 2h = t=43200), 2 free
    # there. B_q (2 GPUs) is within B's target: it takes them. A's debug job may run beyond
    # A's target, but only on GPUs nobody's target claims: it waits for capacity
    # (WaitingForCapacity, not OverShare); A's longer 1-GPU job is over A's share.
    a = running("A_run", "A", "h100", [("n00", range(8))], start=NOW - 600, min_runtime_s=4 * H)
    b = running("B_run", "B", "h100", [("n01", range(6))], start=NOW - 2 * H,
                min_runtime_s=4 * H)
    jobs = [a, b, q("B_q", "B", 2, NOW - 120, mr=4 * H), q("A_long", "A", 1, NOW - 60, mr=4 * H),
            q("A_dbg", "A", 1, NOW - 30, mr=600)]
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), jobs, now=NOW)
    out, msg, _ = decide(snap)
    assert out == {
        "runs": {"A_run": ("h100", (("n00", 8),)), "B_run": ("h100", (("n01", 6),)),
                 "B_q": ("h100", (("n01", 2),))},
        "preempted": {},
        "pending": {"A_long": OVER, "A_dbg": WFC}}
    assert msg["A_long"].startswith(
        "A holds 8 h100 GPUs, its fair-share target this epoch is 8 (floor 8, entitled 8.0, "
        "usage ratio 0.00); starting this 1-GPU job would exceed it")
    assert msg["A_dbg"].startswith(
        "project A may run this debug job beyond its fair-share target: its debug allowance "
        "is 2 h100 GPUs beyond it, 0 of them held (it holds 8 of its target 8), but 1 GPUs "
        "of h100 are not free, and the plan preempts none for it: "), msg["A_dbg"]
    assert "(the first protection ends at t=43200)" in msg["A_dbg"]


# ----------------------------------------------------------------------------- 4. zero share


# Fixed at stop 59 (was a strict xfail): fit.slot_or_best_fit followed the model's slot into
# evicting Z2 (8 GPUs lost) where best fit evicting Z1 loses 4 (fit._fewest_lost).
def test_a_zero_share_projects_young_job_yields_to_allocated_work_and_the_smallest_one_goes():
    # 2 x 8, A share 1, Z share 0: Z's jobs are unallocated work whatever their min_runtime,
    # never protected (rule 4). n00: A's protected 4 + Z1 (4, started 10 min ago); n01: Z2 (8).
    # A_q (4) evicts the smallest job that makes room: Z1, not Z2. Z_q waits for idle GPUs.
    a = running("A_run", "A", "h100", [("n00", range(4))], start=NOW - 600, min_runtime_s=4 * H)
    z1 = running("Z1", "Z", "h100", [("n00", range(4, 8))], start=NOW - 600, min_runtime_s=H)
    z2 = running("Z2", "Z", "h100", [("n01", range(8))], start=NOW - 600, min_runtime_s=H)
    jobs = [a, z1, z2, q("A_q", "A", 4, 0.0), q("Z_q", "Z", 2, 1.0)]
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "Z": 0}), jobs, now=NOW)
    out, msg, plan = decide(snap)
    assert out == {
        "runs": {"A_run": ("h100", (("n00", 4),)), "A_q": ("h100", (("n00", 4),)),
                 "Z2": ("h100", (("n01", 8),))},
        "preempted": {"Z1": (PU, ("A_q",))},
        "pending": {"Z_q": UY}}
    assert {p.job_id: p.allocated for p in plan.placements} == {
        "A_run": True, "A_q": True, "Z2": False}
    assert msg["Z_q"].startswith(
        "its project has no share of h100: runs only on GPUs no allocated job wants; 2 GPUs "
        "needed, h100: 0 free"), msg["Z_q"]


# ----------------------------------------------------------------------------- 5. gang


def test_a_gang_takes_the_one_whole_node_it_can_clear_and_the_protected_neighbour_stays():
    # 3 x 8, A share 2 (entitled 16), B share 1 (8). n00: B1 (8, past its protection);
    # n01: B2 (4, protected) + B3 (4, past); n02 empty. A's 16-GPU gang needs two whole
    # nodes: n02 and n00 (n01 cannot be cleared). B keeps B2 + B3 = its target 8; B_q waits.
    b1 = running("B1", "B", "h100", [("n00", range(8))], start=NOW - 5 * H, min_runtime_s=2 * H)
    b2 = running("B2", "B", "h100", [("n01", range(4))], start=NOW - 1800, min_runtime_s=2 * H)
    b3 = running("B3", "B", "h100", [("n01", range(4, 8))], start=NOW - 5 * H,
                 min_runtime_s=2 * H)
    jobs = [b1, b2, b3, q("A_g", "A", 16, 0.0, mr=2 * H), q("B_q", "B", 4, 1.0)]
    snap = snapshot(nodes_of(3, 8), flat_org({"A": 2, "B": 1}), jobs, now=NOW,
                    usage={"A": 0.5, "B": 0.5})
    out, msg, _ = decide(snap)
    assert out == {
        "runs": {"A_g": ("h100", (("n00", 8), ("n02", 8))), "B2": ("h100", (("n01", 4),)),
                 "B3": ("h100", (("n01", 4),))},
        "preempted": {"B1": (PFS, ("A_g",))},
        "pending": {"B_q": OVER}}
    assert msg["B_q"].startswith(
        "B holds 8 h100 GPUs, its fair-share target this epoch is 8 (floor 8, entitled 8.0, "
        "usage ratio 0.50); starting this 4-GPU job would exceed it"), msg["B_q"]
    assert msg["B1"].startswith("past its protection"), msg["B1"]


def test_a_gang_with_enough_free_gpus_in_the_wrong_nodes_does_not_fit():
    # 3 x 8, A = B (entitled 12 each). B's protected 4-GPU jobs on n00 and n01; n02 empty:
    # 16 GPUs free, one node whole. A's 16-GPU gang needs two whole nodes: GangDoesNotFit.
    # Nothing is preemptible.
    b1 = running("B1", "B", "h100", [("n00", range(4))], start=NOW - 600, min_runtime_s=4 * H)
    b2 = running("B2", "B", "h100", [("n01", range(4))], start=NOW - 600, min_runtime_s=4 * H)
    jobs = [b1, b2, q("A_g", "A", 16, 0.0)]
    snap = snapshot(nodes_of(3, 8), flat_org({"A": 1, "B": 1}), jobs, now=NOW)
    out, msg, _ = decide(snap)
    assert out == {
        "runs": {"B1": ("h100", (("n00", 4),)), "B2": ("h100", (("n01", 4),))},
        "preempted": {},
        "pending": {"A_g": GANG}}
    assert msg["A_g"].startswith(
        "needs 16 GPUs as whole-node gang; h100 has 16 free GPUs but the largest free node has "
        "8 and 1 nodes are entirely free"), msg["A_g"]


def test_a_small_start_beside_a_gang_that_cannot_fit_leaves_the_empty_node_whole():
    # the same, with B_q (4 GPUs) within B's target 12: it starts by best fit on n00 or n01,
    # not on the empty n02. A's gang still cannot start (12 free, one node whole); A is below
    # its floor 12 and the GPUs it lacks are protected.
    b1 = running("B1", "B", "h100", [("n00", range(4))], start=NOW - 600, min_runtime_s=4 * H)
    b2 = running("B2", "B", "h100", [("n01", range(4))], start=NOW - 600, min_runtime_s=4 * H)
    jobs = [b1, b2, q("A_g", "A", 16, 0.0), q("B_q", "B", 4, 1.0)]
    snap = snapshot(nodes_of(3, 8), flat_org({"A": 1, "B": 1}), jobs, now=NOW)
    out, msg, _ = decide(snap)
    assert set(out["runs"]) == {"B1", "B2", "B_q"}
    assert out["runs"]["B_q"][1] in ((("n00", 4),), (("n01", 4),))
    assert out["preempted"] == {}
    assert out["pending"] == {"A_g": WFC}
    assert msg["A_g"].startswith("A is below its h100 floor (0 of 12 GPUs"), msg["A_g"]
    assert "12 free" in msg["A_g"], msg["A_g"]


# ----------------------------------------------------------------------------- 6. drain


def test_a_drain_nodes_protected_job_stays_and_its_expired_job_restarts_where_its_share_allows():
    # 3 x 8: n00 draining, n01 and n02 up; A = B entitled 8 each of the 16 up GPUs. A's
    # ratio 1.0, B's 0.2. n00: A1 (4, protected until t=49800), A2 (4, past its protection,
    # resumable); n01: B1 (8, protected). Queued: A_q (4), B_q (4). Floors 8 + 8; the spare
    # 4 of the targets' 20 (16 up + A1's 4 on the drain node) goes to B (lower ratio): A 8,
    # B 12. A2 leaves n00 and, running, comes before A_q in A's order: it restarts on n02
    # (Moved); B_q takes n02's other half; A_q is over A's share (A1 + A2 = 8).
    n = [Node("n00", "h100", 8, NodeState.DRAIN), Node("n01", "h100", 8), Node("n02", "h100", 8)]
    a1 = running("A1", "A", "h100", [("n00", range(4))], start=NOW - 600, min_runtime_s=4 * H)
    a2 = running("A2", "A", "h100", [("n00", range(4, 8))], start=NOW - 5 * H,
                 min_runtime_s=2 * H)
    b1 = running("B1", "B", "h100", [("n01", range(8))], start=NOW - 600, min_runtime_s=4 * H)
    jobs = [a1, a2, b1, q("A_q", "A", 4, 0.0), q("B_q", "B", 4, 0.0)]
    snap = snapshot(n, flat_org({"A": 1, "B": 1}), jobs, now=NOW, usage={"A": 1.0, "B": 0.2})
    out, msg, plan = decide(snap)
    assert out == {
        "runs": {"A1": ("h100", (("n00", 4),)), "A2": ("h100", (("n02", 4),)),
                 "B1": ("h100", (("n01", 8),)), "B_q": ("h100", (("n02", 4),))},
        "preempted": {"A2": (MOVED, ())},
        "pending": {"A_q": OVER}}
    assert msg["A2"].startswith("restarts on h100 (n02) in place of waiting: node n00 is "
                                "draining"), msg["A2"]
    assert msg["A_q"].startswith(
        "A holds 8 h100 GPUs, its fair-share target this epoch is 8 (floor 8, entitled 8.0, "
        "usage ratio 1.00); starting this 4-GPU job would exceed it"), msg["A_q"]
    (d,) = plan.drains
    assert (d.node, d.staying, d.leaving, d.ready) == ("n00", ("A1",), ("A2",), False)
    assert d.empty_at == pytest.approx(49800 + 60)


# ----------------------------------------------------------------------------- 7. two types


def test_a_project_that_may_run_anywhere_leaves_the_contested_type_to_the_confined_one():
    # h100 n00 (8) + a100 m00 (8), A = B, pooled budget 8 each. A's three 4-GPU jobs may run
    # on either type and were submitted first; B's three are h100-only. Max-min routing: A
    # on a100, B on h100; each project's third job is over its pooled target.
    nodes = [Node("n00", "h100", 8), Node("m00", "a100", 8)]
    jobs = ([q(f"A{i}", "A", 4, float(i)) for i in range(3)]
            + [q(f"B{i}", "B", 4, 3.0 + i, gpu_types=("h100",)) for i in range(3)])
    snap = snapshot(nodes, flat_org({"A": 1, "B": 1}), jobs, now=NOW, types=("h100", "a100"))
    out, msg, _ = decide(snap)
    assert out == {
        "runs": {"A0": ("a100", (("m00", 4),)), "A1": ("a100", (("m00", 4),)),
                 "B0": ("h100", (("n00", 4),)), "B1": ("h100", (("n00", 4),))},
        "preempted": {},
        "pending": {"A2": OVER, "B2": out["pending"]["B2"]}}  # B2's code: next test
    assert msg["A2"].startswith(
        "A holds 8 GPUs over all types (8 a100), its fair-share target this epoch is 8 over all "
        "types (floor 8, entitled 8.0 GPUs over all gpu types, usage ratio 0.00); starting this "
        "4-GPU job would exceed it"), msg["A2"]


def test_a_confined_projects_job_beyond_its_pooled_share_is_over_share():
    nodes = [Node("n00", "h100", 8), Node("m00", "a100", 8)]
    jobs = ([q(f"A{i}", "A", 4, float(i)) for i in range(3)]
            + [q(f"B{i}", "B", 4, 3.0 + i, gpu_types=("h100",)) for i in range(3)])
    snap = snapshot(nodes, flat_org({"A": 1, "B": 1}), jobs, now=NOW, types=("h100", "a100"))
    out, msg, _ = decide(snap)
    assert out["pending"] == {"A2": OVER, "B2": OVER}
    assert msg["B2"].startswith(
        "B holds 8 GPUs over all types (8 h100), its fair-share target this epoch is 8 over all "
        "types (floor 8"), msg["B2"]


# ----------------------------------------------------------------------------- 8. priorities


def test_a_high_priority_in_another_project_does_not_beat_a_better_ranked_floor():
    # one 8-GPU node, A = B (floors 4 + 4), A ratio 0.1 (ranked first), B 1.0. A_q (8,
    # priority 0) and B_q (8, priority 9): priority orders jobs within a project only. Equal
    # floor GPUs, A ranked first: A_q runs, B_q waits below B's floor.
    jobs = [q("A_q", "A", 8, 5.0), replace(q("B_q", "B", 8, 0.0), priority=9)]
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1, "B": 1}), jobs, now=NOW,
                    usage={"A": 0.1, "B": 1.0})
    out, msg, _ = decide(snap)
    assert out == {"runs": {"A_q": ("h100", (("n00", 8),))}, "preempted": {},
                   "pending": {"B_q": WFC}}
    assert msg["B_q"].startswith("B is below its h100 floor (0 of 4 GPUs"), msg["B_q"]


# ----------------------------------------------------------------------------- 9. mixed holders


def test_a_job_below_its_floor_behind_protected_and_unprotected_holders_is_told_the_true_split():
    # 2 x 8, A = B, ratios 0.5. B: B1 (8 on n00, protected until t=49800), B2 (4 on n01,
    # protected until t=39600), B3 (4 on n01, past its protection). A_q (8 GPUs, one node):
    # preempting B3 frees only 4 GPUs of n01, so nothing can make room and nothing is
    # preempted. A is below its floor 8; 12 GPUs are protected, the first until t=39600, 0
    # are free, and the other 4 are B3's (B past its target).
    b1 = running("B1", "B", "h100", [("n00", range(8))], start=NOW - 600, min_runtime_s=4 * H)
    b2 = running("B2", "B", "h100", [("n01", range(4))], start=NOW - H, min_runtime_s=2 * H)
    b3 = running("B3", "B", "h100", [("n01", range(4, 8))], start=NOW - 5 * H,
                 min_runtime_s=2 * H)
    jobs = [b1, b2, b3, q("A_q", "A", 8, 0.0)]
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), jobs, now=NOW,
                    usage={"A": 0.5, "B": 0.5})
    out, msg, _ = decide(snap)
    assert out == {
        "runs": {"B1": ("h100", (("n00", 8),)), "B2": ("h100", (("n01", 4),)),
                 "B3": ("h100", (("n01", 4),))},
        "preempted": {},
        "pending": {"A_q": WFC}}
    m = msg["A_q"]
    assert m.startswith("A is below its h100 floor (0 of 8 GPUs"), m
    assert "12 h100 GPUs are protected (the first protection ends at t=39600), 0 free" in m, m
    assert "B" in m.split("0 free", 1)[1], m


# ----------------------------------------------------------------------------- 10. unallocated


def test_an_allocated_start_of_a_worse_ranked_project_evicts_unallocated_work_of_a_better_one():
    # 2 x 8, A = B; A ratio 0.0, B 2.0. n00: A_u (8, min_runtime 0: unallocated); n01: A's
    # protected 8. B_q (4, allocated, within B's floor 8) evicts A_u: unallocated work
    # yields to allocated demand at once, whatever the ranks (rule 4). The 4 GPUs of n00 that
    # B_q leaves idle go to unallocated work: A_u2 (4, queued, unallocated) takes them.
    a = running("A_run", "A", "h100", [("n01", range(8))], start=NOW - 600, min_runtime_s=4 * H)
    au = running("A_u", "A", "h100", [("n00", range(8))], start=NOW - 600, min_runtime_s=0)
    jobs = [a, au, q("B_q", "B", 4, 0.0), q("A_u2", "A", 4, 1.0, mr=0)]
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), jobs, now=NOW,
                    usage={"A": 0.0, "B": 2.0})
    out, msg, plan = decide(snap)
    assert out == {
        "runs": {"A_run": ("h100", (("n01", 8),)), "B_q": ("h100", (("n00", 4),)),
                 "A_u2": ("h100", (("n00", 4),))},
        "preempted": {"A_u": (PU, ("B_q",))},
        "pending": {}}
    assert {p.job_id: p.allocated for p in plan.placements}["A_u2"] is False
