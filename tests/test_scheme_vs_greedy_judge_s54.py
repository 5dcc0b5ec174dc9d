"""An outside judge (stop 54): the optimizer never loses to greedy on the scheme's own order.

The scheme's order (DESIGN.md sections 1, 7, 8): protections kept, floors, the Fair-Tree order
of programs then projects, priority inside a project, then GPUs busy and work lost. How floors
and ranks trade is the code's weighting, so the judge does not copy it; instead it asserts what
every lexicographic order built from those goals agrees on. Each goal is monotone in the GPUs
of allocated work a project gets on a type (floors and the Fair-Tree order), in the GPUs of
unallocated work it gets on a type (rule 2 shares idle GPUs among unallocated work too), in the
GPUs a project's jobs of priority >= L get (its own order), in the GPUs busy, and
anti-monotone in the work lost. So if greedy's plan is at least as good as ilp's on every
one of these counts and strictly better on one, ilp's plan is worse under *every* such order:
that is the loss the property forbids ("greedy strictly dominates ilp"). Reservations are off
(rule 6 lets a plan hold GPUs idle for a named gang), so this is never excused.

Both plans must also keep the invariants the docs state: capacity per node and type (no GPU
twice, none past the node), gangs on whole nodes by the shape rule (optalloc/shape.py), no
protected job preempted or moved, a drain or down node gets nothing new, a down node keeps
nothing, every job accounted for; and the rules where they are beyond doubt: no waiting job
fits idle GPUs (rule 6), no allocated job waits behind unallocated work it fits in place of
(rule 4), no job on up nodes is stopped for no taker there, no teammate ranked below a waiting
job starts where it would fit (rule 3), no better-ranked project loses more floor GPUs to a
fair-share preemption than its worse-ranked takers have GPUs (rule 1).
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optalloc.epoch import run_epoch
from optalloc.sim.policies.greedy import GreedyScheduler
from optalloc.snapshot import build_snapshot
from optalloc.types import (
    Config,
    GpuType,
    Job,
    JobState,
    Node,
    NodeAlloc,
    NodeState,
    OrgNode,
    Placement,
    Policy,
)

H = 3600.0
M = 60.0
NOW = 20 * H
TYPES = ("h100", "b200", "b300")


# ----------------------------------------------------------------------------- the judge's own

def _protected(job: Job, now: float, cap: float = 8 * H) -> bool:
    """DESIGN rule 4: an allocated job (min_runtime > 0; every project here has a share) is
    protected for min(min_runtime, cap) from its start (debug jobs: 15 min)."""
    if job.state is not JobState.RUNNING or job.min_runtime_s <= 0:
        return False
    return now - job.start_time < min(job.min_runtime_s, cap)


def _lost_s(job: Job, now: float, interval: float = H, overhead: float = 300.0) -> float:
    """Work a preemption loses: since the last checkpoint (since the start if not resumable)
    plus the restart overhead (README, impact.lost_work's documented meaning)."""
    ran = max(now - job.start_time, 0.0)
    since = ran % interval if job.resumable else ran
    return job.gpus * (since + overhead)


def counts(snap, plan) -> dict:
    """The monotone counts every scheme order is built from (module docstring)."""
    jobs = {j.id: j for j in snap.jobs}
    alloc: Counter = Counter()
    prio: Counter = Counter()
    busy = 0
    levels = sorted({j.priority for j in snap.jobs})
    for p in plan.placements:
        j = jobs[p.job_id]
        busy += j.gpus
        # per project and type, allocated and unallocated apart: rule 2 shares the idle GPUs
        # among the projects' unallocated work too, before GPUs busy
        alloc[(j.project, p.gpu_type, j.min_runtime_s > 0)] += j.gpus
        for lv in levels:
            if j.priority >= lv:
                prio[(j.project, j.min_runtime_s > 0, lv)] += j.gpus
    lost = sum(_lost_s(jobs[p.job_id], snap.now) for p in plan.preemptions)
    prot = sum(jobs[p.job_id].gpus for p in plan.placements
               if _protected(jobs[p.job_id], snap.now))
    return {"prot": prot, "alloc": alloc, "prio": prio, "busy": busy, "lost": lost}


def dominates(a: dict, b: dict) -> bool:
    """a at least as good as b on every count and strictly better on one."""
    ge, gt = [], []
    for key in ("alloc", "prio"):
        for k in set(a[key]) | set(b[key]):
            ge.append(a[key][k] >= b[key][k])
            gt.append(a[key][k] > b[key][k])
    for key in ("prot", "busy"):
        ge.append(a[key] >= b[key])
        gt.append(a[key] > b[key])
    ge.append(a["lost"] <= b["lost"] + 1e-6)
    gt.append(a["lost"] < b["lost"] - 1e-6)
    return all(ge) and any(gt)


def check_invariants(cfg: Config, snap, plan) -> None:
    nodes = {n.name: n for n in cfg.nodes}
    jobs = {j.id: j for j in cfg.jobs}
    largest = defaultdict(int)  # S of the shape rule: the type's largest *up* node
    for n in cfg.nodes:         # (optalloc/model/requirements.py, type_max_node)
        if n.state is NodeState.UP:
            largest[n.gpu_type] = max(largest[n.gpu_type], n.gpus)
    used: dict[str, set] = defaultdict(set)
    placed = {}
    for p in plan.placements:
        j = jobs[p.job_id]
        assert p.job_id not in placed, f"{p.job_id} placed twice"
        placed[p.job_id] = p
        assert not j.gpu_types or p.gpu_type in j.gpu_types, f"{j.id} on a type it forbids"
        assert sum(len(a.gpus) for a in p.nodes) == j.gpus, f"{j.id}: wrong GPU count"
        assert len({a.node for a in p.nodes}) == len(p.nodes), f"{j.id}: a node twice"
        for a in p.nodes:
            n = nodes[a.node]
            assert n.gpu_type == p.gpu_type, f"{j.id} on {a.node} of another type"
            assert all(0 <= g < n.gpus for g in a.gpus), f"{j.id}: GPU index past {a.node}"
            assert not (used[a.node] & set(a.gpus)), f"{j.id}: a GPU of {a.node} twice"
            used[a.node] |= set(a.gpus)
            same = (j.placement is not None and j.placement.gpu_type == p.gpu_type
                    and any(b.node == a.node for b in j.placement.nodes))
            if n.state is not NodeState.UP:
                # rule 5: a drain node takes no new work; a down node keeps nothing
                assert n.state is NodeState.DRAIN and same and j.placement.nodes == p.nodes, \
                    f"{j.id} placed on {n.state.value} node {a.node}"
        # shape rule for a start (a kept job keeps the shape it started with): one node when
        # it fits the type's largest up node, else whole such nodes + a rest
        if j.placement is not None and j.placement.nodes == p.nodes:
            continue
        S = largest[p.gpu_type]
        sizes = sorted((len(a.gpus) for a in p.nodes), reverse=True)
        if j.gpus <= S:
            assert len(p.nodes) == 1, f"{j.id} ({j.gpus}) split over {len(p.nodes)} nodes"
        else:
            assert sizes[: j.gpus // S] == [S] * (j.gpus // S), f"{j.id}: not whole nodes"
            assert len(sizes) == j.gpus // S + (1 if j.gpus % S else 0), f"{j.id}: pieces"
    pre = {p.job_id for p in plan.preemptions}
    pend = {r.job_id for r in plan.pending}
    for j in cfg.jobs:
        if j.state is JobState.RUNNING:
            down = any(nodes[a.node].state is NodeState.DOWN for a in j.placement.nodes)
            if down:
                assert j.id in pre, f"{j.id} on a down node not preempted"
            elif _protected(j, snap.now):
                assert j.id not in pre, f"protected {j.id} preempted"
                assert placed[j.id].nodes == j.placement.nodes, f"protected {j.id} moved"
            assert j.id in placed or j.id in pre, f"running {j.id} neither kept nor preempted"
        else:
            assert (j.id in placed) != (j.id in pend), f"queued {j.id}: placed xor pending"


def _fits(job: Job, room: dict, cfg: Config) -> bool:
    """Whether `job` fits GPUs `room` (node -> free GPUs, up nodes only) by the shape rule."""
    for t in (job.gpu_types or [g.name for g in cfg.gpu_types]):
        sizes = [n.gpus for n in cfg.nodes if n.gpu_type == t and n.state is NodeState.UP]
        if not sizes:
            continue
        S = max(sizes)
        free = sorted((room.get(n.name, 0), n.gpus) for n in cfg.nodes if n.gpu_type == t)
        if job.gpus <= S:
            if any(f >= job.gpus for f, _ in free):
                return True
        else:
            whole = [f for f, size in free if size == S and f == S]
            need, rem = divmod(job.gpus, S)
            if len(whole) >= need and (not rem or len(whole) > need
                                       or any(f >= rem for f, size in free if f < S)):
                return True
    return False


def _holders(job: Job, cfg: Config) -> set:
    """The types whose up nodes, empty, could hold the job's shape."""
    empty = {n.name: n.gpus for n in cfg.nodes if n.state is NodeState.UP}
    return {g.name for g in cfg.gpu_types
            if _fits(Job(job.id, job.project, job.gpus, gpu_types=(g.name,)), empty, cfg)
            and (not job.gpu_types or g.name in job.gpu_types)}


def _room(cfg: Config, plan, also=lambda j: False) -> dict:
    """Free GPUs per up node after the plan, plus those of placed jobs `also` picks."""
    jobs = {j.id: j for j in cfg.jobs}
    room = {n.name: n.gpus for n in cfg.nodes if n.state is NodeState.UP}
    for p in plan.placements:
        if also(jobs[p.job_id]):
            continue
        for a in p.nodes:
            if a.node in room:
                room[a.node] -= len(a.gpus)
    return room


def check_scheme_rules(cfg: Config, plan) -> None:
    """Rules 6, 4 and 3 of DESIGN.md section 8, each where it is beyond doubt."""
    jobs = {j.id: j for j in cfg.jobs}
    idle = _room(cfg, plan)
    yielded = _room(cfg, plan, also=lambda j: j.min_runtime_s <= 0)
    started = [jobs[p.job_id] for p in plan.placements if jobs[p.job_id].state is JobState.QUEUED]
    types = {p.job_id: p.gpu_type for p in plan.placements}
    largest = defaultdict(int)
    for n in cfg.nodes:
        if n.state is NodeState.UP:
            largest[n.gpu_type] = max(largest[n.gpu_type], n.gpus)
    nodes = {n.name: n for n in cfg.nodes}
    where = {p.job_id: {a.node for a in p.nodes} for p in plan.placements}
    for pre in plan.preemptions:
        v = jobs[pre.job_id]
        on = {a.node for a in v.placement.nodes}
        if pre.code.value == "Moved" or any(nodes[n].state is not NodeState.UP for n in on):
            continue
        # rule 4 / the contract: a job on up nodes is stopped only for a job that takes its GPUs
        assert any(where.get(t, set()) & on for t in pre.needed_by), \
            f"{v.id} preempted ({pre.code.value}) for no job on its nodes: {pre.needed_by}"
    for r in plan.pending:
        j = jobs[r.job_id]
        # rule 6: no idle GPU while a job that fits waits (reservations are off)
        assert not _fits(j, idle, cfg), f"{j.id} fits idle GPUs and waits ({r.code.value})"
        if j.min_runtime_s <= 0:
            continue
        # rule 4: unallocated work yields to any allocated job at once
        assert not _fits(j, yielded, cfg), f"{j.id} waits behind unallocated work"
        # rule 3: a teammate ranked below it in the team's own order did not start where
        # it would fit (debug jobs may pass same-priority longer ones: README)
        for k in started:
            below = (j.priority > k.priority
                     or (j.priority == k.priority and j.submit_time < k.submit_time
                         and k.min_runtime_s > 900.0))
            t = types[k.id]
            if j.priority == k.priority and _holders(j, cfg) != _holders(k, cfg):
                continue  # the known cut across type sets: the xfail case below
            if (k.project == j.project and k.min_runtime_s > 0 and below
                    and (not j.gpu_types or t in j.gpu_types)
                    and j.gpus <= min(k.gpus, largest[t])):
                raise AssertionError(f"{k.id} started ahead of its teammate {j.id}")


def _ranks_before(snap, p: str, q: str) -> bool:
    """Rule 1: project p ranks strictly before q: at the first level where their paths part,
    p's subtree has the strictly lower usage ratio."""
    org, r = snap.org, snap.usage_ratio
    for a, b in zip(org.path(p), org.path(q)):
        if a != b:
            return r[org.index[a]] < r[org.index[b]] - 1e-9
    return False


def _entitlement(cfg: Config, project: str) -> float:
    """The product of normalized shares on the project's path (glossary)."""
    def walk(node, frac):
        if not node.children:
            return frac if node.name == project else None
        total = sum(c.share for c in node.children)
        for c in node.children:
            got = walk(c, frac * c.share / total) if total else None
            if got is not None:
                return got
        return None
    return walk(cfg.org, 1.0)


def check_fair_share_preemptions(cfg: Config, snap, plan) -> None:
    """Rule 1 with the floors: a job is not preempted for fair share when its project ranks
    before every taker's and the stop costs its project more floor GPUs (floor = min(demand,
    entitlement x up GPUs), pooled: one billing weight, no share_by_type) than the takers
    have GPUs: the floors lost are larger and better ranked than any the takers can meet (a
    worse-ranked larger floor may win by the code's weights, README "Floors")."""
    jobs = {j.id: j for j in cfg.jobs}
    up = sum(n.gpus for n in cfg.nodes if n.state is NodeState.UP)
    got: Counter = Counter()
    demand: Counter = Counter()
    for p in plan.placements:
        j = jobs[p.job_id]
        if j.min_runtime_s > 0:
            got[j.project] += j.gpus
    for j in cfg.jobs:
        if j.min_runtime_s > 0:
            demand[j.project] += j.gpus
    for pre in plan.preemptions:
        v = jobs[pre.job_id]
        if pre.code.value != "PreemptedForFairShare" or v.min_runtime_s <= 0 or not pre.needed_by:
            continue
        takers = [jobs[t] for t in pre.needed_by]
        # the floor GPUs the stop cost its project (a lower bound: an idle sibling's share
        # only raises a floor), against the most the takers can meet: their GPUs
        floor = min(demand[v.project], _entitlement(cfg, v.project) * up)
        cost = min(floor, got[v.project] + v.gpus) - min(floor, got[v.project])
        if (all(_ranks_before(snap, v.project, t.project) for t in takers)
                and sum(t.gpus for t in takers) < cost - 1e-9):
            raise AssertionError(f"{v.id} ({v.project}, {got[v.project]} of floor {floor:.1f})"
                                 f" preempted for worse-ranked {[t.id for t in takers]}")


# ----------------------------------------------------------------------------- random snapshots

@st.composite
def clusters(draw):
    n_types = draw(st.integers(1, 3))
    nodes = []
    for t in range(n_types):
        sizes = draw(st.sampled_from([(4,), (8,), (4, 8)]))  # mixed: the shape rule's S
        for i in range(draw(st.integers(1, 3))):
            state = draw(st.sampled_from([NodeState.UP] * 5 + [NodeState.DRAIN, NodeState.DOWN]))
            nodes.append(Node(f"{TYPES[t]}-{i}", TYPES[t], draw(st.sampled_from(sizes)), state))
    if len(nodes) < 2:
        nodes.append(Node(f"{TYPES[0]}-9", TYPES[0], nodes[0].gpus))
    types = TYPES[:n_types]
    programs, projects, usage = [], [], {}
    for p in range(draw(st.integers(2, 3))):
        kids = []
        for q in range(draw(st.integers(1, 3))):
            name = f"P{p}q{q}"
            kids.append(OrgNode(name, share=float(draw(st.sampled_from([1, 2, 5])))))
            projects.append(name)
            usage[name] = draw(st.sampled_from([0.0, 0.3, 0.8, 1.2, 2.5]))
        programs.append(OrgNode(f"P{p}", share=float(draw(st.sampled_from([1, 2, 3]))),
                                children=tuple(kids)))
        usage[f"P{p}"] = draw(st.sampled_from([0.0, 0.5, 1.0, 1.5]))
    org = OrgNode("root", children=tuple(programs))
    free = {n.name: list(range(n.gpus)) for n in nodes}
    jobs = []
    for k in range(draw(st.integers(3, 20))):
        g = draw(st.sampled_from([1, 1, 2, 4, 8, 16]))
        allowed = draw(st.sampled_from([(), (types[0],), (types[-1],)]))
        mr = draw(st.sampled_from([0.0, 900.0, 2 * H, 8 * H]))
        common = dict(id=f"j{k}", project=draw(st.sampled_from(projects)), gpus=g,
                      gpu_types=allowed, min_runtime_s=mr, priority=draw(st.integers(0, 2)),
                      submit_time=float(k), resumable=draw(st.sampled_from([True, True, False])))
        pl = _pack(nodes, free, g, allowed, k) if draw(st.booleans()) else None
        if pl is not None:
            start = NOW - draw(st.sampled_from([10 * M, 90 * M, 3 * H, 10 * H]))
            jobs.append(Job(**common, state=JobState.RUNNING, start_time=start, placement=pl))
        else:
            jobs.append(Job(**common))
    cfg = Config(tuple(GpuType(t) for t in types), tuple(nodes), org,
                 Policy(max_reservations=0), tuple(jobs))
    # budgets partly spent: GPU-hours owed and not delivered (the floors' debt), some projects
    debt = {p: draw(st.sampled_from([0.0, 0.0, 0.0, 5.0, 50.0])) for p in projects}
    return cfg, build_snapshot(cfg, now=NOW, usage_ratio=usage, shortfall=debt,
                               fair_shortfall=debt)


def _pack(nodes, free, g, allowed, k):
    """Place a running job by the shape rule: one node if it fits, else whole nodes."""
    for t in dict.fromkeys(n.gpu_type for n in nodes):
        if allowed and t not in allowed:
            continue
        pool = [n for n in nodes if n.gpu_type == t]
        S = max(n.gpus for n in pool)
        if g <= S:
            for n in pool:
                if len(free[n.name]) >= g:
                    gp = tuple(free[n.name][:g])
                    del free[n.name][:g]
                    return Placement(f"j{k}", t, (NodeAlloc(n.name, gp),))
        elif g % S == 0:
            whole = [n for n in pool if n.gpus == S and len(free[n.name]) == S][: g // S]
            if len(whole) == g // S:
                for n in whole:
                    free[n.name] = []
                return Placement(f"j{k}", t, tuple(NodeAlloc(n.name, tuple(range(S)))
                                                   for n in whole))
    return None


def snap_has_debt(snap) -> bool:
    return bool(np.any(snap.owed_shortfall > 0) or np.any(snap.fair_owed_shortfall > 0))


def _judge(cfg, snap):
    ilp = run_epoch(snap)
    greedy = GreedyScheduler().decide(snap)
    check_invariants(cfg, snap, ilp)
    check_invariants(cfg, snap, greedy)
    check_scheme_rules(cfg, ilp)
    check_scheme_rules(cfg, greedy)
    if not snap_has_debt(snap):  # a debt may tilt floors against the rank (README)
        check_fair_share_preemptions(cfg, snap, ilp)
        check_fair_share_preemptions(cfg, snap, greedy)
    ci, cg = counts(snap, ilp), counts(snap, greedy)
    assert not dominates(cg, ci), f"greedy dominates ilp:\n greedy {cg}\n ilp {ci}"


@settings(max_examples=int(os.environ.get("JUDGE_N", 60)),  # longer hunts: JUDGE_N=1500
          deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_greedy_never_strictly_dominates_the_optimizers_plan_and_both_keep_the_invariants(cs):
    _judge(*cs)


# ----------------------------------------------------------------------------- hand-worked cases

def _toy(nodes, shares, jobs, usage=None, types=("h100",)):
    org = OrgNode("root", children=tuple(OrgNode(p, share=s) for p, s in shares.items()))
    cfg = Config(tuple(GpuType(t) for t in types), tuple(nodes), org,
                 Policy(max_reservations=0), tuple(jobs))
    return cfg, build_snapshot(cfg, now=NOW, usage_ratio=usage or {})


def _run(jid, project, allocs, ago, mr=2 * H, gpu_type="h100", **kw) -> Job:
    pl = Placement(jid, gpu_type, tuple(NodeAlloc(n, tuple(g)) for n, g in allocs))
    return Job(jid, project, sum(len(g) for _, g in allocs), min_runtime_s=mr,
               state=JobState.RUNNING, start_time=NOW - ago, placement=pl, **kw)


def _nodes(count, gpus, prefix="n", gpu_type="h100", state=NodeState.UP):
    return [Node(f"{prefix}{i:02d}", gpu_type, gpus, state) for i in range(count)]


def _programs(usage, jobs):
    """One 8-GPU node; programs P0 (project q0) and P1 (project r0), equal shares."""
    org = OrgNode("root", children=(OrgNode("P0", children=(OrgNode("q0"),)),
                                    OrgNode("P1", children=(OrgNode("r0"),))))
    cfg = Config((GpuType("h100"),), tuple(_nodes(1, 8)), org, Policy(max_reservations=0),
                 tuple(jobs))
    return cfg, build_snapshot(cfg, now=NOW, usage_ratio=usage)


def _outcome(plan):
    return ({p.job_id: tuple((a.node, len(a.gpus)) for a in p.nodes) for p in plan.placements},
            {p.job_id: p.code.value for p in plan.preemptions},
            {r.job_id: r.code.value for r in plan.pending})


AB = {"A": 1.0, "B": 1.0}
CASES = {
    # 2 x 4 GPUs, one project: a1 (2) and a2 (3) fit in the team's order; a3 (3) would fit only
    # in place of a1 (a tighter packing, 6 GPUs), which rule 3 forbids: a1 and a2 run, a3 waits
    # (3 GPUs free, but not on one node)
    "a tighter packing never passes the team's own order":
        (_toy(_nodes(2, 4), {"A": 1.0},
              [Job("a1", "A", 2, min_runtime_s=H, submit_time=0.0),
               Job("a2", "A", 3, min_runtime_s=H, submit_time=1.0),
               Job("a3", "A", 3, min_runtime_s=H, submit_time=2.0)]),
         ({"a1": (("n00", 2),), "a2": (("n01", 3),)}, {}, {"a3": "GangDoesNotFit"})),
    # one 8-GPU node, floors 4 + 4 mutually exclusive with whole 8-GPU jobs: the Fair-Tree order
    # decides (A 0.2 < B 1.5); B's job ran 3 h of its 2 h min_runtime, so it is preempted for A's
    "a better-ranked project's job preempts a worse-ranked job past its protection":
        (_toy(_nodes(1, 8), AB, [_run("b", "B", [("n00", range(8))], 3 * H),
                                 Job("a", "A", 8, min_runtime_s=2 * H)],
              {"A": 0.2, "B": 1.5}),
         ({"a": (("n00", 8),)}, {"b": "PreemptedForFairShare"}, {})),
    # the same, B's job 1 h into its 2 h: protected (rule 4), A's job waits for capacity
    "a protected job keeps its node against a better-ranked project":
        (_toy(_nodes(1, 8), AB, [_run("b", "B", [("n00", range(8))], 1 * H),
                                 Job("a", "A", 8, min_runtime_s=2 * H)],
              {"A": 0.2, "B": 1.5}),
         ({"b": (("n00", 8),)}, {}, {"a": "WaitingForCapacity"})),
    # B's unallocated 8-GPU job holds the node; A's allocated 4-GPU job (A ranked below B) needs
    # it: unallocated work yields to any allocated job at once, and u (8) cannot restart in the
    # 4 left
    "unallocated work yields to a worse-ranked project's allocated job":
        (_toy(_nodes(1, 8), AB, [_run("u", "B", [("n00", range(8))], 10 * M, mr=0.0),
                                 Job("a", "A", 4, min_runtime_s=2 * H)],
              {"A": 0.9, "B": 0.1}),
         ({"a": (("n00", 4),)}, {"u": "PreemptedUnallocated"}, {})),
    # a full 4-GPU node of B's unallocated job; A's unallocated 4-GPU job (A ranked first) would
    # only swap one for the other: never displaced for nothing, what runs stays
    "unallocated work never displaces other unallocated work for nothing":
        (_toy(_nodes(1, 4), AB, [_run("u", "B", [("n00", range(4))], 10 * M, mr=0.0),
                                 Job("v", "A", 4, min_runtime_s=0.0)],
              {"A": 0.1, "B": 0.9}),
         ({"u": (("n00", 4),)}, {}, {"v": "UnallocatedYields"})),
    # A's 16-GPU gang spans a drain node and an up one, past its protection: it leaves (rule 5)
    # and cannot restart (one up node); B's 8-GPU job takes the up node
    "a gang past protection on a drain node leaves and nothing new lands on the drain node":
        (_toy([Node("d00", "h100", 8, NodeState.DRAIN), Node("n00", "h100", 8)], AB,
              [_run("g", "A", [("d00", range(8)), ("n00", range(8))], 3 * H),
               Job("q", "B", 8, min_runtime_s=2 * H)], {"A": 0.1, "B": 0.9}),
         ({"q": (("n00", 8),)}, {"g": "PreemptedNodeDrain"}, {})),
    # the same gang 1 h into its 2 h: protected, it keeps both nodes; q waits
    "a protected gang keeps its drain node and its up node":
        (_toy([Node("d00", "h100", 8, NodeState.DRAIN), Node("n00", "h100", 8)], AB,
              [_run("g", "A", [("d00", range(8)), ("n00", range(8))], 1 * H),
               Job("q", "B", 8, min_runtime_s=2 * H)], {"A": 0.1, "B": 0.9}),
         ({"g": (("d00", 8), ("n00", 8))}, {}, {"q": "WaitingForCapacity"})),
    # a protected gang loses a node that went down: it must leave; resumable, it restarts on the
    # two whole up nodes, since A (0.1) ranks before B (0.9) and the floors (8 + 8 of 16) are
    # mutually exclusive with whole jobs; B's 8-GPU job waits
    "a gang whose node went down restarts on whole up nodes before a worse-ranked job":
        (_toy([Node("x00", "h100", 8, NodeState.DOWN)] + _nodes(2, 8), AB,
              [_run("g", "A", [("x00", range(8)), ("n00", range(8))], 10 * M),
               Job("q", "B", 8, min_runtime_s=2 * H)], {"A": 0.1, "B": 0.9}),
         ({"g": (("n00", 8), ("n01", 8))}, {"g": "Moved"}, {"q": "WaitingForCapacity"})),
    # 3 x 8 GPUs: A's 16-GPU gang on two whole nodes, B's eight 1-GPU jobs on the third (A 16,
    # B 8: both within demand, all 24 busy)
    "a gang larger than a node takes whole nodes and the small jobs share the third":
        (_toy(_nodes(3, 8), AB, [Job("g", "A", 16, min_runtime_s=2 * H)]
              + [Job(f"b{i}", "B", 1, min_runtime_s=2 * H, submit_time=float(i))
                 for i in range(8)], {"A": 0.1, "B": 0.9}),
         ({"g": (("n00", 8), ("n01", 8)), **{f"b{i}": (("n02", 1),) for i in range(8)}},
          {}, {})),
    # a non-resumable job ends when it is stopped (DESIGN section 1: requeued only if
    # resumable; requirements.py: "it cannot move"; a drain node's non-resumable job ends too,
    # tests/test_epoch_scheme.py): its node went down, so it is preempted and B's job takes
    # the free node; before the fix ilp "Moved" it there, the runner ended it, n00 idled
    "a non-resumable job whose node went down ends and does not restart":
        (_toy([Node("x00", "h100", 8, NodeState.DOWN)] + _nodes(1, 8), AB,
              [_run("g", "A", [("x00", range(8))], 10 * M, resumable=False),
               Job("q", "B", 8, min_runtime_s=2 * H)], {"A": 0.1, "B": 0.9}),
         ({"q": (("n00", 8),)}, {"g": "PreemptedNodeDrain"}, {})),
    # program order first (rule 1): P0 (0.2) before P1 (1.0) although P1's project r0 has
    # ratio 0.0 and P0's q0 2.0; floors 4 + 4 are exclusive with whole 8-GPU jobs, so the rank
    # decides: r0's job past protection is preempted for q0's
    "a project of a better-ranked program preempts a lower-ratio project of a worse one":
        (_programs({"P0": 0.2, "q0": 2.0, "P1": 1.0, "r0": 0.0},
                   [_run("r", "r0", [("n00", range(8))], 3 * H),
                    Job("q", "q0", 8, min_runtime_s=2 * H)]),
         ({"q": (("n00", 8),)}, {"r": "PreemptedForFairShare"}, {})),
    # the team's own order: A's priority-2 job takes the node of A's priority-0 job past its
    # protection (rule 3; README "A running job past its protection yields ...")
    "a running job past protection yields to its teammate of a higher priority":
        (_toy(_nodes(1, 8), {"A": 1.0}, [_run("lo", "A", [("n00", range(8))], 3 * H),
                                         Job("hi", "A", 8, min_runtime_s=2 * H, priority=2)]),
         ({"hi": (("n00", 8),)}, {"lo": "PreemptedForFairShare"}, {})),
    # ... but an equal-priority queued job does not displace its running teammate
    "a queued job does not displace a running teammate of its own priority":
        (_toy(_nodes(1, 8), {"A": 1.0}, [_run("r", "A", [("n00", range(4))], 3 * H),
                                         Job("q", "A", 8, min_runtime_s=2 * H)]),
         ({"r": (("n00", 4),)}, {}, {"q": "LowerPriorityInProject"})),
    # what a sort cannot see: B (ranked first, any type) on h100 would strand A's job confined
    # to h100 (greedy does that); ilp routes B to b200 and both run
    "a job that may run anywhere leaves the contested type to one confined to it":
        (_toy([Node("h0", "h100", 4), Node("b0", "b200", 4)], AB,
              [Job("a", "A", 4, min_runtime_s=2 * H, gpu_types=("h100",)),
               Job("b", "B", 4, min_runtime_s=2 * H)], {"A": 0.9, "B": 0.1},
              types=("h100", "b200")),
         ({"a": (("h0", 4),), "b": (("b0", 4),)}, {}, {})),
    # a 20-GPU gang on 8-GPU nodes: 8 + 8 + a remainder 4, and the remainder node's other 4
    # GPUs hold B's 4-GPU job (shape rule, optalloc/shape.py)
    "a gang's remainder node shares its other GPUs":
        (_toy(_nodes(3, 8), AB, [Job("g", "A", 20, min_runtime_s=2 * H),
                                 Job("b", "B", 4, min_runtime_s=2 * H)], {"A": 0.1, "B": 0.9}),
         ({"g": (("n00", 8), ("n01", 8), ("n02", 4)), "b": (("n02", 4),)}, {}, {})),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_optimizers_whole_plan_in_hand_worked_cases(name):
    (cfg, snap), expect = CASES[name]
    plan = run_epoch(snap)
    check_invariants(cfg, snap, plan)
    check_scheme_rules(cfg, plan)
    assert _outcome(plan) == expect
    assert not dominates(counts(snap, GreedyScheduler().decide(snap)), counts(snap, plan))


def test_a_later_teammate_of_the_same_priority_never_takes_the_place_of_an_earlier_one():
    # h100: one 4-GPU node; b200: two 8-GPU nodes; one project, all priority 0, in submit
    # order a0 (1), a1 (4), a2 (16). Team order (rule 3): a0 first (best fit: h100, 3 left),
    # a1 next (4 > 3 on h100, so a b200 node), a2 needs both b200 nodes whole and waits.
    # Greedy does exactly this. Ilp starts a2 and a1 waits although it fits a2's place; with
    # no h100 node it keeps the order (a1 runs, a2 waits), so the type set alone flips it.
    nodes = [Node("h100-0", "h100", 4), Node("b200-0", "b200", 8), Node("b200-1", "b200", 8)]
    jobs = [Job("a0", "A", 1, min_runtime_s=2 * H, submit_time=0.0),
            Job("a1", "A", 4, min_runtime_s=2 * H, submit_time=1.0),
            Job("a2", "A", 16, min_runtime_s=2 * H, submit_time=2.0)]
    cfg, snap = _toy(nodes, {"A": 1.0}, jobs, types=("h100", "b200"))
    plan = run_epoch(snap)
    placed, pre, pend = _outcome(plan)
    # (a strict xfail until stop 55: submit order inside a priority was not linked across
    # type sets, optalloc.model.type_order, and ilp started a2 while a1 waited.) Which node
    # each of a0 and a1 takes is the packing's freedom: ilp puts a0 on b200 and a1 on the
    # h100 node, the same two jobs and the same GPUs left for a2
    assert set(placed) == {"a0", "a1"}
    assert (pre, pend) == ({}, {"a2": "WaitingForCapacity"})


def test_idle_gpus_go_to_tied_programs_unallocated_work_in_each_teams_order():
    # 3 x 4 h100 + 1 x 4 b200; programs P0 (A), P1 (B, B2), P2 (C, idle), all ratios 0, equal
    # shares. Running: A's unallocated 4-GPU u0 (stays: what runs stays), B2's protected 4-GPU
    # job. A's debug job a5 (allocated) starts first: 7 GPUs left for unallocated work.
    # Rule 2: P0 and P1 tie, so the idle is split by shares, counting what runs: 11 / 2 each,
    # B wants only 3 (b1 2 + b4 1), A gets the rest: 4 more. A's own order (submit) is a3, a6,
    # a7 (3 GPUs), then a8 (2) passes the 4: it does not fit, and neither does a9; no 2-GPU
    # job fits the 1 GPU left (rule 6 holds). Greedy hands all 7 to A (first by name) instead.
    org = OrgNode("root", children=(
        OrgNode("P0", children=(OrgNode("A"),)),
        OrgNode("P1", children=(OrgNode("B"), OrgNode("B2"))),
        OrgNode("P2", children=(OrgNode("C"),))))
    nodes = _nodes(3, 4) + _nodes(1, 4, prefix="b", gpu_type="b200")
    jobs = [_run("u0", "A", [("n00", range(4))], 10 * M, mr=0.0),
            _run("p2", "B2", [("n01", range(4))], 10 * M, priority=1),
            Job("b1", "B", 2, submit_time=1.0), Job("a3", "A", 1, submit_time=3.0),
            Job("b4", "B", 1, submit_time=4.0),
            Job("a5", "A", 1, min_runtime_s=900.0, submit_time=5.0),
            Job("a6", "A", 1, submit_time=6.0), Job("a7", "A", 1, submit_time=7.0),
            Job("a8", "A", 2, submit_time=8.0), Job("a9", "A", 2, submit_time=9.0)]
    cfg = Config((GpuType("h100"), GpuType("b200")), tuple(nodes), org,
                 Policy(max_reservations=0), tuple(jobs))
    snap = build_snapshot(cfg, now=NOW, usage_ratio={})
    plan = run_epoch(snap)
    check_invariants(cfg, snap, plan)
    check_scheme_rules(cfg, plan)
    placed, pre, pend = _outcome(plan)
    assert set(placed) == {"u0", "p2", "b1", "b4", "a3", "a5", "a6", "a7"}
    assert placed["u0"] == (("n00", 4),) and placed["p2"] == (("n01", 4),)
    assert (pre, pend) == ({}, {"a8": "UnallocatedYields", "a9": "UnallocatedYields"})


def test_a_non_resumable_job_on_a_down_node_is_told_it_ends_not_that_it_is_requeued():
    # rule 7: the reason is true; a non-resumable job is not requeued (DESIGN section 1)
    (cfg, snap), _ = CASES["a non-resumable job whose node went down ends and does not restart"]
    msg = {p.job_id: p.message for p in run_epoch(snap).preemptions}
    assert msg == {"g": "node x00 is down; not resumable, it ends"}
