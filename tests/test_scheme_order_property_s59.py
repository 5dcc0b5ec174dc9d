"""An outside judge (stop 59): a property-based differential judge of ilp against greedy on the
scheme's OWN order, scored by an independent scorer written from README "How an epoch decides
(the scheme, exactly)" and DESIGN.md section 8, not by optalloc.plan.score.

The scheme's order (README rule 7: "floors, targets, the teams' order, allocated GPUs, fill
shares, GPUs busy, the teams' order of the running work kept (submit time), work lost"), each
tier computed here from the README's words:

* floors (rule 1): a top-level node's floor is min(demand, entitled GPUs); below, a parent's
  floor is shared among its children by shares, each capped at its demand (what an idle
  sibling does not want goes to the others); rounded down. Floor GPUs met per org node are
  weighed by the README's rank tilt exactly as it states it: "the projects with work this
  epoch are spread over [0, 1] in the Fair-Tree order (an inner node at its best project's
  place), and a floor GPU at place q is worth 1 + q times the least", read two ways (work =
  allocated demand, or any job); both the raw floor and the floor cut by the target ("a
  floor counts only up to it") are scored. (A first version allowed every rank-monotone
  weighting up to 2x, a cone: too lax, it called the README's own 2:1 trades ties.)
* targets (rule 2): the rest is water-filled top-down: each child gets max(protected, floor)
  first, then the spare goes to the lowest usage ratio first, up to demand, split by shares
  among tied siblings; scored both fluid and realized in the team's own order (whole jobs,
  "when its next jobs do not fit, the rest flows to its siblings"), each as GPUs within
  targets level by level (an ancestor's first), as a plain sum, and as GPUs above the floor
  up to the target (optalloc.plan.score's reading).
* the teams' own order (rule 3): per project, allocated GPUs by declared priority,
  lexicographically (more of the highest priority first).
* allocated GPUs (rule 4), then fill (unallocated GPUs per project: only componentwise
  dominance counts), GPUs busy, the running work kept in each team's order (priority, then
  submit time: lexicographic), work lost (GPU-seconds since the last checkpoint, with and
  without the restart overhead).

Each tier gives the set of outcomes its admissible variants allow (+1 greedy better, -1 ilp
better, 0 tie); the lexicographic order over them gives the set of outcomes of every
admissible order. ilp LOSES only where that set is {+1}: greedy is better under every reading
of the README. The judge never charges ilp with a trade the README leaves to the code's
weights.

Both plans must also keep the invariants (capacity per GPU, gangs whole by the shape rule, a
protected job never preempted or moved, no job twice, every job accounted for): the judge's own
check, plus optalloc.sim.invariants.check_plan.

No reservations (rule 6 lets a plan hold GPUs idle for a gang), no ledger debt (the debt
multiplies the floor weights beyond the tilt), no drains; sibling usage ratios far apart
(rule 2's near-ties are the code's to weigh; the judge checks and skips near-ties). One
documented limitation is excused (README rule 3, "Also left": a teammate of a stopped
non-resumable job waits its one epoch): `documented_wait`.

The default run (fixed seed, JUDGE_N=300 examples, ~8 s) passes. Longer hunts
(HYPOTHESIS_PROFILE=explore JUDGE_N=1500, 25 seeds, ~37,000 snapshots, the last ones with
every local fix below applied) found about one snapshot in 500 where greedy's plan is better
under every reading; all of them reduce to the seven causes of the eight strict xfails at the
end of this file, or to the README's documented left-outs (the one-epoch wait above; a type
partly unusable counted in the pooled entitlements, rule 2's "Left out (found at stop 34)").
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optalloc.epoch import run_epoch
from optalloc.sim.invariants import check_plan
from optalloc.sim.policies import make_policy
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
from tests.test_scheme_vs_greedy_judge_s54 import _pack  # running jobs by the shape rule

H = 3600.0
M = 60.0
NOW = 20 * H
CAP = 8 * H          # Policy.min_runtime_cap_s
CKPT = H             # Policy.checkpoint_interval_s
OVERHEAD = 300.0     # Policy.restart_overhead_s
W_OVER_H = 21.0      # lookback 7 d / horizon 8 h: the GPUs that move a projected ratio by one
TYPES = ("h100", "b200")


# ============================================================================ the judge's scorer

def _water(amount: float, weights: dict, caps: dict) -> dict:
    """Split `amount` among keys in proportion to `weights`, each capped at `caps`, what one
    cannot take going to the others (max-min by weight)."""
    out = {k: 0.0 for k in weights}
    live = {k for k in weights if caps[k] > 1e-12 and weights[k] > 0}
    left = amount
    while live and left > 1e-12:
        tot = sum(weights[k] for k in live)
        step = {k: left * weights[k] / tot for k in live}
        full = {k for k in live if out[k] + step[k] >= caps[k] - 1e-12}
        if not full:
            for k in live:
                out[k] += step[k]
            break
        for k in full:
            left -= caps[k] - out[k]
            out[k] = caps[k]
        live -= full
    return out


def _shape_fits(gpus: int, allowed, nodes, room: dict) -> bool:
    """The shape rule (README, optalloc/shape.py): one node if the job fits the type's largest
    up node, else whole such nodes plus one node with the rest."""
    for t in dict.fromkeys(n.gpu_type for n in nodes):
        if allowed and t not in allowed:
            continue
        pool = [n for n in nodes if n.gpu_type == t and n.state is NodeState.UP]
        if not pool:
            continue
        S = max(n.gpus for n in pool)
        free = [(room[n.name], n.gpus) for n in pool]
        if gpus <= S:
            if any(f >= gpus for f, _ in free):
                return True
            continue
        need, rem = divmod(gpus, S)
        whole = [i for i, (f, size) in enumerate(free) if size == S and f == S]
        if len(whole) < need:
            continue
        if not rem:
            return True
        rest = [f for i, (f, _) in enumerate(free) if i not in whole[:need]]
        if any(f >= rem for f in rest):
            return True
    return False


@dataclass
class Scheme:
    """The README's floors, targets and Fair-Tree order for one snapshot, computed here."""

    cfg: Config
    ratio: dict
    now: float = NOW

    def __post_init__(self):
        cfg = self.cfg
        self.up = [n for n in cfg.nodes if n.state is NodeState.UP]
        self.C = float(sum(n.gpus for n in self.up))
        self.parent, self.children, self.ent, self.depth, self.share = {}, {}, {}, {}, {}

        def walk(node, par, frac, d):
            self.parent[node.name], self.ent[node.name], self.depth[node.name] = par, frac, d
            self.share[node.name] = node.share
            self.children[node.name] = [c.name for c in node.children]
            tot = sum(c.share for c in node.children)
            for c in node.children:
                walk(c, node.name, frac * c.share / tot if tot > 0 else 0.0, d + 1)

        walk(cfg.org, None, 1.0, 0)
        self.root = cfg.org.name
        self.leaves = [o for o, ch in self.children.items() if not ch]
        self.jobs = {j.id: j for j in cfg.jobs}
        empty = {n.name: n.gpus for n in self.up}
        self.placeable = {j.id: _shape_fits(j.gpus, j.gpu_types, self.up, empty)
                          for j in cfg.jobs}
        # allocated = tier 1: min_runtime > 0 in a project with a share (rule 4)
        self.alloc = {j.id: j.min_runtime_s > 0 and self.ent[j.project] > 0 for j in cfg.jobs}
        self.prot = {j.id: (j.state is JobState.RUNNING and self.alloc[j.id]
                            and self.now - j.start_time < min(j.min_runtime_s, CAP))
                     for j in cfg.jobs}
        self.D = self._subtree({p: sum(j.gpus for j in cfg.jobs if j.project == p
                                       and self.alloc[j.id] and self.placeable[j.id])
                                for p in self.leaves})
        self.P = self._subtree({p: sum(j.gpus for j in cfg.jobs if j.project == p
                                       and self.prot[j.id]) for p in self.leaves})
        self.E = {o: self.ent[o] * self.C for o in self.ent}
        # rule 2: "when its next jobs do not fit, the rest flows to its siblings": a job that
        # fits nowhere beside the protected jobs this epoch is no demand the targets can give
        room = {n.name: n.gpus for n in self.up}
        for j in cfg.jobs:
            if self.prot[j.id]:
                for a in j.placement.nodes:
                    if a.node in room:
                        room[a.node] -= len(a.gpus)
        self.fits_now = {j.id: self.prot[j.id] or _shape_fits(j.gpus, j.gpu_types, self.up, room)
                         for j in cfg.jobs}
        self._order()
        self.F = self._floors()
        self.near_tie = False
        self.short = False
        self.T_fluid = self._targets({p: sum(j.gpus for j in cfg.jobs if j.project == p
                                             and self.alloc[j.id] and self.placeable[j.id]
                                             and self.fits_now[j.id]) for p in self.leaves})
        self.T_whole = self._whole_targets()
        self.routable = self._floors_routable()

    def _floors_routable(self) -> bool:
        """Whether every project's floor fits on the types its jobs may use, beside the
        protected jobs where they run (README rule 2, pooled: "then placed on the types each
        project's jobs can use, max-min"). Where it does not (a protected job of an
        over-share project holds a type others are confined to), rule 1 shares the shortfall
        max-min ("never dumped on one project") by the code's routing, which the judge does
        not copy: it does not score floors there."""
        types = sorted({n.gpu_type for n in self.up})
        if len(types) < 2:
            return True
        from scipy.optimize import linprog

        leaves = [p for p in self.leaves if self.F[p] > 0 or self.P[p] > 0]
        if not leaves:
            return True
        cap = {t: sum(n.gpus for n in self.up if n.gpu_type == t) for t in types}
        full, prot = defaultdict(float), defaultdict(float)
        for j in self.cfg.jobs:
            if not (self.alloc[j.id] and self.placeable[j.id]) or j.project not in leaves:
                continue
            if self.prot[j.id]:
                prot[(j.project, j.placement.gpu_type)] += j.gpus
                full[(j.project, j.placement.gpu_type)] += j.gpus
                continue
            for t in (j.gpu_types or types):
                full[(j.project, t)] += j.gpus
        var = [(p, t) for p in leaves for t in types]
        A, b = [], []
        for t in types:  # capacity per type
            A.append([1.0 if vt == t else 0.0 for _, vt in var])
            b.append(cap[t])
        for p in leaves:  # each floor met over the types
            A.append([-1.0 if vp == p else 0.0 for vp, _ in var])
            b.append(-min(self.F[p], sum(full[(p, t)] for t in types)))
        bounds = [(prot[v], max(prot[v], full[v])) for v in var]
        r = linprog([0.0] * len(var), A_ub=A, b_ub=b, bounds=bounds, method="highs")
        return r.status == 0

    # ------------------------------------------------------------------ tree helpers
    def _subtree(self, leafval: dict) -> dict:
        out = {}

        def up(o):
            out[o] = leafval.get(o, 0.0) if not self.children[o] else sum(
                up(c) for c in self.children[o])
            return out[o]

        up(self.root)
        return out

    def _order(self):
        """Fair-Tree order (rule 1): DFS, siblings by usage ratio, ties by name; and the rank
        tilt's weights (README rule 1: "the projects with work this epoch are spread over
        [0, 1] in the Fair-Tree order (an inner node at its best project's place), and a
        floor GPU at place q is worth 1 + q times the least"), for two readings of "with
        work": allocated demand, or any job at all."""
        seq = []

        def dfs(o):
            if not self.children[o]:
                seq.append(o)
            for c in sorted(self.children[o], key=lambda c: (self.ratio.get(c, 0.0), c)):
                dfs(c)

        dfs(self.root)
        self.project_order = seq
        anyjob = {j.project for j in self.cfg.jobs}
        self.tilts = []
        for working in ([p for p in seq if self.D[p] > 0], [p for p in seq if p in anyjob]):
            n = len(working)
            q = {p: (1.0 if n == 1 else (n - 1 - i) / (n - 1)) for i, p in enumerate(working)}
            w = {}
            for o in self.ent:
                if o == self.root:
                    continue
                under = [q[p] for p in working if self._under(p, o)]
                w[o] = 1.0 + (max(under) if under else 0.0)
            self.tilts.append(w)

    def _under(self, p, o) -> bool:
        while p is not None:
            if p == o:
                return True
            p = self.parent[p]
        return False

    def _floors(self) -> dict:
        F = {self.root: 0.0}

        def down(o):
            ch = self.children[o]
            if not ch:
                return
            if o == self.root:
                for c in ch:
                    F[c] = min(self.D[c], self.E[c])
            else:
                F.update(_water(F[o], {c: self.E[c] for c in ch}, {c: self.D[c] for c in ch}))
            for c in ch:
                down(c)

        down(self.root)
        return {o: float(int(v + 1e-9)) for o, v in F.items()}

    def _targets(self, leaf_upper: dict) -> dict:
        """Rule 2: max(protected, floor) first, then the spare to the lowest ratio first (tied
        ratios by shares), each up to its demand (here: `leaf_upper`)."""
        U = self._subtree(leaf_upper)
        T = {self.root: min(self.C, U[self.root])}

        def down(o):
            ch = self.children[o]
            if not ch:
                return
            L = {c: min(max(self.P[c], min(self.F[c], U[c])), U[c]) for c in ch}
            A = T[o]
            if sum(L.values()) >= A - 1e-9:
                # protected jobs hold more than the floors leave: the shortfall is shared
                # (max-min); the code's own split decides, the judge does not score targets
                self.short = self.short or sum(L.values()) > A + 1e-9
                prot = {c: min(self.P[c], L[c]) for c in ch}
                rest = max(A - sum(prot.values()), 0.0)
                extra = {c: L[c] - prot[c] for c in ch}
                s = sum(extra.values())
                for c in ch:
                    T[c] = prot[c] + (extra[c] * min(rest / s, 1.0) if s > 0 else 0.0)
            else:
                for c in ch:
                    T[c] = L[c]
                spare = A - sum(L.values())
                groups = defaultdict(list)
                for c in ch:
                    groups[self.ratio.get(c, 0.0)].append(c)
                keys = sorted(groups)
                for gi, r in enumerate(keys):
                    g = groups[r]
                    got = _water(spare, {c: self.E[c] for c in g},
                                 {c: U[c] - T[c] for c in g})
                    for c in g:
                        T[c] += got[c]
                    spare -= sum(got.values())
                    # rule 2's near-tie: the spare moves a subtree's projected ratio by
                    # x H / (E W); where what this group took would reach the next group's
                    # ratio, the code shares it between them (its weights, not the README's
                    # words): the judge does not score targets there
                    if gi + 1 < len(keys):
                        for c in g:
                            if self.E[c] > 0 and got[c] / (self.E[c] * W_OVER_H) \
                                    >= (keys[gi + 1] - r) * (1 - 1 / W_OVER_H) - 1e-9:
                                self.near_tie = True
            for c in ch:
                down(c)

        down(self.root)
        return T

    def team_order(self, p: str) -> list:
        """A project's allocated placeable jobs in its own order: protected first, then
        declared priority (higher first), running before queued, submit time, id."""
        js = [j for j in self.cfg.jobs if j.project == p and self.alloc[j.id]
              and self.placeable[j.id]]
        return sorted(js, key=lambda j: (not self.prot[j.id], -j.priority,
                                         j.state is not JobState.RUNNING, j.submit_time, j.id))

    def _whole_targets(self) -> dict:
        """The targets realized in each team's own order (README rule 2): a project's jobs
        take its target in order, skipping one that does not fit what is left, taking one
        whose overshoot realizes the target more nearly; where that realizes a whole GPU less,
        the project is capped there and the rest flows to its siblings."""
        T = self.T_fluid
        upper = {p: sum(j.gpus for j in self.team_order(p) if self.fits_now[j.id])
                 for p in self.leaves}
        for _ in range(2):
            capped = False
            for p in self.leaves:
                b = T[p] + 1e-9
                used, taken = 0.0, False
                for j in self.team_order(p):
                    if not self.fits_now[j.id]:
                        continue
                    if self.prot[j.id] or used + j.gpus <= b:
                        used += j.gpus
                        taken |= not self.prot[j.id]
                    elif used + j.gpus - b < b - used:
                        used += j.gpus
                        taken = True
                        break
                if taken and used < T[p] - 1.0 + 1e-6 and used < upper[p]:
                    upper[p] = used
                    capped = True
            if not capped:
                break
            T = self._targets(upper)
        return T


