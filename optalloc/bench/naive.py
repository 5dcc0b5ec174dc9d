"""The epoch problem written the way most teams would write it first: PuLP + CBC, element by
element, one binary per (candidate, node, piece kind).

It is the *same problem* as optalloc's model (optalloc.model), read from an EpochModel so it
follows the lead's model: the same candidates, keep bounds (`em.lm.lb/ub` at `em.k`: protected
jobs stay, unprotected jobs on a drain node leave), share tiers (`em.m` with their bounds),
order rows (`em.prec_a/prec_b`, `em.keep_i/keep_c`) and objective coefficients (`em.lm.c` at
`em.x`, `em.k`, `em.m`, offset included), only written as an assignment model instead of optalloc's
aggregated packing (u counts per node and size, z reserved whole nodes):

    x[c]       in {0,1}  candidate c = (job j, type t) starts         objective c[em.x[c]]
    y[c, n, p] in {0,1}  a piece of kind p of c sits on up node n of type t, one binary per
                         (candidate, node, kind):
                           job    a single-node job (n has >= size GPUs)
                           whole  a whole node of a whole-node gang (n has exactly the size)
                           rem    the remainder node of a whole-node gang (the 4 of 8+8+4)
                           piece  a node of a per-node gang (n has >= gpus_per_node GPUs)
    k[i]       in {lb..ub}  running job i keeps its GPUs               objective c[em.k[i]]
    m[r]       (em.lm bounds and integrality) GPUs of share tier r met objective c[em.m[r]]
    d[r], f[r] debug GPUs beyond the target, unallocated GPUs within the fill target

    pieces per kind   sum_n y[c, n, p] = count_p(c) x[c]    (job, rem: 1; whole, piece: pieces)
    one choice        sum_t x[j, t] + k[j] <= 1
    node capacity     sum_{c,p} gpus_p(c) y[c, n, p] + sum_{i on n} g_{i,n} k[i] <= G_n
    shares            sum_{s} m[o, t, s] <= sum_{c on t, tier 1, under o} g_c x[c] + same over k
                      (+ a waiting reservation's GPUs on its project's path: g (1 - sum_t x[gang, t]))
    order             sum_t x[b, t] - sum_t x[a, t] <= 0   (a ahead of b in its project)
    debug, fill       d[p, t] (f[p]) <= the GPUs of p's debug (unallocated) jobs on t (anywhere)
    lookahead         no binary y[c, n, p] on a node reserved until S when c holds its GPUs past
                      S (the model's `reserve` rows); x[c] >= 1 for a due reservation's gang

A job's pieces sit on distinct nodes: the binaries of one kind are one per node, and a whole
node (G_n GPUs) leaves no room for the same gang's remainder. Every feasible point of this
model maps to one of optalloc's (count the job and rem binaries per node and size to get u; a
node holding a whole piece is its z; y is the piece binaries) and back (assign the u counts
to the candidates of that size, the z nodes to the gangs' whole pieces), so the two optima
are equal. The solution is already a placement: GPU indices are given in node order after the
kept jobs' GPUs. If optalloc's model gains a column block, a row family or an objective term
this model does not write, `build_naive` raises instead of solving a different problem.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from optalloc.bench.naive_rows import (
    debug_rows,
    fill_rows,
    keep_order_rows,
    order_rows,
    share_rows,
)
from optalloc.model.build import EpochModel
from optalloc.model.requirements import PIECES, SMALL, WHOLE
from optalloc.plan.holdings import Placed
from optalloc.plan.reasons import got_by_org
from optalloc.types import NodeAlloc, Placement

PROGRESS_EVERY = 250_000  # report progress every this many binaries while building

#: piece kinds, in the order a placement lists them (largest chunk first: 8 + 8 + 4)
KINDS = ("whole", "piece", "job", "rem")
#: optalloc's model parts this formulation writes element by element
KNOWN_BLOCKS = frozenset({"x", "k", "z", "u", "n", "y", "m", "d", "f"})
KNOWN_FAMILIES = frozenset({"one_choice", "gang", "pack", "pieces", "spread", "capacity", "share", "debug",
                            "order", "order_types", "keep_order", "reserve", "fill"})


@dataclass
class NaiveModel:
    prob: object  # pulp.LpProblem
    x: list  # per candidate
    y: dict  # (candidate, node, kind) -> LpVariable
    k: list  # per running job that may stay
    m: list  # per share tier column of em.m
    n_vars: int
    n_cons: int


@dataclass
class NaiveResult:
    status: str  # optimal | timeout | infeasible | error
    started: np.ndarray  # (C,) bool
    kept: np.ndarray  # (K,) bool
    placements: dict  # job index -> Placement (new starts)
    objective: float | None  # of the placed plan (em.plan_objective), offset included
    solver_objective: float | None  # what CBC reports for its incumbent, offset included
    build_s: float
    solve_s: float
    place_s: float
    n_vars: int
    n_cons: int
    message: str = ""


def piece_kinds(em: EpochModel) -> tuple[np.ndarray, ...]:
    """The pieces every candidate needs, one entry per (candidate, kind): (cand, kind index
    into KINDS, GPUs per piece, pieces, exact: the node must have exactly that many GPUs)."""
    req = em.req
    cj, ct = req.cand_job, req.cand_type
    shape, size = req.shape[cj, ct], req.size[cj, ct]
    pieces, rem = req.pieces[cj, ct], req.rem[cj, ct]
    ci = np.arange(len(cj))
    whole, tail = shape == WHOLE, (shape == WHOLE) & (rem > 0)
    parts = [  # (selected candidates, kind, GPUs per piece, pieces, exact)
        (whole, "whole", size, pieces, True),
        (shape == PIECES, "piece", size, pieces, False),
        (shape == SMALL, "job", size, np.ones_like(pieces), False),
        (tail, "rem", rem, np.ones_like(pieces), False),
    ]
    out = [np.concatenate([ci[s] for s, *_ in parts]).astype(np.int64),
           np.concatenate([np.full(s.sum(), KINDS.index(k)) for s, k, *_ in parts]),
           np.concatenate([g[s] for s, _, g, _, _ in parts]).astype(np.int64),
           np.concatenate([p[s] for s, _, _, p, _ in parts]).astype(np.int64),
           np.concatenate([np.full(s.sum(), e) for s, _, _, _, e in parts]).astype(bool)]
    order = np.lexsort((out[1], out[0]))
    return tuple(a[order] for a in out)


def _fitting(snap, t: int, gpus: int, exact: bool) -> np.ndarray:
    """Up nodes of type t a piece of `gpus` GPUs may take."""
    g = snap.node_gpus
    fit = (g == gpus) if exact else (g >= gpus)
    return np.flatnonzero(snap.node_up & (snap.node_type == t) & fit)


def count_binaries(em: EpochModel) -> int:
    """y variables the naive model will have (vectorized: known before building it)."""
    snap = em.snap
    cand, _, gpus, _, exact = piece_kinds(em)
    ct = em.req.cand_type[cand]
    res = em.res
    total = 0
    for t in range(len(snap.gpu_types)):
        up = snap.node_up & (snap.node_type == t)
        g = snap.node_gpus[up]
        sel = ct == t
        ok = np.where(exact[sel, None], g[None, :] == gpus[sel, None],
                      g[None, :] >= gpus[sel, None])
        if res.blocking:  # no binary on a node reserved past the candidate's hold
            ok &= res.deadline[up][None, :] >= res.hold[cand[sel]][:, None]
        total += int(ok.sum())
    return total


def unwritten_parts(em: EpochModel) -> list[str]:
    """Parts of optalloc's model this formulation does not write (empty: the same problem)."""
    lm = em.lm
    out = [f"column block {b}" for b in lm.var_blocks if b not in KNOWN_BLOCKS]
    out += sorted({f"row family {label.split('[')[0]}" for label, _, _ in lm.row_blocks
                   if label.split("[")[0] not in KNOWN_FAMILIES})
    mine = np.zeros(lm.n_vars, dtype=bool)
    mine[np.concatenate([em.x, em.k, em.m, em.d, em.f]).astype(np.int64)] = True
    if np.any(lm.c[~mine] != 0):
        out.append("objective terms on z, u or y")
    return out


