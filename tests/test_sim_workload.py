"""Mapping rules: trace rows -> Jobs of a scenario's org tree, deterministically."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optalloc.config.problems import Loc, Problems
from optalloc.errors import ConfigError
from optalloc.sim.traces import RawJobs
from optalloc.sim.workload import (
    MappingRules,
    assign_projects,
    build_jobs,
    offered_load,
    parse_mapping,
    stable_uniform,
)
from optalloc.types import Config, GpuType, Job, Node, OrgNode, Policy, frozen_map

H = 3600.0


def config(nodes=(("n1", "g1", 8), ("n2", "g1", 8)), types=("g1",), cap_h=8.0) -> Config:
    return Config(
        gpu_types=tuple(GpuType(t) for t in types),
        nodes=tuple(Node(*n) for n in nodes),
        org=OrgNode("root", children=(
            OrgNode("prog", share=3, children=(OrgNode("A", share=2), OrgNode("B", share=1))),
            OrgNode("C", share=1),
        )),
        policy=Policy(min_runtime_cap_s=cap_h * H),
    )


def raw(ids, submit, dur, gpus, team=None, speedup=None) -> RawJobs:
    return RawJobs(
        job_id=np.array(ids, dtype=object),
        submit_time=np.array(submit, dtype=float),
        duration_s=np.array(dur, dtype=float),
        gpus=np.array(gpus, dtype=np.int64),
        team=None if team is None else np.array(team, dtype=object),
        speedup=frozen_map({k: np.array(v, dtype=float) for k, v in (speedup or {}).items()}),
    )


def test_contract_fields_follow_the_rules_for_debug_unallocated_and_other_jobs():
    rules = MappingRules(projects=frozen_map({"A": 1.0}), debug_below_s=900, debug_min_runtime_s=600,
                         min_runtime_s=4 * H, unallocated_share=0.0, resumable_fraction=1.0,
                         checkpoint_interval_s=1800)
    jobs, summary = build_jobs(raw(["b", "a"], [50, 10], [300, 7200], [1, 4]), rules, config())
    assert jobs == (
        Job(id="a", project="A", gpus=4, min_runtime_s=4 * H, resumable=True, submit_time=10.0,
            duration_s=7200.0, checkpoint_interval_s=1800.0),
        Job(id="b", project="A", gpus=1, min_runtime_s=600.0, resumable=True, submit_time=50.0,
            duration_s=300.0, checkpoint_interval_s=1800.0),
    )
    assert summary.n_jobs == 2 and summary.n_debug == 1 and summary.n_unallocated == 0
    assert summary.gpu_hours == pytest.approx((300 + 4 * 7200) / H)


def test_min_runtime_defaults_to_the_policy_cap_and_never_exceeds_it():
    jobs, _ = build_jobs(raw(["x"], [0], [10 * H], [1]), MappingRules(unallocated_share=0.0), config(cap_h=6))
    assert jobs[0].min_runtime_s == 6 * H


def test_every_non_debug_job_is_unallocated_at_share_one_and_none_at_zero():
    ids = [f"j{i}" for i in range(50)]
    r = raw(ids, np.zeros(50), np.full(50, H), np.ones(50))
    all_u, s1 = build_jobs(r, MappingRules(unallocated_share=1.0), config())
    none_u, s0 = build_jobs(r, MappingRules(unallocated_share=0.0), config())
    assert all(j.min_runtime_s == 0 for j in all_u) and s1.n_unallocated == 50
    assert all(j.min_runtime_s == 8 * H for j in none_u) and s0.n_unallocated == 0


def test_a_seeded_share_of_jobs_is_unallocated_and_resumable():
    n = 4000
    ids = [f"job-{i}" for i in range(n)]
    r = raw(ids, np.arange(n), np.full(n, H), np.ones(n))
    jobs, s = build_jobs(r, MappingRules(unallocated_share=0.2, resumable_fraction=0.7), config(), seed=5)
    assert s.n_unallocated / n == pytest.approx(0.2, abs=0.03)
    assert s.n_resumable / n == pytest.approx(0.7, abs=0.03)
    again, _ = build_jobs(r, MappingRules(unallocated_share=0.2, resumable_fraction=0.7), config(), seed=5)
    other, _ = build_jobs(r, MappingRules(unallocated_share=0.2, resumable_fraction=0.7), config(), seed=6)
    assert again == jobs
    assert other != jobs


def test_projects_default_to_entitlement_weights():
    n = 6000
    ids = [f"j{i}" for i in range(n)]
    jobs, _ = build_jobs(raw(ids, np.zeros(n), np.full(n, H), np.ones(n)), MappingRules(), config())
    counts = {p: sum(j.project == p for j in jobs) / n for p in ("A", "B", "C")}
    # entitlements: A = 3/4 * 2/3 = 1/2, B = 1/4, C = 1/4
    assert counts == {"A": pytest.approx(0.5, abs=0.03), "B": pytest.approx(0.25, abs=0.03),
                      "C": pytest.approx(0.25, abs=0.03)}


@settings(max_examples=40, deadline=None)
@given(ids=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=30, unique=True),
       seed=st.integers(0, 1000))
def test_a_jobs_project_depends_only_on_its_id_and_the_seed(ids, seed):
    weights = {"A": 1.0, "B": 2.0, "C": 0.5}
    full = dict(zip(ids, assign_projects(ids, weights, seed)))
    half = ids[::2]
    assert dict(zip(half, assign_projects(half, weights, seed))) == {i: full[i] for i in half}
    u = stable_uniform(ids, "x", seed)
    assert np.all((u >= 0) & (u < 1))


def test_a_zero_weight_project_gets_no_jobs():
    ids = [f"j{i}" for i in range(500)]
    assert set(assign_projects(ids, {"A": 1.0, "B": 0.0}, 0)) == {"A"}


def test_teams_map_to_projects_and_unknown_teams_are_reported_with_the_fix():
    r = raw(["1", "2", "3"], [0, 1, 2], [H, H, H], [1, 1, 1], team=["A", "t-b", "zzz"])
    rules = MappingRules(team_map=frozen_map({"t-b": "B"}))
    with pytest.raises(ConfigError) as err:
        build_jobs(r, rules, config(), loc=Loc("s.yaml", "workload.mapping"))
    assert err.value.problems == [
        "s.yaml: workload.mapping.team_map: team(s) zzz are not projects of the org tree; map each team "
        "to a project under workload.mapping.team_map, or name org leaves after the teams"
    ]
    jobs, _ = build_jobs(r.take(np.array([0, 1])), rules, config())
    assert [j.project for j in jobs] == ["A", "B"]


def test_gangs_get_a_node_shape_and_impossible_jobs_are_dropped_and_counted():
    r = raw(["g12", "g16", "g7", "g40"], [0, 1, 2, 3], [H] * 4, [12, 16, 7, 40])
    jobs, s = build_jobs(r, MappingRules(), config())
    assert [(j.id, j.gpus, j.gpus_per_node) for j in jobs] == [("g12", 12, 6), ("g16", 16, None), ("g7", 7, None)]
    assert dict(s.dropped) == {"more GPUs than the cluster has of its types": 1}
    assert s.reshaped == 1


def test_per_type_speedups_become_allowed_types_and_speeds():
    cfg = config(nodes=(("k1", "k80", 8), ("v1", "v100", 8)), types=("k80", "v100"))
    r = raw(["a", "b", "c"], [0, 1, 2], [H] * 3, [1, 1, 1],
            speedup={"k80": [0.25, 0.0, 1.0], "v100": [1.0, 1.0, 1.0], "p100": [0.5, 0.5, 0.5]})
    jobs, _ = build_jobs(r, MappingRules(), cfg)
    assert [(j.gpu_types, dict(j.speedup)) for j in jobs] == [
        ((), {"k80": 0.25}),  # runs everywhere: no restriction, its slower type listed
        (("v100",), {}),  # cannot run on k80
        ((), {}),  # same speed everywhere
    ]


def test_offered_load_is_work_over_capacity_time():
    jobs = [Job(id="a", project="A", gpus=4, duration_s=H, submit_time=0.0),
            Job(id="b", project="A", gpus=2, duration_s=2 * H, submit_time=H)]
    assert offered_load(jobs, capacity_gpus=8, horizon_s=2 * H) == pytest.approx(8 * H / (16 * H))
    assert offered_load(jobs, capacity_gpus=8) == pytest.approx(8 * H / (8 * H))  # span = 1 h


@pytest.mark.parametrize(
    "mapping, problems",
    [
        ({"projects": {"A": 1, "Z": 2}}, ["f: m.projects.Z: 'Z' is not a project (a leaf of the org tree); projects (org tree leaves): A, B, C"]),
        ({"projects": {"prog": 1}}, ["f: m.projects.prog: 'prog' is not a project (a leaf of the org tree); projects (org tree leaves): A, B, C"]),
        ({"min_runtime": "9h"}, ["f: m.min_runtime: '9h' exceeds policy.min_runtime_cap (28800s); lower it to the cap or raise policy.min_runtime_cap"]),
        ({"debug_min_runtime": "20m"}, ["f: m.debug_min_runtime: must be at most 15m (a debug job's min_runtime), got '20m'; use 15m or less"]),
        ({"unallocated_share": 1.5}, ["f: m.unallocated_share: must be <= 1, got 1.5; use a value of at most 1"]),
        ({"resumable_fraction": "most"}, ["f: m.resumable_fraction: expected a number, got a string ('most'); write a number like 1.5"]),
        ({"team_map": {"t1": "nope"}}, ["f: m.team_map.t1: 'nope' is not a project (a leaf of the org tree); projects (org tree leaves): A, B, C"]),
        ({"unalocated_share": 0.1}, ["f: m.unalocated_share: unknown key 'unalocated_share'; did you mean 'unallocated_share'?"]),
    ],
    ids=["an unknown project", "an inner org node is not a project", "min_runtime above the cap",
         "a debug min_runtime above 15 minutes", "a share above one", "a word for a fraction",
         "a team mapped to no project", "a misspelt key"],
)
def test_mapping_errors_name_the_key_path_and_the_fix(mapping, problems):
    p = Problems()
    parse_mapping(mapping, Loc("f", "m"), config(), p)
    assert p.items == problems


def test_a_valid_mapping_section_parses_into_rules():
    p = Problems()
    rules = parse_mapping(
        {"projects": {"A": 2, "C": 1}, "team_map": {"x": "B"}, "debug_below": "10m", "debug_min_runtime": "5m",
         "min_runtime": "4h", "unallocated_share": 0.25, "resumable_fraction": 0.5, "checkpoint_interval": "30m"},
        Loc("f", "m"), config(), p,
    )
    assert p.items == []
    assert rules == MappingRules(
        projects=frozen_map({"A": 2.0, "C": 1.0}), team_map=frozen_map({"x": "B"}), debug_below_s=600.0,
        debug_min_runtime_s=300.0, min_runtime_s=4 * H, unallocated_share=0.25, resumable_fraction=0.5,
        checkpoint_interval_s=1800.0,
    )