# ------------------------------------------------------------------ the plans' counts

def _got(sc: Scheme, plan) -> dict:
    """Allocated GPUs per org node (pooled over types: one billing weight, one share)."""
    leaf = defaultdict(float)
    for p in plan.placements:
        j = sc.jobs[p.job_id]
        if sc.alloc[j.id]:
            leaf[j.project] += j.gpus
    return sc._subtree(dict(leaf))


def _sign(x: float, eps: float = 1e-6) -> int:
    return 1 if x > eps else (-1 if x < -eps else 0)


def _tier_floors(sc: Scheme, gg: dict, gi: dict) -> set:
    if not sc.routable or sc.short:
        # protected jobs of over-share projects hold what the floors need: rule 1 shares
        # the shortfall max-min ("never dumped on one project"), whole GPUs by the code's
        # rounding; the judge does not score floors there
        return {1, -1}
    out = set()
    for F in (sc.F, {o: min(sc.F[o], sc.T_fluid[o]) for o in sc.F},
              {o: min(sc.F[o], sc.T_whole[o]) for o in sc.F}):
        d = {o: min(gg[o], F[o]) - min(gi[o], F[o]) for o in F if o != sc.root}
        for w in sc.tilts:
            out.add(_sign(sum(w[o] * v for o, v in d.items())))
    return out


