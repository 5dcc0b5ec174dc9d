"""Phase 2: build the epoch model, an ordered list of small `define_*` functions.

See models/formulation.md for the math of every block. The result, `EpochModel`, holds the
matrix form (`lm`, handed unchanged to every backend) and the coordinates needed to read a
solution back (which job/type/node/org node each column is).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from optalloc.model.constraints.capacity import define_node_capacity, define_packing, define_pieces
from optalloc.model.constraints.contract import define_decisions, define_one_choice
from optalloc.model.constraints.fairshare import (
    debug_value,
    define_debug_allowance,
    define_shares,
    floor_yield,
    share_tiers,
)
from optalloc.model.constraints.fill import define_fill, fill_value
from optalloc.model.constraints.gang import define_whole_node_gangs
from optalloc.model.constraints.lookahead import define_lookahead
from optalloc.model.constraints.precedence import (
    define_keep_order,
    define_precedence,
    free_keep_links,
)
from optalloc.model.context import BuildContext
from optalloc.model.fill import fill_targets
from optalloc.model.free_times import backfills
from optalloc.model.matrix import LinearModel
from optalloc.model.type_order import type_links
from optalloc.model.team_rows import team_rows
from optalloc.model.type_rows import TypeRows, type_rows
from optalloc.model.objective.impact import Impact, compute_impact
from optalloc.model.requirements import Requirements, compute_requirements
from optalloc.model.reservations import Reservations, compute_reservations
from optalloc.model.pooled import fair_targets
from optalloc.model.targets import Targets
from optalloc.snapshot import Snapshot

_EMPTY = np.zeros(0, np.int64)
#: models with at most this many `order_types` rows get them all when built; larger ones get
#: those their solutions break (optalloc.model.type_rows). On the 88-GPU bench epoch (~130
#: rows) added as broken they cost each MIP one to three more solves; the 1,024-GPU one has
#: ~4,000, of which its LP's point breaks 29-110 at first
EAGER_TYPE_ROWS = 1000
#: ... in models of fewer columns than this; larger ones make their links on first use
EAGER_TYPE_VARS = 2000

#: The model, in build order. Each adds one block of variables and/or one constraint family.
DEFINES = (
    define_decisions,  # x (starts), k (keeps), churn offset          -- contract.py
    define_one_choice,  # one_choice[job]                              -- contract.py
    define_whole_node_gangs,  # z, gang[t]                             -- gang.py
    define_packing,  # u, pack[t,s]                                    -- capacity.py
    define_pieces,  # n, y, pieces, spread (per-node gangs by class)   -- capacity.py
    define_node_capacity,  # capacity[t] (a row per up node)           -- capacity.py
    define_lookahead,  # reserve[t,s] (reserved nodes: short work only)  -- lookahead.py
    define_shares,  # m, share[o,t] (floor segments + target)          -- fairshare.py
    define_debug_allowance,  # d, debug[p,t] (debug jobs beyond target)  -- fairshare.py
    define_fill,  # f, fill[p] (idle GPUs shared among unallocated work)  -- fill.py
    define_precedence,  # order (a project's own order)                -- precedence.py
    define_keep_order,  # keep_order (running jobs before their team's lower priorities)
)


@dataclass(frozen=True, eq=False)
class EpochModel:
    snap: Snapshot
    req: Requirements
    imp: Impact
    tg: Targets
    res: Reservations
    lm: LinearModel
    x: np.ndarray
    k: np.ndarray
    z: np.ndarray
    z_node: np.ndarray
    u: np.ndarray
    u_node: np.ndarray
    u_size: np.ndarray
    y: np.ndarray
    y_node: np.ndarray
    y_class: np.ndarray
    y_count: np.ndarray
    cand_class: np.ndarray
    classes: list
    m: np.ndarray
    m_org: np.ndarray
    m_type: np.ndarray
    m_seg: np.ndarray
    d: np.ndarray
    d_org: np.ndarray
    d_type: np.ndarray
    f: np.ndarray
    f_org: np.ndarray
    fill: np.ndarray  # (O,) fill targets (optalloc.model.fill)
    prec_a: np.ndarray
    prec_b: np.ndarray
    build_s: float
    # keep_order rows: candidate keep_c[r] starts only if running job req.run_job[keep_i[r]]
    # runs (kept, or moved)
    keep_i: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    keep_c: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # the team's order between jobs whose gpu_types differ (optalloc.model.type_order): its
    # links, and their `order_types` rows, in lm only once a solution broke them (type_rows);
    # made on first use (`ordx`), which in a large epoch comes while its LP solves
    make_ordx: Callable[[], TypeRows] | None = None
    # the (running job's position, job, moved) whose `keep_order` row for the running job's
    # own priority is in lm (with_team_rows)
    team: frozenset = frozenset()

    @property
    def ordx(self) -> TypeRows | None:
        """The `order_types` links and rows (optalloc.model.type_rows), made once: a large
        epoch first asks in its greedy pass, beside its LP on the other thread (XXL: ~0.25 s
        of links off the critical path)."""
        tr = self.__dict__.get("_ordx")
        if tr is None and self.make_ordx is not None:
            tr = self.__dict__["_ordx"] = self.make_ordx()
        return tr

    @property
    def ordx_a(self) -> np.ndarray:
        """(L,) per link, the job ahead: candidate ordx_c[r] starts only if it does."""
        return self.ordx.a if self.ordx is not None else _EMPTY

    @property
    def ordx_c(self) -> np.ndarray:
        return self.ordx.c if self.ordx is not None else _EMPTY

    def with_team_rows(self, pairs: np.ndarray) -> "EpochModel":
        """This model with a `keep_order` row for each (running job's position, job, moved)
        a placement gave a start back for (optalloc.model.team_rows) that it does not have
        yet; itself when there is none."""
        pairs = np.asarray(pairs, np.int64).reshape(-1, 3)
        new = sorted({(int(a), int(b), int(m)) for a, b, m in pairs} - self.team)
        if not new:
            return self
        forced = self.res.forced if self.res is not None else np.zeros(0)
        rows = team_rows(self.snap, self.req, forced, self.x, self.k, self.lm.n_vars,
                         np.array(new, np.int64))
        out = replace(self, lm=self.lm.with_rows("keep_order_team", rows, -np.inf, 0.0),
                      team=self.team | frozenset(new))
        return self._carry(out)

    def with_all_team_rows(self) -> "EpochModel":
        """This model with the team row (optalloc.model.team_rows) of every running job and
        every queued job of its project and its priority or a lower one
        (optalloc.model.order.keep_links, with and without `equal`; a lower priority's
        `keep_order` row counts a move to another type as the running job running, its team
        row does not, as the placement reads the rule: a random cluster, fresh draws at stop
        43, where the epoch refused A's priority-1 job a move to b200 for its priority-0 8-GPU
        teammate and this bound, without those rows, allowed it): the rows never forbid a
        plan that keeps the team's order, so its optimum bounds those plans, and the epoch's
        bound (it adds only the rows its placements needed) is at least it."""
        lb, ub = self.lm.lb[self.k], self.lm.ub[self.k]
        links = [free_keep_links(self.snap, self.req, lb, ub, self.res, equal=eq)
                 for eq in (True, False)]
        i = np.concatenate([a for a, _ in links])
        c = np.concatenate([b for _, b in links])
        run = self.snap.job_running[self.req.cand_job[c]]  # a running job's move: no team row
        i, c = i[~run], c[~run]
        pairs = np.stack([i, self.req.cand_job[c], np.zeros_like(i)], axis=1)
        return self.with_team_rows(np.concatenate([pairs, self._leaver_pairs(lb, ub)]))

    def _leaver_pairs(self, lb: np.ndarray, ub: np.ndarray) -> np.ndarray:
        """(P, 3) team rows for a job leaving a drain node (it restarts as the queued job it
        becomes, optalloc.model.order) behind each running job of its project and priority
        on its type that is free to stay: keep_links leaves running jobs out of its `equal`
        links, and the epoch adds such a row where a placement needs it (fresh draws at stop
        44: this bound, without it, counted the leaver's start in place of its teammate)."""
        snap, req = self.snap, self.req
        rj, rt = req.run_job, req.run_type
        ok = (ub > 0) & (lb < 1) & ~req.run_fixed & snap.job_tier1[rj, rt]
        cj, ct = req.cand_job, req.cand_type
        leaver = snap.job_running[cj] & snap.job_on_drain[cj] & snap.job_tier1[cj, ct]
        out = [(int(i), int(cj[c]), 0) for i in np.flatnonzero(ok) for c in np.flatnonzero(leaver)
               if cj[c] != rj[i] and ct[c] == rt[i]
               and snap.job_project[cj[c]] == snap.job_project[rj[i]]
               and snap.job_priority[cj[c]] == snap.job_priority[rj[i]]]
        return np.array(out, np.int64).reshape(-1, 3)

    def with_all_type_rows(self) -> "EpochModel":
        """This model with every `order_types` row: the whole problem (its MIP's optimum is
        the epoch's true optimum; the epoch itself adds only the rows its solutions break)."""
        if self.ordx is None:
            return self
        return self.with_type_rows(np.ones(self.ordx.n_rows, bool))

    def with_type_rows(self, sel: np.ndarray) -> "EpochModel":
        """This model with the `order_types` rows `sel` ((R,) bool) added (those in it
        already are not added twice); the same columns, so every solution reads the same way,
        and the placement's tables (made once per model) carried over."""
        sel = sel & ~self.ordx.on
        if not sel.any():
            return self
        lm = self.lm.with_rows("order_types", self.ordx.M[np.flatnonzero(sel)], -np.inf, 0.0)
        out = self._carry(replace(self, lm=lm))
        out.__dict__["_ordx"] = self.ordx.with_on(sel)
        return out

    @property
    def floor(self) -> np.ndarray:
        return self.tg.floor

    @property
    def target(self) -> np.ndarray:
        return self.tg.target

    @property
    def demand(self) -> np.ndarray:
        return self.tg.demand

    def with_fill(self, left: float) -> "EpochModel":
        """This model with the fill targets set for `left` idle GPUs (optalloc.model.fill: the
        epoch measures them on the greedy baseline's plan); only the f columns' bounds move,
        so every solution reads the same way. Itself when it has no f columns or nothing
        changes."""
        if not len(self.f):
            return self
        fill = fill_targets(self.snap, self.req, self.tg, left)
        ub = self.lm.ub.copy()
        ub[self.f] = fill[self.f_org]
        if np.array_equal(ub, self.lm.ub):
            return self
        return self._carry(replace(self, lm=replace(self.lm, ub=ub), fill=fill))

    def _carry(self, out: "EpochModel") -> "EpochModel":
        """`out` (this model with other bounds or more rows, the same columns) with the
        placement's tables made once per model (optalloc.plan.place.prepare: the running jobs'
        GPUs, the candidates by job and their links, the value groups), which read neither:
        the 32,768-GPU epoch made them three times, 0.74 s."""
        for key, value in self.__dict__.items():
            if key.startswith("_") and key not in out.__dict__:
                out.__dict__[key] = value
        return out

    def plan_objective(
        self, started: np.ndarray, kept: np.ndarray, got: np.ndarray
    ) -> float:
        """Objective of a concrete plan: `started` (C,) bool candidates placed, `kept` (K,) bool
        running jobs kept, `got` (O, T) tier-1 GPUs per org node and type as the share rows count
        them (optalloc.plan.holdings.got_by_org). Share tiers met are
        filled in order up to their bounds (the best m for that plan); z, u, y carry none."""
        return sum(self.plan_tiers(started, kept, got))

    def plan_tiers(self, started: np.ndarray, kept: np.ndarray, got: np.ndarray) -> tuple:
        """The plan's objective split by the scheme's order: (floors, targets, work + fill +
        churn); compared lexicographically when the epoch chooses among candidate plans."""
        c = self.lm.c
        work = float(c[self.x][started].sum() + c[self.k][kept].sum()) + self.lm.obj_offset
        floors, targets = share_tiers(self.imp, self.tg, got)
        req = self.req
        counted = started & ~req.cand_move & ~req.cand_restart  # counts in no debug or fill row
        jobs = np.concatenate([req.run_job[kept], req.cand_job[counted]])
        types = np.concatenate([req.run_type[kept], req.cand_type[counted]])
        work += fill_value(self.imp, self.snap, self.fill, jobs, types)
        return floors, targets + debug_value(self.imp, self.snap, jobs, types), work


def _type_links(snap: Snapshot, req: Requirements, res: Reservations) -> tuple:
    """optalloc.model.type_order.type_links less the links whose job ahead may not use a
    node of the follower's type reserved until a gang's start where the follower's start may
    (free_times.backfills; the `order` rows' pairs go likewise in compute_reservations):
    short work backfills the reserved nodes while long work waits. Before, a priority-0
    debug job of any type waited behind its team's h100-only priority-2 job held off the
    reserved nodes, while unallocated work held the node it fitted (a helper's random
    search at stop 45)."""
    a, c = type_links(snap, req)
    if len(a) and res.blocking:
        keep = ~backfills(snap, req, res.hold, res.deadline, a, c)
        a, c = a[keep], c[keep]
    return a, c


def build_model(
    snap: Snapshot, req: Requirements | None = None, imp: Impact | None = None
) -> EpochModel:
    t0 = time.perf_counter()
    req = compute_requirements(snap) if req is None else req
    imp = compute_impact(snap) if imp is None else imp
    tg = fair_targets(snap, req)  # pooled across gpu_types when shares are (pooled.py)
    if not tg.pooled:  # floors of work that may move (a pooled row counts a move: no yield)
        tg = replace(tg, floor_yield=floor_yield(snap, req, tg.demand))
    res = compute_reservations(snap, req, tg)  # phase 2a: the lookahead (reservations.py)
    ctx = BuildContext(snap=snap, req=req, imp=imp, tg=tg, res=res)
    for define in DEFINES:
        define(ctx)
    lm = ctx.b.build()
    em = EpochModel(
        snap=snap, req=req, imp=imp, tg=tg, res=res, lm=lm,
        x=ctx.x, k=ctx.k, z=ctx.z, z_node=ctx.z_node,
        u=ctx.u, u_node=ctx.u_node, u_size=ctx.u_size,
        y=ctx.y, y_node=ctx.y_node, y_class=ctx.y_class, y_count=ctx.y_count,
        cand_class=ctx.cand_class, classes=ctx.classes,
        m=ctx.m, m_org=ctx.m_org, m_type=ctx.m_type, m_seg=ctx.m_seg,
        d=ctx.d, d_org=ctx.d_org, d_type=ctx.d_type, f=ctx.f, f_org=ctx.f_org, fill=ctx.fill,
        prec_a=ctx.prec_a, prec_b=ctx.prec_b, keep_i=ctx.keep_i, keep_c=ctx.keep_c,
        make_ordx=lambda: type_rows(snap, req, ctx.x, *_type_links(snap, req, res), lm.n_vars),
        build_s=0.0,
    )
    # a small model: its links now, and where they are few all their rows (no cut loop)
    if lm.n_vars < EAGER_TYPE_VARS and em.ordx.n_rows <= EAGER_TYPE_ROWS:
        em = em.with_all_type_rows()
    return replace(em, build_s=time.perf_counter() - t0)
