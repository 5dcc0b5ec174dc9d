"""An outside judge (stop 53) of the scheme over several epochs in deeper org trees: root ->
programs -> projects -> sub-projects (3-4 levels), unequal shares, one or two gpu_types (one
pooled budget, or per-type budgets via share_by_type), simulated for hours to a day with ilp
and greedy.

Every expectation was worked out by hand from DESIGN.md section 8 before the case was run:
rule 1 (Fair-Tree order level by level: a subtree's rank before anything inside it), rule 2
(what a node does not want goes to its siblings first, nearest first, then up the tree; ties
split by shares: over a day each project's delivered GPU-hours = its entitlement capped by its
demand, the rest redistributed that way), rule 3 (priority orders jobs inside a project only),
rule 4 (protection for min_runtime, preemption after it, unallocated work never charged, never
protected, filling only what allocated work leaves, shared by shares) and the README's floors.

Common setup (tests/test_fairness_over_time_judge_cases.py's helpers): nodes of 8 GPUs, epoch
1800 s, grace 0, checkpoints every 600 s, no early solve, lookback 24 h; "endless" queues are
more 1-hour jobs (protected 1 h) than the cluster can run, submitted at once.

The entitlement of a leaf is the product of its normalized shares on its path; a case states
its tree's numbers. Tolerance: one epoch of every GPU a project could swing (1-GPU jobs: 4
GPU-h) unless a case says why more (a fractional share alternates whole GPUs: 8), or one
gang-hour (16) for gangs.

Found (each a strict xfail with its diagnosis, or fixed): below the top level an idle
sibling's share becomes floor split by entitlement, whatever the Fair-Tree rank
(targets.nested_floors); a gang project whose gang is larger than its program's share gets
nothing, or the gang runs every hour against its cousin, because a project's debt beyond its
siblings is capped at its program's own (debt.debt_tilt); greedy runs work unallocated on a
type allocated jobs want (plan.ranked.rank_pass). Fixed: the pooled routing's surplus over the
max-min level at an arbitrary vertex, which pinned one of two tied siblings at 1 GPU of 8
(pooled.route); at stop 60, the pooled routing over two types starving a confined project
beside a sub-program whose inner node could not absorb a sibling's unusable share
(model/route.py).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

from optalloc.sim.engine import simulate
from optalloc.sim.metrics import compute_metrics
from optalloc.sim.policies import make_policy
from optalloc.sim.scenario import Scenario
from optalloc.types import Config, GpuType, Job, Node, OrgNode, Policy, UsageMode
from tests.test_fairness_over_time_judge_cases import DAY, H, _window, endless, scenario


def O(name, share=1.0, *children, by_type=None):  # noqa: E743 - an org node, tersely
    return OrgNode(name, share=share, children=tuple(children),
                   share_by_type=by_type or {})


def deep():
    """4 levels: root -> P (3) -> [P1 (2) -> [a (3), B (1) -> [b1, b2]], c (1)]; Q (1) -> [q].
    On 32 GPUs: P 24, Q 8; P1 16, c 8; a 12, B 4; b1 2, b2 2."""
    return O("root", 1, O("P", 3, O("P1", 2, O("a", 3), O("B", 1, O("b1"), O("b2"))), O("c", 1)),
             O("Q", 1, O("q")))


def long_jobs(project, n, *, at=0.0, hours=30.0, min_h=1.0, gpus=1, tag="L", **kw):
    return [Job(f"{project}{tag}{i}", project, gpus, min_runtime_s=min_h * H, submit_time=at,
                duration_s=hours * H, **kw) for i in range(n)]


def only(types, jobs):
    return [dataclasses.replace(j, gpu_types=tuple(types)) for j in jobs]


def two_types(jobs, org, *, h100=2, b200=2, b200_weight=1.0, hours=24.0, **policy):
    """h100 x h100 and b200 x b200 nodes of 8 GPUs; one billing weight unless b200_weight."""
    pol = {"grace_s": 0.0, "epoch_s": 1800.0, "checkpoint_interval_s": 600.0,
           "lookback_s": DAY, **policy}
    nodes = tuple(Node(f"h{i}", "h100", 8) for i in range(h100)) + \
        tuple(Node(f"g{i}", "b200", 8) for i in range(b200))
    cfg = Config(gpu_types=(GpuType("h100"), GpuType("b200", billing_weight=b200_weight)),
                 nodes=nodes, org=org, policy=Policy(**pol))
    return Scenario("hierarchy-judge", cfg, tuple(jobs), duration_s=hours * H,
                    early_solve=False)


@dataclass(frozen=True)
class Case:
    name: str
    sc: Scenario
    delivered: dict  # project -> allocated GPU-h over the run
    tol: float = 4.0
    policies: tuple = ("ilp", "greedy")
    unallocated: dict = field(default_factory=dict)  # project -> unallocated GPU-h
    second_half: dict = field(default_factory=dict)  # project -> allocated GPU-h in [12, 24 h]
    by_type: dict = field(default_factory=dict)  # (project, type) -> GPU-h (any kind)
    preemptions: int | None = None  # compute_metrics' preemption count, exactly
    fault: str | None = None  # ilp: strict xfail with the diagnosis
    greedy_fault: str | None = None


ALL4 = ("a", "b1", "b2", "c", "q")
# ilp only where greedy's plan is not hand-workable over one day: with no floors and all
# 1-h jobs ending together it gives the whole cluster to the best-ranked project each hour
# (b1 64 / b2 32 GPU-h on the first case, converging only over days), fills idle GPUs
# winner-take-all, and preempts a demand-capped project's long jobs within its share (78
# times on that case). The per-type case has a greedy fault of its own (test below)
ILP = ("ilp",)

CASES = [
    Case(  # deep(): everyone endless -> a 12, b1 2, b2 2, c 8, q 8 GPUs all day
        "a-four-level-tree-with-unequal-shares-delivers-each-leaf-its-entitlement",
        scenario(sum((endless(p, 400) for p in ALL4), []), deep(), nodes=(8,) * 4),
        {"a": 288.0, "b1": 48.0, "b2": 48.0, "c": 192.0, "q": 192.0}, policies=ILP),
    Case(  # b2 idle: its 2 go to its sibling b1 (B keeps 4), nobody else moves
        "an-idle-sub-projects-share-goes-to-its-sibling-sub-project",
        scenario(sum((endless(p, 400) for p in ("a", "b1", "c", "q")), []), deep(),
                 nodes=(8,) * 4),
        {"a": 288.0, "b1": 96.0, "b2": 0.0, "c": 192.0, "q": 192.0}),
    Case(  # B (b1, b2) idle: B's 4 go to a (its sibling in P1): a 16; c, q unchanged
        "an-idle-sub-tree-share-goes-to-its-sibling-project-not-to-other-programs",
        scenario(sum((endless(p, 400) for p in ("a", "c", "q")), []), deep(), nodes=(8,) * 4),
        {"a": 384.0, "b1": 0.0, "b2": 0.0, "c": 192.0, "q": 192.0}),
    Case(  # P1 idle: its 16 go to c (its sibling in P): c 24, q keeps 8
        "an-idle-sub-programs-share-stays-in-its-program",
        scenario(endless("c", 800) + endless("q", 400), deep(), nodes=(8,) * 4),
        {"a": 0.0, "c": 576.0, "q": 192.0}),
    Case(  # b1 runs 4 long jobs (30 h, protected 1 h) from 0, b2 nothing until 12 h, then 2
        # long jobs; a, c, q endless. 0-12 h b2's 2 go to b1 (B's 4); at 12 h b2 wants its 2:
        # two of b1's jobs (past protection) stop, exactly 2 preemptions, nobody else's.
        # b1 4 x 12 + 2 x 12 = 72, b2 24; a 288, c 192, q 192
        "a-returning-sub-project-takes-its-share-back-from-its-sibling-only",
        scenario(long_jobs("b1", 4) + long_jobs("b2", 2, at=12 * H)
                 + sum((endless(p, 400) for p in ("a", "c", "q")), []), deep(), nodes=(8,) * 4),
        {"a": 288.0, "b1": 72.0, "b2": 24.0, "c": 192.0, "q": 192.0}, policies=ILP,
        second_half={"b1": 24.0, "b2": 24.0}, preemptions=2),
    Case(  # a runs 13 long jobs (wants 13 of P1's 16), B idle: P1's 3 unused go to c (P's
        # other child) before Q: a 13, c 11, q 8 -> 312, 264, 192
        "a-demand-capped-sub-program-passes-its-rest-to-the-nearest-sibling-first",
        scenario(long_jobs("a", 13) + endless("c", 400) + endless("q", 400), deep(),
                 nodes=(8,) * 4),
        {"a": 312.0, "c": 264.0, "q": 192.0}, policies=ILP),
    Case(  # only c (4 long jobs) in P: P wants 4 of its 24, the other 20 go up to Q: q 28
        "a-program-that-wants-little-passes-the-rest-up-the-tree",
        scenario(long_jobs("c", 4) + endless("q", 1000), deep(), nodes=(8,) * 4),
        {"a": 0.0, "c": 96.0, "q": 672.0}),
    Case(  # root -> P (2) -> [a (3), b (1)], Q (1) -> [q], R (1) idle. 32 GPUs: P 16, Q 8,
        # R 8. P and Q tie (usage in proportion to entitlement), so R's 8 split 2:1 ->
        # P 21.33 (a 16, b 5.33), Q 10.67: a 384, b 128, q 256. Fractional: tol 8
        "an-idle-programs-share-is-split-two-to-one-then-three-to-one-down-the-tree",
        scenario(endless("a", 600) + endless("b", 400) + endless("q", 400),
                 O("root", 1, O("P", 2, O("a", 3), O("b", 1)), O("Q", 1, O("q")), O("R", 1)),
                 nodes=(8,) * 4),
        {"a": 384.0, "b": 128.0, "q": 256.0}, tol=8.0),
    Case(  # priority 3 on all of a's work and a's 40 priority-0 jobs submitted first: a still
        # gets 12, the rest as deep()'s first case; a's priority-0 jobs never start
        "inflated-priorities-in-a-deep-project-buy-it-no-gpus-and-order-only-its-own-jobs",
        scenario(long_jobs("a", 40, hours=1.0, tag="low")
                 + endless("a", 400, priority=3, at=60.0)
                 + sum((endless(p, 400) for p in ("b1", "b2", "c", "q")), []),
                 deep(), nodes=(8,) * 4),
        {"a": 288.0, "b1": 48.0, "b2": 48.0, "c": 192.0, "q": 192.0}, policies=ILP),
    Case(  # unallocated work only (min_runtime 0): never charged, the idle GPUs are shared by
        # the same water-filling (ratios all 0: by shares): a 12, b1 2, b2 2, c 8, q 8
        "unallocated-work-alone-is-shared-down-a-deep-tree-by-shares",
        scenario(sum((endless(p, 400, min_h=0.0) for p in ALL4), []), deep(), nodes=(8,) * 4),
        {p: 0.0 for p in ALL4}, policies=ILP,
        unallocated={"a": 288.0, "b1": 48.0, "b2": 48.0, "c": 192.0, "q": 192.0}),
    Case(  # root -> P (1) -> [a (1), z (0)], Q (1) -> [q]; 16 GPUs: a 8, z 0, q 8. a and q run
        # 4 long jobs each; z (share 0) endless jobs declaring 1 h: they run only as
        # unallocated work on the 8 idle GPUs. At 12 h q adds 4 long jobs: z yields 4 at once.
        # z: 8 x 12 + 4 x 12 = 144 unallocated, 0 allocated; a 96; q 96 + 48 = 144
        "a-zero-share-sub-project-runs-only-as-unallocated-work-and-yields-at-once",
        scenario(long_jobs("a", 4) + long_jobs("q", 4) + long_jobs("q", 4, at=12 * H, tag="M")
                 + endless("z", 400),
                 O("root", 1, O("P", 1, O("a", 1), O("z", 0)), O("Q", 1, O("q"))),
                 nodes=(8, 8)),
        {"a": 96.0, "q": 144.0, "z": 0.0}, unallocated={"z": 144.0},
        second_half={"a": 48.0, "q": 96.0, "z": 0.0}),
    Case(  # root -> P (1) -> [a, Z (0) -> [z1, z2]], Q (1) -> [q]; 16 GPUs: a 8, Q 8, z1 = z2
        # = 0. a and q run 4 long jobs each: 8 GPUs idle of allocated work. z1 and z2 (endless
        # jobs declaring 1 h, no share) run only as unallocated work, never charged; their
        # ratios tie (nothing charged), so the 8 idle GPUs split by shares 4 + 4 (rule 2's
        # water-filling for unallocated work): z1 96, z2 96 unallocated, 0 allocated
        "a-zero-share-sub-program-fills-idle-gpus-split-between-its-projects-by-shares",
        scenario(long_jobs("a", 4) + long_jobs("q", 4) + endless("z1", 400) + endless("z2", 400),
                 O("root", 1, O("P", 1, O("a", 1), O("Z", 0, O("z1"), O("z2"))),
                   O("Q", 1, O("q"))), nodes=(8, 8)),
        {"a": 96.0, "q": 96.0, "z1": 0.0, "z2": 0.0}, policies=ILP,
        unallocated={"z1": 96.0, "z2": 96.0}),
    # ---------------------------------------------------------------- two gpu types
    Case(  # deep() on 2 h100 + 2 b200 nodes, one billing weight: one pooled budget of 32 as
        # in the first case; c confined to h100, q to b200 (each within its type's 16)
        "a-pooled-budget-over-two-types-delivers-the-deep-trees-entitlements",
        two_types(only(("h100",), endless("c", 400)) + only(("b200",), endless("q", 400))
                  + sum((endless(p, 400) for p in ("a", "b1", "b2")), []), deep()),
        {"a": 288.0, "b1": 48.0, "b2": 48.0, "c": 192.0, "q": 192.0},
        by_type={("c", "b200"): 0.0, ("q", "h100"): 0.0}, policies=ILP),
    Case(  # deep() pooled on 2 h100 + 2 b200; a and c confined to h100 (they want 12 + 8 of
        # its 16), b1, b2, q anywhere. Level by level (README: pooled routing, a program's
        # share first, then its projects'): P 24, Q 8 (q on b200); inside P, c gets its 8 on
        # h100, P1 its 16 as a 8 (the rest of h100) + B 8 on b200 (b1 4, b2 4), B taking
        # what a cannot use (rule 2: its sibling first). a 192, b1 96, b2 96, c 192, q 192
        "pooled-types-a-confined-sub-project-leaves-its-unusable-share-to-its-sibling",
        two_types(only(("h100",), endless("a", 400) + endless("c", 400))
                  + sum((endless(p, 400) for p in ("b1", "b2", "q")), []), deep()),
        {"a": 192.0, "b1": 96.0, "b2": 96.0, "c": 192.0, "q": 192.0}, policies=ILP,
        by_type={("q", "h100"): 0.0}),
    # ^ was c 0 GPU-h a day, a 384: route capped B's sum at what b1 and b2 want (4), so P1
    # could not pass a's unusable share to B, P1's level max-min left c (a leaf beside it,
    # in no level) 4, _fit capped c there and each pass ratcheted it lower. Fixed at stop
    # 60 (optalloc/model/route.py): leaves take part in their depth's floors and a subtree
    # below a program may take what its parent's leaves want
    Case(  # as above with P1 -> [a (3), b1 (0.5), b2 (0.5)] (3 levels below P): a 12, b1 2,
        # b2 2, c 8, q 8 pooled. a gets 8 on h100 beside c's 8, and P1's other 8 go to its
        # siblings b1 and b2, tied with equal shares: 4 + 4 (rule 2). a 192, b1 96, b2 96,
        # c 192, q 192
        "pooled-types-tied-siblings-split-a-confined-siblings-unusable-share-evenly",
        two_types(only(("h100",), endless("a", 400) + endless("c", 400))
                  + sum((endless(p, 400) for p in ("b1", "b2", "q")), []),
                  O("root", 1, O("P", 3, O("P1", 2, O("a", 3), O("b1", 0.5), O("b2", 0.5)),
                                 O("c", 1)), O("Q", 1, O("q")))),
        {"a": 192.0, "b1": 96.0, "b2": 96.0, "c": 192.0, "q": 192.0}, policies=ILP),
    # ^ was b1 24, b2 168 every day (1 and 7 GPUs): route gave each leaf z * want (z = 2/3, a
    # held at 8 by h100) and the rest of P1's 16 at an arbitrary vertex (b1 1.33, b2 6.67);
    # b1, below its want 2, was marked short by _fit and capped at 1 for the pooled re-fill,
    # so b2 took the rest every epoch. Fixed here: route's stage "each leaf up to its want"
    # (optalloc/model/pooled.py) before running work stays and speed
    Case(  # deep() with c under an inner node C (root -> P (3) -> [P1 (2) -> [a, B -> [b1,
        # b2]], C (1) -> [c]]): the same entitlements and hand outcome as two cases above:
        # a 192, b1 96, b2 96, c 192, q 192
        "pooled-types-a-confined-project-under-its-own-sub-program-keeps-its-floor",
        two_types(only(("h100",), endless("a", 400) + endless("c", 400))
                  + sum((endless(p, 400) for p in ("b1", "b2", "q")), []),
                  O("root", 1, O("P", 3, O("P1", 2, O("a", 3), O("B", 1, O("b1"), O("b2"))),
                                 O("C", 1, O("c"))), O("Q", 1, O("q")))),
        {"a": 192.0, "b1": 96.0, "b2": 96.0, "c": 192.0, "q": 192.0}, policies=ILP),
    # ^ was c 168 (7 of its 8 every hour), a 216: B's sum was held at what its leaves want,
    # so a's unusable part could not all go to B, and the max-min by z * want traded a GPU
    # of c's floor to a (fixed at stop 60, optalloc/model/route.py)
    Case(  # per-type budgets: Q has no b200 share. h100 16: P 8 (P1 6 -> a 3, b 3; c 2), Q 8.
        # b200 16: P 16 (P1 12 -> a 6, b 6; c 4). Everyone endless on any type: a 9, b 9,
        # c 6, q 8 GPUs; q's jobs never run on b200 (P wants it all, q is only unallocated
        # there)
        "per-type-budgets-a-program-without-a-share-of-a-type-gets-none-of-it",
        two_types(sum((endless(p, 400) for p in ("a", "b", "c", "q")), []),
                  O("root", 1, O("P", 1, O("P1", 3, O("a"), O("b")), O("c", 1)),
                    O("Q", 1, O("q"), by_type={"b200": 0.0}))),
        {"a": 216.0, "b": 216.0, "c": 144.0, "q": 192.0}, unallocated={"q": 0.0}, policies=ILP,
        by_type={("q", "b200"): 0.0, ("a", "h100"): 72.0, ("c", "b200"): 96.0}),
    Case(  # per-type budgets: root -> P [a, b], Q [q], R [r] idle; b200 is R's alone (P and
        # Q have no b200 share). a, b confined to h100; q anywhere. h100 16: P, Q, R 16/3
        # each; R idle, P and Q tie (q's b200 work is unallocated, never charged: its ratio
        # stays P's), so R's part splits: P 8 (a 4, b 4), Q 8. b200: no allocated demand (R
        # idle, P and Q no share): q fills all 16 as unallocated work. a 96, b 96, q 192
        # allocated + 384 unallocated. (Were q's b200 work charged, Q's ratio would be 3x
        # P's and P would take R's whole h100 part: P 10.67, Q 5.33)
        "unallocated-work-on-a-type-without-share-is-never-charged-so-the-spare-still-splits",
        two_types(only(("h100",), endless("a", 400) + endless("b", 400)) + endless("q", 1200),
                  O("root", 1, O("P", 1, O("a"), O("b"), by_type={"b200": 0.0}),
                    O("Q", 1, O("q"), by_type={"b200": 0.0}), O("R", 1, O("r")))),
        {"a": 96.0, "b": 96.0, "q": 192.0}, unallocated={"q": 384.0},
        by_type={("q", "b200"): 384.0, ("q", "h100"): 192.0}),
    Case(  # deep()'s first case in decay mode (half-life 6 h): steady demand, the same
        # shares whatever the kernel: a 288, b1 48, b2 48, c 192, q 192
        "in-decay-mode-the-four-level-tree-still-delivers-each-leaf-its-entitlement",
        scenario(sum((endless(p, 400) for p in ALL4), []), deep(), nodes=(8,) * 4,
                 usage_mode=UsageMode.DECAY, half_life_s=6 * H),
        {"a": 288.0, "b1": 48.0, "b2": 48.0, "c": 192.0, "q": 192.0}, policies=ILP),
    Case(  # root -> P (1) -> [P1 [g], P2 [s]], Q (1) -> [q]; 3 x 8: P 12 (P1 6, P2 6), Q 12.
        # g runs only two-node gangs (16 > P's 12), s and q 1-GPU jobs, all endless. Rule 2
        # over the day: each leaf its entitlement, the gang as an average: g 16 f = 6, f = 3/8
        # of the hours; g 144, s 144, q 288 (tol: one gang-hour)
        "a-sub-program-of-two-node-gangs-in-a-two-project-program-gets-its-share-over-the-day",
        scenario(endless("g", 60, gpus=16) + endless("s", 600) + endless("q", 600),
                 O("root", 1, O("P", 1, O("P1", 1, O("g")), O("P2", 1, O("s"))),
                   O("Q", 1, O("q"))), nodes=(8, 8, 8)),
        {"g": 144.0, "s": 144.0, "q": 288.0}, tol=16.0,
        fault="optalloc/model/debt.py (_debts' bound): ilp gives g 0 GPU-h all day "
              "(s 288, q 288; greedy 144 / 144 / 288). g's gang needs 4 GPUs beyond P's 12, so "
              "only a debt can make it win over s's and Q's floors; g is owed 6 GPU-h an hour "
              "(72 by 12 h) but, alone in P1, takes P1's debt, which is capped at P's own, and "
              "P is owed nothing as a whole (s absorbs P's 12): debt 0 every epoch, forever. "
              "The fair debt (programs counting their projects' own shortfalls) reads 6, but "
              "weighs only lifted floors (no idle sibling here). Stop 61's floor_debts (s's rows "
              "weigh less while g is owed beyond P's debt) cannot help: the gang needs Q's "
              "floor, a trade between subtrees that only P's own debt may win (rule 1)"),
    Case(  # the same with g and s projects of P directly: root -> P [g, s], Q [q]; 3 x 8:
        # P 12 (g 6, s 6), Q 12: g 144, s 144, q 288
        "a-project-of-two-node-gangs-larger-than-its-programs-share-gets-its-share-over-the-day",
        scenario(endless("g", 60, gpus=16) + endless("s", 600) + endless("q", 600),
                 O("root", 1, O("P", 1, O("g"), O("s")), O("Q", 1, O("q"))), nodes=(8, 8, 8)),
        {"g": 144.0, "s": 144.0, "q": 288.0}, tol=16.0,
        fault="optalloc/model/debt.py (_debts' bound): as the case above, g's debt (beyond its "
              "sibling s) is capped at P's, and P is owed nothing as a whole: g 0 GPU-h"),
    Case(  # root -> P (3) -> [P1 [g], P2 [s]], Q (1) -> [q]; 4 x 8: P 24 (P1 12, P2 12), Q 8.
        # g runs only two-node gangs (16: more than P1's 12, within P's 24), s and q 1-GPU
        # jobs, all endless. Inside P the gang and s's floor take turns: g 16 f = 12, f = 3/4;
        # s 8 in gang hours and 24 in the others (8 x 3/4 + 24 x 1/4 = 12); q keeps 8.
        # g 288, s 288, q 192
        "inside-a-program-a-gang-sub-program-larger-than-its-share-and-its-cousin-take-turns",
        scenario(endless("g", 60, gpus=16) + endless("s", 600) + endless("q", 400),
                 O("root", 1, O("P", 3, O("P1", 1, O("g")), O("P2", 1, O("s"))),
                   O("Q", 1, O("q"))), nodes=(8, 8, 8, 8)),
        {"g": 288.0, "s": 288.0, "q": 192.0}, tol=16.0),
    Case(  # per-type budgets by billing weight (b200 2.0), and b has no b200 share: root -> P
        # (1) -> [a, b (b200: 0)], Q (1) -> [q]. h100 16: P 8 (a 4, b 4), Q 8. b200 16: P 8
        # (all a's), Q 8. Everyone endless on any type: a 4 + 8, b 4, q 8 + 8 GPUs; b never
        # runs on b200 (only unallocated there, and a wants it). Billed ratios all 1: ties
        "per-type-budgets-by-billing-weight-with-a-sub-project-without-a-share-of-one-type",
        two_types(sum((endless(p, 400) for p in ("a", "b", "q")), []),
                  O("root", 1, O("P", 1, O("a"), O("b", by_type={"b200": 0.0})),
                    O("Q", 1, O("q"))), b200_weight=2.0),
        {"a": 288.0, "b": 96.0, "q": 384.0}, unallocated={"b": 0.0}, policies=ILP,
        by_type={("a", "h100"): 96.0, ("a", "b200"): 192.0, ("b", "h100"): 96.0,
                 ("b", "b200"): 0.0, ("q", "h100"): 192.0, ("q", "b200"): 192.0}),
    # ---------------------------------------------------------------- rule 1 over time
    Case(  # root -> P [a, b], Q [q], R [r] idle; 24 GPUs: 8 each. 0-12 h b runs 16 and q 8
        # 12-h jobs (all of the demand). From 12 h b is idle, a and q have endless queues.
        # Usage at 12 h: P 192, Q 96 of 192 entitled GPU-h each: ratios 1.0 / 0.5, so Q ranks
        # first and R's 8 go to q first, though a's own ratio (0) is below q's (rule 1: the
        # subtree's rank). How fast the ratios close is the README's water-filling: the spare
        # equalizes the ratios projected over H = 8 h (rho = r (1 - H/W), kappa = E W/H):
        # q = 12 + 8 (rP - rQ) in [8, 16], and each hour rQ += q/192, rP += (24 - q)/192.
        # Hour by hour (rounded): q 16, 16, 15, 15, 15, 15, 14, 14, 14, 14, 14, 13 = 175,
        # a 113 (a alone winner-take-all would be 192 / 96). b 192, q 96 + 175
        "a-fresh-project-of-a-program-that-used-more-waits-behind-the-other-program",
        scenario(long_jobs("b", 16, hours=12.0) + long_jobs("q", 8, hours=12.0)
                 + endless("a", 400, at=12 * H) + endless("q", 400, at=12 * H),
                 O("root", 1, O("P", 1, O("a"), O("b")), O("Q", 1, O("q")), O("R", 1, O("r"))),
                 nodes=(8, 8, 8)),
        {"a": 113.0, "b": 192.0, "q": 271.0}, policies=("ilp",),
        second_half={"a": 113.0, "q": 175.0}),
    Case(  # the same one level down: root -> P [P1 [a1, a2], P2 [d], P3 [e] idle], Q [q];
        # 24 GPUs: P 12 (P1 4, P2 4, P3 4), Q 12. q endless all day (12). 0-12 h a2 runs 8 and d
        # 4 12-h jobs (P's 12; P3's 4 go to a2, d wanting no more). From 12 h a2 is idle, a1
        # and d endless. Ratios at 12 h P1 1.0 (96 of 96 entitled GPU-h), P2 0.5: P2 ranks
        # first and P3's 4 go to d first, though a1's own ratio (0) is below d's. The same
        # water-filling inside P (kappa 12 each, P's 12 shared): d = 6 + 4 (r1 - r2) in [4, 8],
        # r2 += d/96, r1 += (12 - d)/96 each hour: d 8, 8, 8, 8, 7, 7, 7, 7, 7, 7, 7, 7
        # = 88, a1 56. a1 56, a2 96, d 48 + 88 = 136, q 288 (one level up, the case above
        # gives exactly the hand numbers)
        "a-fresh-sub-project-of-a-sub-program-that-used-more-waits-behind-its-cousin",
        scenario(long_jobs("a2", 8, hours=12.0) + long_jobs("d", 4, hours=12.0)
                 + endless("a1", 400, at=12 * H) + endless("d", 400, at=12 * H)
                 + endless("q", 800),
                 O("root", 1, O("P", 1, O("P1", 1, O("a1"), O("a2")), O("P2", 1, O("d")),
                                O("P3", 1, O("e"))), O("Q", 1, O("q"))),
                 nodes=(8, 8, 8)),
        {"a1": 56.0, "a2": 96.0, "d": 136.0, "q": 288.0}, policies=("ilp",),
        second_half={"a1": 56.0, "d": 88.0, "q": 144.0},
        fault="optalloc/model/targets.py:278 (nested_floors, called at :351): below the top "
              "level an idle sibling's part of the parent's floor is shared among the others "
              "by entitlement as FLOOR, whatever their Fair-Tree rank: P1 and P2 get floors "
              "6 / 6 (targets forced to 6 / 6) every epoch of the afternoon although P2's "
              "ratio is half P1's (a1 72, d 48 + 72; the hand water-filling gives 56 / 88). "
              "One level up (top-level floors min(D, E), the spare by the targets) the same "
              "case gives the hand numbers. lifted_floors caps a child's share at max(floor, "
              "target) for this very reason (stop 50's review); the unlifted nested floors "
              "do not"),
]


PARAMS = [pytest.param(c, pol, id=f"{c.name}[{pol}]",
                       marks=[pytest.mark.xfail(strict=True, reason=c.fault)]
                       if c.fault and pol == "ilp" else
                       [pytest.mark.xfail(strict=True, reason=c.greedy_fault)]
                       if c.greedy_fault and pol == "greedy" else [])
          for c in CASES for pol in c.policies]


def _by_type(res) -> dict:
    out: dict = defaultdict(float)
    for iv in res.intervals:
        out[(iv.project, iv.gpu_type)] += iv.gpus * (iv.end - iv.start) / H
    return out


@pytest.mark.parametrize("case, policy", PARAMS)
def test_gpu_hours_per_leaf_over_the_run_match_the_hand_worked_shares(case, policy):
    res = simulate(case.sc, make_policy(policy), check=True)
    m = compute_metrics(res)
    approx = lambda want: {p: pytest.approx(v, abs=case.tol) for p, v in want.items()}  # noqa: E731
    got = {p: m["projects"][p]["delivered_gpu_h"] for p in case.delivered}
    assert got == approx(case.delivered)
    if case.unallocated:
        un = {p: m["projects"][p]["unallocated_gpu_h"] for p in case.unallocated}
        assert un == approx(case.unallocated)
    if case.second_half:
        half = {p: _window(res, p, 12 * H, 24 * H) for p in case.second_half}
        assert half == approx(case.second_half)
    if case.preemptions is not None:
        assert m["preemptions"]["count"] == case.preemptions
    if case.by_type:
        bt = _by_type(res)
        assert {k: bt.get(k, 0.0) for k in case.by_type} == approx(case.by_type)


# ----------------------------------------------------------------------------- the contract

def contract_case(grace_s=0.0):
    """16 GPUs, root -> P (1) -> [P1 (1) -> [a, b], c (1)], Q (1) -> [q]: P 8 (P1 4 -> a 2,
    b 2; c 4), Q 8. At 0 a and c each start 8 long 1-GPU jobs (30 h of work, protected 3 h,
    resumable): the cluster is theirs. At 1 h q submits 8 1-GPU jobs of 2 h (protected 1 h)."""
    jobs = long_jobs("a", 8, min_h=3.0) + long_jobs("c", 8, min_h=3.0) + \
        long_jobs("q", 8, at=1 * H, hours=2.0, tag="S")
    org = O("root", 1, O("P", 1, O("P1", 1, O("a"), O("b")), O("c", 1)), O("Q", 1, O("q")))
    return scenario(jobs, org, nodes=(8, 8), grace_s=grace_s)


def _runs(res) -> dict:
    out: dict = defaultdict(list)
    for iv in res.intervals:
        out[iv.job_id].append((iv.start, iv.end))
    return {j: sorted(v) for j, v in out.items()}


@pytest.mark.parametrize("grace", [0.0, 300.0], ids=["no-notice", "300s-notice"])
def test_protection_then_preemption_split_by_the_tree_and_every_preempted_job_resumes(grace):
    # q waits until a's and c's protection ends at 3 h (the epoch at 3 h), then gets its floor
    # 8 at once (with notice g: the 8 leave at 3 h + g and q starts then, ends at 5 h + g;
    # the preempted jobs resume at the first epoch from then: 5 h, or 5.5 h with 300 s).
    # P keeps its 8 and splits it as the tree says: P1 and c tie (each used 24 GPU-h of an
    # entitlement of 4; b idle gives P1's 4 to a), so 4 + 4: four of a's and four of c's
    # jobs are preempted (8 preemptions), not eight of one. The 8 preempted jobs resume when
    # q's end (nothing else wants the GPUs) and run to the end of the day. GPU-hours with no
    # notice: q 16, a 8 x 24 - 4 x 2 = 184, c 184. No job ever runs twice at once, none is
    # lost: every a / c job is running at 24 h.
    # Work lost: the 8 ran g past their 3-h checkpoint: 8 g GPU-s.
    res = simulate(contract_case(grace), make_policy("ilp"), check=True)
    m = compute_metrics(res)
    back = 5 * H if grace == 0 else 5.5 * H
    lost = 4 * (back - 3 * H - grace) / H  # GPU-h each of a and c is off
    got = {p: m["projects"][p]["delivered_gpu_h"] for p in ("a", "c", "q")}
    assert got == {"a": pytest.approx(192.0 - lost, abs=0.01),
                   "c": pytest.approx(192.0 - lost, abs=0.01), "q": pytest.approx(16.0)}
    runs = _runs(res)
    assert {j: r for j, r in runs.items() if j.startswith("q")} == \
        {f"qS{i}": [(3 * H + grace, 5 * H + grace)] for i in range(8)}
    stopped = {j for j, r in runs.items() if len(r) > 1}
    assert len(stopped) == 8
    assert sum(j.startswith("a") for j in stopped) == 4
    for j in stopped:
        assert runs[j] == [(0.0, 3 * H + grace), (back, 24 * H)], j
    for j, r in runs.items():
        if not j.startswith("q"):
            assert r[-1][1] == 24 * H and all(e <= s for (_, e), (s, _) in zip(r, r[1:])), j
    assert m["preemptions"]["count"] == 8
    assert m["preemptions"]["lost_gpu_h"] == pytest.approx(8 * grace / H)


# ----------------------------------------------------------------------------- ilp >= greedy

class Dominance:
    """ilp in the simulation; at every epoch its plan is compared with greedy's on the same
    snapshot by the scheme's own order (tests/test_epoch_dominance.py's check: where greedy's
    plan keeps the model's rules, ilp's score is at least greedy's)."""

    def __init__(self):
        self.inner, self.name, self.epochs = make_policy("ilp"), "ilp", 0

    def decide(self, snap):
        from tests.test_epoch_dominance import _check

        _check(snap)
        self.epochs += 1
        return self.inner.decide(snap)


