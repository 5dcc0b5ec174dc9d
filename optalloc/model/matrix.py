"""The matrix form every backend receives, and the builder that assembles it.

linopy/PyPSA style: variables are declared as whole index blocks (`add_vars` returns the
global column indices as a numpy array), constraints as sparse COO blocks with a named family
(`capacity[h100]`, `floor[A1,h100]`), never one Python object per element.

Sense: **maximize** c @ x + obj_offset subject to row_lo <= A x <= row_hi, lb <= x <= ub,
x integer where `integer` is set.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True, eq=False)
class LinearModel:
    c: np.ndarray
    obj_offset: float
    lb: np.ndarray
    ub: np.ndarray
    integer: np.ndarray  # bool
    A: sp.csr_matrix
    row_lo: np.ndarray
    row_hi: np.ndarray
    var_blocks: dict  # name -> (start, stop)
    row_blocks: tuple  # ((family label, start, stop), ...) in build order

    @property
    def n_vars(self) -> int:
        return len(self.c)

    @property
    def n_cons(self) -> int:
        return self.A.shape[0]

    def objective(self, x: np.ndarray) -> float:
        return float(self.c @ x + self.obj_offset)

    def violation(self, x: np.ndarray) -> float:
        """Largest bound or row violation of `x` (0 for a feasible point)."""
        ax = self.A @ x if self.n_cons else np.zeros(0)
        parts = [
            np.maximum(self.lb - x, 0),
            np.maximum(x - self.ub, 0),
            np.maximum(self.row_lo - ax, 0),
            np.maximum(ax - self.row_hi, 0),
        ]
        return float(max((p.max() if len(p) else 0.0) for p in parts))

    def with_row(self, label: str, cols: np.ndarray, vals: np.ndarray, lo: float,
                 hi: float = np.inf) -> "LinearModel":
        """This model with one more row lo <= sum vals * x[cols] <= hi (same columns: a
        solution of either reads the same way)."""
        row = sp.csr_matrix((np.asarray(vals, float), (np.zeros(len(cols), np.int64),
                                                       np.asarray(cols, np.int64))),
                            shape=(1, self.n_vars))
        return self.with_rows(label, row, lo, hi)

    def with_rows(self, label: str, rows: sp.spmatrix, lo: float, hi: float) -> "LinearModel":
        """This model with the rows lo <= rows @ x <= hi appended as one block `label` (same
        columns)."""
        n, k = self.n_cons, rows.shape[0]
        return replace(self, A=sp.vstack([self.A, rows], format="csr"),
                       row_lo=np.append(self.row_lo, np.full(k, lo)),
                       row_hi=np.append(self.row_hi, np.full(k, hi)),
                       row_blocks=self.row_blocks + ((label, n, n + k),))

    def family_of_row(self, row: int) -> str:
        for label, a, b in self.row_blocks:
            if a <= row < b:
                return label
        raise IndexError(row)


def _spread(v, shape: tuple) -> np.ndarray:
    """`v` (a number or an array) as floats of `shape`, for build()'s concatenation: a plain
    number is filled, not broadcast (np.broadcast_to costs ~5 us a call: 229,158 calls, 1.2 s
    of 12.7 s in build_model over 10 days of ITP cluster04 under ilp, profiled)."""
    if type(v) is float or type(v) is int:
        return np.full(shape, float(v))
    if type(v) is np.ndarray and v.dtype == np.float64 and v.shape == shape:
        return v  # a view of it either way: build() only reads it
    return np.broadcast_to(np.asarray(v, float), shape)


@dataclass
class ModelBuilder:
    _c: list = field(default_factory=list)
    _lb: list = field(default_factory=list)
    _ub: list = field(default_factory=list)
    _int: list = field(default_factory=list)
    _rows: list = field(default_factory=list)
    _cols: list = field(default_factory=list)
    _vals: list = field(default_factory=list)
    _lo: list = field(default_factory=list)
    _hi: list = field(default_factory=list)
    n_vars: int = 0
    n_rows: int = 0
    offset: float = 0.0
    var_blocks: dict = field(default_factory=dict)
    row_blocks: list = field(default_factory=list)

    def add_vars(self, name: str, n: int, lb, ub, obj=0.0, integer: bool = True) -> np.ndarray:
        """Declare a block of n variables; returns their global column indices."""
        idx = np.arange(self.n_vars, self.n_vars + n, dtype=np.int64)
        self._c.append(_spread(obj, (n,)))
        self._lb.append(_spread(lb, (n,)))
        self._ub.append(_spread(ub, (n,)))
        self._int.append(np.full(n, integer))
        self.var_blocks[name] = (self.n_vars, self.n_vars + n)
        self.n_vars += n
        return idx

    def add_rows(self, label: str, n: int, rows, cols, vals, lo, hi) -> np.ndarray:
        """Add n rows (local indices 0..n-1 in `rows`) named `label`; returns global row ids."""
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        rows = np.asarray(rows, dtype=np.int64)
        self._rows.append(rows + self.n_rows)
        self._cols.append(np.asarray(cols, dtype=np.int64))
        self._vals.append(_spread(vals, rows.shape))
        self._lo.append(_spread(lo, (n,)))
        self._hi.append(_spread(hi, (n,)))
        self.row_blocks.append((label, self.n_rows, self.n_rows + n))
        out = np.arange(self.n_rows, self.n_rows + n, dtype=np.int64)
        self.n_rows += n
        return out

    def add_offset(self, value: float) -> None:
        self.offset += float(value)

    def build(self) -> LinearModel:
        def cat(parts, dtype=float):
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)

        A = sp.coo_matrix(
            (cat(self._vals), (cat(self._rows, np.int64), cat(self._cols, np.int64))),
            shape=(self.n_rows, self.n_vars),
        ).tocsr()
        A.sum_duplicates()
        return LinearModel(
            c=cat(self._c),
            obj_offset=self.offset,
            lb=cat(self._lb),
            ub=cat(self._ub),
            integer=cat(self._int, bool),
            A=A,
            row_lo=cat(self._lo),
            row_hi=cat(self._hi),
            var_blocks=dict(self.var_blocks),
            row_blocks=tuple(self.row_blocks),
        )