def build_naive(em: EpochModel, progress: Callable[[dict], None] | None = None) -> NaiveModel:
    import pulp

    missing = unwritten_parts(em)
    if missing:
        raise ValueError("optalloc's model has parts the naive model does not write: "
                         + ", ".join(missing) + "; update optalloc/bench/naive.py")
    snap, req, lm = em.snap, em.req, em.lm
    c, C, K = lm.c, len(req.cand_job), len(req.run_job)
    prob = pulp.LpProblem("naive_epoch", pulp.LpMaximize)
    x = [pulp.LpVariable(f"x_{ci}", lowBound=float(lm.lb[em.x[ci]]), upBound=1,
                         cat=pulp.LpInteger) for ci in range(C)]
    res = em.res
    blocked = res.blocking  # reserved nodes take only work that ends or loses protection in time
    k = [pulp.LpVariable(f"k_{i}", lowBound=float(lm.lb[em.k[i]]),
                         upBound=float(lm.ub[em.k[i]]), cat=pulp.LpInteger) for i in range(K)]
    m = [pulp.LpVariable(f"m_{r}", lowBound=float(lm.lb[col]), upBound=float(lm.ub[col]),
                         cat=pulp.LpInteger if lm.integer[col] else pulp.LpContinuous)
         for r, col in enumerate(em.m)]
    d = [pulp.LpVariable(f"d_{r}", lowBound=float(lm.lb[col]), upBound=float(lm.ub[col]),
                         cat=pulp.LpInteger) for r, col in enumerate(em.d)]
    f = [pulp.LpVariable(f"f_{r}", lowBound=float(lm.lb[col]), upBound=float(lm.ub[col]))
         for r, col in enumerate(em.f)]
    prob += (pulp.lpSum(float(c[em.x[ci]]) * x[ci] for ci in range(C))
             + pulp.lpSum(float(c[em.k[i]]) * k[i] for i in range(K))
             + pulp.lpSum(float(c[col]) * m[r] for r, col in enumerate(em.m))
             + pulp.lpSum(float(c[col]) * d[r] for r, col in enumerate(em.d))
             + pulp.lpSum(float(c[col]) * f[r] for r, col in enumerate(em.f))
             + float(lm.obj_offset))
    n_cons = 0

    # one binary per (candidate, node, kind); each kind's pieces all land or none does
    y: dict = {}
    on_node: dict[int, list] = {}
    for ci, kind, gpus, count, exact in zip(*(a.tolist() for a in piece_kinds(em))):
        mine = []
        for n in _fitting(snap, int(req.cand_type[ci]), gpus, exact).tolist():
            if blocked and res.deadline[n] < res.hold[ci]:
                continue
            v = pulp.LpVariable(f"y_{ci}_{n}_{KINDS[kind]}", cat=pulp.LpBinary)
            y[ci, n, KINDS[kind]] = v
            mine.append(v)
            on_node.setdefault(n, []).append((gpus, v))
            if progress and len(y) % PROGRESS_EVERY == 0:
                progress({"naive_built": len(y)})
        prob += pulp.lpSum(mine) == count * x[ci]
        n_cons += 1
    # one choice per job: one type, or keep it running
    options: dict[int, list] = {}
    for ci in range(C):
        options.setdefault(int(req.cand_job[ci]), []).append(x[ci])
    for i in range(K):
        options.setdefault(int(req.run_job[i]), []).append(k[i])
    for vs in options.values():
        if len(vs) > 1:
            prob += pulp.lpSum(vs) <= 1
            n_cons += 1
    # node capacity (up nodes a new piece may take): new pieces + the GPUs of kept jobs
    for p in range(len(req.run_pair_k)):
        n = int(req.run_pair_node[p])
        if n in on_node:
            on_node[n].append((int(req.run_pair_gpus[p]), k[int(req.run_pair_k[p])]))
    for n, terms in on_node.items():
        prob += pulp.lpSum(a * v for a, v in terms) <= int(snap.node_gpus[n])
        n_cons += 1
    n_cons += (share_rows(em, prob, x, k, m) + order_rows(em, prob, x)
               + keep_order_rows(em, prob, x, k))
    n_cons += debug_rows(em, prob, x, k, d) + fill_rows(em, prob, x, k, f)
    return NaiveModel(prob, x, y, k, m, len(x) + len(y) + len(k) + len(m) + len(d) + len(f),
                      n_cons)


