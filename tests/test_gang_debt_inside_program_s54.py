"""An outside judge (stop 54) of the floors' debt where a project's only jobs are gangs larger
than its own share (DESIGN.md section 8, rule 2: over a day of steady demand each project gets
its entitlement capped by its demand; a gang larger than the share gets it as whole epochs in
turn). Second shapes of tests/test_hierarchy_judge_cases_s53.py's gang cases: flat inside a
program, unequal shares, two levels deep, and guards that the turns give a gang project no
more than it is owed.

Common setup (tests/test_fairness_over_time_judge_cases.py's helpers): nodes of 8 GPUs, epoch
1800 s, grace 0, checkpoints every 600 s, no early solve, lookback 24 h, a simulated day;
"endless" queues are more 1-hour jobs (protected 1 h) than the cluster can run. Gangs are
16-GPU (two-node) 1-hour jobs. Tolerance: one gang-hour (16 GPU-h) unless a case says more.

The entitlement of a leaf is the product of its normalized shares on its path. Where a gang
of 16 must average E GPUs, it runs a fraction f = E / 16 of the hours.

Found: a project's debt beyond its siblings is capped at its program's own (debt.debt_tilt),
so where the program gets its share every hour the sibling of a gang larger than its own
part is never repaid (the flat and two-level cases: ilp g 384 / s 192). A fix was built and
measured at stop 54, not landed: what its siblings owe a node beyond that cap
weighed on its floor GPUs in plans that keep the other subtrees' floors whole (repay rows
with a 0/1 switch per repaid node). It passed these cases and every fairness file, but on
the traces it cost more than it gave. Stop 61 (debt.floor_debts): what the cap holds back
lowers the owing siblings' rows instead (the owed node weighs no more against another
subtree); the flat, two-level and one-epoch cases pass. Still left: a gang larger than its
whole program's floor, which needs another program's floor repaid.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest

from optalloc.sim.engine import simulate
from optalloc.sim.metrics import compute_metrics
from optalloc.sim.policies import make_policy
from optalloc.types import OrgNode
from tests.test_fairness_over_time_judge_cases import endless, scenario


def O(name, share=1.0, *children):  # noqa: E743 - an org node, tersely
    return OrgNode(name, share=share, children=tuple(children))


def gangs(p, n=60):
    return endless(p, n, gpus=16)


@dataclass(frozen=True)
class Case:
    name: str
    sc: object
    delivered: dict  # project -> allocated GPU-h over the day
    tol: float = 16.0
    fault: str | None = None


CASES = [
    Case(  # root -> P (3) [g, s], Q (1) [q]; 4 x 8: P 24 (g 12, s 12), Q 8. g's gang (16)
        # is more than g's 12 and within P's 24: inside P the gang and s take turns, Q's 8
        # untouched. g 16 f = 12 -> f = 3/4; s 8 in gang hours, 24 in the others:
        # 8 * 3/4 + 24 * 1/4 = 12. g 288, s 288, q 192
        "inside-a-program-a-gang-project-larger-than-its-share-and-its-sibling-take-turns",
        scenario(gangs("g") + endless("s", 800) + endless("q", 400),
                 O("root", 1, O("P", 3, O("g"), O("s")), O("Q", 1, O("q"))), nodes=(8,) * 4),
        {"g": 288.0, "s": 288.0, "q": 192.0}),
    Case(  # unequal shares: root -> P (3) [g (1), s (3)], Q (1) [q]; 4 x 8: P 24 (g 6,
        # s 18), Q 8. g 16 f = 6 -> f = 3/8; s 8 in gang hours, 24 in the others:
        # 8 * 3/8 + 24 * 5/8 = 18. g 144, s 432, q 192
        "inside-a-program-a-gang-project-with-a-small-share-gets-its-share-as-turns",
        scenario(gangs("g") + endless("s", 800) + endless("q", 400),
                 O("root", 1, O("P", 3, O("g", 1), O("s", 3)), O("Q", 1, O("q"))),
                 nodes=(8,) * 4),
        {"g": 144.0, "s": 432.0, "q": 192.0}),
    Case(  # two levels deep: root -> P (3) -> [P1 (1) -> [P11 (1) -> [g]], P2 (1) -> [s]],
        # Q (1) -> [q]; 4 x 8: P 24 (P1 12 = P11 12 = g 12; P2 12 = s 12), Q 8. As the
        # first case, one sub-program deeper: g 288, s 288, q 192
        "two-levels-down-a-gang-project-and-its-cousin-take-turns-inside-the-program",
        scenario(gangs("g") + endless("s", 800) + endless("q", 400),
                 O("root", 1, O("P", 3, O("P1", 1, O("P11", 1, O("g"))), O("P2", 1, O("s"))),
                   O("Q", 1, O("q"))), nodes=(8,) * 4),
        {"g": 288.0, "s": 288.0, "q": 192.0}),
    Case(  # the gang larger than the program's share, unequal program shares: root -> P (1)
        # [g, s], Q (2) [q]; 3 x 8: P 8 (g 4, s 4), Q 16. g 16 f = 4 -> f = 1/4 (6 h);
        # s 4 x 24 = 96 (0 in gang hours, more in the others); Q keeps 16 on average,
        # repaid for the gang hours: q 384. g 96, s 96, q 384
        "a-gang-project-larger-than-its-small-programs-share-still-gets-its-share-as-turns",
        scenario(gangs("g") + endless("s", 600) + endless("q", 800),
                 O("root", 1, O("P", 1, O("g"), O("s")), O("Q", 2, O("q"))), nodes=(8,) * 3),
        {"g": 96.0, "s": 96.0, "q": 384.0},
        fault="optalloc/model/targets.py:264 (nested_floors: top-level floors min(D, E)) with "
              "optalloc/model/debt.py (debt_tilt's bound): ilp g 0, s 192, q 384. A gang "
              "hour holds P at 16 > its floor 8 and Q at 8 < its 16, and nothing in the model "
              "ever gives Q more than its floor back (no spare: the floors fill the cluster), "
              "so Q, once owed, ranks ahead of P for the whole window and g's debt (P's own "
              "is 0: s absorbs P's 8) may not take Q's floor (rule 1). A design question: the "
              "top-level floors would have to move by the published debt (Q's lifted above its "
              "share, P's lowered, while Q is owed beyond P) for the program to borrow and "
              "repay"),
    Case(  # guard: the gang is as large as its program's share. root -> P (1) [g, s], Q (1)
        # [q]; 4 x 8: P 16 (g 8, s 8), Q 16; g's gang 16 = P's 16: g 16 f = 8 -> f = 1/2,
        # s 16 in the other hours (8 on average), q 16 every hour. g 192, s 192, q 384
        "a-gang-as-large-as-its-programs-share-alternates-with-its-sibling-and-leaves-q-alone",
        scenario(gangs("g") + endless("s", 600) + endless("q", 800),
                 O("root", 1, O("P", 1, O("g"), O("s")), O("Q", 1, O("q"))), nodes=(8,) * 4),
        {"g": 192.0, "s": 192.0, "q": 384.0}),
    Case(  # guard: the sibling wants less than its share. As the first case, but s runs 8
        # long jobs (30 h, protected 1 h) and wants no more: s is owed nothing (min(12, 8) = 8
        # every hour), so the gang keeps the rest of P's 24 every hour (rule 2: what s does
        # not want goes to its sibling). g 16 x 24 = 384, s 192, q 192
        "a-demand-capped-sibling-is-owed-nothing-so-the-gang-keeps-the-programs-rest",
        scenario(gangs("g") + endless("s", 8, hours=30.0) + endless("q", 400),
                 O("root", 1, O("P", 3, O("g"), O("s")), O("Q", 1, O("q"))), nodes=(8,) * 4),
        {"g": 384.0, "s": 192.0, "q": 192.0}, tol=4.0),
    Case(  # guard, top level (the debt's own case, one program each): root -> G [g], S [s],
        # 3 x 8: 12 each; g only gangs: f = 12 / 16 = 3/4; s 8 in gang hours, 24 in the
        # others: 12. g 288, s 288
        "at-the-top-level-a-gang-project-gets-no-more-than-its-share-over-the-day",
        scenario(gangs("g") + endless("s", 600),
                 O("root", 1, O("G", 1, O("g")), O("S", 1, O("s"))), nodes=(8,) * 3),
        {"g": 288.0, "s": 288.0}),
]


PARAMS = [pytest.param(c, id=c.name,
                       marks=[pytest.mark.xfail(strict=True, reason=c.fault)] if c.fault else [])
          for c in CASES]


@pytest.mark.parametrize("case", PARAMS)
def test_gpu_hours_per_project_over_the_day_match_the_hand_worked_shares(case):
    res = simulate(case.sc, make_policy("ilp"), check=True)
    m = compute_metrics(res)
    got = {p: m["projects"][p]["delivered_gpu_h"] for p in case.delivered}
    assert got == {p: pytest.approx(v, abs=case.tol) for p, v in case.delivered.items()}


# ----------------------------------------------------------------------------- one epoch

from optalloc.epoch import run_epoch  # noqa: E402
from tests.test_debt_review_cases import decide, nodes, queued, snap_of  # noqa: E402


def test_a_project_owed_by_its_gang_sibling_gets_its_floor_back_inside_the_programs_share():
    # root -> P (3) [g, s], Q (1) [q]; 4 x 8: P 24 (g 12, s 12), Q 8. g waits with one 16-GPU
    # job, s with 24 1-GPU jobs, q with 8; usage ratios all 1.0 (every rank tilt the same),
    # s owed 40 GPU-h (3.33 h of its 12), nobody else. Floor GPUs per plan (rows P, g, s, Q,
    # q, each worth w (1 + rank) = 2w): gang g 16 + s 8 + q 8: 24 + 12 + 8 + 8 + 8 = 60;
    # s 24 + q 8: 24 + 12 + 8 + 8 = 52; g 16 + s 16: 24 + 12 + 12 = 48. s's debt beyond g is
    # bounded by P's own (0) on its floor rows; what the rule owes it beyond that weighs
    # 2w * 3.33 per floor GPU of s that meets Q's floor (Q 8 in the first two plans, 0 in
    # the third): 120 + 53 = 173, 104 + 80 = 184, 96 + 0 = 96. So s runs 24, q 8, g's gang
    # waits (capped alone, the gang ran: 120 > 104). Stop 61's floor_debts gives the same
    # plan: g's row keeps 1 / 4.33 of its weight (2w / 4.33 = 0.46w): 48 + 5.5 + 16 + 32 =
    # 101.5 for the gang, 48 + 24 + 32 = 104 for s 24 + q 8, 48 + 5.5 + 24 = 77.5
    org = O("root", 1, O("P", 3, O("g"), O("s")), O("Q", 1, O("q")))
    jobs = queued("g", 1, 16) + queued("s", 24, 1) + queued("q", 8, 1)
    snap = snap_of(org, nodes(4), jobs, {n: 1.0 for n in ("P", "g", "s", "Q", "q")},
                   {"s": 40.0})
    got, _ = decide(snap)
    runs = {f"s{i:02d}": ("h100", (1,)) for i in range(24)}
    runs.update({f"q{i:02d}": ("h100", (1,)) for i in range(8)})
    assert got["runs"] == runs and got["preempted"] == {}
    assert set(got["pending"]) == {"g00"}


def test_a_large_debt_inside_a_program_takes_no_gpu_of_the_other_programs_floor():
    # root -> P (1) [g, s], Q (1) [q]; 2 x 8: P 8, Q 8. g wants one 1-GPU job, s 12, q 8;
    # ratios all 1.0; s owed 400 GPU-h beyond g (the debt's cap). P's floor 8 splits g 1, s 7
    # (g wants 1). s's debt inside P may never take Q's floor (rule 1), however large. So
    # every floor is met: g 1, s 7, q 8, and
    # s's other 5 jobs wait
    org = O("root", 1, O("P", 1, O("g"), O("s")), O("Q", 1, O("q")))
    jobs = queued("g", 1, 1) + queued("s", 12, 1) + queued("q", 8, 1)
    snap = snap_of(org, nodes(2), jobs, {n: 1.0 for n in ("P", "g", "s", "Q", "q")},
                   {"s": 400.0})
    got, _ = decide(snap)
    ran = Counter(j[0] for j in got["runs"])  # jobs started per project (ids: project + n)
    assert ran == {"g": 1, "s": 7, "q": 8} and got["preempted"] == {}
    assert {j for j in got["pending"]} == {f"s{i:02d}" for i in range(7, 12)}


def test_a_project_owed_inside_its_program_still_lets_the_program_take_spare_gpus():
    # root -> P (1) [g, s], Q (1) [q]; 2 x 8: P 8, Q 8. q wants two 1-GPU jobs, g one, s
    # 13; ratios all 1.0; s owed 100 GPU-h beyond g. Floors: P 8 (g 1, s 7), Q 2; Q wants no
    # more, so its other 6 are spare and go to P (rule 2), and no GPU idles while a job fits
    # (rule 6): g 1, s 13, q 2, all 16 busy, and the plan is proved optimal (rule 8). (Stop
    # 54's candidate repay rows broke this twice before they passed: written as
    # "only while P holds at most its floor" they forbade P more than 9 GPUs (ilp lost to
    # greedy in tests/test_epoch_dominance.py), and with their 0/1 switch placed wrongly
    # they paid the best plan to leave the spare idle: "feasible", gap 5.5)
    org = O("root", 1, O("P", 1, O("g"), O("s")), O("Q", 1, O("q")))
    jobs = queued("g", 1, 1) + queued("s", 13, 1) + queued("q", 2, 1)
    snap = snap_of(org, nodes(2), jobs, {n: 1.0 for n in ("P", "g", "s", "Q", "q")},
                   {"s": 100.0})
    got, _ = decide(snap)
    ran = Counter(j[0] for j in got["runs"])  # jobs started per project (ids: project + n)
    assert ran == {"g": 1, "s": 13, "q": 2} and got["preempted"] == {} and got["pending"] == {}
    assert run_epoch(snap).report.status == "optimal"


def test_what_a_project_owes_its_sibling_keeps_its_programs_rank_against_another_program():
    # root -> P [g, s], Q [q]; 2 x 8: P 8 (g 4, s 4), Q 8. P ranks first (ratio 0.1), Q last
    # (2.0). s runs four 1-GPU jobs on n01 (protected) and is owed 100 GPU-h beyond g (P as a
    # whole nothing: g's surplus nets it), past the cap. g waits with an 8-GPU job, q with a
    # 6-GPU one: only n00 holds either. g's meets 4 floor GPUs of P and 4 of g, each worth
    # 2w (rank 1); q's 6 of Q and 6 of q, worth w each: 16 against 12, P's floor first (rule
    # 1: within twice the size). What s is owed inside P must not hand Q the node: a first
    # form of stop 61's floor_debts lowered g's row to 1/17 and q's job ran (8.5 < 12);
    # what g's row loses now goes to P's row (debt.parent_transfer), so a GPU of g within
    # P's floor weighs as before
    from optalloc.types import Job, JobState, NodeAlloc, Placement

    def on_n01(i):  # s's i-th job, running 10 min on GPU i of n01, protected 1 h
        pl = Placement(f"s{i:02d}", "h100", (NodeAlloc("n01", (i,)),))
        return Job(f"s{i:02d}", "s", 1, min_runtime_s=3600.0, state=JobState.RUNNING,
                   start_time=10 * 3600.0 - 600, placement=pl)

    org = O("root", 1, O("P", 1, O("g"), O("s")), O("Q", 1, O("q")))
    jobs = [on_n01(i) for i in range(4)] + queued("g", 1, 8) + queued("q", 1, 6)
    usage = {"P": 0.1, "g": 0.1, "s": 0.1, "Q": 2.0, "q": 2.0}
    snap = snap_of(org, nodes(2), jobs, usage, {"s": 100.0})
    got, _ = decide(snap)
    assert "g00" in got["runs"] and "q00" in got["pending"]
