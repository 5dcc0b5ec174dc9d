"""An outside judge (stop 59) of the TIME-SLICING CONTRACT and the LEDGER OVER TIME: tiny
clusters (1-2 nodes of 8 GPUs) run for several simulated hours through the simulator (the
engine of optalloc/sim, as tests/test_multi_epoch_judge_s55.py drives it), and one case
through the cron turn with a state DB (a cancellation between epochs). Every outcome below
was worked out by hand from README "How an epoch decides" (rules 1-5: floors, Fair-Tree
order, the contract, unallocated work, drains) and DESIGN.md section 8 BEFORE it was run;
the working is in the comment of each test.

Common setup unless a test says: nodes n1, n2 of 8 h100 GPUs, one billing weight, epoch
1800 s, checkpoints every 600 s, grace 0, lookback 24 h, window usage, no early solve (a
decision comes at an epoch tick when something changed, or hourly while jobs wait; never
while a notice runs), org root -> the named projects with equal shares. Times in hours.

Every run also keeps `_always` of the s51 judge (no job runs twice at once, none lost, a
finished resumable job ran its work plus what it lost, delivered = its allocated intervals,
unallocated never delivered, the ledger charged what the cluster ran, no plan preempts or
moves a job inside its protection) and `check=True` (capacity, gangs whole, nothing on a
down node).
"""

from __future__ import annotations

import pytest

from optalloc.clock import SimClock
from optalloc.cycle import run_cycle
from optalloc.org import OrgTree
from optalloc.sim.engine import simulate
from optalloc.sim.metrics import compute_metrics
from optalloc.sim.policies import make_policy
from optalloc.sim.runner import SimulatedRunner
from optalloc.sim.scenario import Scenario
from optalloc.sim.scenario.spec import NodeEvent
from optalloc.state import StateStore
from optalloc.types import (Config, GpuType, Job, Node, NodeState, OrgNode, Policy,
                            SolverSettings, UsageMode)
from tests.test_sim_judge_cases_s51 import _always, _ivs

H = 3600.0
POLICIES = ("ilp", "greedy")
PFS, PU, PND, MOVED = ("PreemptedForFairShare", "PreemptedUnallocated", "PreemptedNodeDrain",
                       "Moved")
WFC, OVER, UY = "WaitingForCapacity", "OverShare", "UnallocatedYields"


# ----------------------------------------------------------------------------- building

def sc(jobs, *, nodes=2, org=("A", "B"), events=(), hours=6.0, early=False, **policy):
    pol = {"grace_s": 0.0, "epoch_s": 1800.0, "checkpoint_interval_s": 600.0,
           "lookback_s": 24 * H, **policy}
    if isinstance(org, tuple):
        org = OrgNode("root", children=tuple(
            OrgNode(n[0], share=n[1]) if isinstance(n, tuple) else OrgNode(n) for n in org))
    cfg = Config(gpu_types=(GpuType("h100"),),
                 nodes=tuple(Node(f"n{i + 1}", "h100", 8) for i in range(nodes)),
                 org=org, policy=Policy(**pol))
    return Scenario("multi-epoch-judge-s59", cfg, tuple(jobs), duration_s=hours * H,
                    early_solve=early, node_events=tuple(events))


def job(jid, project, gpus, *, at=0.0, min_h=1.0, hours=10.0, **kw) -> Job:
    return Job(jid, project, gpus, min_runtime_s=min_h * H, duration_s=hours * H,
               submit_time=at * H, **kw)


class Rec:
    """The policy, keeping every (snapshot, plan) it decided."""

    def __init__(self, name):
        self.inner, self.name, self.seen = make_policy(name), name, []

    def decide(self, snap):
        plan = self.inner.decide(snap)
        self.seen.append((snap, plan))
        return plan


def run(s: Scenario, policy: str):
    w = Rec(policy)
    res = simulate(s, w, check=True)
    m = compute_metrics(res)
    _always(s, res, m, w)
    return res, m, w


def ivs(res, *jids):
    return {j: [(round(a / H, 6), round(b / H, 6)) for a, b in sorted(_ivs(res, j))] for j in jids}


def hrs(*pairs):
    return [(round(a, 6), round(b, 6)) for a, b in pairs]


def gpu_h(res, project, allocated=True):
    return sum(iv.gpus * (iv.end - iv.start) for iv in res.intervals
               if iv.project == project and iv.allocated == allocated) / H


def rec(res, jid):
    return next(r for r in res.jobs if r.job_id == jid)


def at(w, t_h):
    """The (snapshot, plan) of the decision at t_h hours (exactly one)."""
    got = [(s, p) for s, p in w.seen if abs(s.now - t_h * H) < 1e-6]
    assert len(got) == 1, (t_h, [s.now / H for s, _ in w.seen])
    return got[0]


def outcome(plan, snap):
    """runs {job: sorted node names} of jobs that START or MOVE in this plan; preempted {job:
    (code, needed_by)}; pending {job: code}; messages by job."""
    running = {j.id: j.placement for j in snap.jobs if j.running}
    starts = {p.job_id: tuple(sorted(p.node_names)) for p in plan.placements
              if running.get(p.job_id) != p}
    pre = {p.job_id: (p.code.value, tuple(sorted(p.needed_by))) for p in plan.preemptions}
    pend = {r.job_id: r.code.value for r in plan.pending}
    msg = {**{r.job_id: r.message for r in plan.pending},
           **{p.job_id: p.message for p in plan.preemptions}}
    return starts, pre, pend, msg


def _held(snap, plan):
    """GPUs each project holds after a plan."""
    proj = {j.id: j.project for j in snap.jobs}
    out: dict = {}
    for p in plan.placements:
        out[proj[p.job_id]] = out.get(proj[p.job_id], 0) + p.gpus
    return out


# ----------------------------------------------------------------------------- 1. protection, notice

def _staggered():
    # 2 x 8, A = B, grace 300 s. A: a0..a7 (1 GPU, protected 2 h, 10 h of work) at 0 and
    # a8..a15 (the same) at 1 h; B: b0..b7 (1 GPU, protected 1 h, 10 h) at 1.75 h.
    jobs = [job(f"a{i}", "A", 1, min_h=2) for i in range(8)]
    jobs += [job(f"a{i}", "A", 1, at=1, min_h=2) for i in range(8, 16)]
    jobs += [job(f"b{i}", "B", 1, at=1.75) for i in range(8)]
    return sc(jobs, grace_s=300.0, hours=6)


