"""`optalloc dashboard` (a static site) and `optalloc serve` (the same pages live, and /metrics).

    optalloc dashboard --config C --state DB --out DIR [--history N] [--metrics-file PATH]
    optalloc serve --config C --state DB [--host 127.0.0.1] [--port 8080] [--history N]

Both read the state DB without writing to it. `optalloc epoch ... --dashboard DIR
--metrics-file PATH` writes the same site and metrics after each cron epoch.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

from optalloc.units import ascii_int
from optalloc.errors import OptallocError
from optalloc.outdir import check_out_dir
from optalloc.statefile import check_not_an_input, check_output_path

MAX_HISTORY = 1_000_000  # --history: epochs (about ten years of 5-minute epochs)


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser(
        "dashboard",
        help="write the dashboard (org tree, queue, cluster map, utilization, history) as a "
             "static site",
        description="Write a self-contained static site from the config and the state DB (read "
                    "only): open DIR/index.html from disk or put DIR behind any web server. "
                    "Files are replaced atomically, so it is safe to rewrite while people read it.",
    )
    d.add_argument("--config", required=True, help="YAML config file or directory")
    d.add_argument("--state", required=True, help="state DB (SQLite) that `optalloc epoch` writes")
    d.add_argument("--out", required=True, help="directory to write the site into")
    d.add_argument("--history", type=ascii_int, default=None, metavar="N",
                   help="epochs on the history page (default 288: a day of 5-minute epochs)")
    d.add_argument("--metrics-file", metavar="PATH",
                   help="also write Prometheus metrics here (node_exporter textfile format)")
    d.set_defaults(func=cmd_dashboard)

    s = sub.add_parser(
        "serve",
        help="serve the dashboard pages live and Prometheus /metrics (read-only)",
        description="A read-only web server for the dashboard: the pages refresh after each "
                    "epoch; /metrics is the Prometheus exposition. It binds 127.0.0.1 unless "
                    "--host says otherwise and has no authentication: put a proxy with access "
                    "control in front before exposing it.",
    )
    s.add_argument("--config", required=True, help="YAML config file or directory")
    s.add_argument("--state", required=True, help="state DB (SQLite) that `optalloc epoch` writes")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    s.add_argument("--port", type=ascii_int, default=8080,
                   help="port (default: %(default)s; 0 picks a free one and prints it)")
    s.add_argument("--history", type=ascii_int, default=None, metavar="N",
                   help="epochs on the history page (default 288)")
    s.set_defaults(func=cmd_serve)


def _history(value: int | None) -> int:
    from optalloc.dashboard.data import DEFAULT_HISTORY

    if value is None:
        return DEFAULT_HISTORY
    if value < 1:
        raise OptallocError(f"--history {value}: give a number of epochs >= 1, e.g. 288")
    if value > MAX_HISTORY:
        shown = value if len(str(value)) <= 30 else f"{str(value)[:27]}..."
        raise OptallocError(f"--history {shown}: give a number of epochs up to {MAX_HISTORY}, "
                            "e.g. 288")
    return value


def check_outputs(dashboard: str | None, metrics_file: str | None,
                  dashboard_flag: str = "--dashboard") -> None:
    """Refuse output paths that cannot be written, before anything runs (each named by the
    flag that gave it: `optalloc dashboard` calls its folder --out)."""
    for flag, path, what in ((dashboard_flag, dashboard, "directory"),
                             ("--metrics-file", metrics_file, "file")):
        if path is None:
            continue
        target = os.path.abspath(path)
        parent = os.path.dirname(target)
        if what == "directory" and os.path.isdir(target):
            parent = target
        if not os.path.isdir(parent):
            raise OptallocError(f"{flag} {path}: directory {parent} does not exist; create it "
                                "first")
        if not os.access(parent, os.W_OK):
            raise OptallocError(f"{flag} {path}: directory {parent} is not writable; choose "
                                "another path")
        if what == "directory" and os.path.exists(target) and not os.path.isdir(target):
            raise OptallocError(f"{flag} {path}: is a file, not a directory; give a directory")
        if what == "file" and os.path.isdir(target):
            raise OptallocError(f"{flag} {path}: is a directory; give a file name like "
                                "optalloc.prom")
        # tried for real (a name too long, /proc as root): nothing is left behind
        if what == "file":
            check_output_path(path, flag)
        else:
            check_out_dir(path, flag)


def write_outputs(config, state: str, dashboard: str | None, metrics_file: str | None,
                  history: int | None = None, *, after_epoch: bool = False,
                  dashboard_flag: str = "--dashboard") -> list[str]:
    """Write the static site and/or the metrics textfile from the state DB (read only);
    returns a line per output written. `optalloc epoch` calls it after recording an epoch."""
    from pathlib import Path

    from optalloc.dashboard.data import gather
    from optalloc.dashboard.history import load_cache
    from optalloc.dashboard.metrics import write_textfile
    from optalloc.dashboard.readonly import ReadOnlyStore
    from optalloc.dashboard.site import HISTORY_JSON, write_site

    check_outputs(dashboard, metrics_file, dashboard_flag)
    history = _history(history)  # a bad --history is refused before the state DB is opened
    known = load_cache(Path(dashboard) / HISTORY_JSON) if dashboard else {}
    done = []
    try:
        with ReadOnlyStore(state) as store:
            dash = gather(config, store, history=history, known_history=known)
        if dashboard:
            paths = write_site(dash, dashboard)
            done.append(f"dashboard: {len(paths)} pages in {dashboard} (open "
                        f"{os.path.join(dashboard, 'index.html')})")
        if metrics_file:
            write_textfile(dash, metrics_file)
            done.append(f"metrics: {metrics_file}")
    except (OSError, OptallocError) as err:
        why = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        head = "the epoch was recorded, but " if after_epoch else ""
        raise OptallocError(f"{head}writing the dashboard/metrics failed: {why}") from None
    return done


def cmd_dashboard(args) -> int:
    from optalloc.config import load_config

    config = load_config(args.config)
    if args.metrics_file:
        check_not_an_input(args.metrics_file, "--metrics-file", args.state, config.sources)
    for line in write_outputs(config, args.state, args.out, args.metrics_file, args.history,
                              dashboard_flag="--out"):
        print(line)
    return 0


def _check_port(port: int) -> None:
    if not 0 <= port <= 65535:
        raise OptallocError(f"--port {port}: give a port between 1 and 65535 (0: any free one)")


def _bind(host: str, port: int) -> socket.socket:
    _check_port(port)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as err:
        raise OptallocError(f"--host {host}: cannot resolve it ({err.strerror})") from None
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as err:
        sock.close()
        raise OptallocError(f"cannot listen on {host}:{port} ({err.strerror}); pass another "
                            "--port, or --port 0 for any free one") from None
    sock.listen(128)
    return sock


def cmd_serve(args) -> int:
    import uvicorn

    from optalloc.dashboard.app import Source, create_app

    _check_port(args.port)  # before the state DB is opened
    source = Source(args.config, args.state, _history(args.history))
    source.current()  # a bad config or state DB fails now, with its message, not per request
    sock = _bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: serving on {args.host} without authentication; anyone who can reach "
              "it sees the queue and the org tree", file=sys.stderr)
    print(f"serving the dashboard at http://{shown}:{port}/ (metrics at /metrics; read-only; "
          "Ctrl-C stops)", flush=True)
    config = uvicorn.Config(create_app(source), log_level="warning", access_log=False,
                            lifespan="off")
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return 0
