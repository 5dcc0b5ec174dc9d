"""The dashboard's pages: jinja2 templates (autoescape on: every name from the config or jobs
renders as text) over one `Dashboard`, with plotly charts.

    render_site(dash) -> {file name: html}    every page of the static site
    render_page(dash, name, query)            one page (serve), with the queue filtered

Pages: index.html (org tree), queue.html, map.html, utilization.html, history.html, and
org-<node>.html for every program and project (drill down to its jobs). Links are relative, so
the same files work from disk, behind any web server, and from `optalloc serve`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from optalloc.dashboard import charts
from optalloc.dashboard.data import Dashboard
from optalloc.dashboard.queue import CLASSES, STATES, QueueQuery, select
from optalloc.hostlist import compress_names
from optalloc.units import format_duration

NAV = (("index.html", "Org tree"), ("queue.html", "Queue"), ("map.html", "Cluster map"),
       ("utilization.html", "Utilization"), ("history.html", "History"))
PAGES = tuple(href for href, _ in NAV)


def _finite(x: Any, default: float) -> float:
    return default if x is None or not math.isfinite(float(x)) else float(x)


def _pct(x: Any, digits: int = 1) -> str:
    if x is None or not math.isfinite(float(x)):
        return "-"
    return f"{100 * float(x):.{digits}f}%"


def _num(x: Any, digits: int | None = None) -> str:
    if x is None:
        return "-"
    x = float(x)
    if not math.isfinite(x):
        return "inf"
    return f"{x:g}" if digits is None else f"{x:,.{digits}f}"


def _ratio(x: Any) -> str:
    if x is None:
        return "inf"
    return "inf" if math.isinf(float(x)) else f"{float(x):.3f}"


def _ts(t: Any) -> str:
    if t is None:
        return "-"
    return dt.datetime.fromtimestamp(float(t), dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _tshort(t: Any) -> str:
    if t is None:
        return "-"
    return dt.datetime.fromtimestamp(float(t), dt.timezone.utc).strftime("%m-%d %H:%M")


def _dur(s: Any) -> str:
    if s is None:
        return "-"
    return format_duration(float(s)) if float(s) >= 1 else "0s"


def _gib(b: Any) -> str:
    return "-" if b is None else f"{float(b) / 2**30:.1f} GiB"


def environment() -> Environment:
    env = Environment(loader=PackageLoader("optalloc.dashboard", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(pct=_pct, num=_num, ratio=_ratio, ts=_ts, tshort=_tshort, dur=_dur, gib=_gib,
                       gpuh=lambda x: _num(x, 1), finite=_finite, hostlist=compress_names)
    return env


_ENV: Environment | None = None


def _env() -> Environment:
    global _ENV
    if _ENV is None:
        _ENV = environment()
    return _ENV


class _Context:
    """What every page shares: colours per project, page names per org node, nav."""

    def __init__(self, dash: Dashboard):
        self.d = dash
        projects = [r.name for r in dash.org if r.report.is_project]
        self.pidx = {p: i for i, p in enumerate(projects)}
        for r in dash.queue:  # jobs of projects no longer in the config still get a colour
            self.pidx.setdefault(r.project, len(self.pidx))
        self.colours = {p: charts.PALETTE[i % len(charts.PALETTE)] for p, i in self.pidx.items()}
        self.slugs = {r.name: r.slug for r in dash.org}  # projects no longer in the config: none

    def base(self, title: str, charts_used: bool = False, refresh_s: float | None = None) -> dict:
        return dict(d=self.d, title=title, nav=NAV, root="", uses_plotly=charts_used,
                    colours=self.colours, pidx=self.pidx, slugs=self.slugs,
                    colour_of=self.colours, refresh_s=refresh_s)


def _counts(dash: Dashboard) -> dict[str, int]:
    c = Counter(r.state for r in dash.queue)
    return {s: c.get(s, 0) for s in STATES}


def _render(template: str, **ctx: Any) -> str:
    return _env().get_template(template).render(**ctx)


def page_index(dash: Dashboard, cx: _Context, refresh_s=None) -> str:
    projects = [r for r in dash.org if r.report.is_project]
    held_by_type = {t: dash.org[0].held[t] for t in dash.gpu_types} if dash.org else {}
    unalloc_by_type = {t: dash.org[0].unallocated[t] for t in dash.gpu_types} if dash.org else {}
    ch = {
        "held": charts.held_vs_entitled(
            [r.name for r in projects], [sum(r.held.values()) for r in projects],
            [sum(r.unallocated.values()) for r in projects],
            [sum(r.entitled_gpus.values()) for r in projects]),
        "ratio": charts.usage_ratios([r.name for r in projects],
                                     [r.report.ratio for r in projects]),
    }
    off = {t: sum(n.used for n in dash.nodes if n.gpu_type == t and n.state != "up")
           for t in dash.gpu_types}
    return _render("index.html.j2", **cx.base("Org tree", True, refresh_s), charts=ch,
                   held_by_type=held_by_type, unalloc_by_type=unalloc_by_type,
                   busy_off=off, counts=_counts(dash))


def page_queue(dash: Dashboard, cx: _Context, q: QueueQuery | None = None, refresh_s=None) -> str:
    q = q or QueueQuery()
    rows = select(dash.queue, q, dash.subtree())
    return _render("queue.html.j2", **cx.base("Queue", False, refresh_s), rows=rows, q=q,
                   states=STATES, classes=CLASSES, codes=dash.codes,
                   state_counts=list(_counts(dash).items()),
                   code_counts=Counter(r.code for r in dash.queue if r.code).most_common())


def page_map(dash: Dashboard, cx: _Context, refresh_s=None) -> str:
    by_type = [(t, [n for n in dash.nodes if n.gpu_type == t]) for t in dash.gpu_types]
    used = {t: sum(n.used for n in views) for t, views in by_type}
    shown = [p for p in cx.pidx if any(c.project == p for n in dash.nodes for c in n.cells)]
    return _render("map.html.j2", **cx.base("Cluster map", False, refresh_s), by_type=by_type,
                   used_by_type=used, projects_shown=shown)


def page_utilization(dash: Dashboard, cx: _Context, refresh_s=None) -> str:
    sampled = [u for u in dash.utilization if u.samples]
    idle = [u for u in sampled if u.idle]
    ch = {"util": charts.utilization([u.job_id for u in sampled],
                                     [u.recent_util_pct for u in sampled],
                                     [u.idle for u in sampled], dash.policy.idle_util_pct)
          } if sampled else {}
    return _render("utilization.html.j2", **cx.base("Utilization", bool(sampled), refresh_s),
                   charts=ch, sampled=sampled, idle_jobs=idle,
                   idle_gpus=sum(u.gpus for u in idle))


def page_history(dash: Dashboard, cx: _Context, refresh_s=None) -> str:
    h = dash.history
    times = [r.time for r in h]
    ch = {
        "owed": charts.owed_delivered(dash.owed_edges, dash.owed_projects, dash.owed_h,
                                      dash.delivered_h),
        "occupancy": charts.occupancy(times, [r.occupancy for r in h], [r.pending for r in h]),
        "solver": charts.solver(times, [sum(x or 0.0 for x in (r.build_s, r.solve_s, r.place_s))
                                        for r in h], [r.gap for r in h]),
        "preemptions": charts.preemptions(times, [dict(r.preemptions) for r in h]),
    }
    return _render("history.html.j2", **cx.base("History", True, refresh_s), charts=ch)


def page_org(dash: Dashboard, cx: _Context, name: str, refresh_s=None) -> str:
    node = dash.org_row(name)
    if node is None:
        raise KeyError(name)
    under = [r for r in dash.org
             if name == dash.cluster or r.name == name or name in r.path[:-1]]
    members = dash.subtree().get(name, set())
    jobs = [r for r in dash.queue if r.project in members]
    jobs = select(jobs, QueueQuery(), {})
    return _render("org.html.j2", **cx.base(node.name, False, refresh_s), node=node,
                   subtree_rows=under, jobs=jobs)


def render_site(dash: Dashboard, refresh_s: float | None = None) -> dict[str, str]:
    """Every page of the static site by file name."""
    cx = _Context(dash)
    out = {
        "index.html": page_index(dash, cx, refresh_s),
        "queue.html": page_queue(dash, cx, None, refresh_s),
        "map.html": page_map(dash, cx, refresh_s),
        "utilization.html": page_utilization(dash, cx, refresh_s),
        "history.html": page_history(dash, cx, refresh_s),
    }
    for r in dash.org:
        out[f"org-{r.slug}.html"] = page_org(dash, cx, r.name, refresh_s)
    return out


def render_queue(dash: Dashboard, q: QueueQuery, refresh_s: float | None = None) -> str:
    return page_queue(dash, _Context(dash), q, refresh_s)
