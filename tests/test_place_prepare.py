"""The placement's per-model tables computed ahead (optalloc.plan.place.prepare), as the epoch
does while its LP solves on another thread, place every solution exactly as tables computed
on first use do, and a large epoch computes them before it waits for its LP."""

from __future__ import annotations

import numpy as np
import pytest

import optalloc.epoch as epoch
from optalloc.bench.instances import make_instance, scale_instance
from optalloc.model.build import build_model
from optalloc.plan.incumbent import greedy_placed
from optalloc.plan.place import place, prepare
from optalloc.plan.holdings import as_solution

TABLES = ("_running_holds", "_running_gpus", "_candidates_by_job", "_value_groups")


def _same(a, b) -> None:
    assert np.array_equal(a.started, b.started)
    assert np.array_equal(a.kept, b.kept)
    assert a.placements == b.placements
    assert np.array_equal(a.backfilled, b.backfilled)
    assert np.array_equal(a.restored, b.restored)
    assert np.array_equal(a.free, b.free)


@pytest.mark.parametrize("seed", [0, 3, 7])
def test_a_model_prepared_ahead_places_a_solution_as_one_prepared_on_first_use(seed):
    snap = make_instance(seed=seed, n_nodes=24, n_jobs=160, n_programs=3,
                         projects_per_program=3)
    ahead, lazy = build_model(snap), build_model(snap)
    prepare(ahead)
    assert all(k in ahead.__dict__ for k in TABLES)
    assert not any(k in lazy.__dict__ for k in TABLES)
    g = greedy_placed(lazy)
    assert g is not None
    x = as_solution(lazy, g)
    # the greedy plan's starts and keeps as a solution, then the same with half its starts
    # dropped (the backfill has work to do): each placed the same way on both models
    half = x.copy()
    starts = np.flatnonzero(half[lazy.x] > 0.5)
    half[lazy.x[starts[::2]]] = 0.0
    for sol in (x, half, None):
        _same(place(ahead, sol), place(lazy, sol))


def test_a_large_epoch_prepares_its_placement_while_its_lp_solves(monkeypatch):
    calls: list = []
    real_prepare, real_finish = epoch.prepare, epoch.EarlyLp.finish

    def spy_prepare(em):
        calls.append("prepare")
        return real_prepare(em)

    def spy_finish(self, lm):
        calls.append("finish")
        return real_finish(self, lm)

    monkeypatch.setattr(epoch, "prepare", spy_prepare)
    monkeypatch.setattr(epoch.EarlyLp, "finish", spy_finish)
    monkeypatch.setattr(epoch, "EARLY_LP_FROM", 0)
    epoch.run_epoch(scale_instance("S", 1))
    assert calls == ["prepare", "finish"]
    calls.clear()
    monkeypatch.setattr(epoch, "EARLY_LP_FROM", 10**9)  # no LP beside the greedy pass
    epoch.run_epoch(scale_instance("S", 1))
    assert calls == []