def _tier_targets(sc: Scheme, gg: dict, gi: dict) -> set:
    if sc.short or sc.near_tie:
        return {1, -1}
    out = set()
    levels = sorted({d for o, d in sc.depth.items() if o != sc.root})
    for T in (sc.T_fluid, sc.T_whole):
        met = lambda g, o: min(g[o], T[o])  # noqa: E731
        lex = []
        for d in levels:
            lex.append(sum(met(gg, o) - met(gi, o) for o in T if sc.depth[o] == d))
        first = next((_sign(x) for x in lex if _sign(x)), 0)
        out.add(first)
        out.add(_sign(sum(lex)))
        # the code's own reading (optalloc.plan.score): GPUs above the floor up to the target
        out.add(_sign(sum(max(0.0, met(gg, o) - min(gg[o], sc.F[o]))
                          - max(0.0, met(gi, o) - min(gi[o], sc.F[o]))
                          for o in T if o != sc.root)))
    return out


def _combine(signs) -> set:
    s = {x for x in signs if x}
    if not s:
        return {0}
    return s


def _lex(a: list, b: list) -> int:
    for x, y in zip(a, b):
        if _sign(x - y):
            return _sign(x - y)
    return 0


def _team_vec(sc: Scheme, plan, p: str) -> list:
    placed = {pl.job_id for pl in plan.placements}
    prios = sorted({j.priority for j in sc.cfg.jobs if j.project == p}, reverse=True)
    return [sum(j.gpus for j in sc.cfg.jobs if j.project == p and j.priority == q
                and sc.alloc[j.id] and j.id in placed) for q in prios]


def _tier_team(sc: Scheme, g, i) -> set:
    return _combine(_lex(_team_vec(sc, g, p), _team_vec(sc, i, p)) for p in sc.leaves)


def _alloc_total(sc, plan) -> int:
    return sum(sc.jobs[p.job_id].gpus for p in plan.placements if sc.alloc[p.job_id])


def _unalloc(sc, plan) -> dict:
    u = defaultdict(int)
    for p in plan.placements:
        if not sc.alloc[p.job_id]:
            u[sc.jobs[p.job_id].project] += sc.jobs[p.job_id].gpus
    return u


def _tier_fill(sc: Scheme, g, i) -> set:
    ug, ui = _unalloc(sc, g), _unalloc(sc, i)
    return _combine(_sign(ug[p] - ui[p]) for p in sc.leaves)


def _busy(sc, plan) -> int:
    return sum(sc.jobs[p.job_id].gpus for p in plan.placements)


def _kept_vec(sc: Scheme, plan, p: str) -> list:
    pre = {x.job_id for x in plan.preemptions}
    run = sorted((j for j in sc.cfg.jobs if j.project == p and j.state is JobState.RUNNING
                  and sc.alloc[j.id]), key=lambda j: (-j.priority, j.submit_time, j.id))
    return [j.gpus if j.id not in pre else 0 for j in run]


def _tier_kept(sc: Scheme, g, i) -> set:
    return _combine(_lex(_kept_vec(sc, g, p), _kept_vec(sc, i, p)) for p in sc.leaves)


def _lost(sc: Scheme, plan, overhead: float) -> float:
    tot = 0.0
    for x in plan.preemptions:
        j = sc.jobs[x.job_id]
        ran = max(sc.now - j.start_time, 0.0)
        since = ran % (j.checkpoint_interval_s or CKPT) if j.resumable else ran
        tot += j.gpus * (since + overhead)
    return tot


def _tier_lost(sc: Scheme, g, i) -> set:
    return {_sign(_lost(sc, i, oh) - _lost(sc, g, oh), 1e-3) for oh in (OVERHEAD, 0.0)}


def scheme_compare(sc: Scheme, g, i) -> tuple[set, list]:
    """The outcomes every admissible reading of the scheme's order allows: +1 greedy's plan
    better, -1 ilp's, 0 equal; and the tiers' own outcome sets (for the failure message)."""
    gg, gi = _got(sc, g), _got(sc, i)
    tiers = [
        ("floors", _tier_floors(sc, gg, gi)),
        ("targets", _tier_targets(sc, gg, gi)),
        ("teams' order", _tier_team(sc, g, i)),
        ("allocated GPUs", {_sign(_alloc_total(sc, g) - _alloc_total(sc, i))}),
        ("fill", _tier_fill(sc, g, i)),
        ("busy", {_sign(_busy(sc, g) - _busy(sc, i))}),
        ("running kept in team order", _tier_kept(sc, g, i)),
        ("work lost", _tier_lost(sc, g, i)),
    ]
    out, seen = set(), []
    for name, s in tiers:
        seen.append((name, sorted(s)))
        out |= s - {0}
        if 0 not in s:
            return out, seen
    return out | {0}, seen


# ------------------------------------------------------------------ invariants (the judge's)

def invariants(cfg: Config, plan, now: float = NOW) -> None:
    """Capacity per GPU, gangs whole by the shape rule, a protected job neither preempted nor
    moved, no job twice, every job accounted for."""
    nodes = {n.name: n for n in cfg.nodes}
    jobs = {j.id: j for j in cfg.jobs}
    sc_cap = defaultdict(int)
    for n in cfg.nodes:
        if n.state is NodeState.UP:
            sc_cap[n.gpu_type] = max(sc_cap[n.gpu_type], n.gpus)
    used, seen = set(), set()
    for p in plan.placements:
        assert p.job_id not in seen, f"{p.job_id} placed twice"
        seen.add(p.job_id)
        j = jobs[p.job_id]
        assert sum(len(a.gpus) for a in p.nodes) == j.gpus, f"{j.id}: GPU count"
        for a in p.nodes:
            assert nodes[a.node].gpu_type == p.gpu_type
            for g in a.gpus:
                assert 0 <= g < nodes[a.node].gpus, f"{j.id}: GPU {g} past {a.node}"
                assert (a.node, g) not in used, f"{a.node}:{g} twice"
                used.add((a.node, g))
        if j.placement is not None and j.placement.nodes == p.nodes:
            continue
        S = sc_cap[p.gpu_type]
        sizes = sorted((len(a.gpus) for a in p.nodes), reverse=True)
        want = [j.gpus] if j.gpus <= S else [S] * (j.gpus // S) + (
            [j.gpus % S] if j.gpus % S else [])
        assert sizes == want, f"{j.id}: shape {sizes}, the rule says {want}"
    pre = {x.job_id for x in plan.preemptions}
    pend = {r.job_id for r in plan.pending}
    place = {p.job_id: p for p in plan.placements}
    for j in cfg.jobs:
        if j.state is JobState.RUNNING:
            assert (j.id in place) or (j.id in pre), f"running {j.id} unaccounted"
            if j.min_runtime_s > 0 and now - j.start_time < min(j.min_runtime_s, CAP) \
                    and _ent(cfg, j.project) > 0:
                assert j.id not in pre, f"protected {j.id} preempted"
                assert place[j.id].nodes == j.placement.nodes, f"protected {j.id} moved"
        else:
            assert (j.id in place) != (j.id in pend), f"queued {j.id}: placed xor pending"


def _ent(cfg: Config, project: str) -> float:
    def walk(node, frac):
        if not node.children:
            return frac if node.name == project else None
        tot = sum(c.share for c in node.children)
        for c in node.children:
            got = walk(c, frac * c.share / tot if tot else 0.0)
            if got is not None:
                return got
        return None
    return walk(cfg.org, 1.0) or 0.0


# ============================================================================ random snapshots