def solve_naive(em: EpochModel, *, time_limit_s: float, mip_gap: float, threads: int = 1,
                progress: Callable[[dict], None] | None = None) -> NaiveResult:
    """Build, solve with CBC (PuLP's bundled binary, its default settings) and read the plan
    back. CBC's preprocessing can reduce a small model to nothing and then return a wrong
    point as optimal (coin-or/Cbc#720; seen here on a 5-column model: keep one job, or start
    a gang that evicts it, and CBC chose the worse); when its log says the model was reduced
    to nothing, or its optimum is below a plan known to be feasible (keep every running job
    that may stay, start nothing), it is solved again with preprocessing off."""
    import pulp

    t0 = time.perf_counter()
    nm = build_naive(em, progress)
    t1 = time.perf_counter()
    if progress:
        progress({"naive_vars": nm.n_vars, "naive_cons": nm.n_cons, "naive_build_s": t1 - t0})
    C, K = len(em.req.cand_job), len(em.req.run_job)
    left = max(1.0, time_limit_s - (t1 - t0))
    note = ""
    try:
        log = _run_cbc(nm.prob, left, mip_gap, threads)
        reason = _cbc_went_wrong(em, nm, log, mip_gap)
        if reason:
            note = f"; {reason}, solved again with preprocess off"
            left = max(1.0, time_limit_s - (time.perf_counter() - t0))
            _run_cbc(nm.prob, left, mip_gap, threads, ["preprocess off"])
    except pulp.PulpSolverError as err:
        return NaiveResult("error", np.zeros(C, bool), np.zeros(K, bool), {}, None, None,
                           t1 - t0, time.perf_counter() - t1, 0.0, nm.n_vars, nm.n_cons, str(err))
    t2 = time.perf_counter()
    sol = nm.prob.sol_status
    if sol not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        status = "infeasible" if nm.prob.status == pulp.LpStatusInfeasible else "timeout"
        return NaiveResult(status, np.zeros(C, bool), np.zeros(K, bool), {}, None, None,
                           t1 - t0, t2 - t1, 0.0, nm.n_vars, nm.n_cons,
                           f"CBC: {pulp.LpStatus[nm.prob.status]}, no incumbent{note}")
    status = "optimal" if sol == pulp.LpSolutionOptimal else "timeout"
    started, kept, placements = _read_plan(em, nm)
    got = got_by_org(em, Placed(started, kept))
    obj = em.plan_objective(started, kept, got)
    t3 = time.perf_counter()
    return NaiveResult(status, started, kept, placements, obj, _value(em, nm),
                       t1 - t0, t2 - t1, t3 - t2, nm.n_vars, nm.n_cons,
                       f"CBC {'optimal within gapRel' if status == 'optimal' else 'time limit'}"
                       + note)


