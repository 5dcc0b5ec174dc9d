"""`keep_order` rows for a running job's own priority, added when a plan needed them
(optalloc.plan.team_order).

The model has `keep_order` rows for the queued jobs of a strictly lower priority only
(optalloc.model.constraints.precedence). For those of the running job's own priority the
placement keeps the team's order (a running job whose GPUs only jobs its team ranks below it
took keeps them; those wait), so a solution that breaks it is placed to a plan worth less
than the solution, and the bound stays above every plan that keeps it (one 8-GPU node, A's
running 2-GPU job and its queued 8-GPU job of the same priority: the bound counted the 8-GPU
job's floor, a gap of 300%). So where a placement gave a start back for a running job, a row
for that pair is added and the LP or MIP solved again (the cut loops of
optalloc.epoch_status and optalloc.epoch): the start only while the running job runs, or
where something else that may displace it starts on its type (team_rows). Written for every
pair in advance they made the 16,384-GPU bench epoch's LP far harder (the pairwise form: 2.9
s -> its 13 s limit at a 2.4% gap; optalloc.model.order.keep_links).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from optalloc.model.order import project_order, scheme_above
from optalloc.model.requirements import columns_by_job, runs_elsewhere


def team_rows(snap, req, forced, x: np.ndarray, k: np.ndarray, n_vars: int,
              pairs: np.ndarray, strict: bool = False) -> sp.csr_matrix:
    """(P, n_vars) one row per (i, e, moved) (a running job's position in req.run_job, a
    job; `moved`, whether the placement also undid i's move, is not read): +1 at e's start
    columns on i's type t (a queued job's; a running job's move or restart there has its own,
    none here), -1 at i's keep column, at i's restarts on t, and at every start on t of a job
    that may displace i: another project's, one its team ranks above i, or a due
    reservation's gang (`forced`) that i does not rank above by the scheme's order. So e
    starts on t only while i runs, or where something else that may take i's place starts on
    t: the row never forbids a plan that keeps the team's order (another project takes i's
    GPUs and e fills the rest: a helper's case of stop 38, where a row without that term kept
    B below its floor and was called optimal), and where nothing else starts on t it is the
    pairwise row. `strict`: without the starts that may displace i (e starts on t only while i
    runs or restarts there): such a row does forbid plans that keep the team's order, so it
    only ever makes candidates, never a bound (optalloc.epoch_strict)."""
    pairs = np.asarray(pairs, np.int64).reshape(-1, 3)
    P = len(pairs)
    if not P:
        return sp.csr_matrix((0, n_vars))
    i, e = pairs[:, 0], pairs[:, 1]
    cj, ct = req.cand_job, req.cand_type
    start = ~runs_elsewhere(req)
    at = np.full((len(snap.jobs), len(snap.gpu_types)), -1, np.int64)  # (job, type) -> start
    at[cj[start], ct[start]] = np.flatnonzero(start)
    t = req.run_type[i]
    c = at[e, t]
    ok = c >= 0
    rows_c, cols_c = np.flatnonzero(ok), x[c[ok]]
    # a restart on its own type runs it too (packing the placement allows); a move to another
    # type does not: it leaves its type only where something that may displace it starts
    # there (README rule 8; the move for its own teammate was a helper's case at stop 38)
    rm, cm = columns_by_job(req, x, req.cand_restart)(req.run_job[i])
    # the starts on t that may displace i: another project's, its team's above it, forced
    pos = project_order(snap)
    j = req.run_job[i]
    # (a forced gang only where i does not rank above it by the scheme's order: it may not
    # stop a teammate ranked above it, order.scheme_above)
    may = ((ct[None, :] == t[:, None])
           & ((snap.job_project[cj][None, :] != snap.job_project[j][:, None])
              | (pos[cj][None, :] < pos[j][:, None])
              | ((np.asarray(forced)[None, :] > 0)
                 & ~scheme_above(snap, j[:, None], cj[None, :]) if len(forced) else False)))
    rs, cs = np.nonzero(may) if not strict else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    M = sp.csr_matrix((np.r_[np.ones(len(rows_c)), -np.ones(P + len(rm) + len(rs))],
                       (np.r_[rows_c, np.arange(P), rm, rs],
                        np.r_[cols_c, k[i], cm, x[cs]])), shape=(P, n_vars))
    M.sum_duplicates()
    return M
