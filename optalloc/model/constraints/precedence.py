"""A team's own order as a hard rule: a queued job never starts while a job of its own project
ahead of it in line, that could take its place, waits (DESIGN.md section 8, rule 3).

For queued allocated jobs a and b of one project with the same candidate gpu_types, where a
is ahead of b in the project's order (priority, then submit) and a fits in b's place (a
single-node job no larger than b's per-node chunk, a whole-node gang no larger than b's, a
per-node gang of q GPUs per node in no more pieces than b has nodes of >= q GPUs, a per-node
gang's or a whole-node gang's): a fits wherever b would go, so

Family `order[project]`:  sum_t x[b,t] - sum_t x[a,t] <= 0

Rows link each b to the latest such a of every distinct size <= g_b; the rest follows by
transitivity. A bigger job ahead (a gang that does not fit) does not block smaller ones behind
it (backfill). Running jobs are ordered by the objective instead: a running job is worth its
project's best submit score in its priority, so an equal-priority job displaces it only where
that runs more of the project's higher-priority work (a strictly higher priority may; where
the holding rule's Fair-Tree factor outweighs it, optalloc.plan.victims.priority_swaps places
the swap beside the solution and the scheme's order decides).

Family `keep_order`:  x[c] - k[i] - sum of i's move columns <= 0, for a running job i past its
protection and a start c on its type (a queued job's, or a running job's move) of a job of its
project with a strictly lower priority, whatever the sizes (optalloc.model.order.keep_links;
a due reservation's gang too, see free_keep_links): a job ranked below a running one never
takes its GPUs for more of the project's floor or target (before, A's queued 16-GPU
priority-0 job preempted its running 8-GPU priority-2 one).
"""

from __future__ import annotations

import numpy as np

from optalloc.model.constraints.contract import keep_bounds
from optalloc.model.context import BuildContext
from optalloc.model.job_groups import order_columns, precedence_pairs
from optalloc.model.order import keep_links, scheme_above
from optalloc.model.requirements import columns_by_job, runs_elsewhere


def define_precedence(ctx: BuildContext) -> None:
    snap, req, b = ctx.snap, ctx.req, ctx.b
    pairs = ctx.res.prec if ctx.res is not None and ctx.res.prec is not None else None
    a, bb = precedence_pairs(snap, req) if pairs is None else pairs
    ctx.prec_a, ctx.prec_b = a, bb
    if not len(a):
        return
    columns = columns_by_job(req, ctx.x, order_columns(snap, req))
    rb, cb = columns(bb)
    ra, ca = columns(a)
    b.add_rows("order", len(a), np.concatenate([rb, ra]), np.concatenate([cb, ca]),
               np.r_[np.ones(len(cb)), -np.ones(len(ca))], -np.inf, 0.0)


def define_keep_order(ctx: BuildContext) -> None:
    snap, req, b = ctx.snap, ctx.req, ctx.b
    if not len(req.run_job) or not len(req.cand_job):
        return
    lb, ub = keep_bounds(ctx)
    i, c = free_keep_links(snap, req, lb, ub, ctx.res)
    ctx.keep_i, ctx.keep_c = i, c
    if not len(i):
        return
    n = len(i)
    # each running job's move columns (a restart on another type runs it too)
    rm, cm = columns_by_job(req, ctx.x, runs_elsewhere(req))(req.run_job[i])
    b.add_rows("keep_order", n, np.concatenate([np.arange(n), np.arange(n), rm]),
               np.concatenate([ctx.x[c], ctx.k[i], cm]),
               np.concatenate([np.ones(n), -np.ones(n + len(rm))]), -np.inf, 0.0)


def free_keep_links(snap, req, lb: np.ndarray, ub: np.ndarray, res,
                    equal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """optalloc.model.order.keep_links for the running jobs free to stay (keep bounds `lb`,
    `ub`: past their protection, may stay, not fixed); a due reservation's gang's starts
    (`res.forced`, the lookahead's call) only where the running job does not rank above the
    gang by the scheme's order (`order.scheme_above`): its start may not stop a teammate
    ranked above it (a helper's case at stop 41: the model started a due priority-0 gang on
    its team's priority-1 job's node and kept another project's job on a reserved one). Its
    reserved nodes hold no such teammate (free_times.team_holds), so the rows stay
    feasible."""
    i, c = keep_links(snap, req, (ub > 0) & (lb < 1) & ~req.run_fixed, equal)
    forced = res.forced if res is not None and len(res.forced) else None
    if forced is not None and len(i):
        keep = (np.asarray(forced)[c] <= 0) | scheme_above(snap, req.run_job[i], req.cand_job[c])
        i, c = i[keep], c[keep]
    return i, c
