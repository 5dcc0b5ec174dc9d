"""The local runner against real child processes: tiny sh scripts that record their environment,
trap the preemption notice and write markers. Time is driven through the `now` arguments."""

from __future__ import annotations

import dataclasses

import os
import signal
import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optalloc.runners import nvml
from optalloc.runners.base import ApplyResult, EventKind
from optalloc.runners.local import REQUEUE_EXIT_CODE, LocalRunner, process_start_ticks
from optalloc.runners.nvml import GpuInventory
from optalloc.types import (
    Job,
    Node,
    NodeAlloc,
    NodeState,
    Placement,
    Plan,
    Policy,
    Preemption,
    ReasonCode,
)
from tests.conftest import FakeGpu, kill_local_runs, wait_until

NODE = Node("box", "h100", 4)
T0 = 1_000_000.0

# Records its environment, then idles; on the notice signal writes a marker and exits 0 (the
# trap comes first, so a notice right after the .env file appears is caught).
POLITE = """
trap 'echo TERM > "$1/$OPTALLOC_JOB_ID.term"; exit 0' TERM
echo started >> "$1/$OPTALLOC_JOB_ID.starts"
env | grep -E '^(CUDA_VISIBLE_DEVICES|OPTALLOC_[A-Z_]+)=' | sort > "$1/$OPTALLOC_JOB_ID.env.tmp"
mv "$1/$OPTALLOC_JOB_ID.env.tmp" "$1/$OPTALLOC_JOB_ID.env"
while :; do sleep 0.05; done
"""
# Notes the notice but keeps running: only SIGKILL stops it.
STUBBORN = """
trap 'echo TERM > "$1/$OPTALLOC_JOB_ID.term"' TERM
echo started >> "$1/$OPTALLOC_JOB_ID.starts"
while :; do sleep 0.05; done
"""
# Exits with the code given as $2 once the file $1/<job>.go exists.
EXITS = """
echo started >> "$1/$OPTALLOC_JOB_ID.starts"
while [ ! -e "$1/$OPTALLOC_JOB_ID.go" ]; do sleep 0.02; done
exit "$2"
"""


@pytest.fixture
def marks(tmp_path) -> Path:
    d = tmp_path / "marks"
    d.mkdir()
    return d


@pytest.fixture
def scripts(tmp_path) -> dict[str, Path]:
    out = {}
    for name, body in {"polite": POLITE, "stubborn": STUBBORN, "exits": EXITS}.items():
        p = tmp_path / f"{name}.sh"
        p.write_text(body)
        out[name] = p
    return out


@pytest.fixture
def make_runner(tmp_path):
    made: list[LocalRunner] = []

    def make(**kw) -> LocalRunner:
        kw.setdefault("run_dir", tmp_path / "runs")
        kw.setdefault("policy", Policy(min_runtime_cap_s=8 * 3600, checkpoint_interval_s=1800))
        kw.setdefault("kill_wait_s", 5.0)
        r = LocalRunner(tmp_path / "state.db", kw.pop("node", NODE), **kw)
        made.append(r)
        return r

    yield make
    # never leave processes behind: kill every live run's process group
    if made:
        kill_local_runs(tmp_path / "state.db")
        for r in made:
            for proc in r._children.values():
                proc.wait(timeout=10)
            r.close()


def job(jid, script, marks, *args, **kw) -> Job:
    return Job(id=jid, project="p", gpus=kw.pop("gpus", 1),
               command=("sh", str(script), str(marks), *args), **kw)


def place(jid, *gpus, node="box") -> Placement:
    return Placement(jid, "h100", (NodeAlloc(node, tuple(gpus)),))


def plan(now, *placements, preempt=(), grace=30.0) -> Plan:
    return Plan(now=now, placements=tuple(placements), preemptions=tuple(
        Preemption(j, ReasonCode.PREEMPTED_FAIR_SHARE, "a higher-ranked job needs the GPUs", grace)
        for j in preempt))


def read_env(marks, jid) -> dict[str, str]:
    text = wait_until(lambda: (marks / f"{jid}.env").exists() and (marks / f"{jid}.env").read_text())
    return dict(line.split("=", 1) for line in text.splitlines())


