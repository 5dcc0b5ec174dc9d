"""The MIP around a plan (RINS, relaxation induced neighbourhood search): the integer columns
on which an incumbent and the LP relaxation agree are fixed to that value, the rest is left to
the MIP. The neighbourhood holds the incumbent, so its optimum is at least as good; the fixed
columns are where both a feasible plan and the relaxation want the same thing, so what is left
(a few hundred of several thousand integers on the 1,024-GPU bench epoch) is where rounding
went wrong, and the sub-MIP is small. Its bound is the neighbourhood's, not the problem's: the
caller measures the plan it returns against the LP bound.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from optalloc.model.matrix import LinearModel


def neighborhood(lm: LinearModel, incumbent: np.ndarray, lp_x: np.ndarray,
                 tol: float = 1e-6) -> tuple[LinearModel, int]:
    """(the model with every integer column where `incumbent` and `lp_x` agree fixed there,
    how many integer columns stay free)."""
    cols = np.flatnonzero(lm.integer)
    same = cols[np.abs(incumbent[cols] - lp_x[cols]) <= tol]
    lb, ub = lm.lb.copy(), lm.ub.copy()
    v = np.clip(np.round(incumbent[same]), lm.lb[same], lm.ub[same])
    lb[same] = v
    ub[same] = v
    return replace(lm, lb=lb, ub=ub), len(cols) - len(same)


__all__ = ["neighborhood"]
