"""Stop 54: a job whose process fails to start at spawn time is held with a backoff, not placed
again (and left on idle GPUs) every epoch.

The rule (README "When the runner cannot start a job", optalloc.runners.local_backoff): after
n failed starts in a row since its last real start, a job is held out of the decision
(pending `RunnerRefused`, the message naming the error and when it is tried again) and sits
out 2^(n-1) epochs (at most an hour): tried again at the first epoch from
last failure + sits out + half an epoch. A start that succeeds ends the streak. A failure
that is the runner's own (its working directory gone) holds every job while it lasts, with no
backoff, and a failed spawn caused by it is not counted against the job.

Turns run on the stop-52 `Cron` lab (node `box`, 4 h100 GPUs, projects a and b, 1 h
protection, epoch 0.5 h, the turn's clock injected; time in hours after T0 = 1,000,000 s =
1970-01-12 13:46:40 UTC). Every expected outcome was worked out by hand from that rule.
"""

from __future__ import annotations

import errno
import functools

import pytest

import tests.test_cron_judge_cases_s52 as cron_lab
from optalloc.runners import local_start
from optalloc.runners.local import LocalRunner
from optalloc.runners.local_backoff import sits_out_s
from tests.conftest import kill_local_runs
from tests.test_cron_judge_cases_s52 import Cron, _cli

HELD_TAIL = "; the runner is asked again at every epoch (or cancel it)"
E2BIG = "[Errno 7] Argument list too long: '/bin/sh'"


@pytest.fixture
def lab(tmp_path, monkeypatch):
    made = Cron(tmp_path, monkeypatch)
    yield made
    kill_local_runs(made.db)


class FailingSpawn:
    """The runner's `spawn`, raising the kernel's E2BIG for the jobs in `fail` (an OSError at
    spawn time, after every check before the decision passed)."""

    def __init__(self, monkeypatch):
        self.real = local_start.spawn
        self.fail: set[str] = set()
        monkeypatch.setattr(local_start, "spawn", self)

    def __call__(self, argv, exit_path, log_fd, cwd, env):
        if env["OPTALLOC_JOB_ID"] in self.fail:
            raise OSError(errno.E2BIG, "Argument list too long", "/bin/sh")
        return self.real(argv, exit_path, log_fd, cwd, env)


def held(run, job_id="bad"):
    """(code, message) of the job's pending reason in the turn's plan."""
    (p,) = [p for p in run.plan.pending if p.job_id == job_id]
    return p.code.value, p.message


def backoff_message(n, last, run_id, sits, retry):
    """The whole message of a job held after `n` failed starts in a row (the last one run
    `run_id` at `last`), sitting out `sits`, tried again from `retry`."""
    return ("held: the local runner cannot start it: its start failed "
            f"{n} time{'s' if n > 1 else ''} in a row, last at {last} UTC (run {run_id} never "
            f"started: could not start: {E2BIG}); it sits out {sits} and is tried again at "
            f"the first epoch from {retry} UTC" + HELD_TAIL)


def test_a_job_sits_out_one_epoch_then_two_four_and_at_most_an_hour_after_failed_starts_in_a_row():
    """With 5-minute epochs: 300, 600, 1200, 2400, then 3600 s (the cap) from the fifth
    failure on; with 2-hour epochs one epoch (7200 s), never less."""
    assert [sits_out_s(n, 300.0) for n in range(1, 8)] == [
        300.0, 600.0, 1200.0, 2400.0, 3600.0, 3600.0, 3600.0]
    assert [sits_out_s(n, 7200.0) for n in (1, 2, 5)] == [7200.0, 7200.0, 7200.0]


def test_a_failed_spawn_holds_the_job_with_backoff_while_others_take_its_gpus_till_a_start_ends_it(
        lab, monkeypatch):
    """bad (a, 4 GPUs, resumable) is the only job at 0: placed, its spawn fails (E2BIG), run 1
    dropped, nothing started. ok (b, 4 GPUs) comes at 0.1: at 0.5 bad is held (1 failure:
    sits out 1 epoch, tried from 0 + 0.5 + 0.25 = 0.75 h = 14:31:40) and ok starts on the
    GPUs. ok exits at 0.8; at 1.0 bad is placed again and fails again (run 3): 2 in a row,
    sits out 2 epochs (1 h), tried from 1.0 + 1.0 + 0.25 = 2.25 h = 16:01:40: held at 1.5
    and 2.0. The cause is fixed; at 2.5 bad starts (run 4). It exits 75 (requeue) at 2.6; at
    3.0 it is placed again and its spawn fails again (run 5): the streak began anew at the
    start of 2.5, so 1 failure: sits out 1 epoch, held at 3.5 (tried from 3.75 h =
    17:31:40), started at 4.0. Charged: ok 4 x 0.3 = 1.2 GPU-h, bad only its real run
    4 x 0.1 = 0.4 (from 4.0 on its open run too); never a failed start."""
    spawn = FailingSpawn(monkeypatch)
    spawn.fail.add("bad")
    lab.submit(lab.job("bad", "a", 4, resumable=True))
    r = lab.turn(0)
    assert [p.job_id for p in r.plan.placements] == ["bad"]
    assert r.applied.started == ()
    assert dict(r.applied.errors) == {"bad": f"could not start bad: {E2BIG}"}

    lab.submit(lab.job("ok", "b", 4, submit_h=0.1))
    r = lab.turn(0.5)
    assert [p.job_id for p in r.plan.placements] == ["ok"] and r.applied.started == ("ok",)
    assert held(r) == ("RunnerRefused", backoff_message(
        1, "1970-01-12 13:46:40", 1, "1 epoch (1800s)", "1970-01-12 14:31:40"))

    lab.finish("ok", 0.8)
    r = lab.turn(1.0)
    assert [p.job_id for p in r.plan.placements] == ["bad"] and r.applied.started == ()
    assert "bad" in r.applied.errors
    for h in (1.5, 2.0):
        r = lab.turn(h)
        assert r.plan.placements == () and r.applied.started == ()
        assert held(r) == ("RunnerRefused", backoff_message(
            2, "1970-01-12 14:46:40", 3, "2 epochs (3600s)", "1970-01-12 16:01:40"))

    spawn.fail.clear()
    r = lab.turn(2.5)
    assert r.applied.started == ("bad",) and r.plan.pending == ()
    lab.finish("bad", 2.6, rc=75)
    spawn.fail.add("bad")
    r = lab.turn(3.0)
    assert [p.job_id for p in r.plan.placements] == ["bad"] and r.applied.started == ()
    r = lab.turn(3.5)
    assert held(r) == ("RunnerRefused", backoff_message(
        1, "1970-01-12 16:46:40", 5, "1 epoch (1800s)", "1970-01-12 17:31:40"))
    spawn.fail.clear()
    assert lab.turn(4.0).applied.started == ("bad",)

    assert [(row[0], row[1], row[2] is not None) for row in lab.runs()] == [
        ("bad", "ended", False), ("ok", "ended", True), ("bad", "ended", False),
        ("bad", "ended", True), ("bad", "ended", False), ("bad", "running", True)]
    assert lab.intervals() == [("ok", 0.5, 0.8, 4, True), ("bad", 2.5, 2.6, 4, True)]
    assert lab.charged(4.0) == {"a": 0.4, "b": 1.2}
    assert lab.events("bad", "error") == 3
    assert lab.starts() == {"bad": 2, "ok": 1}
    lab.check_conserved()