def ended(runner, now, jid):
    """Observe (acknowledging what is seen) until the runner reports the end of `jid`'s run;
    return that event."""
    def look():
        evs = [e for e in runner.observe(now).events if e.job_id == jid]
        runner.ack_events()
        return evs[0] if evs else None
    return wait_until(look)


# ---------------------------------------------------------------------- starting


def test_a_placed_job_runs_in_its_own_process_group_with_its_gpus_and_contract(
        make_runner, scripts, marks):
    r = make_runner()
    j = job("train-1", scripts["polite"], marks, gpus=2, min_runtime_s=3600,
            checkpoint_interval_s=600)
    res = r.apply(plan(T0, place("train-1", 2, 3)), {"train-1": j}, T0)
    assert res == ApplyResult(started=("train-1",), preempting=(), errors={})
    assert read_env(marks, "train-1") == {
        "CUDA_VISIBLE_DEVICES": "2,3",
        "OPTALLOC_CHECKPOINT_INTERVAL": "600",
        "OPTALLOC_GPUS": "2",
        "OPTALLOC_GRACE": "60",
        "OPTALLOC_JOB_ID": "train-1",
        "OPTALLOC_MIN_RUNTIME": "3600",
        "OPTALLOC_PREEMPT_SIGNAL": "SIGTERM",
        "OPTALLOC_PROTECTED_UNTIL": f"{T0 + 3600:.3f}",
        "OPTALLOC_REQUEUE_EXIT_CODE": "75",
        "OPTALLOC_RESTART_COUNT": "0",
        "OPTALLOC_RESUMABLE": "1",
    }
    (pid,) = r._children
    assert os.getpgid(pid) == pid != os.getpgid(0)  # its own session and process group
    obs = r.observe(T0 + 5)
    assert obs.running == {"train-1": (place("train-1", 2, 3), T0)}
    assert obs.events == ()  # starts are reported by ApplyResult.started, not as events
    assert obs.unknown == () and obs.node_states == {}  # no NVML: no health claims
    assert r.log_path("train-1").name == "train-1.1.log"
    assert r.log_path("train-1").read_text().startswith("# optalloc: job train-1 run 1 on box")


@pytest.mark.parametrize("min_runtime_s, allocated, expected", [
    (10 * 3600, True, ("7200", f"{T0 + 7200:.3f}")),  # capped by the policy
    (1800, True, ("1800", f"{T0 + 1800:.3f}")),
    (0, True, ("0", f"{T0:.3f}")),  # unallocated work: never protected
    (1800, False, ("0", f"{T0:.3f}")),  # a gpu_type where the project has no share
], ids=["capped", "under the cap", "min_runtime 0", "no share on the type"])
def test_the_protection_in_the_environment_is_the_contract_rule(
        make_runner, scripts, marks, min_runtime_s, allocated, expected):
    r = make_runner(policy=Policy(min_runtime_cap_s=7200))
    pl = dataclasses.replace(place("j", 0), allocated=allocated)
    r.apply(plan(T0, pl), {"j": job("j", scripts["polite"], marks,
                                    min_runtime_s=min_runtime_s)}, T0)
    env = read_env(marks, "j")
    assert (env["OPTALLOC_MIN_RUNTIME"], env["OPTALLOC_PROTECTED_UNTIL"]) == expected


def test_with_nvml_the_job_sees_its_gpus_by_uuid_and_the_node_is_reported_healthy(
        make_runner, scripts, marks, fake_pynvml):
    fake_pynvml([FakeGpu(uuid=f"GPU-{i}") for i in range(4)])
    r = make_runner(inventory=GpuInventory.open())
    r.apply(plan(T0, place("j", 1, 3)), {"j": job("j", scripts["polite"], marks, gpus=2)}, T0)
    assert read_env(marks, "j")["CUDA_VISIBLE_DEVICES"] == "GPU-1,GPU-3"
    assert r.observe(T0).node_states == {"box": NodeState.UP}


def test_an_unhealthy_gpu_drains_the_node(make_runner, fake_pynvml):
    fake_pynvml([FakeGpu(uuid="GPU-0"), FakeGpu(uuid="GPU-1", ecc_uncorrected=2)])
    r = make_runner(node=Node("box", "h100", 2), inventory=GpuInventory.open())
    assert r.observe(T0).node_states == {"box": NodeState.DRAIN}


