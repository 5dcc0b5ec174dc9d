"""Plots of a sweep: for each grid axis, one HTML page (plotly) with every metric against that
axis, chosen from a menu (the headline metrics first). Each line is one policy (and one value
of every other axis): the mean over seeds, with error bars of one standard deviation. The
axis values stay in the order the `--grid` gave them (they are strings such as `+10%` or
`7d`). The pages share one `plotly.min.js` beside them, so they open offline.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Sequence

import pandas as pd

from optalloc.sim.compare import HEADLINE
from optalloc.sim.sweep.grid import format_seeds
from optalloc.sim.sweep.plan import SweepPlan
from optalloc.outdir import make_private_dirs
from optalloc.sim.sweep.store import atomic_write

PLOTLY_JS = "plotly.min.js"


def slug(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", key)


def metric_order(metrics: Sequence[str]) -> list[str]:
    """Headline metrics (in their table's order) first, then the rest as they come."""
    head = [r.key for r in HEADLINE if r.key in metrics]
    return head + [m for m in metrics if m not in head]


def _num(v) -> float | None:
    return None if v is None or v != v else float(v)


def _over(seeds: Sequence[int]) -> str:
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    return f"mean over seeds {format_seeds(seeds)}; bars: 1 sd"


def _label(metric: str) -> str:
    labels = {r.key: r.label for r in HEADLINE}
    return f"{labels[metric]} ({metric})" if metric in labels else metric


def write_plots(plan: SweepPlan, summary: pd.DataFrame, folder: Path) -> list[Path]:
    """One page per grid axis under `folder`; none when the sweep has no axis or no result."""
    if not plan.axes or summary.empty:
        return []
    import plotly.graph_objects as go
    from plotly.offline import get_plotlyjs

    make_private_dirs(folder)
    js = folder / PLOTLY_JS
    if not js.exists():
        text = get_plotlyjs()
        atomic_write(js, lambda p: p.write_text(text))
    metrics = metric_order(list(dict.fromkeys(summary["metric"])))
    keys = ["metric", "policy", *(a.key for a in plan.axes)]
    stats = {tuple(k): (m, s) for k, m, s in zip(summary[keys].itertuples(index=False), summary["mean"], summary["std"])}
    paths = []
    for ai, axis in enumerate(plan.axes):
        others = [j for j in range(len(plan.axes)) if j != ai]
        groups = list(itertools.product(plan.policies, *(plan.axes[j].values for j in others)))
        fig = go.Figure()
        for mi, metric in enumerate(metrics):
            for g in groups:
                policy, rest = g[0], dict(zip(others, g[1:]))
                ys, sd = [], []
                for x in axis.values:
                    values = tuple(x if j == ai else rest[j] for j in range(len(plan.axes)))
                    m, s = stats.get((metric, policy, *values), (None, None))
                    ys.append(_num(m))
                    sd.append(_num(s) or 0.0)
                name = ", ".join([policy] + [plan.axes[j].override(rest[j]) for j in others])
                fig.add_trace(go.Scatter(
                    x=list(axis.values), y=ys, name=name, mode="lines+markers", visible=mi == 0,
                    error_y={"type": "data", "array": sd, "visible": True},
                ))
        n_g = len(groups)
        buttons = []
        for mi, metric in enumerate(metrics):
            mask = [False] * (n_g * len(metrics))
            mask[mi * n_g:(mi + 1) * n_g] = [True] * n_g
            buttons.append({"label": _label(metric), "method": "update",
                            "args": [{"visible": mask}, {"yaxis": {"title": {"text": metric}}}]})
        fig.update_layout(
            title=f"{plan.scenario}: metrics against {axis.key} ({_over(plan.seeds)})",
            xaxis={"title": {"text": axis.key}, "type": "category", "categoryorder": "array",
                   "categoryarray": list(axis.values)},
            yaxis={"title": {"text": metrics[0]}},
            updatemenus=[{"buttons": buttons, "direction": "down", "x": 0.0, "xanchor": "left", "y": 1.15,
                          "yanchor": "top"}],
            margin={"t": 120},
        )
        html = fig.to_html(include_plotlyjs="directory", full_html=True)
        paths.append(atomic_write(folder / f"{slug(axis.key)}.html", lambda p, h=html: p.write_text(h)))
    return paths
