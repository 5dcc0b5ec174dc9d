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
from optalloc.types import EXACT_GAP, Job, SolverSettings

from test_epoch_toy import H, flat_org, nodes_of, running, snapshot


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_small_epoch_returns_the_exact_optimum_within_the_tight_gap(seed):
    snap = scale_instance("S", seed)  # 88 GPUs, 200 jobs: ~500 integer columns
    settings = SolverSettings(mip_gap=0.005)
    plan = run_epoch(snap, settings)
    # the whole problem: every `order_types` row, where the epoch adds those it needs
    exact = solve(build_model(snap).with_all_type_rows().lm,
                  replace(settings, mip_gap=1e-9, time_limit_s=60))
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


def _fragmented(n_a: int = 60, n_b: int = 70):
    """A 1,064-GPU cluster: A and B fill 130 nodes with protected work (A below its target, B
    above); n130 runs A's unallocated 8-GPU job, n131 A's own 4-GPU job past its protection
    (4 GPUs free), n132 C's 4-GPU job (within C's floor; 4 free). A's 16-GPU gang waits: it
    needs two whole nodes."""
    jobs, k = [], 0
    for p, n in (("A", n_a), ("B", n_b)):
        for i in range(n):
            jobs.append(running(f"{p.lower()}{i}", p, "h100", [(f"n{k:02d}", range(8))],
                                start=9 * H, min_runtime_s=8 * H))
            k += 1
    jobs += [running("au", "A", "h100", [(f"n{k:02d}", range(8))], start=9 * H, min_runtime_s=0),
             running("ap", "A", "h100", [(f"n{k + 1:02d}", range(4))], start=0.5 * H,
                     min_runtime_s=8 * H),
             running("cp", "C", "h100", [(f"n{k + 2:02d}", range(4))], start=0.5 * H,
                     min_runtime_s=8 * H),
             Job("G", "A", 16, min_runtime_s=8 * H, submit_time=9.5 * H)]
    return snapshot(nodes_of(k + 3, 8), flat_org({"A": 1, "B": 1, "C": 0.2}), jobs)


def test_a_gang_below_its_target_starts_on_the_nodes_its_own_project_frees():
    snap = _fragmented()  # 272 integer columns
    plan = run_epoch(snap, SolverSettings(mip_gap=0.005))
    new = {p.job_id: [a.node for a in p.nodes] for p in plan.placements if p.job_id == "G"}
    assert new == {"G": ["n130", "n131"]}
    assert sorted(p.job_id for p in plan.preemptions) == ["ap", "au"]  # A's own, not C's floor
    # ap restarts at once on the 4 GPUs of n132 beside C's job (rule 6), au waits
    assert {p.job_id: p.code.value for p in plan.preemptions} == {
        "ap": "Moved", "au": "PreemptedUnallocated"}
    ap = next(p for p in plan.placements if p.job_id == "ap")
    assert [(a.node, a.gpus) for a in ap.nodes] == [("n132", (4, 5, 6, 7))]
    assert plan.pending == ()
    assert len(plan.placements) == len(snap.jobs) - 1  # every other running job stays
    assert plan.report.status == "optimal" and plan.report.gap <= EXACT_GAP


def test_at_the_loose_gap_the_same_gang_waits_behind_a_plan_called_optimal():
    # why exact_up_to exists: 0.1% of the whole objective is more than the gang's start
    plan = run_epoch(_fragmented(), SolverSettings(mip_gap=0.005, exact_up_to=0))
    assert [r.job_id for r in plan.pending] == ["G"]
    assert plan.preemptions == ()
    assert plan.report.status == "optimal" and EXACT_GAP < plan.report.gap <= 0.005
