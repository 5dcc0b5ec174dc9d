"""An outside judge (stop 55) of the claim "the optimizer never loses to greedy on the scheme's
own order, and it is right first" over SEVERAL epochs: small hand-written clusters (1-4 nodes
of 8 GPUs, 5-12 simulated hours), each a simulation under `ilp` and `greedy` (the engine of
optalloc/sim, as the s51 judge's `_run`), whose outcome was worked out by hand from
DESIGN.md section 8 (and the README's "How an epoch decides": floors, then the Fair-Tree
targets, then the team's order, the contract, drains) BEFORE it was run. The working is in
the comment of each case.

Common setup (the s51 judge's): nodes n1, n2, ... of 8 GPUs, epoch 1800 s, checkpoints every
600 s, grace 0 unless a case says, lookback 24 h, no early solve, one billing weight unless a
case says; org root -> the named projects, equal shares unless a case says. Decisions come
at epoch ticks when something changed (or hourly while jobs wait); empty nodes fill in node
order. Times in the tables are hours.

Each case checks, per policy where it was worked out by hand:
* `ivs`: the run intervals of the named jobs, exactly (start, end) in hours;
* `delivered` / `unallocated`: allocated / unallocated GPU-hours per project over the run;
* `held`: for ilp, what each project holds after every decision from a time on ("right
  first": the plan is right at its first decision, not only on average);
* `preempted`: how many times the named jobs were stopped.
Every run also keeps the invariants (`_always` of the s51 judge: no job runs twice at once,
none lost, a finished job ran its work plus what it lost, delivered = its allocated
intervals, no plan preempts or moves a job inside its protection, the ledger charged what
the cluster ran; `check=True`: capacity, gangs whole, nothing on a down node). For every
ilp decision the plan greedy makes on the same snapshot is computed too: ilp's plan keeps the
s54 judge's invariants and scheme rules (capacity per node, gangs whole by the shape rule,
protected jobs kept, no new work on a drain node, no job that fits idle GPUs waits, no
allocated job waits behind unallocated work it fits in place of, no teammate ranked below a
waiting job started where it would fit), and greedy's plan never dominates it on every count
the scheme's order is built from (tests/test_scheme_vs_greedy_judge_s54.py `dominates`).

`fault`: ilp disagrees with the hand-worked outcome and the scheme decides for the hand:
strict xfail with file:line and the numbers.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from optalloc.sim.engine import simulate
from optalloc.sim.metrics import compute_metrics
from optalloc.sim.policies import make_policy
from optalloc.sim.policies.greedy import GreedyScheduler
from optalloc.sim.scenario import Scenario
from optalloc.sim.scenario.spec import NodeEvent
from optalloc.types import Config, GpuType, Job, Node, NodeState, OrgNode, Policy
from tests.test_scheme_vs_greedy_judge_s54 import (
    check_invariants,
    check_scheme_rules,
    counts,
    dominates,
)
from tests.test_sim_judge_cases_s51 import _always, _ivs

H = 3600.0


# ----------------------------------------------------------------------------- building

def sc(jobs, *, nodes=(("h100", 8),), types=(("h100", 1.0),), org=("A", "B"), events=(),
       hours=6.0, **policy) -> Scenario:
    pol = {"grace_s": 0.0, "epoch_s": 1800.0, "checkpoint_interval_s": 600.0,
           "lookback_s": 24 * H, **policy}
    if isinstance(org, tuple):
        org = OrgNode("root", children=tuple(OrgNode(n) for n in org))
    cfg = Config(gpu_types=tuple(GpuType(t, billing_weight=w) for t, w in types),
                 nodes=tuple(Node(f"n{i + 1}", t, g) for i, (t, g) in enumerate(nodes)),
                 org=org, policy=Policy(**pol))
    return Scenario("multi-epoch-judge-s55", cfg, tuple(jobs), duration_s=hours * H,
                    early_solve=False, node_events=tuple(events))


def job(jid, project, gpus, *, at=0.0, min_h=1.0, hours=1.0, **kw) -> Job:
    return Job(jid, project, gpus, min_runtime_s=min_h * H, duration_s=hours * H,
               submit_time=at * H, **kw)


def many(project, n, *, tag="", **kw) -> list[Job]:
    """n 1-GPU jobs of one project, ids project+tag+index (the team's order: by index)."""
    return [job(f"{project}{tag}{i:03d}", project, 1, **kw) for i in range(n)]


def stream(project, batches, *, every=0.5, size=8, **kw) -> list[Job]:
    """`batches` batches of `size` 1-GPU jobs, batch k submitted at k * every hours; ids
    project + 'k' + batch + '_' + index."""
    return [job(f"{project}k{k}_{i}", project, 1, at=k * every, **kw)
            for k in range(batches) for i in range(size)]


def O(name, *children, share=1.0, by_type=None):
    return OrgNode(name, share=share, share_by_type=by_type or {}, children=tuple(children))


# ----------------------------------------------------------------------------- the table

@dataclass(frozen=True)
class Want:
    ivs: dict = field(default_factory=dict)  # job -> [(start h, end h), ...]
    delivered: dict = field(default_factory=dict)  # project -> allocated GPU-h
    unallocated: dict = field(default_factory=dict)  # project -> unallocated GPU-h
    held: tuple | None = None  # (from h, {project: GPUs held after each decision})
    held_type: tuple | None = None  # (from h, {(project, type): GPUs held})
    preempted: dict = field(default_factory=dict)  # job -> times stopped
    never: tuple = ()  # jobs that never start
    tol: float = 1e-6  # GPU-h


@dataclass(frozen=True)
class Case:
    name: str
    build: object  # () -> Scenario
    ilp: Want
    greedy: Want | None = None  # None: greedy not worked out (invariants only)
    fault: str | None = None  # ilp disagrees with the hand: strict xfail, with the diagnosis
    rules: bool = True  # the s54 judge's per-decision rules and dominance (off with reservations)


def _c1():
    # 2 x 8, org A, P. a1 (A, 8 GPUs, 10 h) and p_lo (P, 8, priority 0, 10 h) from 0;
    # p_hi (P, 8, priority 5, 2 h) at 0.5 h; p_mid (P, 8, priority 2, 1 h) at 1.25 h; all
    # protected 1 h.
    return sc([job("a1", "A", 8, hours=10), job("p_lo", "P", 8, hours=10),
               job("p_hi", "P", 8, at=0.5, hours=2, priority=5),
               job("p_mid", "P", 8, at=1.25, hours=1, priority=2)],
              nodes=(("h100", 8),) * 2, org=("A", "P"), hours=8)


def _c2():
    # 1 x 8. A's a_hi (4 GPUs, priority 5) and a_lo1, a_lo2 (2 GPUs each, priority 0,
    # checkpointing only every 2 h) from 0, 10 h of work each; B's b (4, 3 h) at 0.5 h.
    slow = {"checkpoint_interval_s": 2 * H}
    return sc([job("a_hi", "A", 4, hours=10, priority=5),
               job("a_lo1", "A", 2, hours=10, **slow), job("a_lo2", "A", 2, hours=10, **slow),
               job("b", "B", 4, at=0.5, hours=3)], hours=6)


def _c3():
    # 1 x 8. A's a1 (4, resumable) and a2 (4, NOT resumable) from 0, same priority and
    # submit time, 10 h; B's b (4, 3 h) at 0.5 h.
    return sc([job("a1", "A", 4, hours=10), job("a2", "A", 4, hours=10, resumable=False),
               job("b", "B", 4, at=0.5, hours=3)], hours=6)


def _c4():
    # 3 x 8. root -> P1 {a1, a2}, P2 {b}, P3 {c} (all shares 1). a1: 24 1-GPU jobs of 6 h
    # at 0 (P2, P3 idle: a1 runs 24 GPUs, 144 GPU-h by 6 h). At 6 h a2 and b each submit
    # 80 1-GPU jobs of 2 h (protected 1 h). c never submits.
    org = O("root", O("P1", O("a1"), O("a2")), O("P2", O("b")), O("P3", O("c")))
    jobs = many("a1", 24, hours=6) + many("a2", 80, at=6, hours=2) + many("b", 80, at=6, hours=2)
    return sc(jobs, nodes=(("h100", 8),) * 3, org=org, hours=12)


def _c5():
    # 2 x 8, shares A 1, B 3, C 4; C idle. A and B: endless 1-GPU 1-h jobs at 0.
    org = O("root", O("A"), O("B", share=3), O("C", share=4))
    return sc(many("A", 60) + many("B", 150), nodes=(("h100", 8),) * 2, org=org, hours=8)


def _c6():
    # 3 x 8, grace 60 s. A's a_short (4, protected 2 h, 1.5 h of work) and a_long (4,
    # protected 3 h, 6 h) at 0; B's b1 (8, protected 8 h, 10 h) at 0.25 h and b2 (8,
    # protected 1 h, 2 h) at 1 h. n1 drains at 1 h.
    return sc([job("a_short", "A", 4, min_h=2, hours=1.5), job("a_long", "A", 4, min_h=3, hours=6),
               job("b1", "B", 8, at=0.25, min_h=8, hours=10), job("b2", "B", 8, at=1, hours=2)],
              nodes=(("h100", 8),) * 3, grace_s=60.0, hours=6,
              events=(NodeEvent(H, ("n1",), NodeState.DRAIN),))


def _c7():
    # 2 x 8. a1 (A, 8, protected 2 h, 10 h) at 0; b1 (B, 8, protected 2 h, 10 h) at
    # 0.25 h. n1 goes down at 4000 s and is up again at 3 h.
    return sc([job("a1", "A", 8, min_h=2, hours=10), job("b1", "B", 8, at=0.25, min_h=2, hours=10)],
              nodes=(("h100", 8),) * 2, hours=8,
              events=(NodeEvent(4000.0, ("n1",), NodeState.DOWN),
                      NodeEvent(3 * H, ("n1",), NodeState.UP)))


def _c8():
    # n1 h100, n2 b200 billed 2x (per-type budgets: each type split A 4, B 4). A: endless
    # 1-GPU 1-h jobs, h100 only; B: endless 1-GPU 1-h jobs on any type.
    return sc(many("A", 80, gpu_types=("h100",)) + many("B", 150),
              nodes=(("h100", 8), ("b200", 8)), types=(("h100", 1.0), ("b200", 2.0)), hours=8)


def _c9():
    # n1 h100, n2 b200, one billing weight; A has no b200 share (share_by_type b200: 0), so
    # per-type budgets: h100 A 4, B 4; b200 all B's. A: endless 1-GPU 1-h jobs on any type;
    # B: endless 1-GPU 1-h jobs, h100 only.
    org = O("root", O("A", by_type={"b200": 0.0}), O("B"))
    return sc(many("A", 150) + many("B", 80, gpu_types=("h100",)),
              nodes=(("h100", 8), ("b200", 8)), types=(("h100", 1.0), ("b200", 1.0)),
              org=org, hours=8)


def _c10():
    # 2 x 8, org A, U. U's u1..u4 (4 GPUs each, min_runtime 0: unallocated, 10 h) at 0;
    # A's a1 (4, 1 h) at 0.25 h and a2 (8, one node, 2 h) at 0.75 h, protected 1 h.
    jobs = [job(f"u{i}", "U", 4, min_h=0.0, hours=10) for i in (1, 2, 3, 4)]
    jobs += [job("a1", "A", 4, at=0.25, hours=1), job("a2", "A", 8, at=0.75, hours=2)]
    return sc(jobs, nodes=(("h100", 8),) * 2, org=("A", "U"), hours=5)


def _c11():
    # 4 x 8. B: a stream of 8 1-GPU jobs every 30 min from 0 (2 h of work, protected 1 h);
    # A: one 16-GPU gang g (3 h, protected 1 h) at 1.25 h.
    return sc(stream("B", 10, hours=2) + [job("g", "A", 16, at=1.25, hours=3)],
              nodes=(("h100", 8),) * 4, hours=5)


def _c12():
    # 3 x 8, A = B = C. A and B: 40 1-GPU jobs each at 0 (3 h of work, protected 1 h); C
    # idle until 4 h, then 40 such jobs.
    return sc(many("A", 40, hours=3) + many("B", 40, hours=3) + many("C", 40, at=4, hours=3),
              nodes=(("h100", 8),) * 3, org=("A", "B", "C"), hours=8)


def _c13():
    # 3 x 8. A's gang g (16, protected 2 h, 10 h) at 0; B's b (8, protected 1 h, 10 h) at
    # 0.25 h. n2 goes down at 3700 s, up at 3 h.
    return sc([job("g", "A", 16, min_h=2, hours=10), job("b", "B", 8, at=0.25, hours=10)],
              nodes=(("h100", 8),) * 3, hours=6,
              events=(NodeEvent(3700.0, ("n2",), NodeState.DOWN),
                      NodeEvent(3 * H, ("n2",), NodeState.UP)))


def _c14():
    # 2 x 8, lookahead on (max_reservations 1). B: a stream of 8 1-GPU 1-h jobs (protected
    # 1 h) every 30 min from 0 to 4.5 h; A: one 16-GPU gang g (2 h, protected 1 h) at 1.75 h.
    return sc(stream("B", 10, hours=1) + [job("g", "A", 16, at=1.75, hours=2)],
              nodes=(("h100", 8),) * 2, hours=6, max_reservations=1)


def _c15():
    # 1 x 8. A's a0 (8, 2 h) at 0; at 1.5 h A's a_hi (8, priority 100, 1 h) and B's b (8,
    # priority 0, 1.5 h); all protected 1 h.
    return sc([job("a0", "A", 8, hours=2), job("a_hi", "A", 8, at=1.5, hours=1, priority=100),
               job("b", "B", 8, at=1.5, hours=1.5)], hours=5)


def _c16():
    # 2 x 8, A = B. Unallocated work only (min_runtime 0), 1-GPU jobs of 3 h: A 48 of them at
    # 0, B 32 at 1 h.
    return sc(many("A", 48, min_h=0.0, hours=3) + many("B", 32, at=1, min_h=0.0, hours=3),
              nodes=(("h100", 8),) * 2, hours=9)


def _c17():
    # 2 x 8, A = B. The stream of _c14 (no lookahead) and the same gang: nothing a greedy
    # sort cannot see, so ilp does as greedy.
    return sc(stream("B", 10, hours=1) + [job("g", "A", 16, at=1.75, hours=2)],
              nodes=(("h100", 8),) * 2, hours=6)


def _c18():
    # 1 x 8, A = B. A's a1 (8, protected 1 h, 10 h) at 0; B's debug job b_dbg (1 GPU,
    # protected 10 min, 10 min of work) at 1.25 h.
    return sc([job("a1", "A", 8, hours=10), job("b_dbg", "B", 1, at=1.25, min_h=1 / 6, hours=1 / 6)],
              hours=6)


def _c19():
    # 2 x 8. A's a_p (4, protected 2 h, 6 h) at 0; B's b (8, protected 8 h, 10 h) at 0.25 h;
    # n1 drains at 0.75 h; A's debug jobs d1..d3 (1 GPU, protected 10 min, 10 min) at
    # 1.25 h; n1 up again at 3 h.
    jobs = [job("a_p", "A", 4, min_h=2, hours=6), job("b", "B", 8, at=0.25, min_h=8, hours=10)]
    jobs += [job(f"d{i}", "A", 1, at=1.25, min_h=1 / 6, hours=1 / 6) for i in (1, 2, 3)]
    return sc(jobs, nodes=(("h100", 8),) * 2, hours=6,
              events=(NodeEvent(0.75 * H, ("n1",), NodeState.DRAIN),
                      NodeEvent(3 * H, ("n1",), NodeState.UP)))


def _c20():
    # 1 x 8, A = B. A's a1 (4, 10 h, checkpoints every 600 s) at 0 and a2 (4, 10 h,
    # checkpoints every hour) at 0.25 h; B's b (4, 3 h) at 1.75 h; all protected 1 h.
    return sc([job("a1", "A", 4, hours=10),
               job("a2", "A", 4, at=0.25, hours=10, checkpoint_interval_s=H),
               job("b", "B", 4, at=1.75, hours=3)], hours=6)


def _c21():
    # 1 x 8. A's a_nr (8, NOT resumable, protected 3 h = its whole work) at 0; B's b (8,
    # 1 h, protected 1 h) at 0.25 h.
    return sc([job("a_nr", "A", 8, min_h=3, hours=3, resumable=False),
               job("b", "B", 8, at=0.25, hours=1)], hours=5)


def _c22():
    # 3 x 8. root -> P1 {a1, a2}, P2 {b}, P3 {c}; a1 and c never submit; a2 and b: endless
    # 1-GPU 1-h jobs at 0.
    org = O("root", O("P1", O("a1"), O("a2")), O("P2", O("b")), O("P3", O("c")))
    return sc(many("a2", 120) + many("b", 120), nodes=(("h100", 8),) * 3, org=org, hours=6)


def _k(batch, n=8):
    return [f"Bk{batch}_{i}" for i in range(n)]


def _same(ids, ivs):
    return {j: ivs for j in ids}


CASES = [
    Case(
        # 0: tie (usage 0), A first by name; a1 and p_lo start (one node each). 0.5 h: p_hi
        # waits (p_lo protected). 1 h: both past protection, usage A 8 = P 8, floors 8 / 8:
        # P's own order puts p_hi first, so p_lo (P's lowest) yields to it, never A's a1
        # (greedy: A is walked first and keeps a1; p_hi's only victim below it is p_lo).
        # 1.25 h: p_mid arrives. 2 h: p_hi past protection but ranks above p_mid (priority 5 >
        # 2): kept. 3 h: p_hi ends; p_mid (2) before p_lo (0): 3 -> 4 h. 4 h: p_lo resumes
        # (stopped at 3600, a checkpoint: nothing lost) -> 8 h. A 64, P 64 GPU-h.
        "a-late-high-priority-job-takes-its-own-teams-place-at-the-protection-end-then-the-"
        "middle-priority-one-goes-before-the-stopped-one",
        _c1,
        Want(ivs={"a1": [(0, 8)], "p_lo": [(0, 1), (4, 8)], "p_hi": [(1, 3)], "p_mid": [(3, 4)]},
             delivered={"A": 64.0, "P": 64.0}, preempted={"p_lo": 1, "a1": 0}),
        Want(ivs={"a1": [(0, 8)], "p_lo": [(0, 1), (4, 8)], "p_hi": [(1, 3)], "p_mid": [(3, 4)]},
             delivered={"A": 64.0, "P": 64.0}, preempted={"p_lo": 1, "a1": 0})),
    Case(
        # 0: A alone: a_hi (4) + a_lo1, a_lo2 (2 + 2) fill n1. 0.5 h: b waits (all
        # protected). 1 h: B (usage 0) ranks first and wants its floor 4; A must give 4 GPUs,
        # and the team's order (rule 3) says its lowest-ranked jobs go: a_lo2 and a_lo1
        # (priority 0), never a_hi (priority 5), although a_lo's checkpoints are 2 h apart
        # (each loses its hour: 2 x 2 x 3600 GPU-s) and a_hi would lose nothing: the team's
        # order comes before the work lost (README "A team's own order"). b 1 -> 4 h; at 4 h
        # a_lo1, a_lo2 resume to 6 h. A 4 x 6 + 2 x 2 x 3 = 36, B 12 GPU-h.
        "when another-project-takes-its-floor-a-team-loses-its-two-low-priority-jobs-not-its-"
        "high-priority-one-of-another-size",
        _c2,
        Want(ivs={"a_hi": [(0, 6)], "a_lo1": [(0, 1), (4, 6)], "a_lo2": [(0, 1), (4, 6)],
                  "b": [(1, 4)]},
             delivered={"A": 36.0, "B": 12.0}, preempted={"a_hi": 0, "a_lo1": 1, "a_lo2": 1}),
        Want(ivs={"a_hi": [(0, 6)], "a_lo1": [(0, 1), (4, 6)], "a_lo2": [(0, 1), (4, 6)],
                  "b": [(1, 4)]},
             delivered={"A": 36.0, "B": 12.0}, preempted={"a_hi": 0, "a_lo1": 1, "a_lo2": 1})),
    Case(
        # 1 h: B ranks first and takes its floor 4; one of A's 4-GPU jobs must go. The team's
        # order (priority, then submit time) ties them, so the work lost decides (the
        # optimizer's freedom: "churn and lost work"): a1 is resumable and at a checkpoint
        # (0 lost), a2 is not resumable (stopping it ends it: 4 x 3600 GPU-s lost). ilp stops
        # a1, which resumes at 4 h when b ends. Greedy releases the victim it ranks last,
        # by id: a2, ended for good; its 4 GPUs idle from 4 h (nothing of A waits).
        "with-the-teams-order-tied-a-preemption-takes-the-resumable-job-at-its-checkpoint-"
        "not-the-non-resumable-one",
        _c3,
        Want(ivs={"a1": [(0, 1), (4, 6)], "a2": [(0, 6)], "b": [(1, 4)]},
             delivered={"A": 36.0, "B": 12.0}, preempted={"a1": 1, "a2": 0}),
        Want(ivs={"a1": [(0, 6)], "a2": [(0, 1)], "b": [(1, 4)]},
             delivered={"A": 28.0, "B": 12.0}, preempted={"a1": 0, "a2": 1})),
    Case(
        # Entitled 8 GPUs per program (a1, a2 4 each). 0-6 h a1 runs 24 GPUs alone: P1 usage
        # 144 GPU-h = ratio 0.75 of its 192 in the window. From 6 h a2 (its own ratio 0) and
        # b (P2, ratio 0) both want 80. Floors: P1 8 (all a2's: a1 wants nothing), P2 8; P3
        # idle: its 8 are the spare, and they go to the better-ranked PROGRAM (rule 1: P2's
        # ratio 0 < P1's 0.75, whatever a2's own 0), all of them (the water-filling's
        # projected ratios stay 0.39+ apart through 12 h: at 10 h P1 0.917, P2 0.333). So
        # every 2-h block a2 runs 8 and b 16: over 6-12 h a2 48, b 96 GPU-h. Greedy ranks P2
        # first every block (its ratio reaches 0.5 at 10 h, P1's stays >= 0.75) and b takes
        # all 24: a2 gets nothing, below its program's floor for 6 h.
        "a-program-below-its-share-gets-the-spare-before-a-program-above-it-whatever-its-"
        "projects-own-ratio-and-the-other-program-keeps-its-floor",
        _c4,
        Want(delivered={"a1": 144.0, "a2": 48.0, "b": 96.0, "c": 0.0},
             held=(6, {"a2": 8, "b": 16})),
        Want(delivered={"a1": 144.0, "a2": 0.0, "b": 144.0, "c": 0.0})),
    Case(
        # Entitled A 2, B 6 (C's 8 idle). Floors 2 + 6; C's 8 is the spare and A and B tie
        # (usage 0): split 1 : 3, so A 4, B 12 from the first decision, and the ratios stay
        # tied (A 4 h / 48, B 12 h / 144): 4 / 12 at every decision. 8 h: A 32, B 96.
        # Greedy hands all 16 to one project each hour (A first by name at 0 and 4 h, where
        # the ratios tie, B in between): the same 32 / 96 over the 8 hours.
        "spare-gpus-of-an-idle-project-are-split-by-shares-among-tied-projects-from-the-"
        "first-epoch-not-winner-take-all",
        _c5,
        Want(delivered={"A": 32.0, "B": 96.0, "C": 0.0}, held=(0, {"A": 4, "B": 12})),
        Want(delivered={"A": 32.0, "B": 96.0, "C": 0.0})),
    Case(
        # 0: a_short and a_long on n1 (the first empty node; best fit keeps the second there
        # too). 0.5 h: b1 on n2. 1 h: n1 drains; b2 goes to n3 (n1 takes nothing new). 1.5 h:
        # a_short finishes inside its protection, on the drain node (completed). 3 h: a_long's
        # protection ends: it leaves n1 with notice (60 s: stops at 3 h + 60 s, 60 s since its
        # checkpoint: 240 GPU-s lost); b2 ended at 3 h, so n3 is free: ilp restarts a_long
        # there at once (Moved) at 3 h + 60 s; greedy requeues it and starts it at the next
        # decision, 3.5 h. n1 is empty from 3 h + 60 s. b1 runs 0.5 -> 6 h.
        "a-draining-node-empties-when-its-protected-job-is-due-and-the-job-restarts-at-once-"
        "on-a-free-node",
        _c6,
        Want(ivs={"a_short": [(0, 1.5)], "a_long": [(0, 3 + 60 / H), (3 + 60 / H, 6)],
                  "b1": [(0.5, 6)], "b2": [(1, 3)]},
             delivered={"A": 6.0 + 24.0, "B": 44.0 + 16.0}),
        Want(ivs={"a_short": [(0, 1.5)], "a_long": [(0, 3 + 60 / H), (3.5, 6)],
                  "b1": [(0.5, 6)], "b2": [(1, 3)]},
             delivered={"A": 6.0 + 4 * (3 + 60 / H) + 10.0, "B": 44.0 + 16.0})),
    Case(
        # 0: a1 on n1; 0.5 h: b1 on n2 (protected to 2.5 h). 4000 s: n1 down, a1 killed (400 s
        # since its checkpoint: 3200 GPU-s lost), requeued. 1.5, 2 h: b1 protected, a1 waits.
        # 2.5 h: capacity 8: floors 4 / 4 and both jobs are 8: A ranks first (usage 8.9 < 16)
        # so a1 takes n2 and b1 yields (at a checkpoint). 3 h: n1 up: b1 restarts there. Then
        # 8 / 8 to the end (8 h).
        "a-job-killed-by-a-node-going-down-waits-out-the-others-protection-takes-its-place-"
        "by-rank-and-the-node-back-serves-the-other",
        _c7,
        Want(ivs={"a1": [(0, 4000 / H), (2.5, 8)], "b1": [(0.5, 2.5), (3, 8)]},
             delivered={"A": 8 * 4000 / H + 44.0, "B": 16.0 + 40.0},
             preempted={"a1": 1, "b1": 1}),
        Want(ivs={"a1": [(0, 4000 / H), (2.5, 8)], "b1": [(0.5, 2.5), (3, 8)]},
             delivered={"A": 8 * 4000 / H + 44.0, "B": 16.0 + 40.0},
             preempted={"a1": 1, "b1": 1})),
    Case(
        # Per-type budgets (b200 billed 2x): h100 A 4, B 4; b200 A 4, B 4, but A's jobs cannot
        # use b200, so its b200 share goes to its sibling B. Floors: h100 A 4, B 4 (B wants
        # h100 too); b200 B 8. Every decision: A 4 h100; B 4 h100 + 8 b200. 8 h: A 32, B 96.
        # (A's weighted ratio stays far below B's, but its rank only orders the spare, and
        # there is none on h100.) Greedy: A first every hour, it takes all 8 h100; B gets
        # b200 only: A 64, B 64 (B below its h100 floor all day).
        "per-type-budgets-a-project-confined-to-h100-gets-its-h100-share-and-the-other-keeps-"
        "its-h100-floor-however-the-ratios-rank",
        _c8,
        Want(delivered={"A": 32.0, "B": 96.0},
             held_type=(0, {("A", "h100"): 4, ("B", "h100"): 4, ("B", "b200"): 8})),
        Want(delivered={"A": 64.0, "B": 64.0})),
    Case(
        # A has no b200 share: its b200 work is unallocated (never charged, never
        # protected). h100: A 4, B 4 (floors; B ranks first, its entitled GPU-hours count
        # b200, but there is no spare on h100). b200: nobody has allocated work for it, A's
        # unallocated work fills all 8. 8 h: A 32 allocated + 64 unallocated, B 32.
        "work-on-a-type-without-share-runs-unallocated-and-the-other-projects-unused-b200-"
        "budget-buys-it-no-extra-h100",
        _c9,
        Want(delivered={"A": 32.0, "B": 32.0}, unallocated={"A": 64.0, "B": 0.0},
             held_type=(0, {("A", "h100"): 4, ("B", "h100"): 4, ("A", "b200"): 8}))),
    Case(
        # 0: U's u1..u4 fill both nodes (u1, u2 on n1; u3, u4 on n2). 0.5 h: a1 (4) evicts
        # ONE unallocated job, U's last in its order: u4 (at a checkpoint). (Fixed at stop
        # 55: the model's packing put a1's 4-GPU slot on n1, the lower index, and the
        # eviction took u2, U's last on that node, while u4 ran on; u2 then waited 0.5 ->
        # 1.5 h ahead of u4 in U's order: optalloc/plan/fit.py slot_or_best_fit now takes
        # the twin node whose evictable work yields first, NodePool.evict_twin.) 1 h: a2 (8, one
        # node) needs a whole node: n2 holds a1 (protected) so n1: u1 and u2 go. 1.5 h: a1
        # ends; U's waiting u1, u2, u4 in U's order: u1 restarts. 3 h: a2 ends: u2 and u4.
        # A 4 + 16 = 20 GPU-h; U 4 x (1 + 3.5 + 1 + 2 + 5 + 0.5 + 2) = 60 unallocated.
        "allocated-arrivals-evict-only-the-unallocated-work-they-need-the-teams-last-first-"
        "and-the-evicted-resume-in-team-order",
        _c10,
        Want(ivs={"u1": [(0, 1), (1.5, 5)], "u2": [(0, 1), (3, 5)], "u3": [(0, 5)],
                  "u4": [(0, 0.5), (3, 5)], "a1": [(0.5, 1.5)], "a2": [(1, 3)]},
             delivered={"A": 20.0, "U": 0.0}, unallocated={"A": 0.0, "U": 60.0}),
        Want(ivs={"u1": [(0, 1), (1.5, 5)], "u2": [(0, 1), (3, 5)], "u3": [(0, 5)],
                  "u4": [(0, 0.5), (3, 5)], "a1": [(0.5, 1.5)], "a2": [(1, 3)]},
             delivered={"A": 20.0, "U": 0.0}, unallocated={"A": 0.0, "U": 60.0})),
    Case(
        # B's batches k (8 jobs, at 0.5 k h) fill n1 (k0), n2 (k1), n3 (k2). 1.5 h: g (A,
        # usage 0, ranks first; its floor is 16 = the gang) needs two whole nodes: n4 is free,
        # k0 and k1 are past protection (k2 is not). B's order (submit time) says its
        # latest-submitted running jobs go first: k1 (n2) yields, not k0. g 1.5 -> 4.5 h; k3
        # (at 1.5 h) waits (B holds its floor 16). 2 h: k0 ends: B's waiting k1 (requeued,
        # submitted 0.5 h, 1 h of work left) goes before k3, k4: 2 -> 3 h. 3 h: k1 and k2
        # end: k3, k4 3 -> 5 h. 4.5 h: g ends: k5, k6 4.5 -> 5 h. A 48, B 88 GPU-h.
        "a-gang-at-its-share-starts-at-its-first-epoch-by-stopping-the-streams-latest-jobs-"
        "and-those-restart-ahead-of-the-streams-newer-jobs",
        _c11,
        Want(ivs={"g": [(1.5, 4.5)], **_same(_k(0), [(0, 2)]), **_same(_k(1), [(0.5, 1.5), (2, 3)]),
                  **_same(_k(2), [(1, 3)]), **_same(_k(3), [(3, 5)]), **_same(_k(4), [(3, 5)]),
                  **_same(_k(5), [(4.5, 5)]), **_same(_k(6), [(4.5, 5)])},
             never=tuple(_k(7) + _k(8) + _k(9)), delivered={"A": 48.0, "B": 88.0}),
        Want(ivs={"g": [(1.5, 4.5)], **_same(_k(0), [(0, 2)]), **_same(_k(1), [(0.5, 1.5), (2, 3)]),
                  **_same(_k(2), [(1, 3)]), **_same(_k(3), [(3, 5)]), **_same(_k(4), [(3, 5)]),
                  **_same(_k(5), [(4.5, 5)]), **_same(_k(6), [(4.5, 5)])},
             never=tuple(_k(7) + _k(8) + _k(9)), delivered={"A": 48.0, "B": 88.0})),
    Case(
        # 0-4 h: C idle, A and B tie and split its share: 12 / 12 (3-h jobs: waves at 0 and
        # 3 h). 4 h: C returns (usage 0, ranks first); the 3-h wave is just past protection.
        # Floors 8 / 8 / 8 fill the 24 GPUs: C gets 8 at once, 4 from A and 4 from B (both
        # above their floors by 4 and tied), not 8 from one, not all 24 (A and B keep their
        # floors). From then every decision leaves 8 / 8 / 8 (C ranks first but nobody has
        # spare). 8 h: A 12 x 4 + 8 x 4 = 80, B 80, C 32; 8 preemptions, all at 4 h.
        "a-project-back-after-idling-takes-its-floor-at-once-four-gpus-from-each-of-the-two-"
        "tied-projects-and-no-more",
        _c12,
        Want(delivered={"A": 80.0, "B": 80.0, "C": 32.0}, held=(4, {"A": 8, "B": 8, "C": 8}))),
    Case(
        # 0: g on n1 + n2; 0.5 h: b on n3. 3700 s: n2 down, the gang dies whole (100 s since
        # its checkpoint: 1600 GPU-s lost), requeued. 1.5-2.5 h: capacity 16, floors 8 / 8; B
        # ranks first (8 to 16.4 GPU-h at 1.5 h) and b keeps n3; g would need n1 + n3: it waits
        # (n1 idle: nothing that fits waits). 3 h: n2 up, A ranks first: g restarts on n1 + n2.
        "a-gang-killed-by-a-node-going-down-waits-whole-while-the-better-ranked-job-keeps-its-"
        "node-and-restarts-when-the-node-is-back",
        _c13,
        Want(ivs={"g": [(0, 3700 / H), (3, 6)], "b": [(0.5, 6)]},
             delivered={"A": 16 * 3700 / H + 48.0, "B": 44.0}, preempted={"g": 1, "b": 0}),
        Want(ivs={"g": [(0, 3700 / H), (3, 6)], "b": [(0.5, 6)]},
             delivered={"A": 16 * 3700 / H + 48.0, "B": 44.0}, preempted={"g": 1, "b": 0})),
    Case(
        # Batch k runs on n1 (k even) or n2 (k odd) from 0.5 k h for 1 h. 2 h: g (A, usage 0,
        # ranks first) waits; the lookahead reserves n1 (free: k2 ended) + n2 (free at 2.5 h:
        # k3's end and protection end); A is within its share over the window (16 GPU-h
        # protected + 4 idle << 192), so k4 (it would outlast 2.5 h) is kept off n1. 2.5 h:
        # g starts on n1 + n2, 2.5 -> 4.5 h; at 3.5 h, past its protection, A (16 GPU-h)
        # still ranks before B (32): it keeps its nodes. 4.5 h: B's queue in order: k4, k5
        # 4.5 -> 5.5; k6, k7 5.5 -> 6. A 32, B 32 + 16 + 8 = 56 GPU-h. Greedy never sees two
        # free nodes at once (one is always in protection): B's batches run back to back,
        # k at 0.5 k h, and g starts only when the stream has run dry, at 5.5 h.
        "the-lookahead-holds-the-freeing-node-for-a-gang-within-its-share-and-starts-it-when-"
        "the-last-protection-on-its-nodes-ends",
        _c14,
        Want(ivs={"g": [(2.5, 4.5)], **{jid: [(0.5 * k, 0.5 * k + 1)] for k in range(4)
                                         for jid in _k(k)},
                  **_same(_k(4), [(4.5, 5.5)]), **_same(_k(5), [(4.5, 5.5)]),
                  **_same(_k(6), [(5.5, 6)]), **_same(_k(7), [(5.5, 6)])},
             never=tuple(_k(8) + _k(9)), delivered={"A": 32.0, "B": 56.0}),
        Want(ivs={"g": [(5.5, 6)],
                  **{jid: [(0.5 * k, 0.5 * k + 1)] for k in range(10) for jid in _k(k)}},
             delivered={"A": 8.0, "B": 80.0}),
        rules=False),
    Case(
        # The same cluster without the lookahead (the default): nothing holds a node for
        # the gang, so, as under greedy, g waits while B's batches run back to back (rule 6:
        # no idle GPU while a job that fits waits) and starts at 5.5 h, when the stream has
        # run dry (k8 ends at 5 h, k9 at 5.5 h). The published open problem; ilp must not do
        # worse than greedy here.
        "without-the-lookahead-a-gang-behind-staggered-protections-waits-as-under-greedy-and-"
        "no-gpu-idles",
        _c17,
        Want(ivs={"g": [(5.5, 6)],
                  **{jid: [(0.5 * k, 0.5 * k + 1)] for k in range(10) for jid in _k(k)}},
             delivered={"A": 8.0, "B": 80.0}),
        Want(ivs={"g": [(5.5, 6)],
                  **{jid: [(0.5 * k, 0.5 * k + 1)] for k in range(10) for jid in _k(k)}},
             delivered={"A": 8.0, "B": 80.0})),
    Case(
        # 0: a0 runs. 1.5 h: B (usage 0) ranks first: b takes the node from a0 (past its
        # protection; floors 4 / 4 and whole 8-GPU jobs: the better rank wins), whatever a_hi's
        # priority 100 (priority orders A's jobs only). 2.5 h: A 12 > B 8: b keeps. 3 h: b
        # ends; A's a_hi (100) before the stopped a0 (0): 3 -> 4 h; a0 resumes 4 -> 4.5 h.
        # A 12 + 8 + 4 = 24, B 12 GPU-h.
        "a-high-priority-job-of-a-project-above-its-share-waits-for-the-other-projects-job-"
        "and-then-goes-before-its-own-stopped-job",
        _c15,
        Want(ivs={"a0": [(0, 1.5), (4, 4.5)], "b": [(1.5, 3)], "a_hi": [(3, 4)]},
             delivered={"A": 24.0, "B": 12.0}),
        Want(ivs={"a0": [(0, 1.5), (4, 4.5)], "b": [(1.5, 3)], "a_hi": [(3, 4)]},
             delivered={"A": 24.0, "B": 12.0})),
    Case(
        # Unallocated only: never charged, ratios stay 0 and tie. 0: A alone fills 16 (its
        # first 16, 0 -> 3 h). 1 h: B's jobs arrive; unallocated work never displaces other
        # unallocated work for nothing (rule 4): they wait for A's to end. 3 h and 6 h: the
        # idle 16 are shared by shares (rule 2 applies to the fill too): 8 / 8. 9 h: A 48 +
        # 24 + 24 = 96, B 48 unallocated; nothing allocated. Greedy hands all idle GPUs to
        # the first name (A) every time: B never runs while A has work.
        "idle-gpus-are-shared-by-shares-among-two-projects-unallocated-work-and-neither-"
        "evicts-the-others",
        _c16,
        Want(unallocated={"A": 96.0, "B": 48.0}, delivered={"A": 0.0, "B": 0.0},
             held=(3, {"A": 8, "B": 8}))),
    Case(
        # 1.5 h: a1 is past its protection; B (usage 0) ranks first and is below its floor (4)
        # with its debug job: the scheme stops a1 for it (rule 1: B's work comes first; rule
        # 4: a1 runs past its protection only while it ranks high enough; the published
        # result: debug p90 wait 2 h -> 30 s). b_dbg 1.5 -> 1.667 h; a1 (at a checkpoint:
        # nothing lost) waits for the next decision, 2 h: a1 back 2 -> 6 h. Greedy does this.
        "a-debug-job-of-a-project-below-its-share-starts-at-the-first-decision-by-stopping-a-"
        "larger-job-past-its-protection",
        _c18,
        Want(ivs={"a1": [(0, 1.5), (2, 6)], "b_dbg": [(1.5, 1.5 + 1 / 6)]},
             delivered={"A": 8 * 5.5, "B": 1 / 6}),
        Want(ivs={"a1": [(0, 1.5), (2, 6)], "b_dbg": [(1.5, 1.5 + 1 / 6)]},
             delivered={"A": 8 * 5.5, "B": 1 / 6}),
        fault="optalloc/model/objective/impact.py:181-183 tier_weights: a floor GPU is worth "
              "1 + RANK_TILT x its place (x 1 + its debt), so A's 8-GPU job (4 of A's floor "
              "GPUs, weight 1; A used 12 GPU-h) outweighs B's 1-GPU debug job (1 floor GPU, "
              "weight 2; B used 0, ranked first): a1 keeps the node and b_dbg waits 1.25 -> "
              "6.5 h (5.25 h; a 24-h run) until B's debt (1 GPU-h owed an hour of a 4-GPU "
              "share) lifts it past 4; greedy starts it at 1.5 h (rules 1 and 4; the README's "
              "'Left out: a floor larger than the tilt allows still comes first')"),
    Case(
        # 0: a_p on n1; 0.5 h: b on n2 (protected all run). 0.75 h: n1 drains. 1.5 h: d1..d3
        # wait: n1's 4 free GPUs take nothing new (rule 5), n2 is protected. 2 h: a_p's
        # protection ends: it leaves n1 (at a checkpoint) and waits (nowhere to go); n1 empty.
        # 3 h: n1 up: A's waiting jobs in A's order, a_p (submitted 0) then d1..d3, all fit n1
        # (4 + 3): a_p 3 -> 6 h, d_i 3 -> 3.167 h. A 8 + 12 + 0.5 = 20.5, B 44 GPU-h.
        "a-draining-nodes-free-gpus-take-no-new-work-even-debug-jobs-and-the-node-back-up-"
        "serves-the-waiting-team-in-order",
        _c19,
        Want(ivs={"a_p": [(0, 2), (3, 6)], "b": [(0.5, 6)],
                  **{f"d{i}": [(3, 3 + 1 / 6)] for i in (1, 2, 3)}},
             delivered={"A": 20.5, "B": 44.0}),
        Want(ivs={"a_p": [(0, 2), (3, 6)], "b": [(0.5, 6)],
                  **{f"d{i}": [(3, 3 + 1 / 6)] for i in (1, 2, 3)}},
             delivered={"A": 20.5, "B": 44.0})),
    Case(
        # 0: a1 starts; 0.5 h: a2. 2 h: B (usage 0) ranks first, wants its floor 4; A must
        # give 4. The team's order (rule 3: priority, then submit time) ranks a2 last (it was
        # submitted later): a2 yields, although it loses 1800 s x 4 GPUs since its hourly
        # checkpoint and a1 would lose nothing; the work lost comes after the teams' order.
        # b 2 -> 5 h; a2 resumes 5 -> 6 h. A 4 x 6 + 4 x 1.5 + 4 = 34, B 12 GPU-h.
        "a-team-that-must-give-up-gpus-stops-its-latest-submitted-job-even-where-an-earlier-"
        "one-would-lose-less-work",
        _c20,
        Want(ivs={"a1": [(0, 6)], "a2": [(0.5, 2), (5, 6)], "b": [(2, 5)]},
             delivered={"A": 34.0, "B": 12.0}),
        Want(ivs={"a1": [(0, 6)], "a2": [(0.5, 2), (5, 6)], "b": [(2, 5)]},
             delivered={"A": 34.0, "B": 12.0})),
    Case(
        # a_nr is protected for its whole 3 h: b (B ranks first from 0.5 h) waits, nothing is
        # preempted, a_nr completes at 3 h and b runs 3 -> 4 h. A 24, B 8 GPU-h.
        "a-non-resumable-job-protected-for-its-whole-run-completes-and-the-better-ranked-job-"
        "starts-at-its-end",
        _c21,
        Want(ivs={"a_nr": [(0, 3)], "b": [(3, 4)]}, delivered={"A": 24.0, "B": 8.0},
             preempted={"a_nr": 0}),
        Want(ivs={"a_nr": [(0, 3)], "b": [(3, 4)]}, delivered={"A": 24.0, "B": 8.0},
             preempted={"a_nr": 0})),
    Case(
        # Programs entitled 8 each. a1 idle: P1's 8 all go to a2 (its sibling first, rule 2);
        # c idle: P3's 8 are split between P1 and P2, tied at usage 0 and staying tied (12 h /
        # 192 each): a2 12, b 12 at every decision from the first. 6 h: 72 / 72. Greedy hands
        # all 24 to one program each hour (P1 first on ties by name): the same 72 / 72.
        "an-idle-projects-share-stays-in-its-program-and-an-idle-programs-share-is-split-"
        "between-tied-programs-from-the-first-epoch",
        _c22,
        Want(delivered={"a1": 0.0, "a2": 72.0, "b": 72.0, "c": 0.0},
             held=(0, {"a2": 12, "b": 12})),
        Want(delivered={"a1": 0.0, "a2": 72.0, "b": 72.0, "c": 0.0})),
]


# ----------------------------------------------------------------------------- running

class Judged:
    """ilp in the simulation; at each decision greedy decides on the same snapshot, and
    ilp's plan is checked against the s54 judge's invariants, rules and dominance."""

    def __init__(self, rules: bool):
        self.inner = make_policy("ilp")
        self.name = "ilp"
        self.rules = rules
        self.seen: list = []
        self.greedy = GreedyScheduler()

    def decide(self, snap):
        plan = self.inner.decide(snap)
        self.seen.append((snap, plan))
        cfg = SimpleNamespace(nodes=snap.nodes, jobs=snap.jobs, gpu_types=snap.gpu_types)
        check_invariants(cfg, snap, plan)
        if self.rules:  # with reservations off: a plan may hold GPUs idle only for a named gang
            check_scheme_rules(cfg, plan)
            g = self.greedy.decide(snap)
            assert not dominates(counts(snap, g), counts(snap, plan)), \
                f"t={snap.now / H:g} h: greedy's plan dominates ilp's"
        return plan


class Recorded:
    def __init__(self, name):
        self.inner, self.name, self.seen = make_policy(name), name, []

    def decide(self, snap):
        plan = self.inner.decide(snap)
        self.seen.append((snap, plan))
        return plan


@functools.lru_cache(maxsize=None)
def run(name: str, policy: str):
    (case,) = [c for c in CASES if c.name == name]
    s = case.build()
    w = Judged(case.rules) if policy == "ilp" else Recorded(policy)
    res = simulate(s, w, check=True)
    m = compute_metrics(res)
    _always(s, res, m, w)
    return s, res, m, w


def _held(snap, plan, by_type=False):
    proj = {j.id: j.project for j in snap.jobs}
    out: dict = {}
    for p in plan.placements:
        k = (proj[p.job_id], p.gpu_type) if by_type else proj[p.job_id]
        out[k] = out.get(k, 0) + sum(len(a.gpus) for a in p.nodes)
    return out


def _window(res, project, t0, t1, allocated=True):
    return sum(iv.gpus * (min(iv.end, t1) - max(iv.start, t0)) for iv in res.intervals
               if iv.project == project and iv.allocated == allocated
               and iv.end > t0 and iv.start < t1) / H


def check(want: Want, res, m, w) -> None:
    got = {j: [(s / H, e / H) for s, e in _ivs(res, j)] for j in want.ivs}
    assert got == {j: [pytest.approx(iv, abs=1e-6) for iv in v] for j, v in want.ivs.items()}
    recs = {r.job_id: r for r in res.jobs}
    assert {j: recs[j].first_start for j in want.never} == {j: None for j in want.never}
    if want.preempted:
        assert {j: recs[j].preemptions for j in want.preempted} == want.preempted
    t0, t1 = res.start, res.end
    if want.delivered:
        d = {p: _window(res, p, t0, t1) for p in want.delivered}
        assert d == {p: pytest.approx(v, abs=want.tol) for p, v in want.delivered.items()}
    if want.unallocated:
        u = {p: _window(res, p, t0, t1, allocated=False) for p in want.unallocated}
        assert u == {p: pytest.approx(v, abs=want.tol) for p, v in want.unallocated.items()}
    for spec, by_type in ((want.held, False), (want.held_type, True)):
        if spec is None:
            continue
        frm, held = spec
        seen = [(s.now / H, _held(s, p, by_type)) for s, p in w.seen if s.now >= frm * H]
        assert seen, "no decision to check"
        assert [(t, {k: h.get(k, 0) for k in held}) for t, h in seen] == \
            [(t, held) for t, _ in seen]


PARAMS = []
for c in CASES:
    for pol, want in (("ilp", c.ilp), ("greedy", c.greedy)):
        if want is None:
            continue
        marks = [pytest.mark.xfail(strict=True, reason=c.fault)] if c.fault and pol == "ilp" else []
        PARAMS.append(pytest.param(c.name, pol, id=f"{c.name}[{pol}]", marks=marks))


@pytest.mark.parametrize("name, policy", PARAMS)
def test_the_hand_worked_outcome_over_several_epochs(name, policy):
    (case,) = [c for c in CASES if c.name == name]
    want = case.ilp if policy == "ilp" else case.greedy
    _, res, m, w = run(name, policy)
    check(want, res, m, w)
