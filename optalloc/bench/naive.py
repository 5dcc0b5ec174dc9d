"""The epoch problem written the way most teams would write it first: PuLP + CBC, element by
element, one binary per (candidate, node).

It is the *same problem* as optalloc's model (optalloc.model), read from an EpochModel so it
follows the lead's model as that changes: the same candidates, running holds, floors and
objective coefficients (taken from `em.lm.c` at `em.x`, `em.k`, `em.m`, offset included), only
written as an assignment model instead of optalloc's aggregated packing:

    y[c, n] in {0,1}  candidate c = (job j, type t) puts one piece on up node n of type t
                      (n has >= size GPUs; whole-node gangs: n has exactly the node size)
    x[c]    in {0,1}  c starts                        objective c[em.x[c]]
    k[i]    in {0,1}  running job i keeps its GPUs    objective c[em.k[i]], lb as em.lm.lb
    m[r]    in {0..F} floor r = (o, t) met            objective c[em.m[r]]

    gang all-or-nothing  sum_n y[c, n] = pieces_c x[c]    (pieces on distinct nodes)
    one choice per job   sum_t x[j, t] + k[j] <= 1
    node capacity        sum_c size_c y[c, n] + sum_{i on n} g_{i,n} k[i] <= G_n   (up nodes)
    floors               m[o,t] <= sum_{c on t, tier 1, under o} g_c x[c] + same over k

Every feasible point of this model is a feasible point of optalloc's (count the y per node and
size to get u; a node a whole-node gang takes is its z), so its optimum never beats optalloc's
LP bound, and without per-node gangs (which optalloc's model counts per node, leaving the
distinct-node check to placement) the two optima are equal. The solution is already a
placement: GPU indices are given in node order after the kept jobs' GPUs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.requirements import WHOLE
from optalloc.plan.place import Placed
from optalloc.plan.reasons import got_by_org
from optalloc.types import NodeAlloc, Placement

PROGRESS_EVERY = 250_000  # report progress every this many binaries while building


@dataclass
class NaiveModel:
    prob: object  # pulp.LpProblem
    x: list  # per candidate
    y: dict  # (candidate, node) -> LpVariable
    k: list  # per running job that may stay
    m: list  # per floor row
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


def count_binaries(em: EpochModel) -> int:
    """y variables the naive model will have (vectorized: known before building it)."""
    snap, req = em.snap, em.req
    cj, ct = req.cand_job, req.cand_type
    size, whole = req.size[cj, ct], req.shape[cj, ct] == WHOLE
    total = 0
    for t in range(len(snap.gpu_types)):
        g = snap.node_gpus[snap.node_up & (snap.node_type == t)]
        sel = ct == t
        ok = np.where(whole[sel, None], g[None, :] == size[sel, None], g[None, :] >= size[sel, None])
        total += int(ok.sum())
    return total


def build_naive(em: EpochModel, progress: Callable[[dict], None] | None = None) -> NaiveModel:
    import pulp

    snap, req, lm = em.snap, em.req, em.lm
    c, C, K = lm.c, len(req.cand_job), len(req.run_job)
    prob = pulp.LpProblem("naive_epoch", pulp.LpMaximize)
    up_nodes = {t: [n for n in range(len(snap.nodes))
                    if snap.node_up[n] and snap.node_type[n] == t]
                for t in range(len(snap.gpu_types))}
    x, y, nodes_of = [], {}, []
    built = 0
    for ci in range(C):
        j, t = int(req.cand_job[ci]), int(req.cand_type[ci])
        x.append(pulp.LpVariable(f"x_{ci}", cat=pulp.LpBinary))
        size, whole = int(req.size[j, t]), req.shape[j, t] == WHOLE
        mine = []
        for n in up_nodes[t]:
            gn = int(snap.node_gpus[n])
            if (whole and gn == size) or (not whole and gn >= size):
                y[ci, n] = pulp.LpVariable(f"y_{ci}_{n}", cat=pulp.LpBinary)
                mine.append(n)
                built += 1
                if progress and built % PROGRESS_EVERY == 0:
                    progress({"naive_built": built})
        nodes_of.append(mine)
    k = [pulp.LpVariable(f"k_{i}", lowBound=float(lm.lb[em.k[i]]), upBound=1, cat=pulp.LpInteger)
         for i in range(K)]
    m = [pulp.LpVariable(f"m_{r}", lowBound=0, upBound=float(lm.ub[em.m[r]]), cat=pulp.LpInteger)
         for r in range(len(em.m))]

    prob += (pulp.lpSum(float(c[em.x[ci]]) * x[ci] for ci in range(C))
             + pulp.lpSum(float(c[em.k[i]]) * k[i] for i in range(K))
             + pulp.lpSum(float(c[em.m[r]]) * m[r] for r in range(len(m)))
             + float(lm.obj_offset))
    n_cons = 0
    # gang all-or-nothing: the job's pieces all land (on distinct nodes) or none does
    for ci in range(C):
        j, t = int(req.cand_job[ci]), int(req.cand_type[ci])
        prob += pulp.lpSum(y[ci, n] for n in nodes_of[ci]) == int(req.pieces[j, t]) * x[ci]
        n_cons += 1
    # one choice per job: one type, or keep it running
    options: dict[int, list] = {}
    for ci in range(C):
        options.setdefault(int(req.cand_job[ci]), []).append(x[ci])
    for i in range(K):
        options.setdefault(int(req.run_job[i]), []).append(k[i])
    for j, vs in options.items():
        if len(vs) > 1:
            prob += pulp.lpSum(vs) <= 1
            n_cons += 1
    # node capacity (up nodes): new pieces + the GPUs of kept running jobs
    on_node: dict[int, list] = {}
    for (ci, n), v in y.items():
        j, t = int(req.cand_job[ci]), int(req.cand_type[ci])
        on_node.setdefault(n, []).append((int(req.size[j, t]), v))
    for p in range(len(req.run_pair_k)):
        n = int(req.run_pair_node[p])
        if snap.node_up[n]:
            on_node.setdefault(n, []).append((int(req.run_pair_gpus[p]), k[int(req.run_pair_k[p])]))
    for n, terms in on_node.items():
        prob += pulp.lpSum(a * v for a, v in terms) <= int(snap.node_gpus[n])
        n_cons += 1
    # floors: tier-1 GPUs under org node o on type t count toward m[o, t]
    M = snap.org.membership()
    row_of = {(int(o), int(t)): r for r, (o, t) in enumerate(zip(em.m_org, em.m_type))}
    floor_terms: list[list] = [[] for _ in m]
    holders = [(int(req.cand_job[ci]), int(req.cand_type[ci]), x[ci]) for ci in range(C)]
    holders += [(int(req.run_job[i]), int(req.run_type[i]), k[i]) for i in range(K)]
    for j, t, v in holders:
        if em.imp.tier[j, t] < 1.0:
            continue
        for o in np.flatnonzero(M[:, snap.job_project[j]]):
            r = row_of.get((int(o), t))
            if r is not None:
                floor_terms[r].append(int(snap.job_gpus[j]) * v)
    for r in range(len(m)):
        prob += m[r] <= pulp.lpSum(floor_terms[r])
        n_cons += 1
    return NaiveModel(prob, x, y, k, m, len(x) + len(y) + len(k) + len(m), n_cons)


def solve_naive(em: EpochModel, *, time_limit_s: float, mip_gap: float, threads: int = 1,
                progress: Callable[[dict], None] | None = None) -> NaiveResult:
    """Build, solve with CBC (PuLP's bundled binary) and read the plan back."""
    import pulp

    t0 = time.perf_counter()
    nm = build_naive(em, progress)
    t1 = time.perf_counter()
    if progress:
        progress({"naive_vars": nm.n_vars, "naive_cons": nm.n_cons, "naive_build_s": t1 - t0})
    left = max(1.0, time_limit_s - (t1 - t0))
    solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=left, gapRel=mip_gap, threads=threads)
    C, K = len(em.req.cand_job), len(em.req.run_job)
    try:
        nm.prob.solve(solver)
    except pulp.PulpSolverError as err:
        return NaiveResult("error", np.zeros(C, bool), np.zeros(K, bool), {}, None, None,
                           t1 - t0, time.perf_counter() - t1, 0.0, nm.n_vars, nm.n_cons, str(err))
    t2 = time.perf_counter()
    sol = nm.prob.sol_status
    if sol not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        status = "infeasible" if nm.prob.status == pulp.LpStatusInfeasible else "timeout"
        return NaiveResult(status, np.zeros(C, bool), np.zeros(K, bool), {}, None, None,
                           t1 - t0, t2 - t1, 0.0, nm.n_vars, nm.n_cons,
                           f"CBC: {pulp.LpStatus[nm.prob.status]}, no incumbent")
    status = "optimal" if sol == pulp.LpSolutionOptimal else "timeout"
    started, kept, placements = _read_plan(em, nm)
    got = got_by_org(em, Placed(started, kept, np.zeros(len(em.snap.jobs), bool)))
    obj = em.plan_objective(started, kept, got)
    t3 = time.perf_counter()
    value = nm.prob.objective.value()  # None when the model has no variable
    return NaiveResult(status, started, kept, placements, obj,
                       float(value) if value is not None else float(em.lm.obj_offset),
                       t1 - t0, t2 - t1, t3 - t2, nm.n_vars, nm.n_cons,
                       f"CBC {'optimal within gapRel' if status == 'optimal' else 'time limit'}")


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
    nodes_of: dict[int, list[int]] = {}
    for (ci, n), v in nm.y.items():
        if started[ci] and _on(v):
            nodes_of.setdefault(ci, []).append(n)
    placements = {}
    for ci in np.flatnonzero(started):
        j, t = int(req.cand_job[ci]), int(req.cand_type[ci])
        size, left, allocs = int(req.size[j, t]), int(snap.job_gpus[j]), []
        for n in sorted(nodes_of.get(ci, [])):
            free = [g for g in range(int(snap.node_gpus[n])) if g not in taken[n]]
            gpus = tuple(free[:min(size, left)])
            taken[n].update(gpus)
            allocs.append(NodeAlloc(snap.nodes[n].name, gpus))
            left -= len(gpus)
        placements[j] = Placement(snap.jobs[j].id, snap.type_names[t], tuple(allocs),
                                  bool(snap.job_allocated[j]))
    return started, kept, placements
