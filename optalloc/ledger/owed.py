"""Owed and delivered GPU-hours, per project and hour (the published fairness metric).

For project p and bin h (usually one hour), in plain (not billing-weighted) GPU-hours:

    entitled_h[p, h]  = sum_t ent[p, t] * integral over h of cap_t(s) ds / 3600
    demanded_h[p, h]  = integral over h of demand_p(s) ds / 3600     (allocated jobs' GPUs asked)
    owed_h[p, h]      = min(entitled_h, demanded_h)                  (the published definition)
    delivered_h[p, h] = allocated GPU-hours of p's run intervals inside h
    met_h[p, h]       = min(delivered_h, owed_h)

Two forms of "owed delivered" (DESIGN.md section 6), per project and overall:

    hourly  = sum_h met_h / sum_h owed_h               (strict: a shortfall is never repaid)
    period  = min(sum_h delivered_h, sum_h owed_h) / sum_h owed_h

Overall forms sum numerator and denominator over projects. A project that was owed nothing
has NaN (nothing to deliver); callers decide how to show it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


def _fraction(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


@dataclass(frozen=True, eq=False)
class OwedDelivered:
    projects: tuple[str, ...]  # (P,) leaf names, org-tree pre-order
    edges: np.ndarray  # (H + 1,) bin edges in seconds; the last bin may be shorter
    entitled_h: np.ndarray  # (P, H) GPU-hours
    demanded_h: np.ndarray  # (P, H) GPU-hours
    delivered_h: np.ndarray  # (P, H) GPU-hours

    @cached_property
    def owed_h(self) -> np.ndarray:
        return np.minimum(self.entitled_h, self.demanded_h)

    @cached_property
    def met_h(self) -> np.ndarray:
        return np.minimum(self.delivered_h, self.owed_h)

    # ------------------------------------------------------------- per project (P,)

    def owed_total(self) -> np.ndarray:
        return self.owed_h.sum(axis=1)

    def delivered_total(self) -> np.ndarray:
        return self.delivered_h.sum(axis=1)

    def met_total(self) -> np.ndarray:
        return self.met_h.sum(axis=1)

    def hourly(self) -> np.ndarray:
        """(P,) sum_h min(delivered, owed) / sum_h owed; NaN where nothing was owed."""
        return _fraction(self.met_total(), self.owed_total())

    def period(self) -> np.ndarray:
        """(P,) min(total delivered, total owed) / total owed; NaN where nothing was owed."""
        owed = self.owed_total()
        return _fraction(np.minimum(self.delivered_total(), owed), owed)

    # ------------------------------------------------------------- overall

    def hourly_overall(self) -> float:
        return float(_fraction(np.array(self.met_h.sum()), np.array(self.owed_h.sum())))

    def period_overall(self) -> float:
        owed = self.owed_total()
        return float(
            _fraction(np.array(np.minimum(self.delivered_total(), owed).sum()), np.array(owed.sum()))
        )

    def worst(self, form: str = "hourly") -> tuple[str | None, float]:
        """The project with the lowest fraction (of those owed anything) and its value."""
        vals = self.hourly() if form == "hourly" else self.period()
        if np.all(np.isnan(vals)):
            return None, float("nan")
        i = int(np.nanargmin(vals))
        return self.projects[i], float(vals[i])

    def by_project(self) -> dict[str, dict[str, float]]:
        """JSON-ready totals and both fractions per project."""
        owed, dlv, hourly, period = (
            self.owed_total(), self.delivered_total(), self.hourly(), self.period()
        )
        return {
            p: {
                "owed_gpu_h": float(owed[i]),
                "delivered_gpu_h": float(dlv[i]),
                "hourly": float(hourly[i]),
                "period": float(period[i]),
            }
            for i, p in enumerate(self.projects)
        }
