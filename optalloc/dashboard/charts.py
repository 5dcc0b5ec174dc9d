"""The dashboard's charts, drawn by plotly (interactive HTML: hover, zoom, toggle a series).

Each function returns a `<div>` fragment (plotly.js itself is loaded once per page from
`plotly.min.js`). Names from the config or jobs go through `label()`: plotly renders a subset of
HTML in labels, so a project called `<b>x</b>` would otherwise turn bold; escaped, it shows as
written.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from typing import Iterable, Sequence

import numpy as np
import plotly.colors
import plotly.graph_objects as go
from plotly.subplots import make_subplots
from markupsafe import Markup

# one colour per project, stable across pages: matplotlib's tab10 without its grey (grey means
# a free GPU on the map), then darker and lighter tab20b/tab20c shades; plotly's Dark24 beyond
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
    "#17becf", "#393b79", "#e7ba52", "#637939", "#843c39", "#7b4173", "#6baed6", "#74c476",
    "#fdae6b", "#9e9ac8",
) + tuple(plotly.colors.qualitative.Dark24)


def label(name: str) -> str:
    return html.escape(str(name), quote=False)


def when(t: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(float(t), dt.timezone.utc).replace(tzinfo=None)


def _div(fig: go.Figure, div_id: str, height: int) -> Markup:
    fig.update_layout(height=height, margin=dict(l=60, r=20, t=50, b=50),
                      template="none", plot_bgcolor="#fff", paper_bgcolor="#fff",
                      font=dict(family="DejaVu Sans, sans-serif", size=12),
                      legend=dict(font=dict(size=10)))
    return Markup(fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                              config={"displaylogo": False, "responsive": True}))


def held_vs_entitled(projects: Sequence[str], held: Sequence[float], unalloc: Sequence[float],
                     entitled: Sequence[float]) -> Markup:
    """Per project: allocated and unallocated GPUs held now against entitled GPUs now."""
    x = [label(p) for p in projects]
    fig = go.Figure([
        go.Bar(name="held, allocated", x=x, y=list(held), marker_color="#2a6fdb"),
        go.Bar(name="held, unallocated", x=x, y=list(unalloc), marker_color="#9ec5fe"),
        go.Scatter(name="entitled now", x=x, y=list(entitled), mode="markers",
                   marker=dict(symbol="line-ew-open", size=28, color="#d62728",
                               line=dict(width=3))),
    ])
    fig.update_layout(barmode="stack", title="GPUs held now vs entitled (all GPU types)",
                      yaxis_title="GPUs")
    return _div(fig, "chart-held", 380)


def usage_ratios(projects: Sequence[str], ratios: Sequence[float | None]) -> Markup:
    """The sort metric per project (lower ranks first); infinite ratios are drawn at the top."""
    finite = [r for r in ratios if r is not None and math.isfinite(r)]
    top = max(finite + [1.0]) * 1.1
    y = [top if r is None or not math.isfinite(r) else r for r in ratios]
    text = ["inf" if r is None or not math.isfinite(r) else f"{r:.3f}" for r in ratios]
    fig = go.Figure(go.Bar(x=[label(p) for p in projects], y=y, text=text,
                           textposition="outside", marker_color="#6c757d"))
    fig.add_hline(y=1.0, line_dash="dash", line_color="#d62728",
                  annotation_text="usage = entitlement")
    fig.update_layout(title="Usage ratio per project (usage / entitled over the window)",
                      yaxis_title="usage ratio")
    return _div(fig, "chart-ratio", 340)


def owed_delivered(edges: np.ndarray, projects: Sequence[str], owed_h: np.ndarray,
                   delivered_h: np.ndarray) -> Markup:
    """Per project and hour: GPUs delivered (allocated, solid) vs owed (dashed)."""
    n = max(1, len(projects))
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig = make_subplots(rows=rows, cols=cols, shared_xaxes=True,
                        subplot_titles=[label(p) for p in projects] or ["(nothing tracked)"],
                        vertical_spacing=min(0.08, 0.6 / rows))
    x = [when(t) for t in edges] if len(edges) else []  # steps over each whole bin
    hours = np.diff(edges) / 3600.0 if len(edges) else np.zeros(0)
    for i, p in enumerate(projects):
        r, c = i // cols + 1, i % cols + 1
        with np.errstate(divide="ignore", invalid="ignore"):
            own = np.where(hours > 0, owed_h[i] / hours, 0.0)
            dlv = np.where(hours > 0, delivered_h[i] / hours, 0.0)
        own, dlv = np.append(own, own[-1:]), np.append(dlv, dlv[-1:])
        fig.add_trace(go.Scatter(x=x, y=dlv, name="delivered", legendgroup="d", mode="lines",
                                 showlegend=i == 0, line=dict(color="#2a6fdb", shape="hv")), r, c)
        fig.add_trace(go.Scatter(x=x, y=own, name="owed", legendgroup="o", showlegend=i == 0,
                                 mode="lines",
                                 line=dict(color="#d62728", dash="dash", shape="hv")), r, c)
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(title="Delivered vs owed GPUs per project, hour by hour (mean GPUs)")
    return _div(fig, "chart-owed", max(320, 150 * rows))


def occupancy(times: Sequence[float], occ: Sequence[float | None], pending: Sequence[int]) -> Markup:
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    x = [when(t) for t in times]
    fig.add_trace(go.Scatter(x=x, y=[None if o is None else 100 * o for o in occ],
                             name="occupancy %", mode="lines+markers"), secondary_y=False)
    fig.add_trace(go.Scatter(x=x, y=list(pending), name="pending jobs", mode="lines+markers",
                             line=dict(dash="dot")), secondary_y=True)
    fig.update_yaxes(title_text="occupancy (% of available GPUs)", range=[0, 105],
                     secondary_y=False)
    fig.update_yaxes(title_text="pending jobs", rangemode="tozero", secondary_y=True)
    fig.update_layout(title="Occupancy and pending jobs per epoch")
    return _div(fig, "chart-occupancy", 320)


def solver(times: Sequence[float], seconds: Sequence[float | None],
           gaps: Sequence[float | None]) -> Markup:
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    x = [when(t) for t in times]
    fig.add_trace(go.Bar(x=x, y=list(seconds), name="solver seconds (build+solve+place)"),
                  secondary_y=False)
    fig.add_trace(go.Scatter(x=x, y=[None if g is None else 100 * g for g in gaps],
                             name="gap %", mode="lines+markers"), secondary_y=True)
    fig.update_yaxes(title_text="seconds", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title_text="gap to bound (%)", rangemode="tozero", secondary_y=True)
    fig.update_layout(title="Solver time and gap per epoch")
    return _div(fig, "chart-solver", 320)


def preemptions(times: Sequence[float], by_code: Iterable[dict[str, int]]) -> Markup:
    by_code = list(by_code)
    codes = sorted({c for d in by_code for c in d})
    x = [when(t) for t in times]
    fig = go.Figure([go.Bar(x=x, y=[d.get(c, 0) for d in by_code], name=label(c))
                     for c in codes] or [go.Bar(x=x, y=[0] * len(x), name="none")])
    fig.update_layout(barmode="stack", title="Preemptions per epoch, by reason",
                      yaxis_title="jobs preempted")
    return _div(fig, "chart-preemptions", 300)


def utilization(jobs: Sequence[str], util: Sequence[float | None], idle: Sequence[bool],
                threshold: float) -> Markup:
    fig = go.Figure(go.Bar(
        x=[label(j) for j in jobs], y=[0 if u is None else u for u in util],
        marker_color=["#d62728" if i else "#2a6fdb" for i in idle]))
    fig.add_hline(y=threshold, line_dash="dash", line_color="#d62728",
                  annotation_text=f"idle below {threshold:g}%")
    fig.update_layout(title="Recent GPU utilization per running job (red: flagged idle)",
                      yaxis_title="GPU utilization (%)", yaxis_range=[0, 100])
    return _div(fig, "chart-util", 340)