@pytest.mark.parametrize("name", [
    "a-four-level-tree-with-unequal-shares-delivers-each-leaf-its-entitlement",
    "a-demand-capped-sub-program-passes-its-rest-to-the-nearest-sibling-first",
    "inflated-priorities-in-a-deep-project-buy-it-no-gpus-and-order-only-its-own-jobs",
    "a-zero-share-sub-project-runs-only-as-unallocated-work-and-yields-at-once",
    "a-pooled-budget-over-two-types-delivers-the-deep-trees-entitlements",
    "per-type-budgets-a-program-without-a-share-of-a-type-gets-none-of-it",
    "a-fresh-sub-project-of-a-sub-program-that-used-more-waits-behind-its-cousin",
    "pooled-types-tied-siblings-split-a-confined-siblings-unusable-share-evenly",
    "a-returning-sub-project-takes-its-share-back-from-its-sibling-only",
])
def test_at_every_epoch_of_a_deep_tree_run_ilp_scores_at_least_greedy(name):
    # the first 12 h of each case (the contract case below too): no epoch where greedy's plan,
    # keeping the model's rules, beats ilp's on (floors, targets, teams' order, allocated,
    # fill, busy, -work lost)
    (case,) = [c for c in CASES if c.name == name]
    pol = Dominance()
    simulate(dataclasses.replace(case.sc, duration_s=12 * H), pol, check=True)
    assert pol.epochs >= 12


