"""The report folder's PNG plots (matplotlib, Agg): owed vs delivered per project, wait CDFs
by class, occupancy against its limit with the queue below; and the time binning the HTML
report's charts share with them (hours, or days past a week)."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Mapping

import numpy as np

from optalloc.statefile import write_atomic
from optalloc.sim.metrics import HOUR, job_waits
from optalloc.sim.timeseries import TimeSeries
from optalloc.sim.report_tables import MAX_PROJECT_PANELS, PLOT_CLASSES
from optalloc.sim.result import SimResult


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def bin_factor(ts: TimeSeries) -> tuple[int, str]:
    """Aggregate hourly bins to days when the horizon is longer than a week."""
    horizon_h = (ts.edges[-1] - ts.edges[0]) / HOUR
    return (24, "day") if horizon_h > 7 * 24 else (1, "hour")


def coarsen(values: np.ndarray, k: int) -> np.ndarray:
    """Mean over groups of k consecutive bins along the last axis (the tail group may be short)."""
    if k == 1:
        return values
    n = values.shape[-1]
    groups = np.arange(n) // k
    m = groups[-1] + 1 if n else 0
    flat = values.reshape(-1, n)
    out = np.empty((flat.shape[0], m))
    for i, row in enumerate(flat):
        ok = np.isfinite(row)
        sums = np.bincount(groups[ok], weights=row[ok], minlength=m)
        cnt = np.bincount(groups[ok], minlength=m)
        out[i] = np.where(cnt > 0, sums / np.maximum(cnt, 1), np.nan)
    return out.reshape(values.shape[:-1] + (m,))


def plot_owed_delivered(series: Mapping[str, TimeSeries], path: Path) -> Path:
    """Per project (the most-owed first): delivered (solid) vs owed (dashed) mean GPUs per bin."""
    plt = _plt()
    first = next(iter(series.values()))
    k, unit = bin_factor(first)
    owed_tot = sum(ts.owed_h.sum(axis=1) for ts in series.values())
    order = [first.projects[i] for i in np.argsort(-owed_tot, kind="stable")][:MAX_PROJECT_PANELS]
    n = max(1, len(order))
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.6 * rows), squeeze=False, sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax_i, proj in enumerate(order):
        ax = axes[ax_i // cols][ax_i % cols]
        for pi, (policy, ts) in enumerate(series.items()):
            if proj not in ts.projects:
                continue
            j = ts.projects.index(proj)
            x = coarsen(ts.hours, k) / (24 if unit == "day" else 1)
            c = colors[pi % len(colors)]
            ax.plot(x, coarsen(ts.delivered_h[j], k), color=c, lw=1.2, label=f"{policy} delivered")
            ax.plot(x, coarsen(ts.owed_h[j], k), color=c, lw=1.0, ls="--", label=f"{policy} owed")
        ax.set_title(proj, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax_i in range(len(order), rows * cols):
        axes[ax_i // cols][ax_i % cols].axis("off")
    for ax in axes[-1]:
        ax.set_xlabel(f"time ({unit}s)", fontsize=8)
    for row in axes:
        row[0].set_ylabel("GPUs (mean)", fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8, frameon=False)
    fig.suptitle("Owed vs delivered allocated GPUs per project", fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 0.96))
    _save(fig, path)
    plt.close(fig)
    return path


def plot_wait_cdf(results: Mapping[str, SimResult], path: Path) -> Path:
    """CDF of wait (submit -> first start, censored at the horizon) per class, one line per
    policy, log time axis."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(PLOT_CLASSES), figsize=(4 * len(PLOT_CLASSES), 3.2), squeeze=False)
    for ci, cls in enumerate(PLOT_CLASSES):
        ax = axes[0][ci]
        drew = False
        for policy, res in results.items():
            w = job_waits(res)
            x = np.sort(w["wait_s"][w["cls"] == cls])
            if len(x) == 0:
                continue
            y = np.arange(1, len(x) + 1) / len(x)
            ax.step(np.maximum(x, 1.0), y, where="post", label=f"{policy} (n={len(x)})")
            drew = True
        ax.set_xscale("log")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{cls} jobs", fontsize=10)
        ax.set_xlabel("wait (s, log; never started = censored at horizon)", fontsize=7)
        ax.grid(alpha=0.3)
        if drew:
            ax.legend(fontsize=7, loc="lower right")
        else:
            ax.text(0.5, 0.5, "no jobs", ha="center", va="center", transform=ax.transAxes)
    axes[0][0].set_ylabel("fraction of jobs")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return path


def plot_occupancy(series: Mapping[str, TimeSeries], path: Path) -> Path:
    """Total and allocated occupancy over time per policy against the occupancy limit
    min(1, demand ratio); queue length below."""
    plt = _plt()
    first = next(iter(series.values()))
    k, unit = bin_factor(first)
    fig, (ax, axq) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for pi, (policy, ts) in enumerate(series.items()):
        x = coarsen(ts.hours, k) / (24 if unit == "day" else 1)
        c = colors[pi % len(colors)]
        ax.plot(x, coarsen(ts.occupancy_total, k), color=c, lw=1.3, label=f"{policy} total")
        ax.plot(x, coarsen(ts.occupancy_allocated, k), color=c, lw=1.0, ls=":", label=f"{policy} allocated")
        ax.plot(x, coarsen(np.minimum(1.0, ts.demand_ratio), k), color=c, lw=0.8, ls="--", alpha=0.6,
                label=f"{policy} limit min(1, demand ratio)")
        axq.plot(x, coarsen(ts.queue_length, k), color=c, lw=1.0, label=policy)
    ax.set_ylabel("occupancy")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=3, loc="lower right")
    axq.set_ylabel("queued jobs (mean)")
    axq.set_xlabel(f"time ({unit}s)")
    axq.grid(alpha=0.3)
    axq.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return path


def _save(fig, path: Path) -> None:
    """The figure as PNG, renamed over `path` as a new 0600 file (statefile.write_atomic)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    write_atomic(path, buf.getvalue())
