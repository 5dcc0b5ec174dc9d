"""`keep_order` rows for a running job's own priority, added when a plan needed them
(optalloc.plan.team_order).

The model has `keep_order` rows for the queued jobs of a strictly lower priority only
(optalloc.model.constraints.precedence). For those of the running job's own priority the
placement keeps the team's order (a running job whose GPUs only its team's queued jobs
ranked below it took keeps them; those wait), so a solution that breaks it is placed to a
plan worth less than the solution, and the bound stays above every plan that keeps it (one
8-GPU node, A's running 2-GPU job and its queued 8-GPU job of the same priority: the bound
counted the 8-GPU job's floor, a gap of 300%). So where a placement gave a start back for a
running job, the row "that start only while that job runs (kept, or moved)" is added and
the LP or MIP solved again (the cut loop of optalloc.epoch_status); written for every such
pair the rows also forbid a start where another project takes the running job's GPUs (and
took the 16,384-GPU bench epoch to its time limit: optalloc.model.order.keep_links). A bound
of the model with these rows is the bound of the plans that keep them.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from optalloc.model.requirements import columns_by_job, runs_elsewhere


def team_rows(req, x: np.ndarray, k: np.ndarray, n_vars: int, n_jobs: int,
              pairs: np.ndarray) -> sp.csr_matrix:
    """(P, n_vars) one row per pair (i, e) (a running job's position in req.run_job, a queued
    job): +1 at e's start columns on i's type, -1 at i's keep column and its move columns."""
    pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
    P = len(pairs)
    if not P:
        return sp.csr_matrix((0, n_vars))
    i, e = pairs[:, 0], pairs[:, 1]
    T = int(req.cand_type.max(initial=0)) + 1
    start = ~runs_elsewhere(req)
    at = np.full((n_jobs, T), -1, np.int64)  # (job, type) -> its start candidate
    at[req.cand_job[start], req.cand_type[start]] = np.flatnonzero(start)
    t = req.run_type[i]
    c = at[e, np.minimum(t, T - 1)]
    ok = (c >= 0) & (t < T)
    rows_c, cols_c = np.flatnonzero(ok), x[c[ok]]
    rm, cm = columns_by_job(req, x, runs_elsewhere(req))(req.run_job[i])
    M = sp.csr_matrix((np.r_[np.ones(len(rows_c)), -np.ones(P + len(rm))],
                       (np.r_[rows_c, np.arange(P), rm], np.r_[cols_c, k[i], cm])),
                      shape=(P, n_vars))
    M.sum_duplicates()
    return M