@pytest.mark.parametrize(
    "case, jobs, placements, expected_errors",
    [
        ("a job without a command", {"j": Job("j", "p", 1)}, [place("j", 0)],
         {"j": "j has no command (argv) to run; set `command:` in its job spec"}),
        ("a job placed on another node", {"j": Job("j", "p", 1, command=("true",))},
         [place("j", 0, node="other")],
         {"j": "j is placed on other but the local runner runs only node box; use the slurm "
               "runner for several nodes"}),
        ("a GPU the machine does not have", {"j": Job("j", "p", 1, command=("true",))},
         [place("j", 7)], {"j": "j: GPU 7 does not exist on box (4 GPUs)"}),
        ("a command that is not installed",
         {"j": Job("j", "p", 1, command=("no-such-program-xyz",))}, [place("j", 0)],
         {"j": "j: command 'no-such-program-xyz' is not an executable file or on PATH"}),
        ("a placement without its job", {}, [place("j", 0)],
         {"j": "j is placed but the plan's job list does not contain it"}),
        ("two jobs on one GPU", {"a": Job("a", "p", 1, command=("sleep", "30")),
                                 "b": Job("b", "p", 1, command=("sleep", "30"))},
         [place("a", 1), place("b", 1)], {"b": "b: GPU 1 of box is in use by another running job"}),
    ],
)
def test_a_placement_that_cannot_start_is_an_error_not_an_exception(
        make_runner, case, jobs, placements, expected_errors):
    r = make_runner()
    res = r.apply(plan(T0, *placements), jobs, T0)
    assert res.errors == expected_errors
    assert set(res.started) == {p.job_id for p in placements} - set(expected_errors)


def test_preempting_a_job_that_is_not_running_is_an_error(make_runner):
    r = make_runner()
    assert r.apply(plan(T0, preempt=["ghost"]), {}, T0) == ApplyResult(errors={
        "ghost": "preemption of ghost: it is not running under the local runner on box; "
                 "nothing to stop"})


# ---------------------------------------------------------------------- ending by itself


@pytest.mark.parametrize(
    "exit_code, resumable, kind",
    [
        (0, True, EventKind.FINISHED),
        (3, True, EventKind.FAILED),
        (REQUEUE_EXIT_CODE, True, EventKind.REQUEUED),  # the job asks to be requeued
        (REQUEUE_EXIT_CODE, False, EventKind.FAILED),  # only resumable jobs may ask
    ],
)
def test_a_job_that_exits_is_reported_by_its_exit_code_with_its_run_interval(
        make_runner, scripts, marks, exit_code, resumable, kind):
    r = make_runner()
    j = job("j", scripts["exits"], marks, str(exit_code), resumable=resumable)
    r.apply(plan(T0, place("j", 0)), {"j": j}, T0)
    (marks / "j.go").touch()
    ev = ended(r, T0 + 100, "j")
    assert (ev.kind, ev.exit_code, ev.run_start, ev.placement) == (
        kind, exit_code, T0, place("j", 0))
    assert T0 <= ev.time <= T0 + 100
    assert f"ran {T0:.3f}-{ev.time:.3f} on box GPUs 0" in ev.message
    assert r.observe(T0 + 101).running == {}


def test_a_job_that_dropped_out_of_the_plan_keeps_running(make_runner, scripts, marks):
    r = make_runner()
    r.apply(plan(T0, place("j", 0)), {"j": job("j", scripts["polite"], marks)}, T0)
    res = r.apply(plan(T0 + 300), {}, T0 + 300)  # next plan does not mention it
    assert res == ApplyResult()
    assert set(r.observe(T0 + 301).running) == {"j"}
    assert not (marks / "j.term").exists()


# ---------------------------------------------------------------------- preemption


@pytest.mark.parametrize("resumable, kind", [(True, EventKind.REQUEUED),
                                             (False, EventKind.PREEMPTED)])
