"""The fault-injection lab: the cron path (`optalloc epoch --runner local`) killed with SIGKILL
at a named point (optalloc.faults), again and again, and the invariants checked after each run.

One run is a small lab on a 4-GPU box: alice and bob (shares 1:1) each start a 2-GPU job;
the budget meeting gives alice 9:1, so once bob's job is past its protection it is preempted
(notice, requeued) for alice's waiting one; then every job is told to finish and epochs go on
until all three have finished. The epochs run as real processes (forked from a helper that
has optalloc imported, so one costs its own work instead of a Python start-up), each one the
`optalloc epoch` command line. One of them is armed with the run's fault point and dies by
SIGKILL where it is reached; cron's next run (the same step, one second later) carries on.

Invariants checked after every run (`check_run`):
- no job started twice: each job's own log of starts and ends never shows two live processes
  of one job, nor two live processes on one GPU;
- none lost: every job ends `finished` in the state DB, and no process of the lab is left;
- no interval charged twice or missing: the ledger's intervals are exactly the runs that
  really started (one per start a job logged), each charged once, none overlapping;
- the next epoch succeeds: every epoch that was not the killed one exits 0.

`python -m tests.faultlab --runs 50` runs the campaign and prints the table for the README.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import sqlite3
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

T0 = 1_800_000_000.0  # 2027-01-15: injected epoch times (seconds)
GRACE = 30

CONFIG = """
gpu_types: [{{name: h100}}]
nodes: [{{name: box, gpu_type: h100, gpus: 4}}]
org: {{name: lab, children: [{{name: alice, share: {alice}}}, {{name: bob, share: 1}}]}}
policy: {{epoch: 1m, grace: {grace}s, min_runtime_cap: 1h}}
"""

# Logs its start (its pid, its wrapper's pid, which the runner records, and its GPUs) and end; stops at the notice (exit 0: preempted, so requeued)
# or once the lab says go. The trap comes first: epochs follow each other within milliseconds,
# so the notice can arrive while the job is still starting.
JOB = """
trap 'echo "end $$" >> "$1/$OPTALLOC_JOB_ID.runs"; exit 0' TERM
echo "start $$ $PPID $CUDA_VISIBLE_DEVICES" >> "$1/$OPTALLOC_JOB_ID.runs"
while [ ! -e "$1/go" ]; do sleep 0.02; done
echo "end $$" >> "$1/$OPTALLOC_JOB_ID.runs"
"""

JOBS = (("a1", "alice"), ("b1", "bob"), ("a2", "alice"))

# point -> (epochs of the script where it is armed: None = from the first one, hits to die at)
POINTS = {
    "runner.after_intent": (None, (1, 2)),
    "runner.after_spawn": (None, (1, 2)),
    "runner.after_notice_intent": (None, (1,)),
    "runner.after_notice": (None, (1,)),
    "cycle.after_observe": ((0, 1, 2, 3), (1,)),
    "cycle.before_ack": ((1, 2, 3), (1,)),
    "cycle.between_transactions": ((0, 1, 2), (1,)),
    "cycle.after_apply": ((0, 2, 3), (1,)),
    "epoch.before_plan_write": ((0, 1, 2, 3), (1,)),
}


# ---------------------------------------------------------------------- one epoch, forked


def _epoch_child(argv: list[str], fault: str | None, log_path: str) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    from optalloc import faults
    from optalloc.cli import main
    from optalloc.runners import local

    local.START_SETTLE_S = 0.5  # a lab-sized wait for starts that may still appear
    faults.arm(fault)
    sys.stdout.write(f"--- {' '.join(argv)} (fault {fault})\n")
    sys.stdout.flush()
    code = main(argv)
    sys.stdout.flush()
    os._exit(code)


_ZYGOTE = r"""
import json, os, signal, sys, time
sys.path[:0] = json.loads(sys.argv[1])
import optalloc.cli, optalloc.cli.epoch_cmd, optalloc.config, optalloc.cycle, optalloc.epoch
import optalloc.ledger, optalloc.runners, optalloc.runners.local, optalloc.runners.nvml
import optalloc.solve, optalloc.solve.highs, ctypes.util
from optalloc.cli import build_parser
build_parser()  # imports every command module
from tests.faultlab import _epoch_child
try:
    import pynvml
except ImportError:
    pass
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        try:
            _epoch_child(req["argv"], req["fault"], req["log"])
        finally:
            os._exit(70)
    start = time.monotonic()
    kill_at = None if req["kill_after"] is None else start + req["kill_after"]
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        now = time.monotonic()
        if (kill_at is not None and now >= kill_at) or now >= start + req["timeout"]:
            os.kill(pid, signal.SIGKILL)
            kill_at = None
        time.sleep(0.002)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    print(json.dumps({"code": code, "seconds": time.monotonic() - start}), flush=True)