def test_at_every_epoch_of_the_contract_case_ilp_scores_at_least_greedy():
    pol = Dominance()
    simulate(dataclasses.replace(contract_case(300.0), duration_s=8 * H), pol, check=True)
    assert pol.epochs >= 4


# ----------------------------------------------------------------------------- greedy's rule 4

# fixed at stop 54 (optalloc/plan/ranked.py greedy_walk): an allocated job was placed in the
# allocated pass on any allowed type, also one where its project has no share, so q took b200
# as unallocated work while P's allocated jobs waited for it (160 GPU-h where 0 is owed)
def test_greedy_never_runs_work_unallocated_on_a_type_allocated_jobs_want():
    # the per-type-budgets case: P's a, b, c want every b200 GPU every hour (endless queues,
    # any type), Q has no b200 share; q's jobs may run anywhere. Every hour all 16 b200 GPUs
    # must go to P's allocated work, so q runs nothing unallocated (and greedy's hourly
    # winner-take-all changes only who of P gets them)
    (case,) = [c for c in CASES if c.name.startswith("per-type-budgets-a-program-without")]
    res = simulate(case.sc, make_policy("greedy"), check=True)
    un = sum(iv.gpus * (iv.end - iv.start) for iv in res.intervals if not iv.allocated) / H
    assert un == 0.0