def test_preemption_sends_the_notice_and_a_job_that_stops_in_time_is_requeued_or_ends(
        make_runner, scripts, marks, resumable, kind):
    r = make_runner()
    r.apply(plan(T0, place("j", 0)), {"j": job("j", scripts["polite"], marks,
                                               resumable=resumable)}, T0)
    read_env(marks, "j")  # the job is up and has its trap installed
    res = r.apply(plan(T0 + 600, preempt=["j"], grace=60), {}, T0 + 600)
    assert res == ApplyResult(preempting=("j",))
    assert wait_until(lambda: (marks / "j.term").exists())
    ev = ended(r, T0 + 610, "j")  # exits within its grace: no SIGKILL needed
    assert (ev.kind, ev.exit_code, ev.run_start) == (kind, 0, T0)
    assert T0 + 600 >= ev.time - 10 and ev.time <= T0 + 610
    assert ev.message.startswith("preempted (PreemptedForFairShare): notice at 1000600.000, "
                                 "exited 0 after the notice; ran")


def test_a_job_ignoring_the_notice_is_killed_only_after_the_grace_period(
        make_runner, scripts, marks):
    r = make_runner()
    r.apply(plan(T0, place("j", 0)), {"j": job("j", scripts["stubborn"], marks)}, T0)
    wait_until(lambda: (marks / "j.starts").exists())
    r.apply(plan(T0 + 600, preempt=["j"], grace=60), {}, T0 + 600)
    wait_until(lambda: (marks / "j.term").exists())
    during = r.observe(T0 + 659)  # still inside the grace period
    assert set(during.running) == {"j"}
    assert during.events == ()
    (pid,) = r._children
    assert process_start_ticks(pid) is not None
    ev = ended(r, T0 + 660, "j")  # deadline reached: SIGKILL, then reported
    assert (ev.kind, ev.exit_code, ev.time, ev.run_start) == (EventKind.REQUEUED, None,
                                                              T0 + 660, T0)
    assert "killed after the grace period" in ev.message
    assert process_start_ticks(pid) is None


def test_a_stopping_job_cannot_be_placed_again_until_it_has_exited(make_runner, scripts, marks):
    r = make_runner()
    j = job("j", scripts["stubborn"], marks)
    r.apply(plan(T0, place("j", 0)), {"j": j}, T0)
    wait_until(lambda: (marks / "j.starts").exists())
    r.apply(plan(T0 + 10, preempt=["j"], grace=60), {}, T0 + 10)
    res = r.apply(plan(T0 + 20, place("j", 0)), {"j": j}, T0 + 20)
    assert res.errors == {"j": "j is still stopping after its preemption notice; it can start "
                               "again once it has exited"}
    assert ended(r, T0 + 70, "j").kind is EventKind.REQUEUED
    res = r.apply(plan(T0 + 80, place("j", 1)), {"j": j}, T0 + 80)  # requeued, placed again
    assert res.started == ("j",)
    assert wait_until(lambda: (marks / "j.starts").read_text().count("started") == 2)


def test_a_configurable_notice_signal_reaches_the_job(make_runner, tmp_path, marks):
    script = tmp_path / "usr1.sh"
    script.write_text('trap \'echo USR1 > "$1/j.usr1"; exit 0\' USR1\n'
                      'echo up > "$1/j.up"\nwhile :; do sleep 0.05; done\n')
    r = make_runner(notice_signal="USR1")
    r.apply(plan(T0, place("j", 0)), {"j": job("j", script, marks)}, T0)
    wait_until(lambda: (marks / "j.up").exists())
    r.apply(plan(T0 + 1, preempt=["j"]), {}, T0 + 1)
    assert wait_until(lambda: (marks / "j.usr1").exists())
    assert ended(r, T0 + 2, "j").kind is EventKind.REQUEUED


# ---------------------------------------------------------------------- restarts


