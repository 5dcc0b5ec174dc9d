"""`optalloc ledger report | record | import`: read and write the usage ledger of a state DB."""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import time

from optalloc.errors import OptallocError
from optalloc.types import Interval
from optalloc.units import format_duration, parse_time

CSV_COLUMNS = ("job_id", "project", "gpu_type", "gpus", "start", "end", "allocated")
_TRUE = {"true", "1", "yes", "y", ""}
_FALSE = {"false", "0", "no", "n"}


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
    rec.add_argument("--gpus", required=True, type=int, help="GPUs used")
    rec.add_argument("--start", required=True, help="seconds or ISO-8601")
    rec.add_argument("--end", required=True, help="seconds or ISO-8601")
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
    if value is None:
        return time.time()
    try:
        return parse_time(value)
    except ValueError as err:
        raise OptallocError(f"{flag}: {err}") from None


def _tree(config):
    from optalloc.org import OrgTree

    return OrgTree.build(config.org, [g.name for g in config.gpu_types])


class _Checker:
    """Checks interval fields against a config; collects located problems."""

    def __init__(self, config):
        tree = _tree(config)
        self.projects = set(tree.leaves)
        self.inner = set(tree.names) - self.projects
        self.types = [g.name for g in config.gpu_types]

    def check(self, where: str, job: str, project: str, gpu_type: str, gpus, start, end,
              allocated, problems: list[str]) -> Interval | None:
        n0 = len(problems)
        if not job.strip():
            problems.append(f"{where}: job_id is empty; give the job's id")
        if project in self.inner:
            problems.append(f"{where}: project {project!r} is a program, not a project; "
                            "charge a leaf of the org tree")
        elif project not in self.projects:
            problems.append(f"{where}: project {project!r} is not in the org tree; use one of "
                            f"{', '.join(sorted(self.projects)[:10])}")
        if gpu_type not in self.types:
            problems.append(f"{where}: gpu_type {gpu_type!r} is not configured; use one of "
                            f"{', '.join(self.types)}")
        try:
            n = int(str(gpus).strip())
            if n < 1:
                raise ValueError
        except ValueError:
            problems.append(f"{where}: gpus {gpus!r} is not a whole number >= 1")
            n = 0
        times = []
        for name, v in (("start", start), ("end", end)):
            try:
                times.append(parse_time(v))
            except ValueError as err:
                problems.append(f"{where}: {name}: {err}")
        if len(times) == 2 and times[1] < times[0]:
            problems.append(f"{where}: end ({end}) is before start ({start}); swap or fix them")
        if len(problems) > n0:
            return None
        return Interval(job, project, gpu_type, n, times[0], times[1], bool(allocated))


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
            led = store.ledger(config.gpu_types, _tree(config), policy)
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
    lost = led.unattributed_gpu_hours(now)
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
    iv = _Checker(config).check(
        "ledger record", args.job, args.project, args.gpu_type, args.gpus, args.start, args.end,
        not args.unallocated, problems,
    )
    if problems:
        raise OptallocError("\n".join(["nothing recorded:"] + [f"  - {p}" for p in problems]))
    with StateStore(args.state) as store:
        store.record_interval(iv)
    kind = "unallocated" if args.unallocated else "allocated"
    print(f"recorded {kind} interval of job {iv.job_id}: {iv.gpus} x {iv.gpu_type} for "
          f"{(iv.end - iv.start) / 3600:.2f} h, charged to {iv.project}" if iv.allocated else
          f"recorded {kind} interval of job {iv.job_id} (never charged)")
    return 0


def read_intervals_csv(path: str, config) -> list[Interval]:
    """Parse and check every row; raise ConfigError listing each bad row by line number."""
    checker = _Checker(config)
    problems: list[str] = []
    out: list[Interval] = []
    try:
        fh = open(path, newline="", encoding="utf-8")
    except OSError as err:
        raise OptallocError(f"{path}: cannot read ({err.strerror})") from None
    with fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in CSV_COLUMNS if c not in header and c != "allocated"]
        if missing:
            raise OptallocError(f"{path}:1: header lacks column(s) {', '.join(missing)}; the header "
                            f"must be {','.join(CSV_COLUMNS)}; nothing was imported")
        reader.fieldnames = header
        seen: dict[tuple[str, str], int] = {}
        for row in reader:
            line = reader.line_num
            where = f"{path}:{line}"
            if None in row:
                problems.append(f"{where}: more cells than header columns; quote cells with commas")
                continue
            cells = {k: (v or "").strip() for k, v in row.items()}
            alloc = cells.get("allocated", "").lower()
            if alloc not in _TRUE | _FALSE:
                problems.append(f"{where}: allocated {cells['allocated']!r} is not true/false "
                                "(empty means true)")
            iv = checker.check(where, cells["job_id"], cells["project"], cells["gpu_type"],
                               cells["gpus"], cells["start"], cells["end"], alloc in _TRUE, problems)
            if iv is None or alloc not in _TRUE | _FALSE:
                continue
            key = (iv.job_id, repr(iv.start))
            if key in seen:
                problems.append(f"{where}: job {iv.job_id!r} already has an interval starting at "
                                f"{cells['start']} (line {seen[key]}); remove the duplicate")
                continue
            seen[key] = line
            out.append(iv)
    if problems:
        n = len(problems)
        raise OptallocError("\n".join(
            [f"{n} bad row{'s' if n != 1 else ''} in {path}; nothing was imported:"]
            + [f"  - {p}" for p in problems]
        ))
    return out


def cmd_import(args) -> int:
    from optalloc.config import load_config
    from optalloc.state import StateStore

    config = load_config(args.config)
    ivs = read_intervals_csv(args.file, config)
    with StateStore(args.state) as store:
        store.record_intervals(ivs)
    gpu_h = sum(iv.gpus * (iv.end - iv.start) for iv in ivs if iv.allocated) / 3600
    print(f"imported {len(ivs)} intervals ({gpu_h:,.1f} allocated GPU-h) into {args.state}")
    return 0
