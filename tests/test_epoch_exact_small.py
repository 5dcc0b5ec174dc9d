"""An epoch whose MIP is small (at most `solver.exact_up_to` integer columns) is solved to a 1e-4
gap, whatever looser mip_gap is set: a 0.5% gap of a whole cluster's objective hid decisions
the scheme asks for (philly-teams: a 16-GPU gang of a project below its target waited 10 h
behind a plan 0.32% from the bound; ITP cluster04, 3 days: 63 of 280 epochs had an exact
optimum better by the scheme's own order). Larger epochs keep mip_gap."""

from __future__ import annotations

from dataclasses import replace

import pytest

from optalloc.bench.instances import scale_instance
from optalloc.config import ConfigError, load_config
from optalloc.epoch import effective_settings, run_epoch
from optalloc.model.build import build_model
from optalloc.solve import solve
from optalloc.types import EXACT_GAP, SolverSettings


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_small_epoch_returns_the_exact_optimum_within_the_tight_gap(seed):
    snap = scale_instance("S", seed)  # 88 GPUs, 200 jobs: ~500 integer columns
    settings = SolverSettings(mip_gap=0.005)
    plan = run_epoch(snap, settings)
    exact = solve(build_model(snap).lm, replace(settings, mip_gap=1e-9, time_limit_s=60))
    assert exact.status == "optimal"
    rep = plan.report
    assert rep.status == "optimal"
    assert rep.gap <= EXACT_GAP
    assert rep.objective >= exact.objective - EXACT_GAP * abs(exact.objective) - 1e-6


def test_the_tight_gap_applies_only_up_to_exact_up_to_integer_columns():
    lm = build_model(scale_instance("S", 0)).lm
    n = int(lm.integer.sum())
    loose = SolverSettings(mip_gap=0.005, exact_up_to=n)
    s, exact = effective_settings(loose, lm)
    assert exact and s.mip_gap == EXACT_GAP and s.time_limit_s == loose.time_limit_s
    s, exact = effective_settings(replace(loose, exact_up_to=n - 1), lm)
    assert not exact and s.mip_gap == 0.005
    s, exact = effective_settings(replace(loose, exact_up_to=0), lm)
    assert not exact and s.mip_gap == 0.005


def test_a_gap_set_tighter_than_the_exact_one_is_kept():
    lm = build_model(scale_instance("S", 0)).lm
    s, exact = effective_settings(SolverSettings(mip_gap=1e-6), lm)
    assert not exact and s.mip_gap == 1e-6


def test_a_large_epoch_keeps_mip_gap_and_reports_its_gap():
    snap = scale_instance("M", 0)  # ~6,600 integer columns: past the default 2,000
    plan = run_epoch(snap, SolverSettings(mip_gap=0.005))
    assert plan.report.status == "optimal"
    assert EXACT_GAP < plan.report.gap <= 0.005


def _config(tmp_path, solver: str):
    p = tmp_path / "cluster.yaml"
    p.write_text(
        "gpu_types: [{name: h100}]\n"
        "nodes: [{name: n01, gpu_type: h100, gpus: 8}]\n"
        "org: {name: root, children: [{name: a, share: 1}]}\n"
        f"policy: {{solver: {solver}}}\n"
    )
    return load_config(p)


def test_exact_up_to_is_read_from_the_policy(tmp_path):
    assert _config(tmp_path, "{exact_up_to: 500}").policy.solver.exact_up_to == 500
    assert _config(tmp_path, "{mip_gap: 0.01}").policy.solver.exact_up_to == 2000


@pytest.mark.parametrize("bad", ["-1", "1.5", "many"])
def test_a_bad_exact_up_to_names_its_key(tmp_path, bad):
    with pytest.raises(ConfigError) as e:
        _config(tmp_path, f"{{exact_up_to: {bad}}}")
    assert "policy.solver.exact_up_to" in str(e.value)
