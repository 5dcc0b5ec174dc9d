"""The team's order across gpu_types (optalloc.model.type_order) as rows added when needed.

Written for every link, the `order_types` rows made the 16,384-GPU bench model 96,733 rows
larger (267k against 170k), its LP 1.34 -> 3.71 s, and the 32,768-GPU epoch's LP passed its
10 s limit (`dde48b9`, reverted). Few of them bind: on the 1,024-GPU bench epoch the LP's
optimum breaks 29-110 of some 4,000. So the model starts without them, and the epoch adds the
rows a solution breaks and solves again (a cut loop, optalloc.epoch_status.cut_type_rows:
where neither the LP's rounding nor the greedy plan is certified, those the LP's point
breaks, warm, until it breaks none; and those a MIP solution breaks, that solution placed
all the same); a model with at most EAGER_TYPE_ROWS rows (optalloc.model.build) has them all
from the start. The placement, the backfill and the priority swaps keep every link whatever
the rows (optalloc.plan), and a plan that breaks one is no answer (optalloc.plan.outcome.scored).
A bound of the model with fewer rows is still a bound: the rows only take plans away.

One row per (a, b): the starts of b on the types a may use <= the starts of a (allocated, on
any of its types).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np
import scipy.sparse as sp

from optalloc.model.job_groups import order_columns
from optalloc.model.requirements import columns_by_job

_EMPTY = np.zeros(0, np.int64)


@dataclass(frozen=True)
class TypeRows:
    a: np.ndarray  # (L,) the job ahead, per link
    c: np.ndarray  # (L,) a start candidate of the job behind it, on a type the job ahead may use
    on: np.ndarray  # (R,) bool: the rows in the model
    make: Callable[[], sp.csr_matrix]  # the (R, n_vars) rows, made when first asked for
    _M: list = field(default_factory=list)  # [M] once made (shared by with_on's copies)

    @property
    def n_rows(self) -> int:
        return len(self.on)

    @property
    def M(self) -> sp.csr_matrix:
        """(R, n_vars) one row per (a, b): +1 at b's columns, -1 at a's. Made on first use:
        an epoch whose first plans are certified never asks (XL: 0.08 s saved)."""
        if not self._M:
            self._M.append(self.make())
        return self._M[0]

    def broken(self, x: np.ndarray, tol: float = 1e-6) -> np.ndarray:
        """(R,) bool: the rows not in the model that the point x breaks."""
        if not self.n_rows or x is None:
            return np.zeros(self.n_rows, bool)
        return (self.M @ np.asarray(x, float) > tol) & ~self.on

    def with_on(self, sel: np.ndarray) -> "TypeRows":
        return replace(self, on=self.on | sel)


def no_rows(n_vars: int) -> TypeRows:
    return TypeRows(_EMPTY, _EMPTY, np.zeros(0, bool), lambda: sp.csr_matrix((0, n_vars)))


def type_rows(snap, req, x: np.ndarray, a: np.ndarray, c: np.ndarray, n_vars: int) -> TypeRows:
    """The rows of links (a[i], c[i]) (optalloc.model.type_order.type_links) over the model's
    columns: x the start column of every candidate."""
    if not len(a):
        return no_rows(n_vars)
    J = len(snap.jobs)
    _, first, row = np.unique(req.cand_job[c] * J + a, return_index=True, return_inverse=True)
    row = np.asarray(row).reshape(-1)
    n = len(first)

    def make() -> sp.csr_matrix:
        # a's starts that the team's order counts, on any of its types (as the `order` rows
        # count them: allocated starts; a job with none, all its starts)
        ra, xa = columns_by_job(req, x, order_columns(snap, req))(a[first])
        M = sp.csr_matrix((np.r_[np.ones(len(c)), -np.ones(len(xa))],
                           (np.r_[row, ra], np.r_[x[c], xa])), shape=(n, n_vars))
        M.sum_duplicates()
        return M

    return TypeRows(a, c, np.zeros(n, bool), make)


def broken_links(tr: TypeRows | None, started: np.ndarray,
                 started_job: np.ndarray) -> np.ndarray:
    """(L,) bool: the links a plan breaks (`started` (C,) its starts, `started_job` (J,) the
    jobs it starts): a start on a type its job ahead may use while that job waits."""
    if tr is None or not len(tr.a):
        return np.zeros(0, bool)
    return started[tr.c] & ~started_job[tr.a]
