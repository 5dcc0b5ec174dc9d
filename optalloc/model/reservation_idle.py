"""The idle GPU-hours reservations held, charged to their projects over the lookback window
(models/formulation.md "Fair-share accounting").

While a reservation waits for its nodes, the GPUs it keeps free are idle on its project's
behalf. The ledger charges runs only, so the lookahead charges that idle time itself, in its
budget test (optalloc.model.reservations): a live reservation carries what it has held so far
(`Reservation.idle_gpu_h`), and once it ends (its gang started, or it was dropped) the hours go
into a `ReservationIdle` record that the plan carries forward for the lookback window. Without
the record a project could drop a reservation and make it again the next epoch with nothing
charged, and so hold nodes idle beyond what its budget pays for.

Weights follow the ledger's usage modes: with a window, the part of the reservation's span
[start, end] inside [now - window, now]; with decay, each hour counts 2^(-age / half-life)
(averaged over the span, the idle GPUs spread evenly over it).
"""

from __future__ import annotations

import numpy as np

from optalloc.snapshot import Snapshot
from optalloc.types import ReservationIdle, UsageMode

#: a record whose weight has fallen below this (decay mode) is dropped from the carry
NEGLIGIBLE = 1e-3


def weights(snap: Snapshot, records) -> np.ndarray:
    """(len(records),) the share of each record's GPU-hours that still counts at snap.now."""
    if not records:
        return np.zeros(0)
    start = np.array([r.start for r in records], dtype=float)
    end = np.maximum(np.array([r.end for r in records], dtype=float), start)
    now, pol = float(snap.now), snap.policy
    span = end - start
    if pol.usage_mode is UsageMode.WINDOW:
        lo = now - float(pol.lookback_s)
        inside = np.clip(np.minimum(end, now) - np.maximum(start, lo), 0.0, None)
        point = (span <= 0) & (end >= lo) & (end <= now)
        return np.where(span > 0, inside / np.where(span > 0, span, 1.0), point.astype(float))
    tau = float(pol.half_life_s) / np.log(2)
    a, b = np.exp(-np.maximum(now - end, 0.0) / tau), np.exp(-np.maximum(now - start, 0.0) / tau)
    return np.where(span > 0, tau * (a - b) / np.where(span > 0, span, 1.0), a)


def charged_by_org(snap: Snapshot) -> np.ndarray:
    """(O,) billing-weighted idle GPU-hours of ended reservations charged under each org node
    now (a project's and all its ancestors'; the root's is 0)."""
    out = np.zeros(snap.org.n)
    recs = [r for r in snap.reservation_idle if r.project in snap.org.index
            and r.gpu_type in snap.type_names]
    if not recs:
        return out
    w = weights(snap, recs)
    bw = np.array([g.billing_weight for g in snap.gpu_types], dtype=float)
    t = np.array([snap.type_names.index(r.gpu_type) for r in recs])
    p = np.array([snap.org.index[r.project] for r in recs])
    return _up_the_tree(snap, np.bincount(
        p, weights=w * bw[t] * np.array([r.gpu_h for r in recs]), minlength=snap.org.n))


def _up_the_tree(snap: Snapshot, leaf: np.ndarray) -> np.ndarray:
    """(O,) what each project's entry of `leaf` charges under it and all its ancestors (the
    root's 0)."""
    out = snap.org.membership().astype(float) @ leaf
    out[0] = 0.0
    return out


def ended_idle(snap: Snapshot, ended: list) -> np.ndarray:
    """(O,) billing-weighted idle GPU-hours that the reservations `ended` (this epoch's
    previous ones that do not continue; optalloc.types.Reservation) held so far, charged
    under each org node as charged_by_org charges the records they leave (root 0)."""
    leaf = np.zeros(snap.org.n)
    for r in ended:
        if r.project in snap.org.index and r.gpu_type in snap.type_names:
            bw = snap.gpu_types[snap.type_names.index(r.gpu_type)].billing_weight
            leaf[snap.org.index[r.project]] += idle_so_far(r, snap.now) * bw
    return _up_the_tree(snap, leaf)


def carried(snap: Snapshot, new: list[ReservationIdle]) -> tuple[ReservationIdle, ...]:
    """The records the plan carries to the next epoch: the snapshot's still inside the
    window, then this epoch's (only those with idle time)."""
    old = list(snap.reservation_idle)
    w = weights(snap, old)
    keep = [r for r, x in zip(old, w) if x > NEGLIGIBLE or r.end > snap.now]
    return tuple(keep) + tuple(r for r in new if r.gpu_h > 0)


def idle_so_far(prev_r, now: float) -> float:
    """GPU-hours a continuing reservation's nodes were held idle so far (its last plan's idle
    GPUs counted until now)."""
    if prev_r is None:
        return 0.0
    at = prev_r.at if prev_r.at is not None else now
    return float(prev_r.idle_gpu_h) + float(prev_r.idle_gpus) * max(0.0, now - at) / 3600.0


def committed(held: list, snap: Snapshot, M, levels, prot_h, bw) -> np.ndarray:
    """(len(levels),) billing-weighted GPU-hours the reservations chosen so far this epoch
    (`held`: optalloc.model.reservations.Held) commit under each org node of `levels` (their
    protected runs and idle time so far; the budget test)."""
    out = np.zeros(len(levels))
    for h in held:
        c = (float(snap.job_gpus[h.job]) * prot_h[h.job] + h.idle_gpu_h) * bw[h.type]
        out += M[levels, int(snap.job_project[h.job])] * c
    return out


__all__ = ["NEGLIGIBLE", "carried", "charged_by_org", "committed", "ended_idle", "idle_so_far",
           "weights"]
