"""Growable column storage: rows appended in chunks, read as contiguous numpy arrays.

The ledger appends a few rows per epoch and queries thousands of times (simulator), or loads a
million rows once (cron). Columns live in preallocated arrays whose capacity doubles, so an
append is amortized O(rows appended) and a read is a zero-copy slice.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np


class Columns:
    """Named numpy columns of equal length (each may be 1-D or 2-D with a fixed width)."""

    def __init__(self, spec: Mapping[str, tuple[np.dtype, int | None]], capacity: int = 1024):
        self._spec = dict(spec)
        self._n = 0
        self._data = {
            name: np.zeros((capacity,) if width is None else (capacity, width), dtype=dtype)
            for name, (dtype, width) in self._spec.items()
        }

    def __len__(self) -> int:
        return self._n

    def _reserve(self, extra: int) -> None:
        need = self._n + extra
        cap = len(next(iter(self._data.values())))
        if need <= cap:
            return
        new_cap = max(need, 2 * cap)
        for name, arr in self._data.items():
            grown = np.zeros((new_cap,) + arr.shape[1:], dtype=arr.dtype)
            grown[: self._n] = arr[: self._n]
            self._data[name] = grown

    def append(self, **cols: np.ndarray) -> None:
        """Append rows; every column of the spec must be given with the same length."""
        if set(cols) != set(self._spec):
            raise ValueError(f"expected columns {sorted(self._spec)}, got {sorted(cols)}")
        lengths = {len(np.atleast_1d(v)) if np.ndim(v) < 2 else len(v) for v in cols.values()}
        if len(lengths) != 1:
            raise ValueError(f"columns of unequal length: {lengths}")
        k = lengths.pop()
        self._reserve(k)
        for name, v in cols.items():
            self._data[name][self._n : self._n + k] = v
        self._n += k

    def __getitem__(self, name: str) -> np.ndarray:
        """A read-only view of the filled part of a column."""
        view = self._data[name][: self._n]
        view.flags.writeable = False
        return view
