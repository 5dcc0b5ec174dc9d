"""More bad input at the command line's doors, found by an outside review: output paths that
pass the path checks but cannot be written (a 300-character name, a path under /proc), trace
files that are FIFOs or devices, and commands without a program. Each is refused with exit
status 2, a message naming the file, key path or flag and what to do, no traceback, and
nothing written: every file under the lab directory is byte for byte as it was, and no state
DB, lock, plan, site or report appears.

Each row: the case as a sentence, how the lab is prepared, the command line, and the pieces
the message must contain.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Callable

import pytest

from optalloc.cli import main
from optalloc.errors import ConfigError
from optalloc.sim.traces import read_philly
from tests.test_hostile_input import CONFIG, refused_in_lab
from tests.test_trace_input_stop42 import HEADER, philly_folder, prow
from tests.test_trace_input_stop42 import SCENARIO as TRACE_SCENARIO  # itp, trace.csv

LONG = "x" * 300  # longer than NAME_MAX (255) on every common file system

# ---------------------------------------------------------------------- lab preparations


def state_with_an_epoch(lab: Path) -> None:
    assert main(["epoch", "--config", "cfg.yaml", "--state", "st.db", "--now", "2000"]) == 0


def scenario_with_trace(make: Callable[[Path], None]) -> Callable[[Path], None]:
    def prepare(lab: Path) -> None:
        (lab / "sc.yaml").write_text(TRACE_SCENARIO)
        make(lab / "trace.csv")
    return prepare


def trace_link_to(target: str) -> Callable[[Path], None]:
    return scenario_with_trace(lambda p: os.symlink(target, p))


def job_file(text: str) -> Callable[[Path], None]:
    return lambda lab: (lab / "jobs.yaml").write_text(text)


EPOCH = ["epoch", "--config", "cfg.yaml", "--state", "st.db", "--now", "1000"]
SUBMIT = ["submit", "--config", "cfg.yaml", "--state", "st.db"]
SIMULATE = ["simulate", "--scenario", "sc.yaml", "--policies", "greedy", "--no-progress"]

CASES = [
    ("an epoch --out with a 300-character name is refused before the state DB is created",
     None, EPOCH + ["--out", LONG],
     [f"--out {LONG}: cannot be written there (File name too long); choose another path"]),
    ("an epoch --out under /proc is refused before the state DB is created",
     None, EPOCH + ["--out", "/proc/plan.json"], ["--out /proc/plan.json: "]),
    ("an epoch --out with a 300-character name leaves an existing state DB untouched",
     state_with_an_epoch, EPOCH[:-1] + ["3000", "--out", LONG],
     [f"--out {LONG}: cannot be written there"]),
    ("an epoch --metrics-file with a 300-character name is refused before the epoch",
     None, EPOCH + ["--metrics-file", LONG],
     [f"--metrics-file {LONG}: cannot be written there (File name too long)"]),
    ("an epoch --metrics-file under /proc is refused before the epoch",
     None, EPOCH + ["--metrics-file", "/proc/optalloc.prom"], ["--metrics-file /proc/optalloc.prom"]),
    ("an epoch --dashboard with a 300-character name is refused before the epoch",
     None, EPOCH + ["--dashboard", LONG],
     [f"--dashboard {LONG} cannot be created (a name in the path is too long); choose another "
      "directory"]),
    ("a dashboard whose --metrics-file cannot be written writes no site either",
     state_with_an_epoch,
     ["dashboard", "--config", "cfg.yaml", "--state", "st.db", "--out", "site",
      "--metrics-file", LONG],
     [f"--metrics-file {LONG}: cannot be written there"]),
    ("a trace that is a FIFO is refused instead of blocking the simulation",
     scenario_with_trace(os.mkfifo), SIMULATE,
     ["sc.yaml: workload.file: trace.csv: is not a regular file (a device or FIFO); point the "
      "workload's file at the trace's CSV file"]),
    ("a trace that is a FIFO is refused by validate too",
     scenario_with_trace(os.mkfifo), ["validate", "sc.yaml"],
     ["sc.yaml: workload.file: trace.csv: is not a regular file (a device or FIFO)"]),
    ("a trace that links to /dev/zero is refused instead of read forever",
     trace_link_to("/dev/zero"), SIMULATE,
     ["sc.yaml: workload.file: trace.csv: is not a regular file (a device or FIFO)"]),
    ("a command-line job whose program is an empty string is refused",
     None, SUBMIT + ["--project", "A1", "--gpus", "1", "--", "", "x"],
     ["<command line>: command[0]: the program to run is empty; name the program first"]),
    ("a job file whose command starts with an empty program is refused",
     job_file("jobs: [{id: j, project: A1, gpus: 1, command: ['  ', train.py]}]\n"),
     SUBMIT + ["jobs.yaml"],
     ["jobs.yaml: jobs[0].command[0]: the program to run is empty"]),
    ("a job file without a command names the file, the key path and the fix",
     job_file("jobs: [{id: j, project: A1, gpus: 1, command: ['true']}, "
              "{id: k, project: B1, gpus: 1}]\n"),
     SUBMIT + ["jobs.yaml"],
     ["jobs.yaml: jobs[1].command: job 'k' has no command; add one such as `command: "
      "[python, train.py]`"]),
    ("a negative --duration reaches its own check instead of being taken for an option",
     scenario_with_trace(lambda p: p.write_text(f"{HEADER}\n1,0,60,1\n")),
     SIMULATE + ["--duration", "-1d"],
     ["--duration: expected a duration like 3600, '90s', '15m', '8h', '7d' or '1h30m', got "
      "'-1d'"]),
]


class Blocked(Exception):
    pass


def _alarm(signum, frame):  # a regression blocks on the FIFO: fail instead of hanging
    raise Blocked("the command blocked")


@pytest.mark.parametrize("case, prepare, argv, message", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_with_a_located_message_and_nothing_written(
        tmp_path, monkeypatch, capsys, case, prepare, argv, message):
    def run(argv):  # under an alarm: a regression that blocks on a FIFO fails, not hangs
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(60)
        try:
            return main(argv)
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)

    refused_in_lab(tmp_path, monkeypatch, capsys, prepare, argv, message, run=run)


def test_a_philly_throughputs_file_that_is_a_fifo_is_refused_instead_of_blocking(tmp_path):
    folder = philly_folder(tmp_path, {"t1": [prow()]})
    (folder / "simulation_throughputs.json").unlink()
    os.mkfifo(folder / "simulation_throughputs.json")
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(60)
    try:
        with pytest.raises(ConfigError) as err:
            read_philly(folder)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert err.value.problems == [
        f"{folder / 'simulation_throughputs.json'}: is not a regular file (a device or FIFO); "
        "point the workload at a philly-vc folder holding the original file"]


@pytest.mark.parametrize("premade", ["an empty file made by touch", "a state DB made under umask 022"])
def test_a_state_db_others_may_read_loses_their_bits_before_it_holds_argv(tmp_path, premade):
    """A state DB that holds jobs' argv is never left world-readable: one that exists with
    mode 0644 (and its WAL file) is narrowed to 0640, the group's bits kept."""
    import sqlite3
    import stat as st

    from optalloc.state.db import open_state_db

    db = tmp_path / "state.db"
    if premade.startswith("an empty"):
        db.write_bytes(b"")
    else:
        sqlite3.connect(db).execute("PRAGMA journal_mode = WAL").fetchone()
        (tmp_path / "state.db-wal").write_bytes(b"")
        os.chmod(tmp_path / "state.db-wal", 0o644)
    os.chmod(db, 0o644)
    conn = open_state_db(db)
    conn.close()
    for f in tmp_path.iterdir():
        if f.name.startswith("state.db"):
            assert st.S_IMODE(f.stat().st_mode) & 0o007 == 0, f.name
    assert st.S_IMODE(db.stat().st_mode) == 0o640
