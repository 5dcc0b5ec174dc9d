"""The simulation / what-if report as one interactive HTML page (report.html beside report.md):
headline metrics side by side (best of each row marked), owed GPU-hours delivered per project,
and plotly charts of delivered vs owed per project over time, wait CDFs by class, occupancy
against its limit and the queue. Every number comes from `optalloc.sim.metrics`, as for the
Markdown report; names from the scenario render as text (jinja2 autoescape; escaped labels in
the charts, where plotly would otherwise read a little HTML).

plotly.js is written once beside the page (plotly.min.js), so the folder works from disk with
no network.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import plotly.colors
import plotly.graph_objects as go
from jinja2 import Environment, PackageLoader
from markupsafe import Markup
from plotly.subplots import make_subplots

from optalloc.statefile import write_atomic
from optalloc.sim.compare import compare, lookup
from optalloc.sim.metrics import HOUR, job_waits
from optalloc.sim.timeseries import TimeSeries, time_series
from optalloc.sim.report_plots import bin_factor, coarsen
from optalloc.sim.report_tables import MAX_PROJECT_PANELS, PLOT_CLASSES, format_value, project_names
from optalloc.sim.result import SimResult
from optalloc.outdir import make_private_dirs

COLOURS = tuple(plotly.colors.qualitative.Plotly)
CDF_POINTS = 400  # per line: quantiles, not every job


def _label(s: str) -> str:
    return html.escape(str(s), quote=False)


def _div(fig: go.Figure, div_id: str, height: int) -> Markup:
    fig.update_layout(height=height, template="none", plot_bgcolor="#fff", paper_bgcolor="#fff",
                      margin=dict(l=60, r=20, t=50, b=50), font=dict(size=12))
    return Markup(fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                              config={"displaylogo": False, "responsive": True}))


def _binned(ts: TimeSeries) -> tuple[np.ndarray, int, str]:

    k, unit = bin_factor(ts)
    return ts.hours / (24 if unit == "day" else 1), k, unit


def chart_owed(series: Mapping[str, TimeSeries], max_projects: int) -> Markup:

    first = next(iter(series.values()))
    owed_tot = sum(ts.owed_h.sum(axis=1) for ts in series.values())
    order = [first.projects[i] for i in np.argsort(-owed_tot, kind="stable")][:max_projects]
    cols = min(3, max(1, len(order)))
    rows = max(1, math.ceil(len(order) / cols))
    fig = make_subplots(rows=rows, cols=cols, shared_xaxes=True,
                        subplot_titles=[_label(p) for p in order] or ["(no projects)"],
                        vertical_spacing=min(0.08, 0.6 / rows))
    for pi, (policy, ts) in enumerate(series.items()):
        x, k, unit = _binned(ts)
        x = coarsen(x, k)
        c = COLOURS[pi % len(COLOURS)]
        for i, proj in enumerate(order):
            if proj not in ts.projects:
                continue
            j = ts.projects.index(proj)
            r, col = i // cols + 1, i % cols + 1
            fig.add_trace(go.Scatter(x=x, y=coarsen(ts.delivered_h[j], k), mode="lines",
                                     name=f"{_label(policy)} delivered", legendgroup=f"{pi}d",
                                     showlegend=i == 0, line=dict(color=c)), r, col)
            fig.add_trace(go.Scatter(x=x, y=coarsen(ts.owed_h[j], k), mode="lines",
                                     name=f"{_label(policy)} owed", legendgroup=f"{pi}o",
                                     showlegend=i == 0, line=dict(color=c, dash="dash")), r, col)
    fig.update_yaxes(rangemode="tozero")
    fig.update_xaxes(title_text=f"{unit}s", row=rows)
    fig.update_layout(title="Delivered (solid) vs owed (dashed) allocated GPUs per project "
                            "(mean per bin)")
    return _div(fig, "sim-owed", max(320, 170 * rows))


def chart_waits(results: Mapping[str, SimResult], classes: tuple[str, ...]) -> Markup:
    fig = make_subplots(rows=1, cols=len(classes), subplot_titles=[f"{c} jobs" for c in classes])
    for pi, (policy, res) in enumerate(results.items()):
        w = job_waits(res)
        for ci, cls in enumerate(classes):
            x = np.sort(w["wait_s"][w["cls"] == cls])
            if len(x) == 0:
                continue
            q = np.linspace(0, 1, min(CDF_POINTS, len(x)))
            xs = np.maximum(np.quantile(x, q), 1.0)
            fig.add_trace(go.Scatter(x=xs, y=q, mode="lines", line=dict(
                shape="hv", color=COLOURS[pi % len(COLOURS)]), name=_label(policy),
                legendgroup=str(pi), showlegend=ci == 0), 1, ci + 1)
    fig.update_xaxes(type="log", title_text="wait (s, log)")
    fig.update_yaxes(range=[0, 1.02])
    fig.update_layout(title="Wait from submit to first start (never started: censored at the "
                            "horizon)")
    return _div(fig, "sim-waits", 340)


def chart_occupancy(series: Mapping[str, TimeSeries]) -> Markup:

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.65, 0.35],
                        subplot_titles=["occupancy", "queued jobs (mean)"])
    unit = "hour"
    for pi, (policy, ts) in enumerate(series.items()):
        x, k, unit = _binned(ts)
        x = coarsen(x, k)
        c = COLOURS[pi % len(COLOURS)]
        name = _label(policy)
        fig.add_trace(go.Scatter(x=x, y=coarsen(ts.occupancy_total, k), name=f"{name} total",
                                 line=dict(color=c)), 1, 1)
        fig.add_trace(go.Scatter(x=x, y=coarsen(ts.occupancy_allocated, k),
                                 name=f"{name} allocated", line=dict(color=c, dash="dot")), 1, 1)
        fig.add_trace(go.Scatter(x=x, y=coarsen(np.minimum(1.0, ts.demand_ratio), k),
                                 name=f"{name} limit min(1, demand ratio)", opacity=0.6,
                                 line=dict(color=c, dash="dash", width=1)), 1, 1)
        fig.add_trace(go.Scatter(x=x, y=coarsen(ts.queue_length, k), name=f"{name} queue",
                                 line=dict(color=c), showlegend=False), 2, 1)
    fig.update_yaxes(range=[0, 1.05], row=1)
    fig.update_xaxes(title_text=f"{unit}s", row=2)
    return _div(fig, "sim-occupancy", 520)


def write_html_report(results: Mapping[str, SimResult], metrics: Mapping[str, Mapping[str, Any]],
                      path: str | Path, *, title: str | None = None,
                      note: str | None = None) -> Path:
    """Write the page to `path` (and plotly.min.js beside it, once); returns the path."""
    from optalloc.units import format_duration

    if not results:
        raise ValueError("write_html_report needs at least one result")
    path = Path(path)
    make_private_dirs(path.parent)
    series = {p: time_series(r, HOUR) for p, r in results.items()}
    policies = list(metrics)
    rows = [{"label": r["label"], "best": r["best"],
             "cells": [(p, format_value(r["values"][p], r["kind"])) for p in policies]}
            for r in compare(metrics)]
    projects = []
    for proj in project_names(metrics):
        cells = []
        for p in policies:
            v = lookup(metrics[p], f"projects.{proj}") or {}
            cells.append((format_value(v.get("hourly"), "pct"), format_value(v.get("period"), "pct"),
                          format_value(v.get("delivered_gpu_h"), "hours"),
                          format_value(v.get("owed_gpu_h"), "hours")))
        projects.append((proj, cells))
    first = next(iter(results.values()))
    env = Environment(loader=PackageLoader("optalloc.sim", "templates"), autoescape=True)
    page = env.get_template("report.html.j2").render(
        title=title or f"Simulation report: {first.scenario}", note=note, policies=policies,
        rows=rows, projects=projects,
        horizon=format_duration(first.end - first.start),
        gpus=sum(n.gpus for n in first.config.nodes), nodes=len(first.config.nodes),
        seed=first.seed, scenario=first.scenario,
        charts={"owed": chart_owed(series, MAX_PROJECT_PANELS),
                "waits": chart_waits(results, PLOT_CLASSES),
                "occupancy": chart_occupancy(series)})
    write_atomic(path, page)
    from plotly.offline import get_plotlyjs

    # every run: one left by an earlier run into the same folder keeps no other mode
    write_atomic(path.parent / "plotly.min.js", get_plotlyjs())
    return path
