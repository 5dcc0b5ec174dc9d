"""The ledger report: one row per org node (pre-order), and its table / JSON forms.

Two families of figures, and each is named for what it is:

* the **sort metric**, billing-weighted under the policy's kernel over the lookback window:

    share            the node's configured share among its siblings
    entitlement_pct  100 * entitled / root's entitled (capacity-weighted over gpu_types);
                     without capacity samples, 100 * the mean entitlement fraction over types
    usage_gpu_h      charged GPU-hours (Ledger.usage)
    entitled_gpu_h   entitled GPU-hours (Ledger.entitled)
    ratio            usage / entitled (Ledger.ratios): below 1 ranks ahead, above 1 behind

* **owed vs delivered**, plain GPU-hours in hourly bins over the *tracked* hours: from the first
  demand sample (or the window start, if later) to now. Owed needs demand; before the first
  demand sample nothing can be owed, so those hours are left out of all four figures instead of
  counting as delivered-but-not-owed:

    owed_gpu_h       sum over hours and projects of min(entitled, demanded)
    delivered_gpu_h  allocated GPU-hours delivered in the tracked hours
    met_gpu_h        sum over hours and projects of min(delivered, owed): the owed part delivered
    met_owed         met / owed, the *hourly* form (a shortfall is never repaid); NaN if nothing owed
    period_owed      sum over projects of min(delivered, owed) / owed, the *period* form
    untracked_gpu_h  allocated GPU-hours delivered in the window before tracking began (in usage,
                     not in the four figures above)

An inner node sums its projects (its met/owed is the hourly form restricted to its subtree:
a project's surplus never covers a sibling's shortfall).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from optalloc.org import walk
from optalloc.types import Interval

if TYPE_CHECKING:
    from optalloc.ledger.memory import Ledger
    from optalloc.ledger.owed import OwedDelivered


@dataclass(frozen=True)
class ReportRow:
    name: str
    depth: int
    is_project: bool
    share: float
    entitlement_pct: float
    usage_gpu_h: float
    entitled_gpu_h: float
    ratio: float
    owed_gpu_h: float
    delivered_gpu_h: float
    met_gpu_h: float
    met_owed: float
    period_owed: float
    untracked_gpu_h: float


def tracked_since(ledger: "Ledger", now: float) -> float | None:
    """Start of the hours owed/delivered are tracked over: the first demand sample or the
    window start, whichever is later; None when no demand sample is in force before `now`."""
    times, _ = ledger._samples("demand")
    if len(times) == 0 or times[0] >= now:
        return None
    return max(float(times[0]), now - ledger.policy.lookback_s)


def owed_window(
    ledger: "Ledger", now: float, open_intervals: Sequence[Interval] = ()
) -> tuple[float | None, "OwedDelivered | None", np.ndarray]:
    """(tracked_since, owed/delivered per project and hour over the tracked hours or None,
    (P,) allocated GPU-hours delivered in the window before tracking began)."""
    start = now - ledger.policy.lookback_s
    since = tracked_since(ledger, now)
    untracked = np.zeros(len(ledger.projects))
    end_untracked = now if since is None else since
    if end_untracked > start:
        untracked = ledger.owed_delivered(start, end_untracked, 3600.0, open_intervals).delivered_total()
    od = None if since is None else ledger.owed_delivered(since, now, 3600.0, open_intervals)
    return since, od, untracked


def _fraction(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def build_report(ledger: "Ledger", now: float, open_intervals: Sequence[Interval] = ()) -> list[ReportRow]:
    tree = ledger.tree
    usage = ledger.usage(now, open_intervals)
    entitled = ledger.entitled(now)
    ratio = ledger.ratios(now, open_intervals)
    if entitled[0] > 0:
        pct = 100.0 * entitled / entitled[0]
    else:
        pct = 100.0 * tree.entitlement.mean(axis=1) if tree.entitlement.size else np.zeros(tree.n)
    _, od, untracked_p = owed_window(ledger, now, open_intervals)
    to_nodes = ledger.members[:, ledger.leaf_index]  # (O, P) node contains project
    zeros = np.zeros(len(ledger.projects))
    owed_p = zeros if od is None else od.owed_total()
    dlv_p = zeros if od is None else od.delivered_total()
    met_p = zeros if od is None else od.met_total()
    owed, delivered, met = to_nodes @ owed_p, to_nodes @ dlv_p, to_nodes @ met_p
    period_met = to_nodes @ np.minimum(dlv_p, owed_p)
    untracked = to_nodes @ untracked_p
    met_owed, period_owed = _fraction(met, owed), _fraction(period_met, owed)
    shares = {node.name: float(node.share) for node, _, _ in walk(tree.root)}
    return [
        ReportRow(
            name=name,
            depth=int(tree.depth[o]),
            is_project=bool(tree.is_leaf[o]),
            share=shares[name],
            entitlement_pct=float(pct[o]),
            usage_gpu_h=float(usage[o]),
            entitled_gpu_h=float(entitled[o]),
            ratio=float(ratio[o]),
            owed_gpu_h=float(owed[o]),
            delivered_gpu_h=float(delivered[o]),
            met_gpu_h=float(met[o]),
            met_owed=float(met_owed[o]),
            period_owed=float(period_owed[o]),
            untracked_gpu_h=float(untracked[o]),
        )
        for o, name in enumerate(tree.names)
    ]


def _num(x: float, fmt: str) -> str:
    if math.isnan(x):
        return "-"
    if math.isinf(x):
        return "inf"
    return format(x, fmt)


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.1f}%"


def format_table(rows: Sequence[ReportRow]) -> str:
    """A fixed-width table, names indented by depth; `legend()` says what each column is."""
    head = ("org node", "share", "ent %", "usage GPU-h", "entitled GPU-h", "ratio", "owed GPU-h",
            "delivered GPU-h", "met GPU-h", "met/owed", "period")
    body = [
        (
            "  " * r.depth + r.name,
            _num(r.share, "g"),
            _num(r.entitlement_pct, ".1f"),
            _num(r.usage_gpu_h, ",.1f"),
            _num(r.entitled_gpu_h, ",.1f"),
            _num(r.ratio, ".3f"),
            _num(r.owed_gpu_h, ",.1f"),
            _num(r.delivered_gpu_h, ",.1f"),
            _num(r.met_gpu_h, ",.1f"),
            _pct(r.met_owed),
            _pct(r.period_owed),
        )
        for r in rows
    ]
    widths = [max(len(str(c)) for c in col) for col in zip(head, *body)]
    lines = []
    for i, line in enumerate([head] + body):
        cells = [line[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(line[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def legend(since: float | None, window_start: float, untracked_gpu_h: float) -> list[str]:
    """What the columns are, with the tracked hours and what was left out of them."""
    import time

    def when(t: float) -> str:
        return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))

    out = [
        "usage, entitled: billing-weighted GPU-h over the lookback window; ratio = usage / "
        "entitled (the fair-share sort metric: lower ranks first)",
    ]
    if since is None:
        out.append("owed, delivered, met: no demand sample yet, so nothing is owed (run "
                   "`optalloc epoch` to start tracking)")
    else:
        out.append(f"owed, delivered, met: plain GPU-h per hour since {when(since)}"
                   + (" (the first demand sample)" if since > window_start else "")
                   + "; owed = min(entitled, demanded), delivered = allocated GPU-h, met = "
                   "min(delivered, owed) hour by hour")
        out.append("met/owed: met / owed (hourly form: a shortfall is never repaid); period: "
                   "min(delivered, owed) / owed per project over the tracked hours")
    if untracked_gpu_h > 0:
        out.append(f"{untracked_gpu_h:,.1f} allocated GPU-h delivered in the window before "
                   "tracking began count in usage only")
    return out


def rows_to_json(rows: Sequence[ReportRow], now: float, **extra) -> str:
    """JSON document: {"now": ..., **extra, "rows": [...]}; non-finite numbers become null
    (a null ratio is infinite: usage with nothing entitled; a null met_owed / period_owed:
    nothing owed)."""

    def clean(v):
        return None if isinstance(v, float) and not math.isfinite(v) else v

    return json.dumps(
        {"now": now, **extra, "rows": [{k: clean(v) for k, v in asdict(r).items()} for r in rows]},
        indent=2,
    )