@pytest.mark.parametrize("policy", POLICIES)
def test_only_the_batch_past_its_protection_yields_with_notice_and_the_protected_batch_runs_on(
        policy):
    # 0: a0..a7 fill n1 (A alone). 1 h: a8..a15 take n2 (A alone: every GPU is A's; no
    # spare idles). 1.75 h: B's eight jobs arrive; the 2 h tick decides (also a0..a7's
    # protection end): B (usage 0) ranks first and is below its floor (8 of 16). Only a0..a7
    # are past protection (a8..a15 protected to 3 h): all eight get a notice of 300 s
    # (PreemptedForFairShare, for B's jobs), keep running and are charged to 2 h + 300 s, and
    # b0..b7 start then. From then A holds 8 (a8..a15) = its floor = its target, B 8; no
    # spare (both want all 16), so nothing changes to 6 h (a0..a7 wait, OverShare: A holds
    # its target). a0..a7 stop 7500 s after their start, 300 s past their checkpoint at
    # 7200: 300 GPU-s lost each. A 8 x (2 + 1/12) + 8 x 5 = 56.667, B 8 x (4 - 1/12) =
    # 31.333 GPU-h; 8 preemptions, all at 2 h.
    res, m, w = run(_staggered(), policy)
    g = 2 + 300 / H
    first, second, bs = ([f"a{i}" for i in range(8)], [f"a{i}" for i in range(8, 16)],
                         [f"b{i}" for i in range(8)])
    assert ivs(res, *first, *second, *bs) == {
        **{j: hrs((0, g)) for j in first}, **{j: hrs((1, 6)) for j in second},
        **{j: hrs((g, 6)) for j in bs}}
    assert gpu_h(res, "A") == pytest.approx(8 * g + 40)
    assert gpu_h(res, "B") == pytest.approx(8 * (6 - g))
    assert {j: (rec(res, j).preemptions, rec(res, j).lost_gpu_s) for j in first + second} == {
        **{j: (1, 300.0) for j in first}, **{j: (0, 0.0) for j in second}}
    snap, plan = at(w, 2)
    starts, pre, pend, msg = outcome(plan, snap)
    assert set(pre) == set(first)
    assert {c for c, _ in pre.values()} == {PFS}
    assert set().union(*(set(nb) for _, nb in pre.values())) <= set(bs)
    assert {p.grace_s for p in plan.preemptions} == {300.0}
    assert set(starts) == set(bs)
    assert pend == {}
    if policy == "greedy":  # greedy's own reason words are not the scheme's; ilp's are
        return
    # each notice says the job is past its protection, what A keeps and who takes the GPUs
    for j in first:
        assert msg[j].startswith("past its protection; A holds 8 h100 GPUs, its fair-share "
                                 "target this epoch is 8 (floor 8"), msg[j]
        assert "its GPUs go to B" in msg[j], msg[j]
    # after the notices, a0..a7 wait behind A's target
    snap, plan = at(w, 3)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({}, {}, {j: OVER for j in first})


# ----------------------------------------------------------------------------- 2. zero share

def _zero_share():
    # 2 x 8, org A, B, Z (Z's share 0: it has no share of any type). Z: z0 (8 GPUs, declares
    # 2 h of protection, 10 h) at 0 and z1 (the same) at 0.1 h; A's a (8, protected 1 h, 2 h
    # of work) at 0.75 h; B's b (8, protected 1 h, 1 h) at 1.25 h.
    jobs = [job("z0", "Z", 8, min_h=2), job("z1", "Z", 8, at=0.1, min_h=2),
            job("a", "A", 8, at=0.75, hours=2), job("b", "B", 8, at=1.25, hours=1)]
    return sc(jobs, org=("A", "B", ("Z", 0.0)), hours=5)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_zero_share_projects_work_is_unallocated_unprotected_uncharged_and_comes_back_on_idle_gpus(
        policy):
    # Z has no share anywhere, so all its work is unallocated (README rule 4: "work on a type
    # where its project has no share"), whatever min_runtime it declares: never protected,
    # never charged, yields to allocated work at once. 0: z0 on n1. 0.5 h: z1 on n2. 1 h: a
    # arrives (A usage 0): it needs a whole node; both are Z's unallocated work, z1 started
    # half an hour ago and "protected" 2 h by its declaration: it is evicted all the same,
    # the one Z's own order ranks last (z1, submitted later; PreemptedUnallocated for a). 1.5
    # h: b evicts z0 likewise (a is protected). 2.5 h: b ends, z0 back on n1 (idle). 3 h: a
    # ends, z1 back on n2. Allocated A 16, B 8, Z 0; unallocated Z 8 x (1.5 + 0.5 + 2.5 + 2)
    # = 52 GPU-h; Z's usage stays 0.
    res, m, w = run(_zero_share(), policy)
    assert ivs(res, "z0", "z1", "a", "b") == {
        "z0": hrs((0, 1.5), (2.5, 5)), "z1": hrs((0.5, 1), (3, 5)),
        "a": hrs((1, 3)), "b": hrs((1.5, 2.5))}
    assert (gpu_h(res, "A"), gpu_h(res, "B"), gpu_h(res, "Z")) == (16.0, 8.0, 0.0)
    assert gpu_h(res, "Z", allocated=False) == pytest.approx(52.0)
    assert m["projects"]["Z"]["delivered_gpu_h"] == 0.0
    snap, plan = at(w, 0.5)
    assert [p.allocated for p in plan.placements if p.job_id in ("z0", "z1")] == [False, False]
    snap, plan = at(w, 1)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({"a": ("n2",)}, {"z1": (PU, ("a",))}, {})
    snap, plan = at(w, 1.5)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({"b": ("n1",)}, {"z0": (PU, ("b",))}, {"z1": UY})
    if policy == "ilp":  # the waiting job is told why it is unallocated work
        assert msg["z1"].startswith("its project has no share of h100"), msg["z1"]
        assert msg["z0"].startswith("unallocated work yields to allocated demand"), msg["z0"]


# ----------------------------------------------------------------------------- 3. usage over time

