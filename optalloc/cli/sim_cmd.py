"""`optalloc simulate` (policies side by side on one workload) and `optalloc whatif` (one
policy, baseline vs changed budgets or policy keys)."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import Iterator

from optalloc.errors import OptallocError
from optalloc.units import ascii_int, parse_duration_in_range


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "simulate",
        help="replay a scenario under several policies and compare their metrics",
        description=(
            "Run every policy on the same workload (same jobs, same node events) through the "
            "production epoch code with a simulated clock and cluster; print the metrics side "
            "by side and, with --out, write the report (summary.json, CSV, plots, report.md)."
        ),
    )
    s.add_argument("--scenario", required=True, help="scenario YAML file or directory")
    s.add_argument("--policies", default="priority,greedy,ilp", help="comma-separated (default: %(default)s)")
    s.add_argument("--out", help="write the report into this directory (created 0700 if missing)")
    s.add_argument("--duration", help="simulate only this long (e.g. 7d); jobs submitted later are dropped")
    s.add_argument("--seed", type=ascii_int, help="re-draw the workload mapping with this seed (0 to 2**63 - 1)")
    s.add_argument("--check", action="store_true", help="check every plan's invariants (slower)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_simulate)

    w = sub.add_parser(
        "whatif",
        help="what if a budget or a policy key changed? baseline vs variant, per project",
        description=(
            "Simulate the scenario as it is and with the --set overrides under one policy, and "
            "print every metric and every project's owed GPU-hours delivered, with the change. "
            "Overrides: org.<path>.share=<v> (v: number, +10%, -10%, *1.5, +5), "
            "org.<path>.share_by_type.<gpu_type>=<v>, policy.<key>=<v> (as in the YAML policy "
            "section, e.g. policy.lookback=3d, policy.solver.time_limit=5s)."
        ),
    )
    w.add_argument("--scenario", required=True, help="scenario YAML file or directory")
    w.add_argument("--set", dest="overrides", action="append", required=True, metavar="KEY=VALUE",
                   help="an override (repeat for several)")
    w.add_argument("--policy", default="ilp", help="policy to run (default: %(default)s)")
    w.add_argument("--duration", help="simulate only this long (e.g. 7d)")
    w.add_argument("--seed", type=ascii_int, help="re-draw the workload mapping with this seed (0 to 2**63 - 1)")
    w.add_argument("--out", help="write both reports into DIR/base and DIR/variant")
    w.add_argument("--no-progress", action="store_true", help="no progress bar")
    w.set_defaults(func=cmd_whatif)


# --------------------------------------------------------------------------- helpers


def check_seed(value: int | None, flag: str = "--seed") -> int | None:
    """A seed from the command line: a whole number from 0 to MAX_SEED (as `sweep --seeds`)."""
    from optalloc.sim.sweep.grid import MAX_SEED, seed_problem

    if value is not None:
        bad = seed_problem(value)
        if bad:
            raise OptallocError(f"{flag}: {bad}; give a whole number from 0 to {MAX_SEED}")
    return value


def check_out(path: str | None, flag: str = "--out") -> None:
    """Before anything runs: an output directory that exists or can be created (never a
    file), tried for real (created, written, then removed again): nothing is left."""
    if path is not None:
        from optalloc.outdir import check_out_dir

        check_out_dir(path, flag)


@contextlib.contextmanager
def private_output(path: str | Path) -> Iterator[Path]:
    """Create the output directory 0700 (and missing parents); inside, every file and folder
    written is private (0600 / 0700) whatever the umask."""
    from optalloc.outdir import make_private_dirs, private_umask

    with private_umask():
        try:
            yield make_private_dirs(path)
        except BrokenPipeError:
            raise
        except OSError as err:  # e.g. the disk filled up while writing: no traceback
            raise OptallocError(f"--out {path}: cannot write the report ({err.strerror or err}); "
                                "free space or choose another directory") from None


def load(path: str, *, seed: int | None = None, duration: str | None = None):
    """Load a scenario, optionally re-seeded and cut to a shorter horizon."""
    from optalloc.config.load import load_document
    from optalloc.sim.scenario import load_scenario, scenario_from_parts, with_horizon

    if not Path(path).exists():
        raise OptallocError(f"scenario {path!r} does not exist; give a scenario YAML file or directory (see scenarios/)")
    if seed is None:
        sc = load_scenario(path)
    else:
        config, extras = load_document(path)
        extras = dict(extras)
        sim = dict(extras.get("simulation") or {})
        sim["seed"] = seed
        extras["simulation"] = sim
        p = Path(path)
        sc = scenario_from_parts(config, extras, str(p), name=p.stem, base_dir=p if p.is_dir() else p.parent)
    if duration is not None:
        try:
            d = parse_duration_in_range(duration)  # up to ten years
        except ValueError as err:
            raise OptallocError(f"--duration: {err}") from None
        if d <= 0:
            raise OptallocError("--duration must be > 0, e.g. 7d")
        sc = with_horizon(sc, d)
    return sc


def _policies(text: str) -> list[str]:
    from optalloc.sim.policies import POLICIES

    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    bad = [p for p in names if p not in POLICIES]
    if bad or not names:
        raise OptallocError(
            f"--policies: unknown policy {', '.join(bad) or '(none)'}; choose from {', '.join(POLICIES)}"
        )
    return list(dict.fromkeys(names))


# --------------------------------------------------------------------------- commands


def _say_dropped(sc):
    """The workload's trace jobs the cluster cannot run (reason -> count; None: no trace
    summary), named on the terminal when there are any."""
    from optalloc.sim.report_tables import dropped_line

    dropped = sc.workload.dropped if sc.workload is not None else None
    if (line := dropped_line(dropped)) is not None:
        print(f"  {line}", file=sys.stderr)
    return dropped


def cmd_simulate(args) -> int:
    from optalloc.sim.engine import check_conservation, simulate
    from optalloc.sim.metrics import compute_metrics
    from optalloc.sim.policies import make_policy
    from optalloc.sim.report import format_table, write_report

    names = _policies(args.policies)
    check_seed(args.seed)
    check_out(args.out)
    sc = load(args.scenario, seed=args.seed, duration=args.duration)
    cap = sum(n.gpus for n in sc.config.nodes)
    # the jobs submitted within the run, as summary.json counts them (a trace's later jobs
    # are loaded but never seen: "4 jobs" read against the report's 2, an outside judge)
    inside = sum(1 for j in sc.jobs if j.submit_time < sc.duration_s)
    later = len(sc.jobs) - inside
    print(
        f"scenario {sc.name}: {inside} jobs"
        + (f" (and {later} submitted after the {sc.duration_s / 86400:g} days, not simulated)"
           if later else "")
        + f", {cap} GPUs on {len(sc.config.nodes)} nodes, "
        f"{sc.duration_s / 86400:g} days, epoch {sc.epoch_s:g}s",
        file=sys.stderr,
    )
    dropped = _say_dropped(sc)
    results, metrics = {}, {}
    for name in names:
        t0 = time.perf_counter()
        res = simulate(sc, make_policy(name), progress=not args.no_progress, check=args.check)
        wall = time.perf_counter() - t0
        check_conservation(res)
        results[name] = res
        metrics[name] = compute_metrics(res)
        print(f"  {name}: {wall:.1f}s wall, {len(res.epochs)} decisions", file=sys.stderr)
    print(format_table(metrics))
    if args.out:
        with private_output(args.out):
            paths = write_report(results, metrics, args.out, dropped=dropped)
        print(f"\nreport: {paths['report.md']}")
    return 0


def cmd_whatif(args) -> int:
    from optalloc.sim.policies import POLICIES
    from optalloc.sim.report import write_report
    from optalloc.sim.whatif import apply_overrides, run_whatif, set_twice

    if args.policy not in POLICIES:
        raise OptallocError(f"--policy: unknown policy {args.policy!r}; choose from {', '.join(POLICIES)}")
    check_seed(args.seed)
    check_out(args.out)
    twice = set_twice(args.overrides)
    if twice:
        raise OptallocError(f"{twice} (only one value can be the variant's)")
    sc = load(args.scenario, seed=args.seed, duration=args.duration)
    apply_overrides(sc.config, args.overrides, jobs=sc.jobs)  # bad ones before simulating
    dropped = _say_dropped(sc)  # the base and the variant run the same workload: once
    wi = run_whatif(sc, args.overrides, args.policy, progress=not args.no_progress)
    print(f"what if {'; '.join(args.overrides)}  ({sc.name}, policy {args.policy})")
    print(wi.format_diff())
    if args.out:
        out = Path(args.out)
        from optalloc.sim.report_html import write_html_report

        with private_output(out):
            write_report({args.policy: wi.base}, {args.policy: wi.base_metrics}, out / "base",
                         dropped=dropped)
            write_report({args.policy: wi.variant}, {args.policy: wi.variant_metrics},
                         out / "variant", dropped=dropped)
            page = write_html_report(
                {"base": wi.base, "variant": wi.variant},
                {"base": wi.base_metrics, "variant": wi.variant_metrics}, out / "report.html",
                title=f"What if: {sc.name}, policy {args.policy}",
                note="variant = " + "; ".join(args.overrides))
        print(f"\nreports: {out / 'base'}, {out / 'variant'}; side by side: {page}")
    return 0