def test_a_restarted_runner_adopts_live_jobs_and_never_starts_them_twice(
        make_runner, scripts, marks):
    first = make_runner()
    jobs = {"j": job("j", scripts["exits"], marks, "0")}
    p = plan(T0, place("j", 2))
    assert first.apply(p, jobs, T0).started == ("j",)
    wait_until(lambda: (marks / "j.starts").exists())

    second = make_runner()  # optalloc restarted: same DB, no child handles
    assert second.observe(T0 + 300).running == {"j": (place("j", 2), T0)}
    assert second.apply(p, jobs, T0 + 300) == ApplyResult()
    (marks / "j.go").touch()
    ev = ended(second, T0 + 600, "j")  # its exit code comes from the wrapper's exit file
    assert (ev.kind, ev.exit_code, ev.run_start) == (EventKind.FINISHED, 0, T0)
    assert (marks / "j.starts").read_text() == "started\n"


def test_two_runners_applying_the_same_plan_at_once_start_the_job_once(
        make_runner, scripts, marks):
    a, b = make_runner(), make_runner()
    jobs = {"j": job("j", scripts["polite"], marks)}
    results = []
    barrier = threading.Barrier(2)

    def go(r):
        barrier.wait()
        results.append(r.apply(plan(T0, place("j", 0)), jobs, T0))

    threads = [threading.Thread(target=go, args=(r,)) for r in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(res.started for res in results) == [(), ("j",)]
    read_env(marks, "j")  # the one job is up (it writes .starts before .env)
    assert (marks / "j.starts").read_text() == "started\n"


def test_a_reused_pid_is_not_mistaken_for_the_job(make_runner, tmp_path):
    r = make_runner()
    with r.conn:
        r.conn.execute(
            "INSERT INTO runner_local_runs (job_id, node, state, pid, proc_start, start_time, "
            "placement, resumable, log_path, exit_path) VALUES ('old', 'box', 'running', ?, 1, "
            "?, ?, 1, 'x.log', ?)",
            (os.getpid(), T0, '{"job_id": "old", "gpu_type": "h100", "nodes": []}',
             str(tmp_path / "missing.exit")))
    obs = r.observe(T0 + 5)
    assert obs.running == {}
    assert [(e.job_id, e.kind, e.exit_code, e.time) for e in obs.events] == [
        ("old", EventKind.FAILED, None, T0 + 5)]
    assert "vanished without an exit record" in obs.events[0].message


# ---------------------------------------------------------------------- GPU users and utilization


def test_gpu_processes_not_started_by_optalloc_are_reported_and_left_alone(
        make_runner, scripts, marks, fake_pynvml):
    squatter = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        mod = fake_pynvml([FakeGpu(uuid=f"GPU-{i}") for i in range(4)])
        r = make_runner(inventory=GpuInventory.open())
        r.apply(plan(T0, place("j", 0)), {"j": job("j", scripts["polite"], marks)}, T0)
        read_env(marks, "j")
        (ours,) = r._children
        mod.gpus[0].processes = [(ours, 2**30)]  # the job's own process: not unknown
        mod.gpus[3].processes = [(squatter.pid, 2**30)]
        obs = r.observe(T0 + 1)
        assert obs.unknown == (f"pid {squatter.pid} (sleep) uses GPU 3 (GPU-3) on box and was "
                               "not started by optalloc",)
        assert squatter.poll() is None  # never killed
    finally:
        squatter.kill()
        squatter.wait()


def test_utilization_is_sampled_per_job_and_stored(make_runner, scripts, marks, fake_pynvml):
    mod = fake_pynvml([FakeGpu(uuid=f"GPU-{i}", util_gpu=10 * i, memory_used=i * 2**30)
                       for i in range(4)])
    r = make_runner(inventory=GpuInventory.open())
    r.apply(plan(T0, place("j", 1, 2)), {"j": job("j", scripts["polite"], marks, gpus=2)}, T0)
    first = r.sample_utilization(T0 + 60)
    mod.gpus[1].util_gpu = 90
    r.sample_utilization(T0 + 120)
    assert [(s.job_id, s.time, s.gpu_index, s.gpu_uuid, s.gpu_util_pct, s.memory_used_bytes)
            for s in first] == [("j", T0 + 60, 1, "GPU-1", 10.0, 2**30),
                                ("j", T0 + 60, 2, "GPU-2", 20.0, 2 * 2**30)]
    assert r.mean_utilization("j") == pytest.approx((10 + 20 + 90 + 20) / 4)


def test_without_nvml_there_is_no_utilization_and_the_config_inventory_is_used(
        make_runner, no_pynvml, monkeypatch):
    monkeypatch.setattr(nvml, "_warned", set())
    r = make_runner(inventory=GpuInventory.open())
    assert r.sample_utilization(T0) == ()
    assert [g.gpu_type for g in r.gpus()] == ["h100"] * 4


# ---------------------------------------------------------------------- invariants


ops = st.lists(
    st.tuples(st.sampled_from(["place", "preempt", "tick"]), st.sampled_from("abc"),
              st.sets(st.integers(0, 3), min_size=1, max_size=2)),
    min_size=1, max_size=6)


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops)
def test_any_sequence_of_plans_never_shares_a_gpu_or_runs_a_job_twice(tmp_path_factory, ops):
    d = tmp_path_factory.mktemp("prop")
    r = LocalRunner(d / "state.db", NODE, run_dir=d / "runs", kill_wait_s=5.0)
    jobs = {j: Job(j, "p", 2, command=("sleep", "30")) for j in "abc"}
    now = T0
    history: dict[str, list[EventKind]] = {j: [] for j in "abc"}
    ends = {EventKind.REQUEUED, EventKind.FAILED, EventKind.FINISHED, EventKind.PREEMPTED}
    try:
        for op, jid, gpus in ops:
            now += 10
            if op == "place":
                p = plan(now, Placement(jid, "h100", (NodeAlloc("box", tuple(sorted(gpus))),)))
            elif op == "preempt":
                p = plan(now, preempt=[jid], grace=0)
            else:
                p = plan(now)
            res = r.apply(p, jobs, now)
            for j in res.started:
                history[j].append(EventKind.STARTED)
            obs = r.observe(now)
            r.ack_events()
            assert not ({e.kind for e in obs.events} - ends)
            for e in obs.events:
                history[e.job_id].append(e.kind)
            held = [(a.node, g) for pl, _ in obs.running.values() for a in pl.nodes for g in a.gpus]
            assert len(held) == len(set(held))  # no GPU given to two live runs
            live = r.conn.execute("SELECT job_id, COUNT(*) FROM runner_local_runs "
                                  "WHERE state != 'ended' GROUP BY job_id").fetchall()
            assert all(n == 1 for _, n in live)
        for kinds in history.values():  # runs alternate: started, then its end
            assert all((k is EventKind.STARTED) == (i % 2 == 0) for i, k in enumerate(kinds))
    finally:
        for (pid,) in r.conn.execute("SELECT pid FROM runner_local_runs WHERE state != 'ended'"):
            os.killpg(pid, signal.SIGKILL)
        for proc in r._children.values():
            proc.wait(timeout=10)
        r.close()


