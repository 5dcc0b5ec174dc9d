"""A deterministic synthetic week for `optalloc ledger report --demo`: a ledger filled from a
config's cluster and projects, without any state DB. Projects differ in appetite (some ask for
far more than their entitlement, some for little), so the report shows ratios on both sides of 1
and owed time both met and missed."""

from __future__ import annotations

import numpy as np

from optalloc.ledger.memory import Ledger
from optalloc.org import OrgTree
from optalloc.types import Config, NodeState


def demo_ledger(config: Config, now: float, seed: int = 0) -> Ledger:
    tree = OrgTree.build(config.org, [g.name for g in config.gpu_types])
    led = Ledger(config.gpu_types, tree, config.policy)
    types = list(tree.gpu_types)
    cap = np.zeros(len(types))
    for n in config.nodes:
        if n.state is NodeState.UP:
            cap[types.index(n.gpu_type)] += n.gpus
    start = now - config.policy.lookback_s
    led.record_capacity(start, dict(zip(types, cap.astype(int).tolist())))
    rng = np.random.default_rng(seed)
    hours = int(config.policy.lookback_s // 3600)
    ent = tree.entitlement[led.leaf_index] @ cap  # (P,) GPUs each project is entitled to
    appetite = rng.choice([0.2, 0.8, 1.5, 3.0], size=len(ent))  # demand / entitlement
    demand = np.rint(ent[:, None] * appetite[:, None] * rng.uniform(0.5, 1.5, (len(ent), hours)))
    # deliver each hour in proportion to demand, scaled to fit the cluster, in hour-long runs
    total = cap.sum()
    scale = np.minimum(1.0, total / np.maximum(demand.sum(axis=0), 1.0))
    delivered = np.floor(demand * scale[None, :])
    p_idx, h_idx = np.nonzero(delivered)
    gpus = delivered[p_idx, h_idx]
    t0 = start + 3600.0 * h_idx
    type_code = rng.choice(len(types), size=len(p_idx), p=cap / total if total else None)
    led.record_columns(
        start=t0, end=t0 + 3600.0, gpus=gpus,
        project_code=p_idx, project_names=led.projects,
        type_code=type_code, type_names=types,
        allocated=rng.random(len(p_idx)) < 0.85,
    )
    for h in range(hours):
        led.record_demand(start + 3600.0 * h, dict(zip(led.projects, demand[:, h].astype(int).tolist())))
    return led