"""

_zygote = None


def zygote():
    """A helper process with optalloc imported that forks one child per epoch: an epoch then
    costs its own work, not a Python start-up, and starts from a clean process (no threads or
    SQLite connections of the test process carried across fork)."""
    global _zygote
    if _zygote is None or _zygote.poll() is not None:
        import atexit
        import subprocess

        paths = [str(Path(__file__).resolve().parent.parent)]
        _zygote = subprocess.Popen([sys.executable, "-c", _ZYGOTE, json.dumps(paths)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        atexit.register(_zygote.stdin.close)
    return _zygote


def run_epoch(argv: list[str], fault: str | None, log_path: Path, timeout: float = 60,
              kill_after: float | None = None) -> int:
    """The exit status of one `optalloc epoch` (-9: killed by its fault point, or from outside
    `kill_after` seconds after it started, if it was still running then)."""
    z = zygote()
    z.stdin.write(json.dumps({"argv": argv, "fault": fault, "log": str(log_path),
                              "timeout": timeout, "kill_after": kill_after}) + "\n")
    z.stdin.flush()
    line = z.stdout.readline()
    if not line:
        raise RuntimeError("the epoch zygote died")
    return json.loads(line)["code"]


# ---------------------------------------------------------------------- one run


@dataclass
class RunResult:
    point: str | None
    nth: int
    armed: tuple[int, ...] | None
    fired: bool = False
    epochs: list[tuple[float, int]] = field(default_factory=list)  # (now, exit status)
    problems: list[str] = field(default_factory=list)


def _setup(root: Path) -> None:
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    (root / "marks").mkdir(mode=0o700, exist_ok=True)
    (root / "job.sh").write_text(JOB)
    (root / "cfg.yaml").write_text(CONFIG.format(alice=1, grace=GRACE))
    from optalloc.cli import main

    for jid, project in JOBS:
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(["submit", "--config", str(root / "cfg.yaml"), "--state",
                         str(root / "state.db"), "--project", project, "--gpus", "2",
                         "--min-runtime", "60s", "--id", jid, "--now", str(T0 - 10), "--",
                         "sh", str(root / "job.sh"), str(root / "marks")])
        if code:
            raise RuntimeError(f"could not submit {jid}")


def _wait_quiet(db: Path, timeout: float = 3.0) -> None:
    """Give jobs told to stop (notice sent, or go) a moment to exit before the next epoch."""
    from optalloc.runners.local_proc import process_start_ticks

    deadline = time.monotonic() + timeout
    go = (db.parent / "marks" / "go").exists()
    while time.monotonic() < deadline:
        conn = sqlite3.connect(db)
        try:
            rows = conn.execute("SELECT pid, state, notice_sent FROM runner_local_runs "
                                "WHERE state != 'ended'").fetchall()
        except sqlite3.OperationalError:
            rows = []
        finally:
            conn.close()
        busy = [pid for pid, state, sent in rows
                if pid and (go or (state == "stopping" and sent))
                and process_start_ticks(pid) is not None]
        if not busy:
            return
        time.sleep(0.02)


RANDOM = "random kill -9"  # a pseudo point: SIGKILL from outside at a random moment


def run_once(root: Path, point: str | None, seed: int, max_epochs: int = 14) -> RunResult:
    """One lab run with `point` armed (None: no fault; RANDOM: each of the first four
    epochs is killed from outside after a random 0-0.6 s, if still running), then its
    invariants checked."""
    rng = random.Random(seed)
    armed_epochs, nths = POINTS[point] if point in POINTS else (None, (1,))
    nth = rng.choice(nths)
    armed = None if armed_epochs is None else (rng.choice(armed_epochs),)
    res = RunResult(point, nth, armed)
    _setup(root)
    db, cfg, log = root / "state.db", root / "cfg.yaml", root / "epochs.log"
    argv = ["epoch", "--config", str(cfg), "--state", str(db), "--runner", "local",
            "--out", str(root / "plan.json")]
    step, now, retry = 0, T0, False
    while step < max_epochs:
        if step == 1:
            cfg.write_text(CONFIG.format(alice=9, grace=GRACE))  # the budget meeting
        if step == 3 and not retry:
            # every job may finish now; they poll for it, so give them a moment to exit
            # before the epoch: one that observed them still running (a fast machine) would
            # start nothing at this step, and a point armed here would never be reached
            (root / "marks" / "go").touch()
            _wait_quiet(db)
        arm = point if (not res.fired and (armed is None or step in armed)) else None
        kill_after = None
        if point == RANDOM:  # each of the first four steps, not its retry
            arm, kill_after = None, (rng.uniform(0.0, 0.6) if step < 4 and not retry else None)
        code = run_epoch(argv + ["--now", f"{now:.0f}"], f"{arm}:{nth}" if arm else None, log,
                         kill_after=kill_after)
        res.epochs.append((now, code))
        if code == -signal.SIGKILL and (arm or kill_after is not None):
            res.fired, retry = True, True
            now += 1  # cron runs again: the same step, a second later
            continue
        retry = False
        if code != 0:
            res.problems.append(f"epoch at {now:.0f} exited {code} (see {log})")
            break
        _wait_quiet(db)
        if step >= 3 and _all_finished(db):
            break
        step += 1
        now = T0 + 60 * (step + 1) if step < 3 else now + 60
    check_run(root, res)
    if point in POINTS and not res.fired:
        res.problems.append(f"fault point {point}:{nth} was never reached")
    return res


def _all_finished(db: Path) -> bool:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT id, status FROM jobs").fetchall()
    finally:
        conn.close()
    return len(rows) == len(JOBS) and all(s == "finished" for _, s in rows)


# ---------------------------------------------------------------------- invariants


def check_run(root: Path, res: RunResult) -> None:
    """Append every broken invariant to res.problems (see the module docstring)."""
    from optalloc.runners.local_proc import process_start_ticks

    db, marks = root / "state.db", root / "marks"
    conn = sqlite3.connect(db)
    try:
        status = dict(conn.execute("SELECT id, status FROM jobs"))
        intervals = conn.execute("SELECT job_id, start, end, gpus FROM intervals "
                                 "ORDER BY job_id, start").fetchall()
        runs = conn.execute("SELECT job_id, state, pid, start_time, end_time, kill_time FROM "
                            "runner_local_runs ORDER BY run_id").fetchall()
        ends = conn.execute("SELECT job_id, COUNT(*) FROM events WHERE kind IN ('finished', "
                            "'failed', 'cancelled') GROUP BY job_id").fetchall()
    finally:
        conn.close()
    p = res.problems
    # none lost
    for jid, _ in JOBS:
        if status.get(jid) != "finished":
            p.append(f"job {jid} is {status.get(jid) or 'missing'} at the end, not finished")
    for jid, state, pid, _s, _e, _k in runs:
        if state != "ended":
            p.append(f"run of {jid} (pid {pid}) is still {state} at the end")
        if pid and process_start_ticks(pid) is not None and state == "ended":
            p.append(f"process {pid} of {jid} still lives after its run ended")
    for jid, n in ends:
        if n != 1:
            p.append(f"job {jid} has {n} end events, not 1")
    # no job started twice: each job's own log (appends, so in the order they happened). A
    # run the runner killed after its grace period (SIGKILL: no trap runs) logs no end; it
    # counts as ended once the runner recorded its end and its process is gone.
    killed = {str(pid) for _j, _st, pid, _s, _e, kt in runs if kt is not None and pid
              and process_start_ticks(pid) is None}
    starts: dict[str, int] = {}
    for jid, _ in JOBS:
        f = marks / f"{jid}.runs"
        live: dict[str, str] = {}  # job pid -> its wrapper's pid
        for line in (f.read_text().splitlines() if f.exists() else ()):
            word, pid, *rest = line.split()
            if word == "start":
                starts[jid] = starts.get(jid, 0) + 1
                live = {k: w for k, w in live.items() if w not in killed}
                live[pid] = rest[0] if rest else ""
                if len(live) > 1:
                    p.append(f"job {jid} ran twice at once (pids {', '.join(sorted(live))})")
            else:
                live.pop(pid, None)
        live = {k: w for k, w in live.items() if w not in killed}
        if live:
            p.append(f"job {jid}: process(es) {', '.join(sorted(live))} never logged an end")
    # runs that really started = intervals charged, one each, no overlaps: a pid recorded,
    # or a run adopted after a restart whose process had already exited (no pid: it ends
    # after its start, where an abandoned intent ends at its start)
    spawned = [(j, s, e) for j, _st, pid, s, e, _k in runs
               if pid or (e is not None and s is not None and e > s)]
    charged = [(j, s, e) for j, s, e, _g in intervals]
    for jid, _ in JOBS:
        n_spawned = sum(1 for j, _, _ in spawned if j == jid)
        if n_spawned != starts.get(jid, 0):
            p.append(f"job {jid} logged {starts.get(jid, 0)} starts but the runner recorded "
                     f"{n_spawned}")
    if sorted(charged) != sorted(spawned):
        p.append(f"charged intervals {sorted(charged)} differ from the runs that ran "
                 f"{sorted(spawned)}")
    if len(set(charged)) != len(charged):
        p.append("an interval is charged twice")
    by_job: dict[str, list[tuple[float, float]]] = {}
    for j, s, e in charged:
        by_job.setdefault(j, []).append((s, e))
    for j, ivs in by_job.items():
        ivs.sort()
        for (s1, e1), (s2, _e2) in zip(ivs, ivs[1:]):
            if s2 < e1:
                p.append(f"job {j}: charged intervals overlap ({s1}-{e1} and from {s2})")
    # no GPU held by two live runs at once (the runner's own record of each run's span)
    spans = [(j, s, e if e is not None else float("inf"))
             for j, _st, pid, s, e, _k in runs if pid]
    for i, (j1, s1, e1) in enumerate(spans):
        for j2, s2, e2 in spans[i + 1:]:
            if j1 != j2 and s1 < e2 and s2 < e1:
                gpus1, gpus2 = _gpus_of(root, j1, s1), _gpus_of(root, j2, s2)
                if gpus1 & gpus2:
                    p.append(f"{j1} and {j2} held GPUs {sorted(gpus1 & gpus2)} at once")


def _gpus_of(root: Path, job_id: str, start: float) -> set[int]:
    conn = sqlite3.connect(root / "state.db")
    try:
        (pl,) = conn.execute("SELECT placement FROM runner_local_runs WHERE job_id = ? AND "
                             "start_time = ? AND pid IS NOT NULL", (job_id, start)).fetchone()
    finally:
        conn.close()
    return {g for a in json.loads(pl)["nodes"] for g in a["gpus"]}


def diagnose(root: Path) -> str:
    """What a failed run leaves to read: each job's log, the runner's runs and events, the
    epochs' output."""
    out = []
    for f in sorted((root / "marks").glob("*.runs")):
        out.append(f"{f.name}: {f.read_text()!r}")
    db = root / "state.db"
    if db.exists():
        conn = sqlite3.connect(db)
        try:
            out += [repr(r) for r in conn.execute(
                "SELECT run_id, job_id, state, pid, start_time, end_time, notice_time, "
                "notice_sent, kill_time, exit_code FROM runner_local_runs")]
            out += [repr(r) for r in conn.execute(
                "SELECT seq, job_id, kind, time, run_start, delivered, message "
                "FROM runner_local_events")]
        except sqlite3.OperationalError:
            pass
        finally:
            conn.close()
    log = root / "epochs.log"
    if log.exists():
        out.append(log.read_text()[-6000:])
    return "\n".join(out)