def test_events_are_repeated_until_acknowledged_and_then_never_again(make_runner, scripts, marks):
    r = make_runner()
    r.apply(plan(T0, place("j", 0)), {"j": job("j", scripts["exits"], marks, "0")}, T0)
    (marks / "j.go").touch()
    first = wait_until(lambda: r.observe(T0 + 5).events)
    assert [e.kind for e in first] == [EventKind.FINISHED]
    assert r.observe(T0 + 6).events == first  # not acknowledged: the caller crashed, say
    restarted = make_runner()  # a new optalloc process sees them too
    assert restarted.observe(T0 + 7).events == first
    restarted.ack_events()
    assert restarted.observe(T0 + 8).events == ()
    assert r.observe(T0 + 9).events == ()


# ---------------------------------------------------------------------- intent first


class Crash(BaseException):
    """Stands in for kill -9 at a fault point: nothing after it in that call runs."""


def crash_at(monkeypatch, point):
    import optalloc.runners.local as local_mod
    import optalloc.runners.local_start as start_mod

    def fault(name):
        if name == point:
            raise Crash(name)

    monkeypatch.setattr(local_mod, "fault_point", fault)
    monkeypatch.setattr(start_mod, "fault_point", fault)


def test_a_start_whose_pid_was_never_recorded_is_adopted_and_not_started_again(
        make_runner, scripts, marks, monkeypatch):
    crash_at(monkeypatch, "runner.after_spawn")
    first = make_runner()
    jobs = {"j": job("j", scripts["polite"], marks)}
    with pytest.raises(Crash):
        first.apply(plan(T0, place("j", 1)), jobs, T0)
    read_env(marks, "j")  # the process runs; the runner's row still says 'starting'
    monkeypatch.undo()
    second = make_runner()
    assert second.observe(T0 + 60).running == {"j": (place("j", 1), T0)}
    assert second.apply(plan(T0 + 60, place("j", 1)), jobs, T0 + 60) == ApplyResult()
    assert (marks / "j.starts").read_text() == "started\n"
    second.apply(plan(T0 + 70, preempt=["j"]), {}, T0 + 70)  # and it is ours to stop
    assert ended(second, T0 + 80, "j").kind is EventKind.REQUEUED


