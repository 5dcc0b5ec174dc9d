"""A sweep plan: every run (cell x policy x seed) with the key its result is stored under.

A run's key is a hash of what decides its result and of nothing else: the optalloc version,
the scenario the seed produced (its name, config, jobs, horizon, epoch, node events; not the
path it was read from), the configuration after the run's overrides, and the policy. A rerun
with the same `--out` finds the finished runs by key; a changed scenario file, seed, override
or policy is a new key, so a stale result is never reused (results of another optalloc
version are not either).

What a seed changes is the scenario's `simulation.seed`, which the CLI re-reads the scenario
with (`optalloc.cli.sim_cmd.load`): for a synthetic workload, the generator's draw (arrivals,
sizes, durations, teams) and the mapping rules' hashes; for a trace, the mapping rules' hashes
only (the project of a job in a trace without teams, which jobs are unallocated or resumable,
`sample`); for a `jobs` workload, nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import optalloc
from optalloc.config.problems import Problems
from optalloc.sim.sweep.grid import (
    Axis,
    Cell,
    check_overrides,
    make_cells,
    parse_grid,
    parse_policies,
)
from optalloc.sim.whatif import apply_overrides, set_twice


@dataclass(frozen=True)
class Run:
    """One simulation: a cell under one policy with one seed."""

    key: str
    cell: Cell
    policy: str
    seed: int


@dataclass(frozen=True)
class SweepPlan:
    scenario: str  # its name
    axes: tuple[Axis, ...]
    cells: tuple[Cell, ...]
    policies: tuple[str, ...]
    seeds: tuple[int, ...]
    fixed: tuple[str, ...]  # --set overrides applied to every cell
    runs: tuple[Run, ...]
    check: bool = False  # check every plan's invariants while simulating

    def size(self) -> str:
        """'6 cells x 2 policies x 5 seeds = 60 runs'."""
        parts = [(len(self.cells), "cell"), (len(self.policies), "policy"), (len(self.seeds), "seed"),
                 (len(self.runs), "run")]
        words = [f"{n} {w if n == 1 else ('policies' if w == 'policy' else w + 's')}" for n, w in parts]
        return " x ".join(words[:3]) + f" = {words[3]}"

    def describe(self) -> dict[str, Any]:
        """The plan as JSON (sweep.json)."""
        return {
            "optalloc": optalloc.__version__,
            "scenario": self.scenario,
            "axes": [{"key": a.key, "values": list(a.values)} for a in self.axes],
            "fixed": list(self.fixed),
            "policies": list(self.policies),
            "seeds": list(self.seeds),
            "runs": [
                {"key": r.key, "cell": r.cell.index, "values": dict(zip([a.key for a in self.axes], r.cell.values)),
                 "policy": r.policy, "seed": r.seed}
                for r in self.runs
            ],
        }


def scenario_fingerprint(scenario) -> str:
    """sha256 of the scenario as the engine sees it (its source path left out)."""
    if dataclasses.is_dataclass(scenario) and hasattr(scenario, "source_path"):
        scenario = dataclasses.replace(scenario, source_path="")
    return hashlib.sha256(repr(scenario).encode()).hexdigest()


def run_key(fingerprint: str, config, policy: str) -> str:
    text = "\n".join([optalloc.__version__, fingerprint, repr(config), policy])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def plan_sweep(
    scenarios: Mapping[int, Any],
    grid: Sequence[str] = (),
    policies: str | Sequence[str] = "ilp",
    *,
    fixed: Sequence[str] = (),
    problems: Problems | None = None,
    check: bool = False,
) -> SweepPlan:
    """The plan for `scenarios` (seed -> the scenario loaded with that seed). Raises
    ConfigError listing every problem in the grid, the policies and the overrides (each
    override checked against every seed's config) before anything runs; `problems` may carry
    earlier ones (e.g. from `--seeds`)."""
    problems = problems if problems is not None else Problems()
    axes = parse_grid(grid, problems, fixed=fixed)
    twice = set_twice(fixed)
    if twice:  # the later --set would silently replace the earlier in every cell
        problems.items.append(f"{twice} (it applies to every cell; for several values of a "
                              "key, give it one --grid)")
    pol_text = policies if isinstance(policies, str) else ",".join(policies)
    names = parse_policies(pol_text, problems)
    cells = make_cells(axes, fixed)
    for sc in scenarios.values():  # each seed's workload must fit every cell's policy
        check_overrides(sc.config, axes, cells, fixed, problems, sc.jobs)
    problems.raise_if_any()
    runs = []
    for seed, sc in scenarios.items():
        fp = scenario_fingerprint(sc)
        for cell in cells:
            cfg = apply_overrides(sc.config, list(cell.overrides))
            for policy in names:
                runs.append(Run(run_key(fp, cfg, policy), cell, policy, int(seed)))
    # cell-major order: a sweep stopped early has whole cells done rather than one seed of all
    order = {c.index: i for i, c in enumerate(cells)}
    runs.sort(key=lambda r: (order[r.cell.index], names.index(r.policy), r.seed))
    name = next(iter(scenarios.values())).name if scenarios else "scenario"
    return SweepPlan(name, axes, cells, names, tuple(int(s) for s in scenarios), tuple(fixed), tuple(runs), check)
