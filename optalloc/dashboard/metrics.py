"""Prometheus exposition of a `Dashboard`, with the official client (prometheus_client).

Every value is a gauge of the latest epoch (what a scrape of `serve`'s /metrics or of the
node_exporter textfile shows), named `optalloc_*`:

    org tree   optalloc_org_share{org}, optalloc_org_entitlement_ratio{org,gpu_type},
               optalloc_org_entitled_gpus{org,gpu_type}, optalloc_org_usage_ratio{org},
               optalloc_org_usage_gpu_hours{org}, optalloc_org_entitled_gpu_hours{org},
               optalloc_org_gpus_held{org,gpu_type,allocated},
               optalloc_org_owed_gpu_hours{org}, optalloc_org_delivered_gpu_hours{org},
               optalloc_org_met_gpu_hours{org}, optalloc_org_owed_delivered_ratio{org,form}
    queue      optalloc_queue_jobs{state,class}, optalloc_queue_gpus{state,class},
               optalloc_queue_reason_jobs{code}, optalloc_queue_wait_seconds{class,quantile}
    epoch      optalloc_epoch_id, optalloc_epoch_timestamp_seconds,
               optalloc_epoch_solver_seconds{phase}, optalloc_epoch_solver_gap_ratio,
               optalloc_epoch_solver_info{backend,status}, optalloc_epoch_degraded,
               optalloc_epoch_preemptions{code}, optalloc_epoch_floor_violations,
               optalloc_history_epochs, optalloc_history_preemptions{code}
    cluster    optalloc_cluster_gpus{gpu_type,state}, optalloc_cluster_gpus_in_use{gpu_type,allocated},
               optalloc_drain_jobs_left{node}, optalloc_drain_ready{node}, optalloc_reservations
    utilization optalloc_job_gpu_utilization_percent{job,project},
               optalloc_job_idle_seconds{job,project} (idle jobs only),
               optalloc_project_gpu_utilization_percent{project},
               optalloc_project_idle_jobs{project}, optalloc_project_idle_gpus{project}

An infinite usage ratio (usage with nothing entitled) is exported as +Inf; a ratio of nothing
owed is left out. Counts of preemptions per epoch are gauges (the epoch's decision); over the
history window they are summed in optalloc_history_preemptions.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Callable, Iterator

import numpy as np
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from optalloc.dashboard.data import Dashboard
from optalloc.dashboard.queue import CLASSES, STATES

WAITING = ("pending", "preempted", "queued")


def _g(name: str, doc: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels))


def families(d: Dashboard) -> Iterator[GaugeMetricFamily]:
    yield from _org(d)
    yield from _queue(d)
    yield from _epoch(d)
    yield from _cluster(d)
    yield from _utilization(d)


def _org(d: Dashboard) -> Iterator[GaugeMetricFamily]:
    share = _g("optalloc_org_share", "configured share among siblings", ("org",))
    ent = _g("optalloc_org_entitlement_ratio", "fraction of the gpu_type's capacity the org "
             "node is entitled to (product of normalized shares)", ("org", "gpu_type"))
    ent_g = _g("optalloc_org_entitled_gpus", "entitled GPUs now (entitlement x GPUs up)",
               ("org", "gpu_type"))
    ratio = _g("optalloc_org_usage_ratio", "usage / entitled over the lookback window (the "
               "fair-share sort metric; lower ranks first)", ("org",))
    usage = _g("optalloc_org_usage_gpu_hours", "charged billing-weighted GPU-hours in the "
               "lookback window", ("org",))
    entitled = _g("optalloc_org_entitled_gpu_hours", "billing-weighted GPU-hours the "
                  "entitlement gives over the lookback window", ("org",))
    held = _g("optalloc_org_gpus_held", "GPUs held now by the org node's running jobs",
              ("org", "gpu_type", "allocated"))
    owed = _g("optalloc_org_owed_gpu_hours", "owed GPU-hours (min(entitled, demanded) per "
              "hour) over the tracked hours", ("org",))
    dlv = _g("optalloc_org_delivered_gpu_hours", "allocated GPU-hours delivered over the "
             "tracked hours", ("org",))
    met = _g("optalloc_org_met_gpu_hours", "sum per hour of min(delivered, owed) over the "
             "tracked hours", ("org",))
    frac = _g("optalloc_org_owed_delivered_ratio", "owed GPU-hours delivered: hourly = met / "
              "owed, period = min(delivered, owed) / owed per project", ("org", "form"))
    for r in d.org:
        x, o = r.report, r.name
        share.add_metric([o], x.share)
        for i, t in enumerate(d.gpu_types):
            ent.add_metric([o, t], r.entitled_gpus[t] / d.capacity_up[t]
                           if d.capacity_up[t] else 0.0)
            ent_g.add_metric([o, t], r.entitled_gpus[t])
            held.add_metric([o, t, "true"], r.held[t])
            held.add_metric([o, t, "false"], r.unallocated[t])
        ratio.add_metric([o], x.ratio if not math.isnan(x.ratio) else 0.0)
        usage.add_metric([o], x.usage_gpu_h)
        entitled.add_metric([o], x.entitled_gpu_h)
        owed.add_metric([o], x.owed_gpu_h)
        dlv.add_metric([o], x.delivered_gpu_h)
        met.add_metric([o], x.met_gpu_h)
        for form, v in (("hourly", x.met_owed), ("period", x.period_owed)):
            if not math.isnan(v):
                frac.add_metric([o, form], v)
    yield from (share, ent, ent_g, ratio, usage, entitled, held, owed, dlv, met, frac)


def _queue(d: Dashboard) -> Iterator[GaugeMetricFamily]:
    jobs = _g("optalloc_queue_jobs", "live jobs by state and class", ("state", "class"))
    gpus = _g("optalloc_queue_gpus", "GPUs asked by live jobs by state and class",
              ("state", "class"))
    n = Counter((r.state, r.cls) for r in d.queue)
    g = Counter()
    for r in d.queue:
        g[(r.state, r.cls)] += r.gpus
    for s in STATES:
        for c in CLASSES:
            jobs.add_metric([s, c], n[(s, c)])
            gpus.add_metric([s, c], g[(s, c)])
    reasons = _g("optalloc_queue_reason_jobs", "pending and preempted jobs by reason code of "
                 "the latest plan", ("code",))
    for code, k in sorted(Counter(r.code for r in d.queue if r.code).items()):
        reasons.add_metric([code], k)
    wait = _g("optalloc_queue_wait_seconds", "wait since submit of jobs not running, by class "
              "(quantile 1 = the longest)", ("class", "quantile"))
    for c in CLASSES:
        w = np.array([r.wait_s for r in d.queue if r.state in WAITING and r.cls == c
                      and r.wait_s is not None])
        if w.size:
            for q in (0.5, 0.9, 1.0):
                wait.add_metric([c, f"{q:g}"], float(np.quantile(w, q)))
    yield from (jobs, gpus, reasons, wait)


def _epoch(d: Dashboard) -> Iterator[GaugeMetricFamily]:
    e = d.epoch
    if e is None:
        return
    yield GaugeMetricFamily("optalloc_epoch_id", "id of the latest recorded epoch", value=e.id)
    yield GaugeMetricFamily("optalloc_epoch_timestamp_seconds", "time of the latest epoch",
                            value=e.time)
    last = d.history[-1] if d.history and d.history[-1].epoch_id == e.id else None
    sec = _g("optalloc_epoch_solver_seconds", "seconds of the latest epoch's solver by phase",
             ("phase",))
    if last is not None:
        for phase, v in (("build", last.build_s), ("solve", last.solve_s),
                         ("place", last.place_s)):
            if v is not None:
                sec.add_metric([phase], v)
    yield sec
    if e.gap is not None:
        yield GaugeMetricFamily("optalloc_epoch_solver_gap_ratio", "relative gap of the placed "
                                "plan to the solver's bound", value=e.gap)
    info = _g("optalloc_epoch_solver_info", "solver backend and status of the latest epoch",
              ("backend", "status"))
    info.add_metric([e.backend or "", e.status or ""], 1)
    yield info
    yield GaugeMetricFamily("optalloc_epoch_degraded", "1 when the latest plan is a fallback",
                            value=1.0 if e.degraded else 0.0)
    pre = _g("optalloc_epoch_preemptions", "preemptions decided by the latest epoch", ("code",))
    for code, k in (dict(last.preemptions) if last else {}).items():
        pre.add_metric([code], k)
    yield pre
    yield GaugeMetricFamily("optalloc_epoch_floor_violations", "share floors the latest plan "
                            "could not meet", value=len(e.floor_violations))
    yield GaugeMetricFamily("optalloc_history_epochs", "epochs in the history window",
                            value=len(d.history))
    hp = _g("optalloc_history_preemptions", "preemptions over the history window", ("code",))
    total: Counter = Counter()
    for h in d.history:
        total.update(dict(h.preemptions))
    for code, k in sorted(total.items()):
        hp.add_metric([code], k)
    yield hp


def _cluster(d: Dashboard) -> Iterator[GaugeMetricFamily]:
    gpus = _g("optalloc_cluster_gpus", "GPUs by type and node state", ("gpu_type", "state"))
    used = _g("optalloc_cluster_gpus_in_use", "GPUs running jobs", ("gpu_type", "allocated"))
    for t in d.gpu_types:
        for s in ("up", "drain", "down"):
            gpus.add_metric([t, s], sum(n.gpus for n in d.nodes if n.gpu_type == t and n.state == s))
        cells = [c for n in d.nodes if n.gpu_type == t for c in n.cells if c.job_id]
        used.add_metric([t, "true"], sum(bool(c.allocated) for c in cells))
        used.add_metric([t, "false"], sum(not c.allocated for c in cells))
    left = _g("optalloc_drain_jobs_left", "jobs still on a drain/down node", ("node",))
    ready = _g("optalloc_drain_ready", "1 when a drain/down node is empty (ready for repair)",
               ("node",))
    for x in d.drains:
        left.add_metric([x.node], x.n_left)
        ready.add_metric([x.node], 1.0 if x.ready else 0.0)
    yield from (gpus, used, left, ready)
    yield GaugeMetricFamily("optalloc_reservations", "reservations in the latest plan",
                            value=len(d.reservations))


def _utilization(d: Dashboard) -> Iterator[GaugeMetricFamily]:
    job = _g("optalloc_job_gpu_utilization_percent", "recent mean GPU utilization of a running "
             "job (local runner samples)", ("job", "project"))
    idle = _g("optalloc_job_idle_seconds", "how long a job flagged idle has held its GPUs "
              "under the idle threshold", ("job", "project"))
    for u in d.utilization:
        if u.recent_util_pct is not None:
            job.add_metric([u.job_id, u.project], u.recent_util_pct)
        if u.idle:
            idle.add_metric([u.job_id, u.project], u.idle_s)
    proj = _g("optalloc_project_gpu_utilization_percent", "GPU-weighted recent utilization of "
              "a project's sampled jobs", ("project",))
    pj = _g("optalloc_project_idle_jobs", "jobs flagged idle", ("project",))
    pg = _g("optalloc_project_idle_gpus", "GPUs held by jobs flagged idle", ("project",))
    for p in d.project_util:
        if p.mean_util_pct is not None:
            proj.add_metric([p.project], p.mean_util_pct)
        pj.add_metric([p.project], p.idle_jobs)
        pg.add_metric([p.project], p.idle_gpus)
    yield from (job, idle, proj, pj, pg)


class DashboardCollector(Collector):
    """Collects from whatever dashboard `provide()` returns at scrape time."""

    def __init__(self, provide: Callable[[], Dashboard]):
        self.provide = provide

    def collect(self):
        return families(self.provide())


def exposition(dash: Dashboard | Callable[[], Dashboard]) -> bytes:
    """The text exposition format (what /metrics answers and the textfile holds)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DashboardCollector(dash if callable(dash) else (lambda: dash)))
    return generate_latest(registry)


def write_textfile(dash: Dashboard, path: str) -> None:
    """node_exporter textfile format, written atomically (readers never see a torn file)."""
    from optalloc.statefile import write_atomic

    write_atomic(path, exposition(dash).decode("utf-8"))
