"""`optalloc ledger report | record | import`: read and write the usage ledger of a state DB."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import time

from optalloc.cli.interval_input import (
    CSV_COLUMNS,
    RECORD_FLAGS,
    IntervalChecker,
    org_tree,
    over_capacity,
    overlap_text,
    overlaps,
    read_intervals_csv,
    refuse_overlaps,
    same_interval,
)
from optalloc.errors import OptallocError
from optalloc.types import Interval
from optalloc.units import MAX_JOB_GPUS, format_duration, parse_time_in_range


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ledger", help="fair-share ledger: report usage, record or import intervals")
    lsub = p.add_subparsers(dest="ledger_command", metavar="SUBCOMMAND")

    r = lsub.add_parser(
        "report",
        help="usage, entitlement, ratio and owed/delivered GPU-hours per org node",
        description=(
            "One row per org node, indented by depth. usage and entitled are billing-weighted "
            "GPU-hours under the policy's window or decay; ratio = usage / entitled (below 1 ranks "
            "ahead); owed = entitlement capped hour by hour at demand, delivered = allocated GPU-h, "
            "met = min(delivered, owed) hour by hour, all over the hours since the first demand "
            "sample in the lookback window; met/owed (hourly) and period forms."
        ),
    )
    r.add_argument("--config", required=True, help="YAML config file or directory")
    r.add_argument("--state", help="state DB (SQLite)")
    r.add_argument("--now", help="report time (seconds or ISO-8601); default: the clock")
    r.add_argument("--json", action="store_true", help="machine-readable JSON")
    r.add_argument(
        "--demo", action="store_true",
        help="no state DB: report a deterministic synthetic week on the config's cluster",
    )
    r.set_defaults(func=cmd_report)

    rec = lsub.add_parser("record", help="record one run interval")
    rec.add_argument("--config", required=True, help="YAML config the interval is checked against")
    rec.add_argument("--state", required=True, help="state DB (SQLite), created if missing")
    rec.add_argument("--job", required=True, help="job id")
    rec.add_argument("--project", required=True, help="a project (leaf of the org tree)")
    rec.add_argument("--gpu-type", required=True, help="a configured gpu_type")
    rec.add_argument("--gpus", required=True, help=f"GPUs used (1 to {MAX_JOB_GPUS})")
    rec.add_argument("--start", required=True, help="seconds or ISO-8601 (1970 to 2100)")
    rec.add_argument("--end", required=True, help="seconds or ISO-8601, after --start")
    rec.add_argument("--unallocated", action="store_true", help="never charged (min_runtime 0)")
    rec.set_defaults(func=cmd_record)

    imp = lsub.add_parser(
        "import",
        help="import run intervals from CSV (all or nothing)",
        description=f"CSV with a header row: {','.join(CSV_COLUMNS)} (allocated: true/false, "
        "default true). Every bad row is reported with its line number; nothing is written if "
        "any row is bad.",
    )
    imp.add_argument("--config", required=True, help="YAML config the rows are checked against")
    imp.add_argument("--state", required=True, help="state DB (SQLite), created if missing")
    imp.add_argument("file", help="CSV file")
    imp.set_defaults(func=cmd_import)

    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


# ---------------------------------------------------------------------------- helpers


def _time_arg(value: str | None, flag: str) -> float:
    """A time flag in optalloc's range (1970 .. 2100), as `epoch --now` takes it; the clock
    when not given."""
    if value is None:
        return time.time()
    try:
        return parse_time_in_range(value)
    except ValueError as err:
        raise OptallocError(f"{flag}: {err}") from None


def _recorded(store, ivs: list[Interval]) -> tuple[list[Interval], list[Interval]]:
    """The intervals already in the DB that end after the earliest start of `ivs` (those the
    capacity check sums with them), and of those the ones of their jobs (those one of them may
    overlap or record again): one read for all three checks."""
    if not ivs:
        return [], []
    jobs = {iv.job_id for iv in ivs}
    since = min(float(iv.start) for iv in ivs)
    every = store.intervals(since=since)
    return every, [r for r in every if r.job_id in jobs]


def _by_start(recorded: list[Interval]) -> dict[tuple[str, float], Interval]:
    return {(r.job_id, float(r.start)): r for r in recorded}


# ---------------------------------------------------------------------------- commands


def cmd_report(args) -> int:
    from optalloc.config import load_config
    from optalloc.ledger import build_report, format_table, rows_to_json, running_intervals
    from optalloc.state import StateStore

    config = load_config(args.config)
    now = _time_arg(args.now, "--now")
    policy = config.policy
    notes: list[str] = []
    open_ivs = []
    if args.demo:
        from optalloc.ledger.demo import demo_ledger

        led = demo_ledger(config, now)
        notes.append("demo: a synthetic week generated from the config (no state DB read)")
    else:
        if not args.state:
            raise OptallocError("ledger report: give --state DB (or --demo for a synthetic week)")
        if not os.path.exists(args.state):
            raise OptallocError(
                f"--state {args.state}: no such state DB; run `optalloc epoch` or "
                "`optalloc ledger import` first"
            )
        with StateStore(args.state) as store:
            led = store.ledger(config.gpu_types, org_tree(config), policy)
            open_ivs = running_intervals(store.list_jobs(states=("running",)), now)
    if led.entitled(now)[0] == 0:
        from optalloc.snapshot import build_snapshot

        snap = build_snapshot(config, now, jobs=())
        cap = dict(zip(snap.type_names, map(int, snap.capacity_by_type())))
        led.record_capacity(now, cap)
        notes.append(f"no capacity recorded in the state DB: using the config's up nodes {cap}")
    from optalloc.ledger.report import legend, tracked_since

    rows = build_report(led, now, open_ivs)
    since = tracked_since(led, now)
    window_start = now - policy.lookback_s
    lost = led.unattributed_gpu_hours(now, open_ivs)
    if lost > 0:
        notes.append(f"{lost:,.1f} GPU-h of projects or gpu_types no longer in the config are not shown")
    mode = (
        f"window {format_duration(policy.lookback_s)}"
        if policy.usage_mode.value == "window"
        else f"decay, half-life {format_duration(policy.half_life_s)}"
    )
    if args.json:
        print(rows_to_json(rows, now, usage=mode, lookback_s=policy.lookback_s,
                           tracked_since=since, intervals=led.n_intervals,
                           running=len(open_ivs), notes=notes))
        return 0
    when = dt.datetime.fromtimestamp(now, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    tracked = (f"tracked {format_duration(now - since)}" if since is not None
               else "not tracked yet")
    print(f"ledger at {when} ({now:.0f}); usage: {mode}; {led.n_intervals} intervals, "
          f"{len(open_ivs)} running; owed/delivered: {tracked} of the last "
          f"{format_duration(policy.lookback_s)}")
    print(format_table(rows))
    import shutil
    import textwrap

    width = min(100, shutil.get_terminal_size((100, 24)).columns)
    for line in legend(since, window_start, rows[0].untracked_gpu_h if rows else 0.0):
        print(textwrap.fill(line, width, initial_indent="  ", subsequent_indent="    "))
    for n in notes:
        print(f"note: {n}")
    return 0


def cmd_record(args) -> int:
    from optalloc.config import load_config
    from optalloc.state import StateStore

    config = load_config(args.config)
    problems: list[str] = []
    iv = IntervalChecker(config).check(
        "ledger record", args.job, args.project, args.gpu_type, args.gpus, args.start, args.end,
        not args.unallocated, problems, RECORD_FLAGS,
    )
    if problems:
        raise OptallocError("\n".join(["nothing recorded:"] + [f"  - {p}" for p in problems]))
    with StateStore(args.state) as store:
        every, recorded = _recorded(store, [iv])
        clash = overlaps([iv], recorded)
        if clash:
            raise OptallocError(f"nothing recorded: {overlap_text(*clash[0])}")
        full = over_capacity([iv], every, IntervalChecker(config).type_gpus)
        if full:
            raise OptallocError(f"nothing recorded: {full[0]}")
        before = _by_start(recorded).get((iv.job_id, float(iv.start)))
        if before is not None and same_interval(before, iv):
            print(f"already recorded: that interval of job {iv.job_id} (start {iv.start:.0f}, end "
                  f"{iv.end:.0f}) is in {args.state}; nothing changed")
            return 0
        store.record_interval(iv)
    kind = "unallocated" if args.unallocated else "allocated"
    what = (f"{iv.gpus} x {iv.gpu_type} for {(iv.end - iv.start) / 3600:.2f} h, charged to "
            f"{iv.project}" if iv.allocated else "never charged")
    again = "" if before is None else "; it replaces the one recorded with the same start"
    print(f"recorded {kind} interval of job {iv.job_id}: {what}{again}")
    return 0


def cmd_import(args) -> int:
    from optalloc.config import load_config
    from optalloc.state import StateStore

    config = load_config(args.config)
    ivs = read_intervals_csv(args.file, config)
    refuse_overlaps(args.file, overlaps(ivs))  # before the state DB is opened (or made)
    full = over_capacity(ivs, [], IntervalChecker(config).type_gpus)
    if full:  # the file alone, before the state DB is opened (or made)
        raise OptallocError(f"{args.file}: " + "; ".join(full) + "; nothing was imported")
    with StateStore(args.state) as store:
        every, recorded = _recorded(store, ivs)
        refuse_overlaps(args.file, overlaps(ivs, recorded))
        full = over_capacity(ivs, every, IntervalChecker(config).type_gpus)
        if full:
            raise OptallocError(f"{args.file}: " + "; ".join(full) + "; nothing was imported")
        before = _by_start(recorded)
        new = [iv for iv in ivs if (old := before.get((iv.job_id, float(iv.start)))) is None
               or not same_interval(old, iv)]
        store.record_intervals(new)
    gpu_h = sum(iv.gpus * (iv.end - iv.start) for iv in new if iv.allocated) / 3600
    same = len(ivs) - len(new)
    print(f"imported {len(new)} intervals ({gpu_h:,.1f} allocated GPU-h) into {args.state}"
          + (f"; {same} were already recorded (unchanged)" if same else ""))
    return 0
