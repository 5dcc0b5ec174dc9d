"""Run one benchmark row in its own process, so rows do not pollute each other's memory.

`run_isolated("module:function", kwargs)` starts a fresh interpreter (multiprocessing spawn),
calls `function(progress=..., **kwargs) -> dict` there and returns that dict with

    peak_rss_mb   the row process's peak RSS (VmHWM on Linux) plus the peak RSS of the solver
                  subprocesses it waited for (CBC runs as a child of PuLP), from getrusage at
                  the end; an upper bound of the peak of the two together;

The parent samples the RSS of the row's process tree every `poll_s` (Linux /proc) and kills
the tree when it passes `rss_limit_mb` or the row runs past `wall_s`: the row then comes back
with status `killed`, a note saying which limit and when, and whatever the row reported through
`progress(dict)` before (e.g. how much of a model it had built).
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import resource
import signal
import sys
import time
import traceback


def _peak_mb() -> float:
    scale = 1024.0 if sys.platform != "darwin" else 1024.0**2  # ru_maxrss: KiB (macOS: bytes)
    own = _hwm_mb()
    if own is None:
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / scale
    return own + kids


def _hwm_mb() -> float | None:
    """The row process's own peak RSS (Linux VmHWM: reset at exec). Not ru_maxrss: Linux
    carries into it the high-water mark of the forked image replaced at exec, i.e. the bench
    parent's RSS when it spawned the row (a row doing nothing read 528 MB under a 500 MB
    parent)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def _child(conn, target: str, kwargs: dict) -> None:
    try:
        mod, fn = target.split(":")
        func = getattr(importlib.import_module(mod), fn)
        row = func(progress=lambda d: conn.send(("info", dict(d))), **kwargs)
        conn.send(("done", {**row, "peak_rss_mb": _peak_mb()}))
    except Exception as err:  # the parent reports it as the row's status
        conn.send(("error", {"status": "error", "note": f"{type(err).__name__}: {err}",
                             "traceback": traceback.format_exc(), "peak_rss_mb": _peak_mb()}))
    finally:
        conn.close()


def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    return out


def tree(pid: int) -> list[int]:
    """pid and all its descendants (Linux; [pid] elsewhere)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += _children(p)
    return out


def rss_mb(pids) -> float:
    total = 0.0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) / 1024.0
                        break
        except OSError:
            continue
    return total


def _kill(pids) -> None:
    for p in reversed(pids):  # the solver subprocesses first, then the row process
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def run_isolated(target: str, kwargs: dict, *, wall_s: float = 600.0,
                 rss_limit_mb: float = 5000.0, poll_s: float = 0.2) -> dict:
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, target, kwargs), daemon=True)
    t0 = time.perf_counter()
    proc.start()
    send.close()
    info: dict = {}
    sampled = 0.0
    result: dict | None = None
    try:
        while result is None:
            if recv.poll(poll_s):
                try:
                    kind, payload = recv.recv()
                except EOFError:
                    result = {"status": "error", "note": f"row process died (exit {proc.exitcode})"}
                    break
                if kind == "info":
                    info.update(payload)
                elif kind == "done":
                    result = payload
                else:
                    result = payload
                continue
            pids = tree(proc.pid)
            now_mb = rss_mb(pids)
            sampled = max(sampled, now_mb)
            elapsed = time.perf_counter() - t0
            why = None
            if now_mb > rss_limit_mb:
                why = f"RSS {now_mb:.0f} MB passed the {rss_limit_mb:.0f} MB limit after {elapsed:.0f} s"
            elif elapsed > wall_s:
                why = f"ran past the {wall_s:g} s wall limit"
            elif not proc.is_alive() and not recv.poll(0):
                why = f"row process died (exit {proc.exitcode})"
            if why:
                _kill(pids)
                result = {"status": "killed", "note": why, "wall_s": elapsed}
    finally:
        proc.join(timeout=10)
        if proc.is_alive():
            _kill(tree(proc.pid))
            proc.join()
        recv.close()
    out = {**info, **result}
    out["peak_rss_mb"] = max(out.get("peak_rss_mb") or 0.0, sampled)
    return out
