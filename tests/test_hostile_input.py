"""Hostile and careless input at every door of the cron path: each case is refused with exit
status 2 and a message that names the file, key path or flag and what to do, no traceback,
and nothing written (every file under the lab directory is byte for byte as it was, no file
added, and nothing created next to paths such as /dev/null).

Each row: the case as a sentence, how the lab is prepared, the command line, and the pieces
the message must contain.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
import textwrap
from pathlib import Path
from typing import Callable

import pytest

from optalloc.cli import main

CONFIG = textwrap.dedent(
    """
    gpu_types: [{name: h100}]
    nodes: [{name: box, gpu_type: h100, gpus: 4}]
    org: {name: lab, children: [{name: A1, share: 1}, {name: B1, share: 1}]}
    """
)
SCENARIO = CONFIG + textwrap.dedent(
    """
    jobs:
      - {id: a1, project: A1, gpus: 2, min_runtime: 1h, submit_time: 0, duration: 2h}
    workload: {source: jobs}
    simulation: {duration: 4h}
    """
)


# ---------------------------------------------------------------------- lab preparations


def state_with_an_epoch(lab: Path) -> None:
    assert main(["epoch", "--config", str(lab / "cfg.yaml"), "--state", str(lab / "st.db"),
                 "--now", "2000"]) == 0


def foreign_sqlite(lab: Path) -> None:
    conn = sqlite3.connect(lab / "st.db")
    conn.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    conn.execute("INSERT INTO customers VALUES (1, 'ada')")
    conn.commit()
    conn.close()


def non_integer_schema_version(lab: Path) -> None:
    state_with_an_epoch(lab)
    conn = sqlite3.connect(lab / "st.db")
    conn.execute("UPDATE meta SET value = 'one' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()


def text_file_as_state(lab: Path) -> None:
    (lab / "st.db").write_text("not a database\n" * 20)


def node_with_huge_gpus(lab: Path) -> None:
    (lab / "cfg.yaml").write_text(CONFIG.replace("gpus: 4", "gpus: 99999999999999999999"))


def file(name: str, text: str | bytes) -> Callable[[Path], None]:
    def write(lab: Path) -> None:
        p = lab / name
        p.parent.mkdir(exist_ok=True)
        (p.write_bytes if isinstance(text, bytes) else p.write_text)(text)
    return write


def config_dir_with(link: str, target: str) -> Callable[[Path], None]:
    def make(lab: Path) -> None:
        d = lab / "cluster"
        d.mkdir()
        (d / "main.yaml").write_text(CONFIG)
        os.symlink(target, d / link)
        if target.startswith("loop"):
            os.symlink(link, d / target)
    return make


def symlinked_state(lab: Path) -> None:
    (lab / "real.db").write_bytes(b"")
    os.symlink("real.db", lab / "st.db")


def planted_lock_link(lab: Path) -> None:
    (lab / "precious").write_text("root's file\n")
    os.symlink("precious", lab / "st.db.lock")


def world_writable_dir(lab: Path) -> None:
    (lab / "open").mkdir()
    os.chmod(lab / "open", 0o777)


def several(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def run(lab: Path) -> None:
        for s in steps:
            s(lab)
    return run


EPOCH = ["epoch", "--config", "cfg.yaml", "--state", "st.db"]
SUBMIT = ["submit", "--config", "cfg.yaml", "--state", "st.db"]
FLAGS_JOB = ["--project", "A1", "--gpus", "1"]
HUGE_ARGV = "jobs:\n  - {id: big, project: A1, gpus: 1, command: [echo, '" + "x" * 10_000_000 + "']}\n"
BOMB = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh"))

CASES = [
    ("an epoch earlier than the last recorded one is refused",
     state_with_an_epoch, EPOCH + ["--now", "1000"],
     ["--now 1000 = 1970-01-01T00:16:40Z is earlier than the last recorded epoch (2000 = ",
      "epochs must move forward in time", "nothing was written"]),
    ("a priority beyond 32 bits is refused at submit",
     None, SUBMIT + FLAGS_JOB + ["--priority", "99999999999999999999999", "--", "true"],
     ["<command line>: priority: must be <= 2147483647, got 99999999999999999999999"]),
    ("a node with 10^20 GPUs is refused by validate",
     node_with_huge_gpus, ["validate", "cfg.yaml"],
     ["cfg.yaml: nodes[0].gpus: must be <= 1024, got 99999999999999999999"]),
    ("a node with 10^20 GPUs is refused by epoch before any state exists",
     node_with_huge_gpus, EPOCH, ["cfg.yaml: nodes[0].gpus: must be <= 1024"]),
    ("submit --now nan is refused", None, SUBMIT + FLAGS_JOB + ["--now", "nan", "--", "true"],
     ["--now: expected a time (seconds or ISO-8601", "got 'nan'"]),
    ("submit --now inf is refused", None, SUBMIT + FLAGS_JOB + ["--now", "inf", "--", "true"],
     ["--now: expected a time", "got 'inf'"]),
    ("epoch --now=1e20 is refused", None, EPOCH + ["--now=1e20"],
     ["--now: time 1e+20 is out of range", "before 2100"]),
    ("a job file with a submit_time in the year 3000 is refused",
     file("jobs.yaml", "jobs: [{id: j, project: A1, gpus: 1, submit_time: 3000-01-01, "
                       "command: ['true']}]\n"),
     SUBMIT + ["jobs.yaml"], ["jobs.yaml: jobs[0].submit_time: time ", "is out of range"]),
    ("a non-UTF-8 job id from the command line is refused",
     None, SUBMIT + FLAGS_JOB + ["--id", "job-\udcff", "--", "true"],
     ["<command line>: id: the value is not valid UTF-8"]),
    ("a job id with a terminal escape is refused",
     file("jobs.yaml", 'jobs: [{id: "a\\e[31m", project: A1, gpus: 1, command: ["true"]}]\n'),
     SUBMIT + ["jobs.yaml"], ["jobs.yaml: jobs[0].id: the value contains the control character"]),
    ("a job file that is not UTF-8 is refused",
     file("jobs.yaml", b"jobs: [{id: \xff\xfe, project: A1, gpus: 1}]\n"),
     SUBMIT + ["jobs.yaml"], ["jobs.yaml: is not UTF-8 text (byte 12: invalid start byte); save the file as UTF-8"]),
    ("a 10 MB argv in a job file is refused",
     file("jobs.yaml", HUGE_ARGV), SUBMIT + ["jobs.yaml"],
     ["jobs.yaml: jobs[0].command: the command is 10000006 bytes long, more than 65536",
      "put long inputs in a file"]),
    ("a non-integer schema_version is refused",
     non_integer_schema_version, EPOCH + ["--now", "3000"],
     ["state DB st.db has schema_version 'one', which is not an integer"]),
    ("a state file that is another program's SQLite database is refused",
     foreign_sqlite, EPOCH, ["state DB st.db is another program's SQLite database",
                             "tables customers", "optalloc will not add its tables to it"]),
    ("a state file that another program's SQLite database is refused by submit too",
     foreign_sqlite, SUBMIT + FLAGS_JOB + ["--", "true"],
     ["state DB st.db is another program's SQLite database"]),
    ("a text file as the state DB is refused",
     text_file_as_state, ["jobs", "--state", "st.db"],
     ["state DB st.db is not a usable SQLite database"]),
    ("--state /dev/null is refused", None, ["epoch", "--config", "cfg.yaml", "--state",
                                            "/dev/null"],
     ["state DB /dev/null is not a regular file; point --state at a file"]),
    ("a directory as --state is refused", file("dir/x", ""), ["epoch", "--config", "cfg.yaml",
                                                              "--state", "dir"],
     ["state DB dir is a directory; point --state at a file"]),
    ("a symlink as --state is refused", symlinked_state, EPOCH,
     ["state DB st.db is a symbolic link; point --state at the real file"]),
    ("a planted symlink at the lock's name is refused, its target untouched",
     planted_lock_link, EPOCH, ["state lock st.db.lock is a symbolic link; remove it"]),
    ("a state directory other users may write is refused",
     world_writable_dir, ["epoch", "--config", "cfg.yaml", "--state", "open/st.db"],
     ["state DB open/st.db: directory", "is writable by other users (mode 777)",
      "chmod o-w"]),
    ("--state in a missing directory is refused", None,
     ["epoch", "--config", "cfg.yaml", "--state", "nowhere/st.db"],
     ["state DB nowhere/st.db: directory", "nowhere does not exist; create it first"]),
    ("--out into a missing directory is refused before the state is touched", None,
     EPOCH + ["--out", "nowhere/plan.json"],
     ["--out nowhere/plan.json: directory", "does not exist"]),
    ("--wait nan is refused", None, EPOCH + ["--wait", "nan"],
     ["--wait 'nan': give a number of seconds from 0 to 86400"]),
    ("--time-limit -1 is refused", None, EPOCH + ["--time-limit", "-1"],
     ["--time-limit '-1': give a number of seconds above 0 to 86400"]),
    ("whatif --set share=nan is refused", file("sc.yaml", SCENARIO),
     ["whatif", "--scenario", "sc.yaml", "--set", "org.A1.share=nan", "--no-progress"],
     ["--set: org.A1.share=nan: must be a finite number, got nan"]),
    ("whatif --set share=inf is refused", file("sc.yaml", SCENARIO),
     ["whatif", "--scenario", "sc.yaml", "--set", "org.A1.share=inf", "--no-progress"],
     ["--set: org.A1.share=inf: must be a finite number, got inf"]),
    ("whatif --set share=1e400 is refused", file("sc.yaml", SCENARIO),
     ["whatif", "--scenario", "sc.yaml", "--set", "org.A1.share=1e400", "--no-progress"],
     ["--set: org.A1.share=1e400: must be a finite number, got inf"]),
    ("whatif --set share=1e300 is refused like the YAML path", file("sc.yaml", SCENARIO),
     ["whatif", "--scenario", "sc.yaml", "--set", "org.A1.share=1e300", "--no-progress"],
     ["--set: org.A1.share=1e300: must be <= 1e+09"]),
    ("a config that is /dev/zero is refused instead of read forever",
     None, ["epoch", "--config", "/dev/zero", "--state", "st.db"],
     ["/dev/zero: is not a regular file (a device, FIFO or directory)"]),
    ("a job file that is a FIFO is refused instead of blocking",
     lambda lab: os.mkfifo(lab / "jobs.yaml"), SUBMIT + ["jobs.yaml"],
     ["jobs.yaml: is not a regular file (a device, FIFO or directory)"]),
    ("a recursive YAML alias is a located problem, not a RecursionError",
     file("r.yaml", "gpu_types: &a [*a]\n"), ["validate", "r.yaml"],
     ["r.yaml: line 1: an alias there refers to a value that contains it"]),
    ("an alias bomb is a located problem, not an out-of-memory",
     file("b.yaml", BOMB), ["validate", "b.yaml"],
     ["b.yaml: the document expands to more than 1000000 values"]),
    ("a dangling *.yaml symlink in a config directory is reported",
     config_dir_with("extra.yaml", "gone.yaml"), ["validate", "cluster"],
     ["cluster/extra.yaml: the config file is a dangling symlink (to gone.yaml)"]),
    ("a looping *.yaml symlink in a config directory is reported",
     config_dir_with("a.yaml", "loop.yaml"), ["validate", "cluster"],
     ["cluster/a.yaml: the config file is a symlink loop"]),
]


def tree(root: Path) -> dict[str, tuple[str, str]]:
    """Every path under root: (kind, content hash or link target)."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", "")
            elif not p.is_file():
                out[rel] = ("special", "")
            else:
                out[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
    return out


@pytest.mark.parametrize("case, prepare, argv, message", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_is_refused_with_a_located_message_and_nothing_written(
        tmp_path, monkeypatch, capsys, case, prepare, argv, message):
    refused_in_lab(tmp_path, monkeypatch, capsys, prepare, argv, message)


def refused_in_lab(tmp_path, monkeypatch, capsys, prepare, argv, message, run=main) -> None:
    """`run(argv)` (the CLI) in a private lab folder holding CONFIG as cfg.yaml, after
    `prepare(lab)`: exit status 2, one located message holding every piece of `message` on
    stderr, no traceback, nothing on stdout, and nothing in the lab (or /dev/null.lock)
    written."""
    lab = tmp_path / "lab"
    lab.mkdir(mode=0o700)
    (lab / "cfg.yaml").write_text(CONFIG)
    monkeypatch.chdir(lab)
    if prepare:
        prepare(lab)
    capsys.readouterr()
    before = tree(lab)
    dev_null_lock = os.path.exists("/dev/null.lock")
    code = run(argv)
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert err.startswith(f"optalloc {argv[0]}: ")
    for piece in message:
        assert piece in err, err
    assert "Traceback" not in err and out == ""
    assert tree(lab) == before
    assert os.path.exists("/dev/null.lock") == dev_null_lock


def test_a_state_path_in_a_read_only_directory_is_refused_for_an_unprivileged_user():
    """As root every directory is writable, so the epoch runs as `nobody` in a child (in a
    directory of its own under /tmp: pytest's are private to root)."""
    import pwd
    import shutil
    import tempfile
    import traceback

    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user `nobody` on this machine")
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to another user")
    lab = Path(tempfile.mkdtemp(prefix="optalloc-ro-"))
    try:
        os.chmod(lab, 0o755)
        (lab / "ro").mkdir(mode=0o555)
        os.chmod(lab / "ro", 0o555)  # nobody may enter it, not write it
        (lab / "cfg.yaml").write_text(CONFIG)
        os.chmod(lab / "cfg.yaml", 0o644)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: nobody runs the epoch
            code = 70
            try:
                os.close(r)
                sys.stdout = sys.stderr = os.fdopen(w, "w")  # (pytest replaced sys.stderr)
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
                code = main(["epoch", "--config", str(lab / "cfg.yaml"), "--state",
                             str(lab / "ro" / "st.db")])
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(code)
        os.close(w)
        with os.fdopen(r) as fh:
            err = fh.read()
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 2, err
        assert err == (f"optalloc epoch: state DB {lab}/ro/st.db: directory {lab}/ro is not "
                       "writable by this user (or is on a read-only file system); use a "
                       "writable directory\n")
        assert os.listdir(lab / "ro") == []
    finally:
        shutil.rmtree(lab)
