"""Floors not met by a plan (phase 5 of optalloc.epoch): per org node and type, or over all
types where one budget spans them."""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.plan.holdings import Placed
from optalloc.types import FloorViolation

ALL_TYPES = "all"  # a FloorViolation's gpu_type when the budget is pooled over types


def floor_violations(em: EpochModel, got: np.ndarray,
                     placed: Placed | None = None) -> tuple[FloorViolation, ...]:
    """Floors not met: per org node and type, or, when the budget is pooled over types
    (optalloc.model.pooled), per org node over all types (gpu_type "all"): a project that
    got fewer GPUs of one type than its floor's share there and more of another met it.
    Per type, the GPUs of jobs the plan moves off t (`placed`) count as met there: they
    run, on another type (the floor was its demand on t before the move)."""
    snap = em.snap
    req = em.req
    if placed is not None and not em.tg.pooled and req.cand_move.any():
        j = req.cand_job[placed.started & req.cand_move]  # (a restart counts where it runs)
        off = np.zeros_like(got)
        np.add.at(off, (snap.job_project[j], snap.job_run_type[j]), snap.job_gpus[j])
        got = got + snap.org.membership().astype(float) @ off
    if em.tg.pooled:
        F, G = em.floor.sum(axis=1), got.sum(axis=1)
        return tuple(FloorViolation(snap.org.names[a], ALL_TYPES, float(F[a]), float(G[a]))
                     for a in np.flatnonzero(F > G + 1e-9))
    o, t = np.nonzero(em.floor > got + 1e-9)
    return tuple(
        FloorViolation(snap.org.names[a], snap.type_names[b], float(em.floor[a, b]),
                       float(got[a, b]))
        for a, b in zip(o, t)
    )
