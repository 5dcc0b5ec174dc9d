"""`optalloc bench`: run the benchmark suites and write a Markdown table + JSON per suite.

Each suite is a module `optalloc.bench.<name>_bench` with `run(quick: bool = False) ->
list[dict]` (one row per size/backend). Numbers are wall seconds measured in one run on the
machine at hand: compare ratios within a table, not absolute values across machines.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import time

from optalloc.bench.table import markdown_table

SUITES = ("ledger", "epoch", "sim")
DEFAULT_SUITES = ("ledger", "epoch")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run benchmarks; write tables (Markdown) and JSON")
    p.add_argument("--out", default="bench-results", help="output directory")
    p.add_argument(
        "--suite",
        default=",".join(DEFAULT_SUITES),
        help=f"comma-separated suites among {', '.join(SUITES)} (default: %(default)s; 'all')",
    )
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    p.set_defaults(func=cmd_bench)


def cmd_bench(args) -> int:
    from optalloc.errors import OptallocError

    names = SUITES if args.suite == "all" else tuple(s.strip() for s in args.suite.split(",") if s.strip())
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        raise OptallocError(f"--suite: unknown {unknown}; choose among {', '.join(SUITES)} or 'all'")
    os.makedirs(args.out, exist_ok=True)
    header = (
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    md = [f"# optalloc benchmarks\n\n{header}\n"]
    for name in names:
        mod = importlib.import_module(f"optalloc.bench.{name}_bench")
        print(f"== {name} ...", flush=True)
        rows = mod.run(quick=args.quick)
        with open(os.path.join(args.out, f"{name}.json"), "w") as fh:
            json.dump({"machine": header, "rows": rows}, fh, indent=1, default=str)
        table = markdown_table(rows)
        print(table, flush=True)
        md.append(f"## {name}\n\n{table}")
    with open(os.path.join(args.out, "bench.md"), "w") as fh:
        fh.write("\n".join(md))
    print(f"wrote {args.out}/bench.md and one JSON per suite")
    return 0