def test_a_job_whose_argv_is_too_long_for_the_kernel_is_held_and_can_be_cancelled_uncharged(lab):
    """A real spawn failure: bad (a, 4 GPUs) runs `true` with one 200 kB argument (over the
    kernel's 128 kB per argument: execve says E2BIG although `true` is on PATH). At 0 it is
    placed and fails; ok (b, 4 GPUs, at 0.1) starts at 0.5 while bad is held RunnerRefused
    (1 failure, tried from 0.75 h). `optalloc cancel bad` at 0.6 ends it: exit 0; at 1.0 the
    queue holds only ok, nothing is placed again; bad never ran and is charged nothing."""
    lab.submit(lab.job("bad", "a", 4, command=("true", "x" * 200_000)))
    r = lab.turn(0)
    assert r.applied.started == () and "Argument list too long" in r.applied.errors["bad"]
    lab.submit(lab.job("ok", "b", 4, submit_h=0.1))
    r = lab.turn(0.5)
    assert r.applied.started == ("ok",)
    code, message = held(r)
    assert code == "RunnerRefused"
    assert message.startswith("held: the local runner cannot start it: its start failed 1 "
                              "time in a row, last at 1970-01-12 13:46:40 UTC (run 1 never "
                              "started: could not start: [Errno 7] Argument list too long")
    assert "tried again at the first epoch from 1970-01-12 14:31:40 UTC" in message
    assert _cli("cancel", "bad", "--state", lab.db)[:2] == (0, "cancelled bad\n")
    r = lab.turn(1.0)
    assert r.plan.pending == () and r.applied.started == ()
    assert lab.status() == {"bad": "cancelled", "ok": "running"}
    assert [(row[0], row[2]) for row in lab.runs()][0] == ("bad", None)
    assert lab.charged(1.0) == {"a": 0.0, "b": 2.0}
    lab.check_conserved()


def test_a_missing_working_directory_holds_every_job_without_backoff_and_they_start_once_it_is_back(
        lab, monkeypatch):
    """The runner's working directory `wd` is removed before 0: a1 (a, 2 GPUs) and b1 (b, 2
    GPUs) are both held RunnerRefused naming it, nothing is spawned. It is back by 0.5, but
    vanishes again between the start intents and the spawns: both spawns fail (errors), yet
    the runner, not the jobs, was at fault, so no backoff: at 1.0 (still gone) both are held
    naming the directory again, and once it is back at 1.5 both start at once (not after
    sitting out an epoch). Nothing charged for the failed starts."""
    wd = lab.dir / "wd"
    monkeypatch.setattr(cron_lab, "LocalRunner", functools.partial(LocalRunner, workdir=wd))
    lab.submit(lab.job("a1", "a", 2), lab.job("b1", "b", 2, submit_h=-0.005))
    why = (f"held: the local runner cannot start it: the runner's working directory {wd} is "
           "missing or not a directory it can enter; no job starts on box until that is "
           "fixed" + HELD_TAIL)
    r = lab.turn(0)
    assert r.plan.placements == () and lab.runs() == []
    assert sorted((p.job_id, p.code.value, p.message) for p in r.plan.pending) == [
        ("a1", "RunnerRefused", why), ("b1", "RunnerRefused", why)]

    wd.mkdir()
    r = lab.turn(0.5, at="runner.after_intent", do=wd.rmdir)
    assert sorted(p.job_id for p in r.plan.placements) == ["a1", "b1"]
    assert r.applied.started == () and sorted(r.applied.errors) == ["a1", "b1"]
    r = lab.turn(1.0)
    assert sorted((p.job_id, p.message) for p in r.plan.pending) == [("a1", why), ("b1", why)]
    wd.mkdir()
    r = lab.turn(1.5)
    assert sorted(r.applied.started) == ["a1", "b1"] and r.plan.pending == ()
    assert lab.running() == [("a1", 1.5, 2), ("b1", 1.5, 2)]
    assert lab.intervals() == []
    lab.check_conserved()
