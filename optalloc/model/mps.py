"""Export the matrix form to free-format MPS (reference instances in models/*.mps).

Maximization is written with an OBJSENSE MAX section (read by HiGHS, SCIP, CBC, OR-Tools).
The objective's constant offset (minus the churn of every preemptible running job) is not
part of MPS; an instance's pinned optimum is `c @ x` without it.
"""

from __future__ import annotations

import numpy as np

from optalloc.model.matrix import LinearModel


def to_mps(lm: LinearModel, name: str = "optalloc") -> str:
    rows = [f"r{i}" for i in range(lm.n_cons)]
    sense = []
    for i in range(lm.n_cons):
        lo, hi = lm.row_lo[i], lm.row_hi[i]
        sense.append("E" if lo == hi else ("L" if np.isfinite(hi) else "G"))
    out = [f"NAME {name}", "OBJSENSE", "    MAX", "ROWS", " N obj"]
    out += [f" {s} {r}" for s, r in zip(sense, rows)]
    out.append("COLUMNS")
    A = lm.A.tocsc()
    in_int = False
    for j in range(lm.n_vars):
        if lm.integer[j] and not in_int:
            out.append("    MARKER 'MARKER' 'INTORG'")
            in_int = True
        elif not lm.integer[j] and in_int:
            out.append("    MARKER 'MARKER' 'INTEND'")
            in_int = False
        if lm.c[j] != 0:
            out.append(f"    x{j} obj {float(lm.c[j])!r}")
        for k in range(A.indptr[j], A.indptr[j + 1]):
            out.append(f"    x{j} {rows[A.indices[k]]} {float(A.data[k])!r}")
        if lm.c[j] == 0 and A.indptr[j] == A.indptr[j + 1]:
            out.append(f"    x{j} obj 0.0")
    if in_int:
        out.append("    MARKER 'MARKER' 'INTEND'")
    out.append("RHS")
    ranges = []
    for i, s in enumerate(sense):
        lo, hi = lm.row_lo[i], lm.row_hi[i]
        rhs = hi if s in ("E", "L") else lo
        if rhs != 0:
            out.append(f"    rhs {rows[i]} {float(rhs)!r}")
        if s == "L" and np.isfinite(lo):
            ranges.append(f"    rng {rows[i]} {float(hi - lo)!r}")
    if ranges:
        out.append("RANGES")
        out += ranges
    out.append("BOUNDS")
    for j in range(lm.n_vars):
        lo, hi = lm.lb[j], lm.ub[j]
        if lo == hi:
            out.append(f" FX bnd x{j} {float(lo)!r}")
            continue
        if lo != 0:
            out.append(f" LO bnd x{j} {float(lo)!r}" if np.isfinite(lo) else f" MI bnd x{j}")
        if np.isfinite(hi):
            out.append(f" UP bnd x{j} {float(hi)!r}")
        else:
            out.append(f" PL bnd x{j}")
    out.append("ENDATA")
    return "\n".join(out) + "\n"
