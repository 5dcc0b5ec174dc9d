"""The ledger report: one row per org node (pre-order), and its table / JSON forms.

Columns (usage and entitled are billing-weighted under the policy's kernel; owed and delivered
are plain GPU-hours over the lookback window [now - lookback, now] in hourly bins, summed over
the node's projects):

    share            the node's configured share among its siblings
    entitlement_pct  100 * entitled / root's entitled (capacity-weighted over gpu_types);
                     without capacity samples, 100 * the mean entitlement fraction over types
    usage_gpu_h      charged GPU-hours (Ledger.usage)
    entitled_gpu_h   entitled GPU-hours (Ledger.entitled)
    ratio            usage / entitled (Ledger.ratios): below 1 ranks ahead, above 1 behind
    owed_gpu_h       sum over hours and projects of min(entitled, demanded)
    delivered_gpu_h  allocated GPU-hours delivered
    delivered_owed   hourly form: sum min(delivered, owed) / sum owed (NaN if nothing owed)
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
    delivered_owed: float


def build_report(ledger: "Ledger", now: float, open_intervals: Sequence[Interval] = ()) -> list[ReportRow]:
    tree = ledger.tree
    usage = ledger.usage(now, open_intervals)
    entitled = ledger.entitled(now)
    ratio = ledger.ratios(now, open_intervals)
    if entitled[0] > 0:
        pct = 100.0 * entitled / entitled[0]
    else:
        pct = 100.0 * tree.entitlement.mean(axis=1) if tree.entitlement.size else np.zeros(tree.n)
    lookback = ledger.policy.lookback_s
    od = ledger.owed_delivered(now - lookback, now, 3600.0, open_intervals)
    to_nodes = ledger.members[:, ledger.leaf_index]  # (O, P) node contains project
    owed = to_nodes @ od.owed_total()
    delivered = to_nodes @ od.delivered_total()
    met = to_nodes @ od.met_total()
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(owed > 0, met / np.where(owed > 0, owed, 1.0), np.nan)
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
            delivered_owed=float(frac[o]),
        )
        for o, name in enumerate(tree.names)
    ]


def _num(x: float, fmt: str) -> str:
    if math.isnan(x):
        return "-"
    if math.isinf(x):
        return "inf"
    return format(x, fmt)


def format_table(rows: Sequence[ReportRow]) -> str:
    """A fixed-width table, names indented by depth."""
    head = ("org node", "share", "ent %", "usage GPU-h", "entitled GPU-h", "ratio", "owed GPU-h",
            "delivered GPU-h", "dlv/owed")
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
            _num(100 * r.delivered_owed, ".1f") + ("%" if not math.isnan(r.delivered_owed) else ""),
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


def rows_to_json(rows: Sequence[ReportRow], now: float, **extra) -> str:
    """JSON document: {"now": ..., **extra, "rows": [...]}; non-finite numbers become null
    (a null ratio is infinite: usage with nothing entitled; a null delivered_owed: nothing owed)."""

    def clean(v):
        return None if isinstance(v, float) and not math.isfinite(v) else v

    return json.dumps(
        {"now": now, **extra, "rows": [{k: clean(v) for k, v in asdict(r).items()} for r in rows]},
        indent=2,
    )
