"""The backfill (placement step 5) starts jobs in descending marginal objective per GPU. A job
is ranked by the type where it is worth most; when that type has no room for it (fragmented
nodes), it must be ranked again by what it is worth on the type it would actually get, not
placed there at the first type's rank. Before: a job of a project already at its floor on the
second type took the last GPUs of that type from a project below its floor there (on the
bench's 1,024-GPU epoch the rounded plan met 7 fewer floor GPUs, 0.55% from the bound)."""

from __future__ import annotations

import numpy as np

from optalloc.epoch import run_epoch
from optalloc.model.build import build_model
from optalloc.plan.place import place
from optalloc.plan.holdings import got_by_org
from optalloc.snapshot import build_snapshot
from optalloc.types import Config, GpuType, Job, Node, Policy

from test_epoch_toy import H, flat_org, gpus_by_project, pending_codes, running


def _snap():
    # h100: two 4-GPU nodes, each half held by a protected job of B (4 free, but no node has
    # 4); a100: one 8-GPU node, 4 held by a protected job of A (A is at its floor there)
    nodes = [Node("h0", "h100", 4), Node("h1", "h100", 4), Node("a0", "a100", 8)]
    jobs = [
        running("Bh0", "B", "h100", [("h0", [0, 1])], start=9.9 * H),
        running("Bh1", "B", "h100", [("h1", [0, 1])], start=9.9 * H),
        running("Aa", "A", "a100", [("a0", [0, 1, 2, 3])], start=9.9 * H),
        # A's job is worth most on h100 (twice as fast there, and A has the lower usage)
        Job("Aq", "A", 4, min_runtime_s=H, submit_time=0.0, speedup={"h100": 2.0}),
        Job("Bq", "B", 4, min_runtime_s=H, submit_time=0.0, gpu_types=("a100",)),
    ]
    # per-type budgets (a100 billed at half an h100 GPU): each type's floors stand alone, as
    # the case needs (pooled, A's lower usage ratio rightly takes the a100 GPUs: both are
    # below their floors over all types)
    cfg = Config((GpuType("h100", 1.0), GpuType("a100", 0.5)), tuple(nodes),
                 flat_org({"A": 1, "B": 1}), Policy(), tuple(jobs))
    return build_snapshot(cfg, now=10 * H, usage_ratio={"A": 0.1, "B": 0.5})


def test_a_job_that_misses_its_best_type_is_ranked_again_by_the_type_it_would_get():
    snap = _snap()
    em = build_model(snap)
    placed = place(em, np.zeros(em.lm.n_vars))  # the solver chose nothing: the backfill decides
    started = {snap.jobs[j].id: p.gpu_type for j, p in placed.placements.items()}
    assert started == {"Bq": "a100"}
    assert bool(placed.kept.all())
    got = got_by_org(em, placed)
    a100 = snap.type_names.index("a100")
    b = snap.org.names.index("B")
    assert got[b, a100] == min(em.tg.floor[b, a100], 4)  # B's floor there met by its own job


def test_the_epoch_gives_the_last_a100_gpus_to_the_project_below_its_floor_there():
    snap = _snap()
    plan = run_epoch(snap)
    assert gpus_by_project(snap, plan) == {"A": 4, "B": 8}
    assert {p.job_id: p.gpu_type for p in plan.placements if p.job_id.endswith("q")} == {
        "Bq": "a100"}
    assert set(pending_codes(plan)) == {"Aq"}
    assert plan.preemptions == ()
    assert plan.report.status == "optimal"
