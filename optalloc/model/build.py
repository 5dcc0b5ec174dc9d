"""Phase 2: build the epoch model, an ordered list of small `define_*` functions.

See models/formulation.md for the math of every block. The result, `EpochModel`, holds the
matrix form (`lm`, handed unchanged to every backend) and the coordinates needed to read a
solution back (which job/type/node/org node each column is).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from optalloc.model.constraints.capacity import define_node_capacity, define_packing
from optalloc.model.constraints.contract import define_decisions, define_one_choice
from optalloc.model.constraints.floors import define_floors
from optalloc.model.constraints.gang import define_whole_node_gangs
from optalloc.model.context import BuildContext
from optalloc.model.matrix import LinearModel
from optalloc.model.objective.impact import Impact, compute_impact
from optalloc.model.requirements import Requirements, compute_requirements
from optalloc.snapshot import Snapshot

#: The model, in build order. Each adds one block of variables and/or one constraint family.
DEFINES = (
    define_decisions,  # x (starts), k (keeps), churn offset          -- contract.py
    define_one_choice,  # one_choice[job]                              -- contract.py
    define_whole_node_gangs,  # z, gang[t]                             -- gang.py
    define_packing,  # u, pack[t,s]                                    -- capacity.py
    define_node_capacity,  # capacity[t] (a row per up node)           -- capacity.py
    define_floors,  # m, floor[o,t]                                    -- floors.py
)


@dataclass(frozen=True, eq=False)
class EpochModel:
    snap: Snapshot
    req: Requirements
    imp: Impact
    lm: LinearModel
    x: np.ndarray
    k: np.ndarray
    z: np.ndarray
    z_node: np.ndarray
    u: np.ndarray
    u_node: np.ndarray
    u_size: np.ndarray
    m: np.ndarray
    m_org: np.ndarray
    m_type: np.ndarray
    floor: np.ndarray  # (O, T)
    demand: np.ndarray  # (O, T)
    build_s: float

    def plan_objective(
        self, started: np.ndarray, kept: np.ndarray, got: np.ndarray
    ) -> float:
        """Objective of a concrete plan: `started` (C,) bool candidates placed, `kept` (K,) bool
        running jobs kept, `got` (O, T) tier-1 GPUs per org node and type. Floors met are
        min(F, got) (the best m for that plan); z and u carry no objective."""
        c = self.lm.c
        val = float(c[self.x][started].sum() + c[self.k][kept].sum()) + self.lm.obj_offset
        if len(self.m):
            met = np.minimum(self.floor[self.m_org, self.m_type], got[self.m_org, self.m_type])
            val += float((c[self.m] * met).sum())
        return val


def build_model(
    snap: Snapshot, req: Requirements | None = None, imp: Impact | None = None
) -> EpochModel:
    t0 = time.perf_counter()
    req = compute_requirements(snap) if req is None else req
    imp = compute_impact(snap) if imp is None else imp
    ctx = BuildContext(snap=snap, req=req, imp=imp)
    for define in DEFINES:
        define(ctx)
    lm = ctx.b.build()
    O, T = snap.org.n, len(snap.gpu_types)
    return EpochModel(
        snap=snap,
        req=req,
        imp=imp,
        lm=lm,
        x=ctx.x,
        k=ctx.k,
        z=ctx.z,
        z_node=ctx.z_node,
        u=ctx.u,
        u_node=ctx.u_node,
        u_size=ctx.u_size,
        m=ctx.m,
        m_org=ctx.m_org,
        m_type=ctx.m_type,
        floor=ctx.floor if ctx.floor is not None else np.zeros((O, T)),
        demand=ctx.demand if ctx.demand is not None else np.zeros((O, T)),
        build_s=time.perf_counter() - t0,
    )