EMPTIED = "processed model has 0 rows, 0 columns"  # CBC's log when preprocessing left nothing


def _run_cbc(prob, time_limit_s: float, mip_gap: float, threads: int, options=()) -> str:
    """Solve `prob` with CBC; its log."""
    import pulp

    with tempfile.TemporaryDirectory(prefix="optalloc-naive-") as tmp:
        log = os.path.join(tmp, "cbc.log")
        prob.solve(pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit_s, gapRel=mip_gap,
                                     threads=threads, logPath=log, options=list(options)))
        if not os.path.exists(log):
            return ""
        with open(log, errors="replace") as fh:
            return fh.read()


def _value(em: EpochModel, nm: NaiveModel) -> float:
    value = nm.prob.objective.value()  # None when the model has no variable
    return float(value) if value is not None else float(em.lm.obj_offset)


def _cbc_went_wrong(em: EpochModel, nm: NaiveModel, log: str, mip_gap: float) -> str:
    """Why CBC's answer cannot be trusted ('' when it can)."""
    import pulp

    if nm.prob.sol_status != pulp.LpSolutionOptimal:
        return ""
    if EMPTIED in log:
        return "CBC's preprocessing reduced the model to nothing"
    K = len(em.req.run_job)
    stay = em.lm.ub[em.k] > 0 if K else np.zeros(0, bool)
    none = np.zeros(len(em.req.cand_job), bool)
    floor = em.plan_objective(none, stay, got_by_org(em, Placed(none, stay)))
    if _value(em, nm) < floor - mip_gap * max(1.0, abs(floor)) - 1e-6:
        return "CBC's optimum is below keeping every running job"
    return ""


def _on(v) -> bool:
    return v.varValue is not None and v.varValue > 0.5


def _read_plan(em: EpochModel, nm: NaiveModel) -> tuple[np.ndarray, np.ndarray, dict]:
    """started, kept and the new placements (GPU indices: lowest free after kept jobs)."""
    snap, req = em.snap, em.req
    started = np.array([_on(v) for v in nm.x], dtype=bool)
    kept = np.array([_on(v) for v in nm.k], dtype=bool)
    taken = {n: set() for n in range(len(snap.nodes))}
    for i in np.flatnonzero(kept):
        for a in snap.jobs[req.run_job[i]].placement.nodes:
            taken[snap.node_index[a.node]].update(a.gpus)
    gpus_of = {}
    for ci, kind, gpus, _, _ in zip(*(a.tolist() for a in piece_kinds(em))):
        gpus_of[ci, KINDS[kind]] = gpus
    pieces_of: dict[int, list[tuple[int, int, int]]] = {}  # ci -> (kind order, node, GPUs)
    for (ci, n, kind), v in nm.y.items():
        if started[ci] and _on(v):
            pieces_of.setdefault(ci, []).append((KINDS.index(kind), n, gpus_of[ci, kind]))
    placements = {}
    for ci in np.flatnonzero(started):
        j, t = int(req.cand_job[ci]), int(req.cand_type[ci])
        allocs = []
        for _, n, gpus in sorted(pieces_of.get(int(ci), [])):
            free = [g for g in range(int(snap.node_gpus[n])) if g not in taken[n]]
            mine = tuple(free[:gpus])
            taken[n].update(mine)
            allocs.append(NodeAlloc(snap.nodes[n].name, mine))
        placements[j] = Placement(snap.jobs[j].id, snap.type_names[t], tuple(allocs),
                                  bool(snap.job_allocated[j]))
    return started, kept, placements