def kill_leftovers(root: Path) -> None:
    """Never leave a lab process behind (a failed run may have): the process group of every
    run whose process is still the one the runner started (pid and kernel start time, so a
    pid reused by someone else's process is never signalled), and wrappers of starts whose
    pid was never recorded."""
    from optalloc.runners.local_proc import find_wrapper, process_start_ticks

    db = root / "state.db"
    if not db.exists():
        return
    conn = sqlite3.connect(db)
    try:
        runs = conn.execute("SELECT pid, proc_start FROM runner_local_runs WHERE pid IS NOT "
                            "NULL").fetchall()
    except sqlite3.OperationalError:
        runs = []
    finally:
        conn.close()
    pgids = {pid for pid, ticks in runs
             if ticks is not None and process_start_ticks(pid) == ticks}
    for log in (root / "runs").glob("*.log"):  # starts whose pid was never recorded
        pid = find_wrapper(str(log.with_suffix(".exit")))
        if pid:
            pgids.add(pid)
    for pgid in pgids:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


# ---------------------------------------------------------------------- the campaign


def campaign(base: Path, runs: int, seed: int = 0) -> dict[str, tuple[int, int]]:
    """Every point (and RANDOM) `runs` times: {point: (runs, failed runs)}; failures are
    printed."""
    out: dict[str, tuple[int, int]] = {}
    for point in (*POINTS, RANDOM):
        failed = 0
        for i in range(runs):
            root = base / f"{point}-{i}"
            try:
                res = run_once(root, point, seed * 100_003 + i)
            finally:
                kill_leftovers(root)
            if res.problems:
                failed += 1
                print(f"FAIL {point} run {i} (nth {res.nth}, armed {res.armed}): "
                      + "; ".join(res.problems), flush=True)
        out[point] = (runs, failed)
        print(f"{point}: {runs} runs, {failed} failed", flush=True)
    return out


if __name__ == "__main__":
    import argparse
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="faultlab-") as tmp:
        started = time.monotonic()
        table = campaign(Path(tmp), a.runs, a.seed)
        total = sum(r for r, _ in table.values())
        bad = sum(f for _, f in table.values())
        print(f"{len(table)} points x {a.runs} runs = {total} runs, {bad} failed, "
              f"{time.monotonic() - started:.0f} s")