# ----------------------------------------------------------------------------- rule 3 over time

def test_a_deep_projects_late_high_priority_jobs_displace_its_own_low_priority_ones_only():
    # deep() on 32 GPUs, b1, b2, c, q endless 1-h jobs. a runs 12 long priority-0 jobs (its
    # whole 12) from 0; at 6 h a submits 4 long priority-1 jobs. Rule 3: they take the places
    # of 4 of a's own priority-0 jobs (past protection), nobody else's: a stays at 12 all day
    # (288), the others at their entitlements (b1 48, b2 48, c 192, q 192); exactly 4
    # preemptions, all of a's priority-0 jobs, at 6 h; the priority-1 jobs run from 6 h to
    # the end; the 4 stopped jobs do not come back (a's share stays full of better work)
    jobs = long_jobs("a", 12) + long_jobs("a", 4, at=6 * H, tag="HI", priority=1) + \
        sum((endless(p, 400) for p in ("b1", "b2", "c", "q")), [])
    sc = scenario(jobs, deep(), nodes=(8,) * 4)
    res = simulate(sc, make_policy("ilp"), check=True)
    m = compute_metrics(res)
    got = {p: m["projects"][p]["delivered_gpu_h"] for p in ALL4}
    assert got == {"a": pytest.approx(288.0, abs=1), "b1": pytest.approx(48.0, abs=4),
                   "b2": pytest.approx(48.0, abs=4), "c": pytest.approx(192.0, abs=4),
                   "q": pytest.approx(192.0, abs=4)}
    runs = _runs(res)
    assert {j: runs[j] for j in runs if j.startswith("aHI")} == \
        {f"aHI{i}": [(6 * H, 24 * H)] for i in range(4)}
    stopped = sorted(j for j, r in runs.items() if j.startswith("aL") and r[-1][1] < 24 * H)
    assert len(stopped) == 4 and all(runs[j] == [(0.0, 6 * H)] for j in stopped)
    assert {r.job_id for r in res.jobs if r.preemptions} == set(stopped)