def _morning(**policy):
    # 1 x 8, A = B. A's a (8, 30 h of work) at 0; B idle until 4 h, then b (8, 30 h).
    return sc([job("a", "A", 8, hours=30, min_h=policy.pop("min_h", 1.0)),
               job("b", "B", 8, at=4, hours=30, min_h=policy.pop("min_hb", 1.0))],
              nodes=1, hours=24, **policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_in_decay_mode_the_project_served_all_morning_gives_way_at_once_and_then_turns_go_hourly(
        policy):
    # Decay usage, half-life 1 h, protections 1 h. A ran alone 0-4 h: decayed usage
    # 8 (1 - 2^-4) / ln 2 = 10.82 GPU-h at 4 h; B 0. 4 h: B ranks first: b takes the node (a
    # is long past its protection; equal floors 4 / 4, whole 8-GPU jobs: the better rank
    # wins). 5 h: A 10.82 / 2 = 5.41 < B 8 (1 - 1/2) / ln 2 = 5.77: A first, a takes it back
    # (in window mode A's 32 GPU-h would keep it with B until 8 h). Each hour the one that ran
    # has u/2 + 5.77 (7.2-8.5) and the other u/2 (2.9-4.2): the turns go hourly, b at 4, 6,
    # ..., 22 h, a at 5, 7, ..., 23 h. (The published debt agrees at every decision: the
    # shortfalls are equal whenever B ranks first.) A 32 + 10 x 8 = 112, B 80 GPU-h; a
    # stopped 10 times (4, 6, ..., 22 h), b 10 (5, 7, ..., 23 h); nothing lost (hourly stops
    # at 600 s checkpoints).
    res, m, w = run(_morning(usage_mode=UsageMode.DECAY, half_life_s=H), policy)
    assert ivs(res, "a", "b") == {
        "a": hrs((0, 4), *((k, k + 1) for k in range(5, 24, 2))),
        "b": hrs(*((k, k + 1) for k in range(4, 24, 2)))}
    assert (gpu_h(res, "A"), gpu_h(res, "B")) == (112.0, 80.0)
    assert (rec(res, "a").preemptions, rec(res, "b").preemptions) == (10, 10)
    snap, plan = at(w, 5)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({"a": ("n1",)}, {"b": (PFS, ("a",))}, {})


@pytest.mark.parametrize("policy", POLICIES)
def test_with_a_three_hour_window_usage_older_than_the_window_stops_counting_and_turns_go_two_hourly(
        policy):
    # Window usage, lookback 3 h, protections 2 h (a's too). 0-4 h A alone. 4 h: B (0) first:
    # b 4 -> 6 (protected). 6 h: window [3, 6]: A 8 (3-4), B 16: A first, a 6 -> 8. 8 h:
    # [5, 8]: A 16, B 8 (5-6): b. 10 h: [7, 10]: A 8, B 16: a. So two-hour turns: b at 4, 8,
    # 12, 16, 20; a at 6, 10, 14, 18, 22 (the hourly refreshes in between find the runner
    # protected). The published debt over the same 3-h window (net of surpluses) never
    # disagrees with the ratio at a decision. A 32 + 5 x 16 = 112, B 80 GPU-h.
    res, m, w = run(_morning(lookback_s=3 * H, min_h=2.0, min_hb=2.0), policy)
    assert ivs(res, "a", "b") == {
        "a": hrs((0, 4), *((k, k + 2) for k in range(6, 24, 4))),
        "b": hrs(*((k, k + 2) for k in range(4, 24, 4)))}
    assert (gpu_h(res, "A"), gpu_h(res, "B")) == (112.0, 80.0)


# ----------------------------------------------------------------------------- 4. node down

def _restart_protection():
    # 2 x 8, A = B = C. a (A, 8, protected 2 h, 20 h) at 0; b (B, 8, protected 2 h, 20 h) at
    # 0.5 h; c (C, 8, protected 1 h, 1 h of work) at 2.25 h. n1 goes down at 0.75 h and is
    # up again at 1 h.
    jobs = [job("a", "A", 8, min_h=2, hours=20), job("b", "B", 8, at=0.5, min_h=2, hours=20),
            job("c", "C", 8, at=2.25, hours=1)]
    return sc(jobs, org=("A", "B", "C"), hours=6,
              events=(NodeEvent(0.75 * H, ("n1",), NodeState.DOWN),
                      NodeEvent(1 * H, ("n1",), NodeState.UP)))


@pytest.mark.parametrize("policy", POLICIES)
def test_a_job_restarted_after_its_node_failed_is_protected_from_the_restart_not_its_first_start(
        policy):
    # 0: a on n1. 0.5 h: b on n2 (protected to 2.5 h). 0.75 h: n1 down: a dies (2700 s in,
    # 300 s past its checkpoint: 2400 GPU-s lost), requeued. 1 h: n1 up, a restarts there,
    # protected to 3 h (its first protection would have ended at 2 h). 2.5 h: c (C, usage 0)
    # ranks first, below its floor (16/3); A (usage 6 + 12 = 18) ranks last, B (16) second;
    # but a is inside its new protection, so c takes b's node, b being past its own (2.5 h):
    # b PreemptedForFairShare for c. 3 h: a's protection ends; A 22 > B 16: b (B below its
    # floor) takes n1, a yields (PFS for b; at its 7200-s checkpoint, nothing lost). 3.5 h: c
    # ends; a restarts on n2. Nothing waits after, so no more decisions. A 6 + 16 + 20 = 42,
    # B 16 + 24 = 40, C 8 GPU-h; a stopped twice (the failure counts), b once.
    res, m, w = run(_restart_protection(), policy)
    assert ivs(res, "a", "b", "c") == {"a": hrs((0, 0.75), (1, 3), (3.5, 6)),
                                       "b": hrs((0.5, 2.5), (3, 6)), "c": hrs((2.5, 3.5))}
    assert (gpu_h(res, "A"), gpu_h(res, "B"), gpu_h(res, "C")) == (42.0, 40.0, 8.0)
    assert [(rec(res, j).preemptions, rec(res, j).lost_gpu_s) for j in "abc"] == [
        (2, 2400.0), (1, 0.0), (0, 0.0)]
    snap, plan = at(w, 2.5)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({"c": ("n2",)}, {"b": (PFS, ("c",))}, {})
    if policy == "ilp":  # the lower ratio that decided it (B 16 GPU-h of 127.3 entitled)
        assert msg["b"].startswith("past its protection"), msg["b"]
        assert "(C 0.00 against B 0.13)" in msg["b"], msg["b"]
    snap, plan = at(w, 3)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({"b": ("n1",)}, {"a": (PFS, ("b",))}, {})
    if policy == "ilp":  # A 22 GPU-h, B 16 (entitled 127.3 each: the window less n1's 15 min)
        assert "(B 0.13 against A 0.17)" in msg["a"], msg["a"]


def _down_with_fill():
    # 2 x 8, A = B. a (A, 8, protected 2 h, 10 h) at 0; u (B, 8, unallocated, 10 h) at 0.
    # n1 goes down at 1.25 h, up at 2.25 h.
    return sc([job("a", "A", 8, min_h=2), job("u", "B", 8, min_h=0)], hours=5,
              events=(NodeEvent(1.25 * H, ("n1",), NodeState.DOWN),
                      NodeEvent(2.25 * H, ("n1",), NodeState.UP)))


@pytest.mark.parametrize("policy", POLICIES)
def test_a_job_killed_by_a_node_failure_restarts_next_tick_in_place_of_unallocated_work(policy):
    # 0: a on n1 (first empty node), u fills n2. 1.25 h: n1 down: a dies inside its
    # protection (4500 s in, 300 s past its checkpoint: 2400 GPU-s lost), requeued. 1.5 h: a
    # (allocated, A usage 10) needs a whole node; n2 holds only unallocated work: u yields
    # at once (PreemptedUnallocated for a). a restarts on n2 (protected again to 3.5 h).
    # 2 h: u waits (UnallocatedYields: the only up node is a's). 2.5 h (n1 up at 2.25 h): u
    # on n1. A 8 x (1.25 + 3.5) = 38 allocated; B 8 x (1.5 + 2.5) = 32 unallocated, 0
    # allocated; a's charge ends at the failure, exactly.
    res, m, w = run(_down_with_fill(), policy)
    assert ivs(res, "a", "u") == {"a": hrs((0, 1.25), (1.5, 5)), "u": hrs((0, 1.5), (2.5, 5))}
    assert (gpu_h(res, "A"), gpu_h(res, "B"), gpu_h(res, "B", allocated=False)) == (38.0, 0.0, 32.0)
    assert (rec(res, "a").preemptions, rec(res, "a").lost_gpu_s) == (1, 2400.0)
    snap, plan = at(w, 1.5)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({"a": ("n2",)}, {"u": (PU, ("a",))}, {})
    snap, plan = at(w, 2)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({}, {}, {"u": UY})
    snap, plan = at(w, 2.5)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({"u": ("n1",)}, {}, {})


# ----------------------------------------------------------------------------- 5. drain

def _drain_fill():
    # 2 x 8, org A, B, U; grace 120 s. a1 (A, 4, protected 2 h, 5 h of work) and u (U, 4,
    # unallocated, 10 h) at 0; b (B, 4, protected 1 h, 2 h) at 2.25 h. n1 drains at 1 h and
    # is up again at 3 h.
    jobs = [job("a1", "A", 4, min_h=2, hours=5), job("u", "U", 4, min_h=0),
            job("b", "B", 4, at=2.25, hours=2)]
    return sc(jobs, org=("A", "B", "U"), grace_s=120.0, hours=6,
              events=(NodeEvent(1 * H, ("n1",), NodeState.DRAIN),
                      NodeEvent(3 * H, ("n1",), NodeState.UP)))


@pytest.mark.parametrize("policy", ["ilp"])
def test_a_drain_moves_unallocated_work_at_once_the_protected_job_at_its_end_and_both_keep_running(
        policy):
    # 0: a1 on n1 (first empty node) and u beside it (best fit: the tightest node). 1 h: n1
    # drains: u (unallocated) leaves at once with notice (120 s) and, worth what new
    # unallocated work is, restarts on n2's idle GPUs in the same plan (Moved); a1 stays
    # (protected to 2 h): the drain says a1 stays, u leaves, empty at 2 h + 120 s. 2 h: a1
    # leaves with notice and restarts on n2's idle 4 (Moved; 7320 s in, 120 s past its
    # checkpoint: 480 GPU-s lost; 3 h of work left, ends 5 h + 120 s). 2.5 h: b (allocated)
    # finds n1 draining and n2 full: it evicts u (unallocated, PreemptedUnallocated for b),
    # starts at 2.5 h + 120 s, ends 2 h later; n1 is empty: ready. 3 h: n1 up: u restarts
    # there. A 4 x (5 + 1/30) GPU-h, B 8, U 0 allocated and 4 x ((2.5 + 1/30) + 3) = 22.133
    # unallocated.
    res, m, w = run(_drain_fill(), policy)
    g = 120 / H
    assert ivs(res, "a1", "u", "b") == {"a1": hrs((0, 2 + g), (2 + g, 5 + g)),
                                        "u": hrs((0, 1 + g), (1 + g, 2.5 + g), (3, 6)),
                                        "b": hrs((2.5 + g, 4.5 + g))}
    assert gpu_h(res, "A") == pytest.approx(4 * (5 + g))
    assert (gpu_h(res, "B"), gpu_h(res, "U")) == (pytest.approx(8.0), 0.0)
    assert gpu_h(res, "U", allocated=False) == pytest.approx(4 * (2.5 + g + 3))
    assert [(rec(res, j).completed, rec(res, j).lost_gpu_s) for j in ("a1", "b")] == [
        (True, 480.0), (True, 0.0)]
    snap, plan = at(w, 0)
    assert {p.job_id: p.node_names for p in plan.placements} == {"a1": ("n1",), "u": ("n1",)}
    snap, plan = at(w, 1)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({"u": ("n2",)}, {"u": (MOVED, ())}, {})
    (d,) = plan.drains
    assert (d.node, d.staying, d.leaving, d.empty_at, d.ready) == ("n1", ("a1",), ("u",),
                                                                   2 * H + 120, False)
    snap, plan = at(w, 2)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({"a1": ("n2",)}, {"a1": (MOVED, ())}, {})
    assert "draining" in msg["a1"] and "n1" in msg["a1"], msg["a1"]
    snap, plan = at(w, 2.5)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({"b": ("n2",)}, {"u": (PU, ("b",))}, {})
    assert [(d.node, d.ready) for d in plan.drains] == [("n1", True)]


# ----------------------------------------------------------------------------- 6. unallocated

def _own_fill():
    # 2 x 8, A = B. A: a1 (8, protected 1 h, 10 h) and u1, u2 (4 GPUs each, unallocated,
    # 10 h) at 0; B: b (8, protected 1 h, 3 h of work) at 1.75 h.
    jobs = [job("a1", "A", 8), job("u1", "A", 4, min_h=0), job("u2", "A", 4, min_h=0),
            job("b", "B", 8, at=1.75, hours=3)]
    return sc(jobs, hours=7)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_teams_unallocated_work_yields_before_its_allocated_job_past_protection_and_returns_after(
        policy):
    # 0: a1 on n1, u1 + u2 fill n2 (nothing else wants it). 2 h: B (usage 0) ranks first and
    # wants its floor 8: the GPUs come from A's unallocated work first (rule 4: it yields to
    # any allocated job), not from a1, though a1 is past its protection (A keeps its floor
    # 8 with it): u1 and u2 PreemptedUnallocated for b; b 2 -> 5 h on n2. 3 h, 4 h: u1, u2
    # wait (UnallocatedYields). 5 h: b ends; u1, u2 back on n2. A charged 8 x 7 = 56 (its
    # unallocated 8 x 2 + 8 x 2 = 32 never), B 24.
    res, m, w = run(_own_fill(), policy)
    assert ivs(res, "a1", "u1", "u2", "b") == {
        "a1": hrs((0, 7)), "u1": hrs((0, 2), (5, 7)), "u2": hrs((0, 2), (5, 7)), "b": hrs((2, 5))}
    assert (gpu_h(res, "A"), gpu_h(res, "B"), gpu_h(res, "A", allocated=False)) == (56.0, 24.0, 32.0)
    snap, plan = at(w, 2)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({"b": ("n2",)}, {"u1": (PU, ("b",)), "u2": (PU, ("b",))}, {})
    for t in (3, 4):
        snap, plan = at(w, t)
        assert outcome(plan, snap)[:3] == ({}, {}, {"u1": UY, "u2": UY})


# ----------------------------------------------------------------------------- 7. lost work

def _lost_work():
    # 1 x 8, A = B. a (A, 8, protected 1.5 h, 4 h of work, checkpoints hourly) at 0; b (B,
    # 8, protected 1 h, 1 h) at 0.25 h.
    return sc([job("a", "A", 8, min_h=1.5, hours=4, checkpoint_interval_s=H),
               job("b", "B", 8, at=0.25, hours=1)], nodes=1, hours=7)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_job_stopped_between_checkpoints_is_charged_the_lost_half_hour_and_ends_that_much_later(
        policy):
    # 0: a starts. 0.5 h: b waits: a is protected to 1.5 h (WaitingForCapacity: B is below
    # its floor; the message names the protection's end, t=5400). 1.5 h: a is past it, B
    # (usage 0) first: b runs 1.5 -> 2.5 h; a stops 30 min after its 1-h checkpoint: 0.5 h x
    # 8 = 14400 GPU-s lost. 2.5 h: a resumes from the checkpoint: 3 h of work left, it ends
    # at 5.5 h. The ledger charges what ran, the lost half hour too: A 8 x (1.5 + 3) = 36,
    # B 8.
    res, m, w = run(_lost_work(), policy)
    assert ivs(res, "a", "b") == {"a": hrs((0, 1.5), (2.5, 5.5)), "b": hrs((1.5, 2.5))}
    r = rec(res, "a")
    assert (r.completed, r.end_time, r.preemptions, r.lost_gpu_s) == (True, 5.5 * H, 1, 14400.0)
    assert (gpu_h(res, "A"), gpu_h(res, "B")) == (36.0, 8.0)
    snap, plan = at(w, 0.5)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({}, {}, {"b": WFC})
    if policy == "ilp":  # greedy's own reason words are not the scheme's
        assert "5400" in msg["b"], msg["b"]


# ----------------------------------------------------------------------------- 8. debug jobs

def _debug_fill():
    # 1 x 8, org A, B, U, V; early solve, grace 60 s. A: a0..a3 (1 GPU, protected 3 h, 10 h)
    # at 0; U: u (3 GPUs, unallocated, 10 h) at 0; V: v (1 GPU, unallocated, 10 h) at 0; B:
    # a debug job d (1 GPU, protected 10 min, 10 min of work) at 1.1 h.
    jobs = [job(f"a{i}", "A", 1, min_h=3) for i in range(4)]
    jobs += [job("u", "U", 3, min_h=0), job("v", "V", 1, min_h=0),
             job("d", "B", 1, at=1.1, min_h=1 / 6, hours=1 / 6)]
    return sc(jobs, nodes=1, org=("A", "B", "U", "V"), early=True, grace_s=60.0, hours=3)


@pytest.mark.parametrize("policy", ["ilp"])
def test_a_debug_job_on_a_full_cluster_evicts_the_smallest_unallocated_job_within_a_notice(policy):
    # 0: A's four protected jobs, u (3) and v (1) fill the node (4 idle GPUs: v wants 1, u
    # 3). 1.1 h: d arrives, decided at once (early solve): no GPU free, A's jobs protected;
    # unallocated work yields, the smallest job that makes room: v (1 GPU), not u (3 GPUs,
    # two of which would idle), PreemptedUnallocated for d, notice 60 s. d runs 1.1 h + 60 s
    # -> + 600 s (wait 60 s). 1.5 h (the next tick after d ended): v restarts on its GPU. A
    # 4 x 3 = 12, B 1/6 allocated; U 9, V (1.1 + 1/60) + 1.5 unallocated.
    res, m, w = run(_debug_fill(), policy)
    t0 = 1.1 + 60 / H
    assert ivs(res, "d", "u", "v") == {"d": hrs((t0, t0 + 1 / 6)), "u": hrs((0, 3)),
                                       "v": hrs((0, t0), (1.5, 3))}
    assert rec(res, "d").first_start - rec(res, "d").submit_time == pytest.approx(60.0)
    assert (gpu_h(res, "A"), gpu_h(res, "B")) == (12.0, pytest.approx(1 / 6))
    assert (gpu_h(res, "U", allocated=False), gpu_h(res, "V", allocated=False)) == (
        9.0, pytest.approx(t0 + 1.5))
    snap, plan = at(w, 1.1)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({"d": ("n1",)}, {"v": (PU, ("d",))}, {})
    assert [p.grace_s for p in plan.preemptions] == [60.0]
    assert msg["v"] == "unallocated work yields to allocated demand (d)"


def _debug_wait():
    # 2 x 8, A = B; early solve, grace 60 s. A: a0..a7 (1 GPU, protected 2 h, 10 h) at 0 and
    # a8..a15 (the same) at 0.75 h; B: debug job d (1 GPU, protected 10 min, 10 min) at 1 h.
    jobs = [job(f"a{i}", "A", 1, min_h=2) for i in range(8)]
    jobs += [job(f"a{i}", "A", 1, at=0.75, min_h=2) for i in range(8, 16)]
    jobs += [job("d", "B", 1, at=1, min_h=1 / 6, hours=1 / 6)]
    return sc(jobs, early=True, grace_s=60.0, hours=4)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_debug_job_waits_out_the_first_protection_end_is_told_when_and_then_takes_one_gpu(
        policy):
    # 0: a0..a7 on n1; 0.75 h: a8..a15 on n2 (A alone). 1 h: d (B usage 0, below its floor)
    # finds every GPU protected (to 2 h and 2.75 h): it waits, WaitingForCapacity, the
    # message naming the first protection end (t=7200); nothing preempted. 2 h: a0..a7 are
    # past protection: one of them (twins) gets 60 s notice for d (PFS), d runs 2 h + 60 s
    # -> + 600 s. 2.5 h: the stopped A job restarts on the GPU d left. A 8 x 0.75 + 16 x 3.25
    # - (2.5 - 2 - 60 / 3600) = 57.517, B 1/6 GPU-h; one preemption.
    res, m, w = run(_debug_wait(), policy)
    t0 = 2 + 60 / H
    assert ivs(res, "d")["d"] == hrs((t0, t0 + 1 / 6))
    snap, plan = at(w, 1)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({}, {}, {"d": WFC})
    if policy == "ilp":  # greedy's own reason words are not the scheme's
        assert "7200" in msg["d"], msg["d"]
    snap, plan = at(w, 2)
    starts, pre, pend, msg = outcome(plan, snap)
    assert set(starts) == {"d"} and pend == {}
    ((victim, (code, nb)),) = pre.items()
    assert (victim in {f"a{i}" for i in range(8)}, code, nb) == (True, PFS, ("d",))
    assert ivs(res, victim)[victim] == hrs((0, t0), (2.5, 4))
    assert gpu_h(res, "A") == pytest.approx(6 + 16 * 3.25 - (0.5 - 60 / H))
    assert gpu_h(res, "B") == pytest.approx(1 / 6)
    assert m["preemptions"]["count"] == 1


# ----------------------------------------------------------------------------- 9. cancellation (cron)

def _cron(tmp_path, jobs, *, end_h, cancels=(), epoch_h=0.5):
    """Epochs every epoch_h through end_h via run_cycle on a state DB (1 x 8 GPUs, A = B,
    grace 0); `cancels`: (at h, job) ended `cancelled` in the DB as `optalloc cancel` does,
    between epochs."""
    cfg = Config(gpu_types=(GpuType("h100"),), nodes=(Node("n1", "h100", 8),),
                 org=OrgNode("root", children=(OrgNode("A"), OrgNode("B"))),
                 policy=Policy(grace_s=0.0, epoch_s=epoch_h * H, lookback_s=24 * H,
                               checkpoint_interval_s=600.0,
                               solver=SolverSettings(backend="highs", time_limit_s=10.0)))
    store = StateStore(tmp_path / "state.db")
    runner = SimulatedRunner(cfg.nodes, grace_s=0.0, checkpoint_interval_s=600.0)
    clock, sched = SimClock(0.0), make_policy("ilp")
    todo = sorted(jobs, key=lambda j: (j.submit_time, j.id))
    cancels = sorted(cancels)
    plans = []
    for k in range(int(round(end_h / epoch_h)) + 1):
        t = k * epoch_h * H
        while cancels and cancels[0][0] * H <= t:
            at_h, jid = cancels.pop(0)
            with store.transaction():
                assert store.job_status(jid) == "queued"
                store.finish_job(jid, "cancelled", at_h * H, "cancelled by optalloc cancel")
        clock.advance_to(t)
        while todo and todo[0].submit_time <= t:
            store.add_job(todo.pop(0))
        res = run_cycle(cfg, store, runner, clock, scheduler=sched)
        plans.append((t, res.plan, res.snapshot))
    tree = OrgTree.build(cfg.org, ["h100"])
    return store, runner, plans, tree, cfg


def test_a_preempted_job_cancelled_while_requeued_never_runs_again_and_its_teammate_takes_its_turn(
        tmp_path):
    # 1 x 8, A = B, epochs every 0.5 h. A: a_hi (8, priority 1, protected 1 h, 5 h of work)
    # and a_lo (8, priority 0, protected 1 h, 1 h) at 0; B: b (8, protected 1 h, 1 h) at
    # 0.5 h. 0: a_hi starts (A's order: priority first), a_lo waits. 0.5 h: b waits (a_hi
    # protected). 1 h: B (usage 0) first: b starts, a_hi is preempted (PFS for b) and
    # requeued. Between 1 h and 1.5 h a_hi is cancelled (queued: allowed): it ends
    # `cancelled` and no later epoch sees it. 2 h: b ends; a_lo (A's only job left) starts,
    # ends at 3 h. Runs: a_hi 0-1 h (once), b 1-2 h, a_lo 2-3 h; charged A 8 + 8 = 16, B 8;
    # the node idles from 3 h.
    jobs = [job("a_hi", "A", 8, hours=5, priority=1), job("a_lo", "A", 8, hours=1),
            job("b", "B", 8, at=0.5, hours=1)]
    store, runner, plans, tree, cfg = _cron(tmp_path, jobs, end_h=4, cancels=[(1.25, "a_hi")])
    runs = sorted((iv.job_id, iv.start / H, iv.end / H) for iv in store.intervals())
    assert runs == [("a_hi", 0.0, 1.0), ("a_lo", 2.0, 3.0), ("b", 1.0, 2.0)]
    assert {j: store.job_status(j) for j in ("a_hi", "a_lo", "b")} == {
        "a_hi": "cancelled", "a_lo": "finished", "b": "finished"}
    by_t = {t / H: (p, s) for t, p, s in plans}
    p1, s1 = by_t[1.0]
    assert {p.job_id: (p.code.value, p.needed_by) for p in p1.preemptions} == {
        "a_hi": (PFS, ("b",))}
    for t in (1.5, 2.0, 2.5, 3.0, 3.5, 4.0):
        assert "a_hi" not in {j.id for j in by_t[t][1].jobs}
    assert {p.job_id for p in by_t[2.0][0].placements} == {"a_lo"}
    led = store.ledger(cfg.gpu_types, tree, cfg.policy)
    use = led.usage(4 * H, [])
    assert {p: float(use[tree.index[p]]) for p in ("A", "B")} == {"A": 16.0, "B": 8.0}
    assert runner.stats["a_hi"].preemptions == 1


# ----------------------------------------------------------------------------- 10. shortfall, twins

def _shortfall():
    # 3 x 8, A = B = C (entitled 8 each). A: a00..a07 (1 GPU, protected 2 h, 10 h) and
    # a08..a23 (1 GPU, protected 3 h, 10 h) at 0; B and C: 16 1-GPU jobs each (protected 1 h,
    # 10 h) at 0.25 h.
    jobs = [job(f"a{i:02d}", "A", 1, min_h=2) for i in range(8)]
    jobs += [job(f"a{i:02d}", "A", 1, min_h=3) for i in range(8, 24)]
    jobs += [job(f"{p}{i:02d}", p.upper(), 1, at=0.25) for p in "bc" for i in range(16)]
    return sc(jobs, nodes=3, org=("A", "B", "C"), hours=5)


def test_as_protections_end_the_freed_gpus_are_shared_between_the_two_waiting_projects_not_dumped_on_one():
    # 0: A alone takes all 24. 0.5 h: B and C (usage 0, tied) are below their floors (8
    # each) but every GPU is protected: nothing moves. 2 h: a00..a07 are past protection; A
    # still holds 16 protected GPUs (above its floor 8), so only 8 can go, and the floors'
    # shortfall is shared max-min in proportion to the floors (README rule 1; formulation
    # "a shortfall is shared, never dumped on the cheapest project"): B 4, C 4, all eight of
    # a00..a07 stopped (PFS). 3 h: a08..a23 past protection: A keeps its floor 8, B +4, C +4
    # (8 of a08..a23 stopped). Held after each decision: 24/0/0 to 1.5 h, 16/4/4 at 2 and
    # 2.5 h, 8/8/8 from 3 h. A 8 x 2 + 16 x 3 + 8 x 2 = 80, B = C = 4 + 16 = 20 GPU-h.
    # (ilp only: greedy, the published sort, hands all 8 to B at 2 h, B first by name.)
    res, m, w = run(_shortfall(), "ilp")
    got = [(round(s.now / H, 6), _held(s, p)) for s, p in w.seen]
    want = {0.0: (24, 0, 0), 0.5: (24, 0, 0), 1.5: (24, 0, 0), 2.0: (16, 4, 4),
            2.5: (16, 4, 4), 3.0: (8, 8, 8), 3.5: (8, 8, 8), 4.0: (8, 8, 8)}
    assert {t: (h.get("A", 0), h.get("B", 0), h.get("C", 0)) for t, h in got} == want
    assert [gpu_h(res, p) for p in "ABC"] == [80.0, 20.0, 20.0]
    snap, plan = at(w, 2)
    starts, pre, pend, msg = outcome(plan, snap)
    assert set(pre) == {f"a{i:02d}" for i in range(8)}
    assert {c for c, _ in pre.values()} == {PFS}
    assert sorted(j[0] for j in starts) == ["b"] * 4 + ["c"] * 4
    assert set(pend) == ({f"b{i:02d}" for i in range(16)} | {f"c{i:02d}" for i in range(16)}) \
        - set(starts)



def _twins():
    # 1 x 8, A = B, checkpoints every hour. A: a0..a7 (1 GPU, protected 1 h, 10 h) at 0 (a
    # job array: same submit time, priority, size); B: b0 (4 GPUs, protected 0.5 h, 1.25 h)
    # at 0 and b1 (1 GPU, protected 1 h, 10 h) at 2.25 h.
    jobs = [job(f"a{i}", "A", 1) for i in range(8)]
    jobs += [job("b0", "B", 4, min_h=0.5, hours=1.25), job("b1", "B", 1, at=2.25)]
    return sc(jobs, nodes=1, hours=4, checkpoint_interval_s=H)


def test_of_twins_past_protection_the_one_stopped_is_one_that_loses_no_work_at_its_checkpoint():
    # 0: A and B tie (usage 0), floors 4 / 4 and B wants only 4: a0..a3 and b0. 1.25 h: b0
    # ends; 1.5 h: a4..a7 start. 2.25 h: b1 arrives; 2.5 h: B (5 GPU-h) ranks before A (4 x
    # 2.5 + 4 x 1 = 14) and is below its floor: one A job past protection goes. All eight are
    # twins (project, priority, size, submit time); a0..a3 are 2.5 h into their run, 30 min
    # past their hourly checkpoint (0.5 GPU-h lost), a4..a7 1 h in, exactly at theirs (0
    # lost): the victim is one of a4..a7 (README rule 8: "of twins submitted together the
    # one that loses least work"), PFS for b1; it waits to 4 h (OverShare). Nothing is lost
    # all run. (ilp only: greedy gives A all 8 at 0 on the tie and runs another history.)
    res, m, w = run(_twins(), "ilp")
    snap, plan = at(w, 2.5)
    starts, pre, pend, msg = outcome(plan, snap)
    ((victim, (code, nb)),) = pre.items()
    assert (victim in ("a4", "a5", "a6", "a7"), code, nb, starts, pend) == (
        True, PFS, ("b1",), {"b1": ("n1",)}, {})
    assert ivs(res, victim, "b0", "b1") == {victim: hrs((1.5, 2.5)), "b0": hrs((0, 1.25)),
                                            "b1": hrs((2.5, 4))}
    assert sum(r.lost_gpu_s for r in res.jobs) == 0.0
    assert (gpu_h(res, "A"), gpu_h(res, "B")) == (4 * 4 + 3 * 2.5 + 1.0, 5.0 + 1.5)


# ----------------------------------------------------------------------------- 11. short windows

def _returning(**policy):
    # 2 x 8; shares A 1, B 1, C 2 (entitled A 4, B 4, C 8; C never submits). A: 16 1-GPU
    # jobs (protected 1 h, 30 h) at 0; B: 16 such jobs at 2.75 h.
    org = OrgNode("root", children=(OrgNode("A"), OrgNode("B"), OrgNode("C", share=2.0)))
    jobs = [job(f"a{i:02d}", "A", 1, hours=30) for i in range(16)]
    jobs += [job(f"b{i:02d}", "B", 1, at=2.75, hours=30) for i in range(16)]
    return sc(jobs, org=org, hours=5, **policy)


TARGETS_FAULT = (  # the judge's diagnosis of the fault, fixed at stop 59 (below)
    "optalloc/model/targets.py:354 compute_targets: rho = r * (1 - horizon / window) with "
    "horizons() (targets.py:128-132) H = min(max(min_runtime_cap 8 h, epoch), W); whenever "
    "W <= 8 h (window lookback <= 8 h, e.g. the README's sweep grid policy.lookback=6h; decay "
    "half-life <= 5.55 h, W = half-life / ln 2, e.g. the judges' 4-h half-life) H = W and "
    "rho = 0 for every sibling, so the water-filling ignores the usage ratios and splits the "
    "spare by shares alone. Here A (decayed usage 37.4 GPU-h at 3 h, ratio >= 1.6; window: 48 "
    "GPU-h of 24 entitled) and B (0) get 8 / 8 at every decision 3-5 h, B at 8 = its floor + "
    "half the spare; formulation.md: 'the spare goes to the lowest-ratio subtree first'. In "
    "decay mode (1 - H/W) is also not the decay (exp(-H/W) = 0.37 at H = W). Tried locally: "
    "horizons() returning min(H, W / 2) gives B 12 / 11 / 11 (window) and 11 / 10 / 10 "
    "(decay) at 3 / 4 / 5 h; rho = r * exp(-H/W) in decay mode gives 9 / 9 / 9. (fill.py:83 "
    "and pooled.py:114 read the same horizons.)")


# Fixed at stop 59 (was a strict xfail, TARGETS_FAULT): targets.horizons caps H at W / 2.
@pytest.mark.parametrize("policy_kw", [
    {"usage_mode": UsageMode.DECAY, "half_life_s": 4 * H},
    {"lookback_s": 6 * H},
], ids=["decay-half-life-4h", "window-6h"])
def test_with_a_short_window_the_returning_project_still_gets_more_of_an_idle_projects_share(
        policy_kw):
    # 0-3 h A alone runs 16 GPUs; C (share 2) never wants anything, so its 8 are spare. 3 h:
    # B's jobs (submitted 2.75 h) are decided. Usage ratios: A ran 48 GPU-h in the last 3 h
    # (decay, half-life 4 h: 16 x 5.77 x (1 - 2^-0.75) = 37.4 GPU-h against at most 23.1
    # entitled: ratio >= 1.6; window 6 h: 48 against 24: 2.0); B 0. Floors 4 / 4 (both want
    # 16), every A job past its protection. Rule 2 (README "Fair-share targets": the spare
    # goes to the lowest-ratio subtree first, shared only among near-tied siblings): B, far
    # below A, gets more of C's 8 than A does: B holds more than A after the 3 h decision
    # and after every later one to 5 h (B's ratio is still far below A's: decay at 5 h, even
    # at 8 / 8, A 33.2 vs B 14.7 GPU-h; window [-1, 5]: A 48 + 16 = 64 vs B 16). So over
    # 3-5 h B runs more GPU-hours than A.
    res, m, w = run(_returning(**policy_kw), "ilp")
    got = {round(s.now / H, 6): _held(s, p) for s, p in w.seen if s.now >= 3 * H}
    assert {3.0, 4.0} <= set(got), sorted(got)
    for t, h in got.items():
        assert h.get("B", 0) > h.get("A", 0), (t, h)
    in_window = {p: sum(iv.gpus * (min(iv.end, 5 * H) - max(iv.start, 3 * H))
                        for iv in res.intervals if iv.project == p and iv.end > 3 * H) / H
                 for p in "AB"}
    assert in_window["B"] > in_window["A"], in_window


# ----------------------------------------------------------------------------- 12. non-resumable, drain

def _drain_nonresumable():
    # 2 x 8, A = B, grace 120 s. a (A, 8, NOT resumable, protected 1 h, 5 h of work) and b
    # (B, 4, protected 3 h, 4 h) at 0. n1 drains at 0.5 h.
    return sc([job("a", "A", 8, hours=5, resumable=False), job("b", "B", 4, min_h=3, hours=4)],
              grace_s=120.0, hours=6,
              events=(NodeEvent(0.5 * H, ("n1",), NodeState.DRAIN),))


# Fixed at stop 59 (was a strict xfail): preemptions.py appends 'not resumable, it ends' to
# any stop of a non-resumable job that is not restarted.
def test_a_non_resumable_job_on_a_draining_node_leaves_at_its_protection_end_and_is_told_it_ends():
    # 0: a on n1 (first empty node), b on n2 (the tightest node that holds it). 0.5 h: n1
    # drains; a is protected to 1 h: it stays (drain: a staying, n1 empty at 1 h + 120 s).
    # 1 h: a is past its protection: it leaves with notice (PreemptedNodeDrain, 120 s); not
    # resumable, it never moves (README rule 8) nor is requeued (rule 5: "requeue if
    # resumable"): it ends at 1 h + 120 s, not completed, all 3720 s x 8 of its work lost. n1
    # is then empty: ready from the 1.5 h plan on. b runs to 4 h. A charged 8 x (1 + 1/30),
    # B 16. The message must state the drain, the protection end and that the job ends.
    res, m, w = run(_drain_nonresumable(), "ilp")
    g = 120 / H
    assert ivs(res, "a", "b") == {"a": hrs((0, 1 + g)), "b": hrs((0, 4))}
    r = rec(res, "a")
    assert (r.completed, r.end_time, r.preemptions, r.lost_gpu_s) == (
        False, 3720.0, 1, 3720.0 * 8)
    assert (gpu_h(res, "A"), gpu_h(res, "B")) == (pytest.approx(8 * (1 + g)), 16.0)
    snap, plan = at(w, 0.5)
    assert [(d.node, d.staying, d.leaving, d.empty_at) for d in plan.drains] == [
        ("n1", ("a",), (), 3720.0)]
    snap, plan = at(w, 1.5)
    assert [(d.node, d.ready) for d in plan.drains] == [("n1", True)]
    snap, plan = at(w, 1)
    starts, pre, pend, msg = outcome(plan, snap)
    assert (starts, pre, pend) == ({}, {"a": (PND, ())}, {})
    assert msg["a"].startswith("node n1 is draining and the job is past its protection"), msg["a"]
    assert "not resumable, it ends" in msg["a"], msg["a"]