RATIOS = (0.0, 2.0, 4.0, 6.0)  # siblings far apart: rule 2's near-ties are the code's weights


@st.composite
def worlds(draw):
    n_types = draw(st.integers(1, 2))
    nodes = []
    n_nodes = draw(st.integers(2, 5))
    for i in range(n_nodes):
        t = TYPES[0] if n_types == 1 or i < max(1, n_nodes // 2) else TYPES[1]
        nodes.append(Node(f"{t[0]}{i}", t, draw(st.sampled_from([4, 8]))))
    types = TYPES[:n_types]
    ratio, projects = {}, []

    def siblings(names):
        rs = draw(st.permutations(RATIOS))
        for nm, r in zip(names, rs):
            ratio[nm] = r

    if draw(st.booleans()):  # 2 levels: root -> projects
        names = [f"p{i}" for i in range(draw(st.integers(2, 4)))]
        kids = []
        for nm in names:
            s = draw(st.sampled_from([0.0, 1.0, 1.0, 2.0, 3.0]))
            kids.append(OrgNode(nm, share=s))
        siblings(names)
        projects = names
        org = OrgNode("root", children=tuple(kids))
    else:  # 3 levels: root -> programs -> projects
        progs = []
        pnames = [f"P{i}" for i in range(draw(st.integers(2, 3)))]
        siblings(pnames)
        for pn in pnames:
            names = [f"{pn.lower()}{q}" for q in range(draw(st.integers(1, 3)))]
            siblings(names)
            kids = tuple(OrgNode(nm, share=draw(st.sampled_from([0.0, 1.0, 1.0, 2.0])))
                         for nm in names)
            projects += names
            progs.append(OrgNode(pn, share=float(draw(st.sampled_from([1, 2, 3]))),
                                 children=kids))
        org = OrgNode("root", children=tuple(progs))
    if all(_ent_of(org, p) == 0 for p in projects):
        org = _reshare(org)
    free = {n.name: list(range(n.gpus)) for n in nodes}
    jobs = []
    for k in range(draw(st.integers(3, 15))):
        g = draw(st.sampled_from([1, 1, 2, 2, 4, 4, 8, 16]))
        allowed = draw(st.sampled_from([(), (), (types[0],), (types[-1],)]))
        mr = draw(st.sampled_from([0.0, 900.0, 2 * H, 2 * H, 8 * H]))
        common = dict(id=f"j{k}", project=draw(st.sampled_from(projects)), gpus=g,
                      gpu_types=allowed, min_runtime_s=mr, priority=draw(st.integers(0, 2)),
                      submit_time=float(k), resumable=draw(st.sampled_from([True, True, False])))
        pl = _pack(nodes, free, g, allowed, k) if draw(st.booleans()) else None
        if pl is not None:
            ago = draw(st.sampled_from([10 * M, 90 * M, 3 * H, 10 * H]))
            jobs.append(Job(**common, state=JobState.RUNNING, start_time=NOW - ago,
                            placement=pl))
        else:
            jobs.append(Job(**common))
    cfg = Config(tuple(GpuType(t) for t in types), tuple(nodes), org,
                 Policy(max_reservations=0), tuple(jobs))
    return cfg, ratio


def _ent_of(org, name) -> float:
    return _ent(Config((), (), org, Policy(), ()), name)


def _reshare(org):
    """Give the first project a share where the draw left every one at 0."""
    def fix(node, done=[False]):
        if not node.children:
            if not done[0]:
                done[0] = True
                return OrgNode(node.name, share=1.0)
            return node
        return OrgNode(node.name, share=node.share, children=tuple(fix(c) for c in node.children))
    return fix(org, [False])


def snapshot_of(cfg: Config, ratio: dict):
    return build_snapshot(cfg, now=NOW, usage_ratio=ratio)


def documented_wait(cfg: Config, plan) -> str | None:
    """README, rule 3, "Also left": "a job held back behind a stopped teammate that is not
    resumable waits its one epoch all the same". Where greedy's plan starts such a job (a
    teammate of strictly lower priority than a non-resumable running job it stops), the
    epoch's plan may not, by the README's own account: the judge does not charge ilp with
    that wait (test_a_non_resumable_job_stopped_for_a_better_ranked_floor_does_not_hold_its_
    teammate, below, shows where it costs more than the wait)."""
    jobs = {j.id: j for j in cfg.jobs}
    started = [jobs[p.job_id] for p in plan.placements
               if jobs[p.job_id].state is JobState.QUEUED]
    for x in plan.preemptions:
        r = jobs[x.job_id]
        if r.resumable:
            continue
        for k in started:
            if k.project == r.project and k.priority < r.priority and k.min_runtime_s > 0:
                return f"{k.id} starts while its teammate {r.id} (not resumable) is stopped"
    return None


def judge(cfg: Config, ratio: dict) -> tuple[set, list]:
    snap = snapshot_of(cfg, ratio)
    ilp = run_epoch(snap)
    greedy = make_policy("greedy").decide(snap)
    for plan in (ilp, greedy):
        check_plan(snap, plan)
        invariants(cfg, plan)
    sc = Scheme(cfg, ratio)
    out, tiers = scheme_compare(sc, greedy, ilp)
    why = documented_wait(cfg, greedy)
    if out == {1} and why:
        return {0, 1}, tiers + [("excused, README rule 3 'Also left'", [why])]
    return out, tiers


def _org_src(o) -> str:
    if not o.children:
        return f"OrgNode({o.name!r}, share={o.share!r})"
    kids = ", ".join(_org_src(c) for c in o.children)
    return f"OrgNode({o.name!r}, share={o.share!r}, children=({kids},))"


def _job_src(j) -> str:
    kw = (f"min_runtime_s={j.min_runtime_s!r}, priority={j.priority}, "
          f"submit_time={j.submit_time!r}, resumable={j.resumable}")
    if j.gpu_types:
        kw += f", gpu_types={tuple(j.gpu_types)!r}"
    if j.state is JobState.RUNNING:
        pl = j.placement
        on = ", ".join(f"NodeAlloc({a.node!r}, {tuple(a.gpus)!r})" for a in pl.nodes)
        kw += (f", state=JobState.RUNNING, start_time={j.start_time!r}, "
               f"placement=Placement({j.id!r}, {pl.gpu_type!r}, ({on},))")
    return f"Job({j.id!r}, {j.project!r}, {j.gpus}, {kw})"


def _describe(cfg, ratio) -> str:
    """The example as Python source (to paste into a hand-worked test)."""
    types = tuple(g.name for g in cfg.gpu_types)
    nodes = ", ".join(f"Node({n.name!r}, {n.gpu_type!r}, {n.gpus})" for n in cfg.nodes)
    jobs = ",\n    ".join(_job_src(j) for j in cfg.jobs)
    return (f"cfg = Config(tuple(GpuType(t) for t in {types!r}), ({nodes},),\n  "
            f"{_org_src(cfg.org)},\n  Policy(max_reservations=0), (\n    {jobs},))\n"
            f"ratio = {ratio!r}\n")


@settings(max_examples=int(os.environ.get("JUDGE_N", 300)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(worlds())
def test_ilp_never_loses_to_greedy_on_the_readme_order_and_both_keep_the_invariants(w):
    cfg, ratio = w
    out, tiers = judge(cfg, ratio)
    assert out != {1}, f"greedy better under every reading: {tiers}\n{_describe(cfg, ratio)}"


# ============================================================================ hand-worked cases
# Each case's whole outcome is worked out by hand from the README before it was run. Where the
# code disagrees and the disagreement is a fault, the case is a strict xfail naming the cause.

AGO_PAST = 3 * H      # a 2-h job started 3 h ago: past its protection
AGO_FRESH = 30 * M    # a 2-h job started 30 min ago: protected


def _run(jid, project, gpus_on, mr, ago, prio=0, submit=0.0, gpu_type="h100", **kw) -> Job:
    pl = Placement(jid, gpu_type, tuple(NodeAlloc(n, tuple(g)) for n, g in gpus_on))
    return Job(jid, project, sum(len(g) for _, g in gpus_on), min_runtime_s=mr, priority=prio,
               submit_time=submit, state=JobState.RUNNING, start_time=NOW - ago, placement=pl,
               **kw)


def _q(jid, project, gpus, mr=2 * H, prio=0, submit=0.0, **kw) -> Job:
    return Job(jid, project, gpus, min_runtime_s=mr, priority=prio, submit_time=submit, **kw)


def _flat(*kids) -> OrgNode:
    return OrgNode("root", children=tuple(OrgNode(n, share=s) for n, s in kids))


def _cfg(nodes, org, jobs, types=("h100",)) -> Config:
    return Config(tuple(GpuType(t) for t in types), tuple(nodes), org,
                  Policy(max_reservations=0), tuple(jobs))


def _outcome(cfg, ratio):
    """The whole outcome of ilp's plan: runs {job: (type, ((node, GPUs), ...))}, preempted
    {job: (code, needed_by)}, pending {job: code}, messages by job; invariants checked."""
    snap = snapshot_of(cfg, ratio)
    plan = run_epoch(snap)
    check_plan(snap, plan)
    invariants(cfg, plan)
    runs = {p.job_id: (p.gpu_type, tuple(sorted((a.node, len(a.gpus)) for a in p.nodes)))
            for p in plan.placements}
    pre = {p.job_id: (p.code.value, tuple(sorted(p.needed_by))) for p in plan.preemptions}
    pend = {r.job_id: r.code.value for r in plan.pending}
    msg = {**{r.job_id: r.message for r in plan.pending},
           **{p.job_id: p.message for p in plan.preemptions}}
    return runs, pre, pend, msg


def _held(cfg, runs) -> dict:
    by = defaultdict(int)
    jobs = {j.id: j for j in cfg.jobs}
    for jid, (_, pieces) in runs.items():
        by[jobs[jid].project] += sum(n for _, n in pieces)
    return dict(by)


# ----------------------------------------------------------------------------- the scorer itself

def test_the_judges_scorer_reads_floors_targets_and_the_tilt_from_the_readme():
    # 2 x 4 h100 = 8 GPUs. Org (in this YAML order) B 2, C 1, A 2, Z 1: entitled 8/6 per share,
    # B 2.67, C 1.33, A 2.67, Z 1.33. Ratios A 0, B 2, C 4, Z 6: the Fair-Tree order A, B,
    # C, Z. Demands A 7, B 9, C 4, Z 8 (C's 4-GPU job fits n0, which holds no protected
    # work), so floors min(D, E) rounded down: A 2, B 2, C 1, Z 1. Z's protected 4-GPU job
    # is 3 over its floor: 4 GPUs are left for the others' floors of 5. But B's 8-GPU job
    # fits nowhere beside zp this epoch, so B can hold only b1 (1 GPU): its floor counts up
    # to 1 there (rule 2, the rest flows), and A 2 + B 1 + C 1 + Z 4 = 8: no shortfall left
    # to share, no spare either. Rank tilt (4 projects with work, places 1, 2/3, 1/3, 0):
    # A 2, B 5/3, C 4/3, Z 1.
    cfg, ratio = _integerize_case()
    sc = Scheme(cfg, ratio)
    assert sc.project_order == ["A", "B", "C", "Z"]
    assert {p: sc.F[p] for p in "ABCZ"} == {"A": 2, "B": 2, "C": 1, "Z": 1}
    assert not sc.fits_now["b8"] and not sc.short
    assert {p: round(sc.T_fluid[p], 6) for p in "ABCZ"} == {"A": 2, "B": 1, "C": 1, "Z": 4}
    assert {p: round(sc.tilts[0][p], 6) for p in "ABCZ"} == {
        "A": 2.0, "B": round(5 / 3, 6), "C": round(4 / 3, 6), "Z": 1.0}


def test_the_judges_scorer_lets_a_project_whose_jobs_cannot_fit_leave_its_target_to_others():
    # 3 x 8 h100 = 24, A = B = C (entitled 8 each), ratios A 0, B 2, C 4. B's protected
    # 16-GPU gang holds n1 + n2 and A's protected 4-GPU job half of n0: 20 GPUs protected,
    # 4 left (B's job past protection on n0). C's only job needs 8 GPUs on one node: it fits
    # nowhere beside the protected jobs this epoch, so rule 2 ("when its next jobs do not
    # fit, the rest flows to its siblings") gives C no target, and A, ranked first, gets its
    # whole demand 5; B the rest, 19.
    cfg, ratio = _head_of_line_case()
    sc = Scheme(cfg, ratio)
    assert not sc.fits_now["c8"] and sc.fits_now["aq"] and sc.fits_now["bold"]
    assert {p: sc.F[p] for p in "ABC"} == {"A": 5, "B": 8, "C": 8}
    assert {p: round(sc.T_whole[p], 6) for p in "ABC"} == {"A": 5, "B": 19, "C": 0}


# ----------------------------------------------------------------------------- passing cases

def test_unallocated_work_that_may_run_anywhere_leaves_the_only_type_its_teammate_fits():
    # h0 (h100, 4) and b0 (b200, 4). Z has no share (rule 4: all its work is unallocated,
    # whatever its min_runtime): z2 (2 GPUs, any type, submitted first) and z4 (4 GPUs,
    # h100 only). No allocated work, so the idle GPUs are all Z's (rule 2's fill). Both fit
    # only if z2 takes b0 and z4 h0: 6 GPUs busy. Greedy best-fits z2 on h0 (first of two
    # equal nodes) and z4 waits beside 2 idle b200 GPUs; the optimizer sees the packing (its
    # freedom, README "How an epoch decides"): the judge's order prefers it on fill and busy.
    cfg = _cfg([Node("h0", "h100", 4), Node("b0", "b200", 4)], _flat(("A", 1.0), ("Z", 0.0)),
               [_q("z2", "Z", 2, mr=8 * H, submit=0.0),
                _q("z4", "Z", 4, mr=900.0, submit=1.0, gpu_types=("h100",))],
               types=("h100", "b200"))
    ratio = {"A": 0.0, "Z": 2.0}
    runs, pre, pend, _ = _outcome(cfg, ratio)
    assert runs == {"z2": ("b200", (("b0", 2),)), "z4": ("h100", (("h0", 4),))}
    assert (pre, pend) == ({}, {})
    out, _ = judge(cfg, ratio)
    assert out == {-1}


def test_a_teammate_of_a_stopped_non_resumable_job_starts_beside_the_floor_that_stopped_it():
    # Until stop 60 README rule 3, "Also left": "a job held back behind a stopped teammate
    # that is not resumable waits its one epoch all the same". Since stop 60 a non-resumable
    # job that the plan stops gave way where work ranked above it takes its own place
    # (keep_displaced.gave_way): it ends, so its teammate below it starts (rule 3: nothing
    # waits ahead of d; rule 6: an allocated job that fits idle GPUs does not wait).
    # n0 (4) + n1 (8) h100, A = B (entitled 6 each), ratios A 2, B 0: B first. A runs r
    # (priority 1, 4 GPUs, a debug job 90 min in: past its 15 min, not resumable) on n1 and
    # unallocated u (1 GPU) on n0; queued: B's g (8 GPUs, debug), A's unallocated v, w (1
    # each) and A's debug d (priority 0, 1 GPU). Floors A 5 (r 4 + d 1), B 6: g needs n1
    # whole, so r is stopped for B's floor (B ranked first, 6 floor GPUs against A's 4:
    # rule 1) and ends. d fits on n0 (4 GPUs: u, v, w and d): it starts beside the
    # unallocated u, v and w, as greedy does (until stop 60 r's keep_order row held it an
    # epoch, told r ends, and one GPU of n0 idled).
    cfg = _cfg([Node("n0", "h100", 4), Node("n1", "h100", 8)], _flat(("A", 1.0), ("B", 1.0)),
               [_run("u", "A", [("n0", (0,))], 0.0, 10 * M, submit=0.0),
                _run("r", "A", [("n1", range(4))], 900.0, 90 * M, prio=1, submit=1.0,
                     resumable=False),
                _q("g", "B", 8, mr=900.0, submit=2.0),
                _q("v", "A", 1, mr=0.0, submit=3.0), _q("w", "A", 1, mr=0.0, submit=4.0),
                _q("d", "A", 1, mr=900.0, submit=5.0)])
    ratio = {"A": 2.0, "B": 0.0}
    runs, pre, pend, msg = _outcome(cfg, ratio)
    assert runs == {"u": ("h100", (("n0", 1),)), "v": ("h100", (("n0", 1),)),
                    "w": ("h100", (("n0", 1),)), "g": ("h100", (("n1", 8),)),
                    "d": ("h100", (("n0", 1),))}
    assert pre == {"r": ("PreemptedForFairShare", ("g",))}
    assert pend == {}
    assert "not resumable, it ends" in msg["r"]
    out, _ = judge(cfg, ratio)  # the same plan as greedy's
    assert out == {0}


# ----------------------------------------------------------------------------- counterexamples
# Found by the property above (HYPOTHESIS_PROFILE=explore, JUDGE_N=1500, 25 seeds), shrunk by
# hand to the smallest cluster that keeps the cause, and checked by hand against the README.


def _routing_case():
    """h0 (h100, 8) + b0 (b200, 8), one budget over both types (README rule 2, pooled)."""
    jobs = [_run("a1", "A", [("h0", range(4))], 8 * H, 1 * H, submit=0.0),
            _run("a2", "A", [("h0", (4, 5))], 2 * H, AGO_PAST, submit=1.0,
                 gpu_types=("h100",)),
            _q("a3", "A", 2, submit=2.0),
            _q("b1", "B", 4, submit=3.0, gpu_types=("h100",)),
            _q("b2", "B", 2, submit=4.0)]
    cfg = _cfg([Node("h0", "h100", 8), Node("b0", "b200", 8)], _flat(("A", 3.0), ("B", 1.0)),
               jobs, types=("h100", "b200"))
    return cfg, {"A": 0.0, "B": 2.0}


# Both routing cases below were strict xfails until stop 60: route() gave every leaf z * want
# with one z for all (rank-blind), so a contested type was shared whatever the Fair-Tree
# order, _fit capped the short leaves at what they got and Targets.share_floor cut their
# floors to it. Now the floors are routed first (leximin, held), then the wants in the
# Fair-Tree order (optalloc/model/route.py).


def test_a_contested_type_is_routed_to_the_floors_first_so_a_better_ranked_job_keeps_its_place():
    # Pooled 16 GPUs, A 3 : B 1 -> entitled A 12, B 4; A ratio 0 (first), B 2. A: a1 (4,
    # protected) and a2 (2, h100 only, past its protection) on h0, a3 (2, any type) queued:
    # D 8, floor 8. B: b1 (4, h100 only), b2 (2, any type): D 6, floor min(6, 4) = 4. Routed
    # (rule 2: "placed on the types each project's jobs can use"): h100 A 6 + B 2, b200 A 2
    # + B 2: both floors fit, and B's 2 more (b1) only on h100, which A's floor holds: targets
    # A 8, B 4. Whole jobs: keeping a2 gives A 8 (floor met) and B 2 (b2; b1 needs 4 h100,
    # 2 are left); stopping a2 for b1 gives A 6, B 6 (4 of its floor): 2 floor GPUs of the
    # first-ranked A against 2 of B, so A keeps its place (rule 1, with or without the
    # tilt). Greedy does this. Expected: a1, a2 kept, a3 starts (h0's 2 free GPUs or b0),
    # b2 starts on b0, b1 waits for capacity (B below its floor, A at its target 8).
    cfg, ratio = _routing_case()
    runs, pre, pend, msg = _outcome(cfg, ratio)
    assert set(runs) == {"a1", "a2", "a3", "b2"}
    assert runs["a1"] == ("h100", (("h0", 4),)) and runs["a2"] == ("h100", (("h0", 2),))
    assert runs["b2"] == ("b200", (("b0", 2),))
    assert (pre, pend) == ({}, {"b1": "WaitingForCapacity"})
    assert "below its floor" in msg["b1"] and "A (8 of target 8" in msg["b1"]
    assert _held(cfg, runs) == {"A": 8, "B": 2}


def test_an_idle_siblings_share_on_a_contested_type_goes_to_the_better_ranked_project_first():
    # Same pooled pattern with an idle project. 16 GPUs: h0 (h100, 4), b1 (b200, 4), b2
    # (b200, 8); shares A 2, B 1, C 3 (idle): entitled A 5.33, B 2.67, C 8; ratios A 0,
    # B 2, C 6. A: a0 (4, h100 only, priority 0) on h0 past its protection, a2 (4, any
    # type, priority 1) queued: D 8, floor 5. B: d2 (2, priority 2) on b2, protected; b4
    # (4, h100 only, priority 1) and b1 (1, h100 only, priority 0) queued: D 7, floor 2.
    # Rule 2: C's unused share goes to A first (ratio 0), up to its demand 8: a0 on h100 and
    # a2 on b200; B's h100 jobs then find h100 held by A's target and B stays at its floor
    # and target 2 (d2). Expected: a0 kept, a2 starts on a b200 node, b4 and b1 wait (B
    # at its target); greedy does this. (The code routes A 5.33 / B 4.67 by one z, caps A
    # at 5, A's own order (a2 before a0) realizes 4 of it, and a0 is stopped for b4.)
    jobs = [_run("a0", "A", [("h0", range(4))], 2 * H, 10 * H, submit=0.0,
                 gpu_types=("h100",)),
            _q("a2", "A", 4, prio=1, submit=2.0),
            _run("d2", "B", [("b2", (3, 4))], 2 * H, 90 * M, prio=2, submit=11.0,
                 gpu_type="b200", resumable=False),
            _q("b4", "B", 4, mr=8 * H, prio=1, submit=13.0, gpu_types=("h100",)),
            _q("b1", "B", 1, mr=8 * H, prio=0, submit=14.0, gpu_types=("h100",))]
    cfg = _cfg([Node("h0", "h100", 4), Node("b1", "b200", 4), Node("b2", "b200", 8)],
               _flat(("A", 2.0), ("B", 1.0), ("C", 3.0)), jobs, types=("h100", "b200"))
    runs, pre, pend, _ = _outcome(cfg, {"A": 0.0, "B": 2.0, "C": 6.0})
    assert set(runs) == {"a0", "a2", "d2"} and pre == {}
    assert runs["a0"] == ("h100", (("h0", 4),)) and runs["a2"][0] == "b200"
    assert pend["b4"] == "OverShare" and pend["b1"] in ("OverShare", "LowerPriorityInProject")
    assert set(pend) == {"b4", "b1"}


def _non_resumable_case():
    """h0, h1 (8) + h2 (4) h100; A 2 : B 3."""
    jobs = [_run("a1", "A", [("h1", range(6))], 8 * H, 1 * H, submit=0.0),
            _q("a8", "A", 8, submit=1.0),
            _run("bnr", "B", [("h0", range(3))], 2 * H, AGO_PAST, prio=1, submit=2.0,
                 resumable=False),
            _q("blo", "B", 2, submit=3.0)]
    cfg = _cfg([Node("h0", "h100", 8), Node("h1", "h100", 8), Node("h2", "h100", 4)],
               _flat(("A", 2.0), ("B", 3.0)), jobs)
    return cfg, {"A": 0.0, "B": 2.0}


# Fixed at stop 60 (was a strict xfail): keep_displaced.gave_way asked whether bnr would fit
# anywhere on h100 beside the plan's work but blo (on h2's 4 free GPUs it would), though
# bnr, not resumable, ends when stopped; it now asks whether bnr fits in its own place (h0,
# taken by A's a8): it does not, so it gave way and greedy's plan is eligible. The bench's
# seed 6 keeps its plan (tests/test_epoch_repack_order.py).
def test_a_non_resumable_job_stopped_for_a_better_ranked_floor_does_not_hold_its_teammate():
    # 20 GPUs, A 2 : B 3 -> entitled A 8, B 12; A ratio 0 (first), B 2. A: a1 (6, protected)
    # on h1, a8 (8, queued): D 14, floor 8. B: bnr (priority 1, 3 GPUs, past protection, not
    # resumable) on h0, blo (priority 0, 2, queued): D 5, floor 5. a8 needs a whole 8-GPU
    # node: h1 is a1's (protected), h0 bnr's. Keep bnr: A 6 (6 of 8), B 5 (bnr + blo). Stop
    # bnr (it ends): a8 on h0, A 14 (8 of 8), blo on the 2 free of h1 (or h2), B 2 (2 of 5).
    # Rule 1: A first gains 2 floor GPUs, B loses 3: within the tilt (B's not more than twice
    # as large), A wins; greedy does that. blo's start is no breach of rule 3: bnr is not
    # waiting for anything, it ends. Expected: a8 on h0, bnr preempted for it, blo starts,
    # nothing waits.
    cfg, ratio = _non_resumable_case()
    runs, pre, pend, _ = _outcome(cfg, ratio)
    assert set(runs) == {"a1", "a8", "blo"}
    assert runs["a8"] == ("h100", (("h0", 8),)) and runs["a1"] == ("h100", (("h1", 6),))
    assert runs["blo"][1][0][1] == 2
    assert pre == {"bnr": ("PreemptedForFairShare", ("a8",))}
    assert pend == {}


def _head_of_line_case():
    """3 x 8 h100, A = B = C."""
    jobs = [_run("a4", "A", [("n0", range(4))], 2 * H, AGO_FRESH, submit=0.0),
            _run("bold", "B", [("n0", range(4, 8))], 2 * H, AGO_PAST, submit=1.0),
            _run("b16", "B", [("n1", range(8)), ("n2", range(8))], 8 * H, 10 * M, submit=2.0),
            _q("aq", "A", 1, submit=3.0), _q("bq", "B", 2, submit=4.0),
            _q("c8", "C", 8, submit=5.0)]
    cfg = _cfg([Node(f"n{i}", "h100", 8) for i in range(3)],
               _flat(("A", 1.0), ("B", 1.0), ("C", 1.0)), jobs)
    return cfg, {"A": 0.0, "B": 2.0, "C": 4.0}


# Fixed at stop 60 (was a strict xfail): the floor of a waiting single-node job that fits no up
# node beside the protected jobs is no lower bound of the targets' water-filling
# (targets._runnable_floors): targets A 5, B 19, C 0.
def test_a_gang_that_fits_nowhere_beside_protected_jobs_leaves_its_share_to_a_better_ranked_job():
    # 24 GPUs, entitled 8 each; ratios A 0, B 2, C 4. Protected: A's a4 (4 of n0), B's b16
    # (n1 + n2): 20 GPUs. bold (B, 4 of n0) is past its protection. Floors A min(5, 8) = 5,
    # B 8, C 8; B holds 16 protected, 8 over its floor. C's only job needs a whole 8-GPU
    # node and every node holds protected work: it cannot run this epoch, so its share
    # flows on (rule 2) and A, ranked first and below its floor (4 of 5), takes 1 GPU of
    # bold's 4: bold is stopped (B is 12 over its floor, rule 1), aq starts on n0, and B's
    # bq (2) takes 2 of the 3 left (rule 6; bold, 4, cannot restart there). c8 waits.
    # Greedy does this.
    cfg, ratio = _head_of_line_case()
    runs, pre, pend, _ = _outcome(cfg, ratio)
    assert set(runs) == {"a4", "b16", "aq", "bq"}
    assert runs["aq"] == ("h100", (("n0", 1),)) and runs["bq"] == ("h100", (("n0", 2),))
    assert set(pre) == {"bold"} and pre["bold"][0] == "PreemptedForFairShare"
    assert "aq" in pre["bold"][1]
    assert pend == {"c8": "WaitingForCapacity"}
    assert _held(cfg, runs) == {"A": 5, "B": 18}


def _integerize_case():
    """2 x 4 h100; the org in YAML order B 2, C 1, A 2, Z 1."""
    jobs = [_run("zp", "Z", [("n1", range(4))], 2 * H, 90 * M, prio=2, submit=0.0),
            _run("zr2", "Z", [("n0", (0, 1))], 2 * H, AGO_PAST, prio=1, submit=1.0),
            _run("zr1", "Z", [("n0", (2,))], 2 * H, AGO_PAST, prio=2, submit=2.0),
            _q("z0", "Z", 1, prio=0, submit=3.0),
            _run("a1", "A", [("n0", (3,))], 900.0, AGO_PAST, prio=2, submit=4.0),
            _q("a2", "A", 2, mr=900.0, prio=1, submit=5.0),
            _q("a4", "A", 4, prio=0, submit=6.0),
            _q("b1", "B", 1, submit=7.0), _q("b8", "B", 8, submit=8.0),
            _q("c4", "C", 4, mr=900.0, submit=9.0)]
    cfg = _cfg([Node("n0", "h100", 4), Node("n1", "h100", 4)],
               _flat(("B", 2.0), ("C", 1.0), ("A", 2.0), ("Z", 1.0)), jobs)
    return cfg, {"A": 0.0, "B": 2.0, "C": 4.0, "Z": 6.0}


# Fixed at stop 59 (was a strict xfail): targets._integerize breaks equal remainders in the
# Fair-Tree order (tree_position), not the org file's.
def test_a_shortfalls_whole_gpu_goes_to_the_better_ranked_tie_not_the_first_declared():
    # 8 GPUs; entitled 8/6 per share: B 2.67, C 1.33, A 2.67, Z 1.33; ratios A 0, B 2, C 4,
    # Z 6. Demands A 7, B 9, C 4, Z 8: floors A 2, B 2, C 1, Z 1. Z's protected zp holds n1
    # (3 over its floor): 4 GPUs are left for floors of 5, shared in proportion (rule 1):
    # A 1.6, B 1.6, C 0.8; in whole GPUs the A/B tie goes to A, ranked first: A 2, B 1, C 1
    # (and B could not use a second GPU anyway: b8 fits nowhere beside zp, rule 2).
    # n0 holds only work past protection: Z's zr2 (2, priority 1) and zr1 (1, priority 2),
    # A's debug a1 (1). A keeps a1 and starts a2 (2) in Z's place (A 3: its floor met), B
    # starts b1 (1) in the other; zr2 and zr1 are stopped (Z 4, at its target). Left waiting:
    # z0 (behind its stopped teammates), a4 (A past its target with higher-priority jobs),
    # b8 and c4 (below their floors, no room). Greedy does this.
    cfg, ratio = _integerize_case()
    runs, pre, pend, msg = _outcome(cfg, ratio)
    assert runs == {"zp": ("h100", (("n1", 4),)), "a1": ("h100", (("n0", 1),)),
                    "a2": ("h100", (("n0", 2),)), "b1": ("h100", (("n0", 1),))}
    assert {j: c for j, (c, _) in pre.items()} == {"zr2": "PreemptedForFairShare",
                                                   "zr1": "PreemptedForFairShare"}
    assert pend == {"z0": "LowerPriorityInProject", "a4": "LowerPriorityInProject",
                    "b8": "WaitingForCapacity", "c4": "WaitingForCapacity"}


def _exact_tilt_case():
    """2 x 4 h100; A 1, B 2 and two idle projects C, D (2 each)."""
    jobs = [_q("j0", "A", 8, submit=0.0, gpu_types=("h100",)),
            _run("j3", "B", [("h0", (0, 1))], 8 * H, 10 * H, submit=3.0)]
    cfg = _cfg([Node("h0", "h100", 4), Node("h1", "h100", 4)],
               _flat(("A", 1.0), ("B", 2.0), ("C", 2.0), ("D", 2.0)), jobs)
    return cfg, {"A": 2.0, "B": 6.0, "C": 0.0, "D": 4.0}


# Fixed at stop 60 (was a strict xfail): impact.tier_weights multiplies the tilt's factor by
# 1 + the tie-break instead of adding the tie-break per GPU, which summed to more for B's two
# GPUs (1 x 2.042 < 2 x 1.025) and gave the exact tie to the worse-ranked, larger floor.
def test_a_floor_exactly_twice_as_large_still_loses_to_the_better_ranked_one():
    # 8 GPUs, shares A 1, B 2, C 2, D 2 (C, D idle): entitled 8/7 per share, A 1.14, B 2.29.
    # Ratios C 0, A 2, D 4, B 6: of the projects with work A is first (place 1, weight 2)
    # and B last (weight 1). A's j0 needs both nodes whole (8); B's j3 (2 GPUs, past its
    # protection) holds h0. Floors A min(8, 1.14) = 1, B min(2, 2.29) = 2: whole jobs make
    # them exclusive, and B's is exactly twice A's: README rule 1, "between the best- and
    # the worst-ranked project with work a floor up to twice as large loses": A's wins. The
    # targets agree: C and D idle, the spare 5 goes to A (ratio 2 before 6): A 6, B 2; j0
    # meets 6 of A's, j3 2 of B's. Greedy does this. Expected: j3 stopped for j0, j0 on both
    # nodes, nothing waits.
    cfg, ratio = _exact_tilt_case()
    runs, pre, pend, _ = _outcome(cfg, ratio)
    assert runs == {"j0": ("h100", (("h0", 4), ("h1", 4)))}
    assert pre == {"j3": ("PreemptedForFairShare", ("j0",))}
    assert pend == {}


def test_a_floor_over_twice_as_large_beats_the_better_ranked_one_where_greedy_follows_rank():
    # The same cluster as the exact case, B's share 3 (entitled 8/8 per share: A 1, B 3) and
    # its running job 3 GPUs: floors A 1 (weight 2), B 3 (weight 1). B's is more than twice
    # A's, so it comes first (README rule 1, "a floor larger than the tilt allows still comes
    # first"): j3 keeps h0, and j0, which needs both nodes whole, waits for capacity with A
    # below its floor (0 of 1) and B at its target 3. The 5 free GPUs fit no waiting job.
    # Greedy follows the rank and stops j3; the judge's order prefers ilp's plan.
    org = _flat(("A", 1.0), ("B", 3.0), ("C", 2.0), ("D", 2.0))
    jobs = [_q("j0", "A", 8, submit=0.0, gpu_types=("h100",)),
            _run("j3", "B", [("h0", (0, 1, 2))], 8 * H, 10 * H, submit=3.0)]
    cfg = _cfg([Node("h0", "h100", 4), Node("h1", "h100", 4)], org, jobs)
    ratio = {"A": 2.0, "B": 6.0, "C": 0.0, "D": 4.0}
    runs, pre, pend, msg = _outcome(cfg, ratio)
    assert runs == {"j3": ("h100", (("h0", 3),))}
    assert (pre, pend) == ({}, {"j0": "WaitingForCapacity"})
    assert "A is below its h100 floor (0 of 1 GPUs)" in msg["j0"]
    assert "B (3 of target 3)" in msg["j0"]
    out, _ = judge(cfg, ratio)
    assert out == {-1}


def _sibling_flow_case():
    """h0 (4) + h1 (8) h100; P0 {A1 1, A2 2}, P1 {B1 2, B2 1}, P0 = P1."""
    jobs = [_q("a11", "A1", 1, mr=900.0, prio=1, submit=11.0),
            _q("a14", "A1", 4, prio=0, submit=1.0, resumable=False),
            _q("a22", "A2", 2, prio=1, submit=4.0, resumable=False),
            _q("a28", "A2", 8, mr=8 * H, prio=1, submit=9.0),
            _run("b14", "B1", [("h1", range(4))], 900.0, 3 * H, submit=6.0),
            _run("b12", "B1", [("h1", (4, 5))], 900.0, 10 * M, prio=2, submit=12.0),
            _run("b22", "B2", [("h0", (2, 3))], 2 * H, 90 * M, prio=1, submit=8.0)]
    org = OrgNode("root", children=(
        OrgNode("P0", children=(OrgNode("A1", share=1.0), OrgNode("A2", share=2.0))),
        OrgNode("P1", children=(OrgNode("B1", share=2.0), OrgNode("B2", share=1.0)))))
    cfg = _cfg([Node("h0", "h100", 4), Node("h1", "h100", 8)], org, jobs)
    return cfg, {"P0": 2.0, "P1": 4.0, "A1": 2.0, "A2": 4.0, "B1": 0.0, "B2": 2.0}


# Fixed at stop 60 (was a strict xfail): the in-order caps take one leaf per family a pass,
# the one losing most (targets.most_lost_per_family): A2 capped at 2, A1 on 4 realizes 5.
def test_a_projects_unusable_share_reaches_its_sibling_before_another_program():
    # 12 GPUs, P0 = P1 (6 each), P0 ratio 2 first, P1 4. P0: A1 (share 1, ratio 2) wants
    # a11 (1, priority 1, debug) and a14 (4, priority 0); A2 (share 2, ratio 4) a22 (2) and
    # a28 (8, a whole node). P1: B1 (share 2, ratio 0) runs b14 (4 on h1, a debug job 3 h
    # in: past its protection) and b12 (2 on h1, protected); B2 runs b22 (2 on h0,
    # protected). Floors P0 6 (A1 2, A2 4), P1 6 (B1 4, B2 2). a28 fits nowhere beside b12,
    # so A2 can use 2 and its other 2 go to its sibling A1 (rule 2): A1 4, realized by a11 +
    # a14 (5, the overshoot of 1 nearer than the shortfall of 3). P0, ranked first and
    # below its floor, gets a14 in b14's place: b14 stopped (P1 at 8 of its floor 6), a14
    # and a22 on h1, a11 on h0. Floors by the README's tilt (places A1 1, A2 2/3, B1 1/3,
    # B2 0): stopping b14 meets P0 6 x 2 + A1 2 x 2 + A2 2 x 5/3 + P1 4 x 4/3 + B1 2 x 4/3
    # + B2 2 = 29.3 against keeping it, 26.7. Greedy does this.
    cfg, ratio = _sibling_flow_case()
    runs, pre, pend, _ = _outcome(cfg, ratio)
    assert set(runs) == {"a11", "a14", "a22", "b12", "b22"}
    assert runs["a14"] == ("h100", (("h1", 4),)) and runs["a22"] == ("h100", (("h1", 2),))
    assert set(pre) == {"b14"} and pre["b14"][0] == "PreemptedForFairShare"
    assert "a14" in pre["b14"][1]
    # a28 waits: A2's target is cut to what its jobs can hold (2), and a28 fits no node
    # beside b12 anyway; either word is true (README: the message says which cut it)
    assert set(pend) == {"a28"} and pend["a28"] in ("OverShare", "WaitingForCapacity")


def _restart_case():
    """h0 (4), h1 (8), h2 (4) h100; A 1, B 1, C 3."""
    jobs = [_q("a0", "A", 4, mr=8 * H, submit=0.0, resumable=False, gpu_types=("h100",)),
            _run("b5", "B", [("h0", range(4))], 8 * H, 10 * H, submit=5.0),
            _run("b6", "B", [("h1", (0, 1))], 2 * H, AGO_PAST, submit=6.0),
            _q("c7", "C", 8, mr=8 * H, submit=7.0),
            _run("a10", "A", [("h1", (2, 3, 4, 5))], 8 * H, 10 * H, prio=2, submit=10.0)]
    cfg = _cfg([Node("h0", "h100", 4), Node("h1", "h100", 8), Node("h2", "h100", 4)],
               _flat(("A", 1.0), ("B", 1.0), ("C", 3.0)), jobs)
    return cfg, {"A": 4.0, "B": 6.0, "C": 2.0}


@pytest.mark.xfail(strict=True, reason=(
    "optalloc/model/requirements.py:217 cand_counted(): a restart column is in no share "
    "row (README rule 8), so in the model restarting a10 on h2 with a0 held back (a10's "
    "keep_order row) meets none of A's floor 3, while stopping B's b5 (B's whole floor 3), "
    "restarting a10 on h0 and starting a0 on h2 meets A's 3 with a0: A ranks ahead of B, "
    "so the MIP takes that (status optimal, objective = bound). Scored by plan_score, which "
    "counts a10, the chosen plan is worse than the rule-keeping one on floors: 3117.7 "
    "against 3574.0 (B 0 of 3 against 3 of 3, A's floor met either way). Greedy's plan (a0 "
    "on h2, a10 stopped) breaks a10's keep_order row and is no candidate. Fix (not tried): "
    "count an allocated job's restart on its own type in its project's floor rows, or make "
    "'the stopped job restarts in its teammate's start's place' (several_places._stopped) "
    "a candidate before the plans are compared, not only a repair of the chosen one"))
def test_a_stopped_job_restarts_beside_another_projects_floor_not_in_its_place():
    # 16 GPUs, shares A 1, B 1, C 3: entitled 3.2, 3.2, 9.6; ratios C 2, A 4, B 6. C: c7
    # (8 GPUs, a whole node) queued: floor 8. A: a10 (priority 2, 4 GPUs on h1, past its
    # protection, resumable) and a0 (priority 0, 4, queued): floor 3. B: b5 (4 on h0) and b6
    # (2 on h1), both past protection: floor 3. c7 needs h1 whole (C first, below its floor):
    # a10 and b6 are stopped. a10 restarts at once on h2's 4 idle GPUs (README rule 8,
    # `Moved`), ahead of its teammate a0 (rule 3: a running job is never passed by a lower
    # priority of its project), and B keeps b5 (its floor 3). A 4, B 4, C 8: every floor met.
    # Expected: c7 on h1, b5 kept on h0, a10 moved to h2; b6 preempted for c7; a0 waits.
    cfg, ratio = _restart_case()
    runs, pre, pend, _ = _outcome(cfg, ratio)
    assert runs == {"c7": ("h100", (("h1", 8),)), "b5": ("h100", (("h0", 4),)),
                    "a10": ("h100", (("h2", 4),))}
    assert pre == {"a10": ("Moved", ("c7",)), "b6": ("PreemptedForFairShare", ("c7",))}
    assert pend == {"a0": "LowerPriorityInProject"}