def test_a_start_intent_that_never_became_a_process_is_dropped_and_the_job_can_start(
        make_runner, scripts, marks, monkeypatch):
    crash_at(monkeypatch, "runner.after_intent")
    first = make_runner()
    jobs = {"j": job("j", scripts["polite"], marks)}
    with pytest.raises(Crash):
        first.apply(plan(T0, place("j", 0)), jobs, T0)
    monkeypatch.undo()
    second = make_runner(start_settle_s=0.2)
    obs = second.observe(T0 + 60)
    assert (obs.running, obs.events) == ({}, ())  # nothing ran: nothing to report or charge
    assert second.apply(plan(T0 + 60, place("j", 0)), jobs, T0 + 60).started == ("j",)
    read_env(marks, "j")
    assert (marks / "j.starts").read_text() == "started\n"
    assert [r[0] for r in second.conn.execute(
        "SELECT state FROM runner_local_runs ORDER BY run_id")] == ["ended", "running"]


def test_a_committed_notice_that_was_never_sent_is_sent_by_the_next_runner(
        make_runner, scripts, marks, monkeypatch):
    first = make_runner()
    first.apply(plan(T0, place("j", 0)), {"j": job("j", scripts["polite"], marks)}, T0)
    read_env(marks, "j")
    crash_at(monkeypatch, "runner.after_notice_intent")
    with pytest.raises(Crash):
        first.apply(plan(T0 + 600, preempt=["j"]), {}, T0 + 600)
    assert not (marks / "j.term").exists()
    monkeypatch.undo()
    second = make_runner()
    second.observe(T0 + 601)  # sends it
    assert wait_until(lambda: (marks / "j.term").exists())
    ev = ended(second, T0 + 610, "j")
    assert (ev.kind, ev.run_start) == (EventKind.REQUEUED, T0)  # preempted, not "finished"


def test_a_runs_table_from_before_start_intents_is_migrated(tmp_path):
    import sqlite3

    conn = sqlite3.connect(tmp_path / "state.db")
    conn.executescript("""
        CREATE TABLE runner_local_runs (
            run_id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, node TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('running', 'stopping', 'ended')),
            pid INTEGER NOT NULL, proc_start INTEGER, start_time REAL NOT NULL, end_time REAL,
            placement TEXT NOT NULL, resumable INTEGER NOT NULL, log_path TEXT NOT NULL,
            exit_path TEXT NOT NULL, notice_time REAL, kill_deadline REAL, kill_time REAL,
            preempt_code TEXT, exit_code INTEGER);
        INSERT INTO runner_local_runs (job_id, node, state, pid, start_time, end_time, placement,
            resumable, log_path, exit_path, exit_code) VALUES ('old', 'box', 'ended', 1, 5.0,
            9.0, '{"job_id": "old", "gpu_type": "h100", "nodes": []}', 1, 'l', 'e', 0);
    """)
    conn.close()
    r = LocalRunner(tmp_path / "state.db", NODE, run_dir=tmp_path / "runs")
    try:
        assert r.conn.execute("SELECT job_id, state, pid, end_time, notice_sent FROM "
                              "runner_local_runs").fetchall() == [("old", "ended", 1, 9.0, 0)]
        r.conn.execute("INSERT INTO runner_local_runs (job_id, node, state, start_time, "
                       "placement, resumable, log_path, exit_path) VALUES ('new', 'box', "
                       "'starting', 1, '{}', 1, '', '')")  # the new state is allowed now
    finally:
        r.close()
