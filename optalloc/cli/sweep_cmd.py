"""`optalloc sweep`: every cell of a grid of overrides under several policies and seeds, on
local processes or a Dask cluster; restartable; a tidy table, a summary over seeds, plots."""

from __future__ import annotations

import argparse
import sys

from optalloc.units import ascii_int
from optalloc.config.problems import Problems


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "sweep",
        help="simulate every cell of a grid of overrides x policies x seeds (local processes or Dask)",
        description=(
            "Simulate the scenario for every combination of the --grid values (each value an "
            "override exactly as `whatif --set` takes it), under every policy, with every seed. "
            "Every bad override is reported before anything runs. Finished runs are stored in "
            "OUT/runs and skipped when the same command runs again (failed ones are retried); "
            "OUT gets results.parquet/.csv (one row per cell x policy x seed, every metric), "
            "summary.parquet/.csv (mean and spread over seeds), summary.md and plots/<axis>.html. "
            "A seed replaces the scenario's simulation.seed: for a synthetic workload it re-draws "
            "the jobs, for a trace it re-draws the mapping rules (projects of teamless jobs, "
            "unallocated, resumable), for a jobs: workload it changes nothing. "
            "Exit status 0 when every run succeeded, 1 when some failed, 2 for bad input."
        ),
    )
    s.add_argument("--scenario", required=True, help="scenario YAML file or directory")
    s.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="an axis: an override key and its values, e.g. org.B.share=+10%%,+20%% or "
                        "policy.lookback=3d,7d,14d (repeat for more axes; cells are every combination)")
    s.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="an override applied to every cell (repeat for several)")
    s.add_argument("--policies", default="ilp", help="comma-separated (default: %(default)s)")
    s.add_argument("--seeds", help="seeds, e.g. 0-4 or 0,3,7, each 0 to 2**63 - 1, at most 1000 "
                                   "(default: the scenario's simulation.seed)")
    s.add_argument("--out", required=True, help="results directory, created 0700 if missing (rerun "
                                                "with the same one to resume)")
    s.add_argument("--duration", help="simulate only this long (e.g. 2d); jobs submitted later are dropped")
    s.add_argument("--engine", default="local", choices=("local", "dask"),
                   help="local: worker processes on this machine (default); dask: a Dask distributed cluster")
    s.add_argument("--jobs", type=ascii_int, help="local: worker processes (default: every core; 1 runs in this "
                                            "process, one run after the other); dask without --address: "
                                            "workers of the local cluster")
    s.add_argument("--address", help="dask: the scheduler, e.g. tcp://scheduler:8786 (default: start a "
                                     "local cluster)")
    s.add_argument("--check", action="store_true", help="check every plan's invariants (slower)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_sweep)


def cmd_sweep(args) -> int:
    from optalloc.cli.sim_cmd import load
    from optalloc.sim.sweep import make_executor, parse_seeds, plan_sweep, run_sweep
    from optalloc.sim.sweep.report import format_summary

    from optalloc.outdir import check_out_dir

    check_out_dir(args.out)  # nothing runs or is written for an --out that cannot be one
    executor = make_executor(args.engine, args.jobs, args.address)
    base = load(args.scenario, duration=args.duration)
    problems = Problems()
    seeds = parse_seeds(args.seeds, problems, default=base.seed)
    # every problem in --seeds, --policies, --grid and --set, at once, before any other load
    plan_sweep({base.seed: base}, args.grid, args.policies, fixed=args.overrides, problems=problems)
    scenarios = {s: base if s == base.seed else load(args.scenario, seed=s, duration=args.duration)
                 for s in seeds}
    plan = plan_sweep(scenarios, args.grid, args.policies, fixed=args.overrides, check=args.check)
    if len(seeds) > 1 and getattr(base, "workload", True) is None:
        print("note: the scenario's workload is its own jobs: list; a seed changes nothing in it",
              file=sys.stderr)
    result = run_sweep(plan, scenarios, args.out, executor, progress=not args.no_progress)
    print(format_summary(plan, result.summary))
    print(f"\n{result.ran} run(s) now, {result.skipped} finished earlier; {result.wall_s:.1f}s. "
          f"Results: {result.paths['results.parquet']} (and .csv), summary: {result.paths['summary.md']}")
    failed = result.failed
    if len(failed):
        print(f"{len(failed)} run(s) failed (their errors are in results.csv and summary.md); "
              "run the same command again to retry them", file=sys.stderr)
        return 1
    return 0
