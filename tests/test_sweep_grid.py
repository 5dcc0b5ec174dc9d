"""Sweep grids: axes, cells, seeds and policies parse as documented, every problem is reported
at once and located, cells are every combination exactly once, and a run's key changes with
what decides its result and with nothing else."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from optalloc.config.problems import Problems
from optalloc.errors import ConfigError
from optalloc.sim.scenario import Scenario
from optalloc.sim.sweep import format_seeds, parse_seeds, plan_sweep
from optalloc.sim.sweep.grid import Axis, make_cells, parse_grid, parse_policies
from optalloc.sim.sweep.table import flatten
from optalloc.types import Config, GpuType, Job, Node, OrgNode, Policy


def config() -> Config:
    org = OrgNode("lab", children=(
        OrgNode("A", share=50, children=(OrgNode("A1", share=35), OrgNode("A2", share=65))),
        OrgNode("B", share=50, children=(OrgNode("B1"),)),
    ))
    return Config(gpu_types=(GpuType("h100"),), nodes=(Node("n1", "h100", 8),), org=org,
                  policy=Policy(epoch_s=300.0, grace_s=0.0, lookback_s=86400.0))


def scenario(seed: int = 0, name: str = "s", jobs: int = 2) -> Scenario:
    js = tuple(Job(f"j{k}", "A1", 4, min_runtime_s=3600.0, duration_s=3600.0) for k in range(jobs))
    return Scenario(name, config(), js, duration_s=7200.0, seed=seed, source_path=f"/somewhere/{name}.yaml")


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    "text, seeds",
    [("0-4", (0, 1, 2, 3, 4)), ("7", (7,)), ("0,3,7", (0, 3, 7)), ("1-3,9", (1, 2, 3, 9)),
     ("9, 2-3", (2, 3, 9)), (" 5 - 6 ", (5, 6))],
)
def test_seeds_are_ranges_and_lists_sorted(text, seeds):
    problems = Problems()
    assert parse_seeds(text, problems, default=0) == seeds
    assert problems.items == []


def test_without_seeds_the_scenarios_own_seed_is_the_only_one():
    assert parse_seeds(None, Problems(), default=11) == (11,)


@pytest.mark.parametrize(
    "text, problem",
    [
        ("4-0", "--seeds: 4-0: range 4-0 runs backwards; write 0-4"),
        ("a", "--seeds: a: 'a' is not a seed or a range; write whole numbers >= 0: 0-4, 0,3,7 or 1-3,9"),
        ("-1", "--seeds: -1: '-1' is not a seed or a range; write whole numbers >= 0: 0-4, 0,3,7 or 1-3,9"),
        ("0-2,2", "--seeds: 0-2,2: seed(s) 2 given twice; list each seed once"),
        ("", "--seeds: '' is not a seed or a range; write whole numbers >= 0: 0-4, 0,3,7 or 1-3,9"),
    ],
)
def test_a_bad_seed_list_is_one_located_problem(text, problem):
    problems = Problems()
    assert parse_seeds(text, problems, default=0) == ()
    assert problems.items == [problem]


@given(st.sets(st.integers(min_value=0, max_value=60), min_size=1, max_size=20))
def test_formatted_seeds_parse_back_to_the_same_seeds(seeds):
    problems = Problems()
    assert parse_seeds(format_seeds(seeds), problems, default=0) == tuple(sorted(seeds))
    assert problems.items == []


def test_grid_flags_become_axes_in_the_order_given():
    problems = Problems()
    axes = parse_grid(["org.B.share=+10%, +20%,+30%", "policy.lookback=3d,7d"], problems)
    assert axes == (Axis("org.B.share", ("+10%", "+20%", "+30%")), Axis("policy.lookback", ("3d", "7d")))
    assert problems.items == []


@pytest.mark.parametrize(
    "grid, fixed, problem",
    [
        (["org.B.share"], [], "--grid: org.B.share: expected KEY=V1,V2,...; write e.g. --grid org.B.share=+10%,+20% or --grid policy.lookback=3d,7d"),
        (["=1,2"], [], "--grid: =1,2: no key before '='; write e.g. org.B.share=+10%,+20%"),
        (["org.B.share="], [], "--grid: org.B.share=: no values for org.B.share; list the values after '=', separated by commas"),
        (["org.B.share=1,,2"], [], "--grid: org.B.share=1,,2: an empty value between commas; remove the extra comma"),
        (["org.B.share=1,2,1"], [], "--grid: org.B.share=1,2,1: value(s) 1 given twice; list each value once"),
        (["org.B.share=1", "org.B.share=2"], [], "--grid: org.B.share=2: org.B.share is already an axis (--grid org.B.share=1); give each key one --grid with all its values"),
        (["org.B.share=1,2"], ["org.B.share=3"], "--grid: org.B.share=1,2: org.B.share is also fixed by --set; drop the --set or the --grid for it"),
        ([f"org.B.share={','.join(map(str, range(1, 102)))}", f"org.A.share={','.join(map(str, range(1, 101)))}"], [],
         "--grid: org.B.share, org.A.share: 10,100 cells (101 x 100), more than 10,000; give fewer values per --grid, or split the grid into several sweeps"),
    ],
)
def test_a_bad_grid_flag_is_one_located_problem(grid, fixed, problem):
    problems = Problems()
    parse_grid(grid, problems, fixed=fixed)
    assert problems.items == [problem]


@pytest.mark.parametrize(
    "text, names, problems",
    [
        ("greedy,ilp", ("greedy", "ilp"), []),
        ("ILP, greedy, ilp", ("ilp", "greedy"), []),
        ("greedy,gredy", ("greedy",), ["--policies: greedy,gredy: unknown policy 'gredy'; did you mean greedy?"]),
        (",", (), ["--policies: ,: no policy named; choose from priority, greedy, ilp"]),
    ],
)
def test_policies_parse_to_known_names_once_each(text, names, problems):
    found = Problems()
    assert parse_policies(text, found) == names
    assert found.items == problems


@given(st.lists(st.integers(min_value=1, max_value=4), min_size=0, max_size=4))
def test_cells_are_every_combination_once_last_axis_fastest(sizes):
    axes = [Axis(f"org.X{i}.share", tuple(str(v) for v in range(n))) for i, n in enumerate(sizes)]
    cells = make_cells(axes, fixed=("policy.grace=0",))
    assert [c.values for c in cells] == list(itertools.product(*(a.values for a in axes)))
    assert [c.index for c in cells] == list(range(len(cells)))
    for c in cells:
        assert c.overrides == ("policy.grace=0",) + tuple(f"{a.key}={v}" for a, v in zip(axes, c.values))


# --------------------------------------------------------------------------- plans


def test_a_plan_has_one_run_per_cell_policy_and_seed_cell_by_cell():
    plan = plan_sweep({0: scenario(0), 1: scenario(1)}, ["org.B.share=+0%,+50%"], "greedy,priority")
    assert [(r.cell.index, r.policy, r.seed) for r in plan.runs] == [
        (c, p, s) for c in (0, 1) for p in ("greedy", "priority") for s in (0, 1)
    ]
    assert len({r.key for r in plan.runs}) == 8


def test_every_override_problem_is_reported_once_before_a_plan_exists():
    problems = Problems()
    parse_seeds("2-1", problems, default=0)
    with pytest.raises(ConfigError) as err:
        plan_sweep({0: scenario(0), 1: scenario(1)}, ["org.B.share=+x,1", "org.C.share=1", "policy.lookbak=1d"], "greedy,magic",
                   fixed=["policy.epoch=0"], problems=problems)
    assert err.value.problems == [
        "--seeds: 2-1: range 2-1 runs backwards; write 1-2",
        "--policies: greedy,magic: unknown policy 'magic'; choose from priority, greedy, ilp",
        "--set policy.epoch=0: policy.epoch: must be > 0, got 0; give a positive duration like '5m'",
        "--grid: org.B.share=+x: '+x' is not a share; use a number >= 0, or +10% / -10% / *1.5 / +5",
        "--grid: org.C.share=1: org node 'C' is not a child of the root; children of the root: A, B",
        "--grid: policy.lookbak=1d: unknown policy key 'lookbak'; did you mean policy.lookback?",
    ]


def test_a_combination_that_only_fails_together_names_its_cell():
    with pytest.raises(ConfigError) as err:
        plan_sweep({0: scenario()}, ["org.A.share=0,1", "org.B.share=0,1"], "greedy")
    assert err.value.problems == [
        "--grid cell [org.A.share=0, org.B.share=0]: org.B.share=0: every child of 'lab' would have share 0 on h100; keep at least one sibling above 0",
    ]


def key_of(scenarios, grid=("org.B.share=+50%",), policies="greedy", fixed=()):
    return plan_sweep(scenarios, list(grid), policies, fixed=list(fixed)).runs[0].key


def test_a_run_key_follows_what_decides_the_result_and_nothing_else():
    base = key_of({0: scenario(0)})
    same = {
        "another path": key_of({0: dataclasses.replace(scenario(0), source_path="elsewhere.yaml")}),
        "an equal override": key_of({0: scenario(0)}, grid=("org.B.share=75",)),
        "the same change as --set": key_of({0: scenario(0)}, grid=(), fixed=("org.B.share=*1.5",)),
    }
    changed = {
        "the seed": key_of({1: scenario(1)}),
        "the jobs": key_of({0: scenario(0, jobs=3)}),
        "the scenario's name": key_of({0: scenario(0, name="t")}),
        "the override": key_of({0: scenario(0)}, grid=("org.B.share=+60%",)),
        "the policy": key_of({0: scenario(0)}, policies="priority"),
    }
    assert {k: v == base for k, v in same.items()} == {k: True for k in same}
    assert {k: v == base for k, v in changed.items()} == {k: False for k in changed}


def test_metrics_flatten_to_dotted_columns_in_their_order():
    nested = {"a": 1, "b": {"c": 2.5, "d": {"e": None, "f": "x"}}, "g": {}}
    assert list(flatten(nested).items()) == [("a", 1), ("b.c", 2.5), ("b.d.e", None), ("b.d.f", "x")]
