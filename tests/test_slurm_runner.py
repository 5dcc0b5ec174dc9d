"""The Slurm runner against a REAL Slurm started by the `slurm_cluster` fixture (4 virtual nodes
with 8 fake GPUs each). Skipped with the reason when not root or slurm-wlm/munge are missing.

Jobs are tiny sh scripts: they record node, CUDA_VISIBLE_DEVICES and restart count, trap the
preemption notice, and on their second run finish by themselves."""

from __future__ import annotations

import subprocess
import time

import pytest

from optalloc.runners.base import EventKind
from optalloc.runners.slurm import SlurmRunner
from optalloc.types import (
    Config,
    Job,
    Node,
    NodeAlloc,
    NodeState,
    OrgNode,
    Placement,
    Plan,
    Preemption,
    ReasonCode,
)
from tests.conftest import wait_until

pytestmark = pytest.mark.slurm

JOB = r"""
n=${SLURM_RESTART_COUNT:-0}
echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES $OPTALLOC_JOB_ID $OPTALLOC_MIN_RUNTIME" > "$1/$OPTALLOC_JOB_ID.run$n"
trap 'echo TERM > "$1/$OPTALLOC_JOB_ID.term$n"; exit 0' TERM
if [ "$n" -ge 1 ]; then sleep 1; exit 0; fi
while :; do sleep 0.1; done
"""
STUBBORN = r"""
echo up > "$1/$OPTALLOC_JOB_ID.up"
trap 'echo TERM > "$1/$OPTALLOC_JOB_ID.term"' TERM
while :; do sleep 0.1; done
"""


def config(cluster) -> Config:
    return Config(
        gpu_types=(),
        nodes=tuple(Node(n, "h100", cluster.gpus) for n in cluster.node_names),
        org=OrgNode("root", children=(OrgNode("A1"),)),
    )


@pytest.fixture
def runner(slurm_cluster, tmp_path):
    r = SlurmRunner(tmp_path / "state.db", config(slurm_cluster), partition="gpu",
                    slurm_conf=str(slurm_cluster.conf), log_dir=tmp_path / "logs",
                    workdir=tmp_path, timeout_s=20)
    yield r
    for row in r.table.rows():
        subprocess.run(["scancel", row.slurm_id], env=slurm_cluster.env(), capture_output=True)
    r.close()


@pytest.fixture
def marks(tmp_path):
    d = tmp_path / "marks"
    d.mkdir()
    return d


def script(tmp_path, body, name="job.sh"):
    p = tmp_path / name
    p.write_text(body)
    return p


def place(jid, node, gpus) -> Placement:
    return Placement(jid, "h100", (NodeAlloc(node, tuple(range(gpus))),))


def plan(*placements, preempt=(), grace=30.0) -> Plan:
    return Plan(now=time.time(), placements=tuple(placements), preemptions=tuple(
        Preemption(j, ReasonCode.PREEMPTED_FAIR_SHARE, "fair share", grace) for j in preempt))


def squeue(cluster, slurm_id) -> dict:
    (job,) = [j for j in SlurmRunner(config=None, slurm_conf=str(cluster.conf)).cli.jobs()
              if j.slurm_id == slurm_id]
    return job


def observe_until(runner, pred, timeout=40.0):
    """Observe (now = wall time) until pred(observation) holds; return all events seen."""
    seen = []

    def step():
        obs = runner.observe(time.time())
        seen.extend(obs.events)
        runner.ack_events()  # recorded, as the cycle does: not handed out again
        return obs if pred(obs, seen) else None

    obs = wait_until(step, timeout=timeout, interval=0.3)
    return obs, seen


def test_submit_place_preempt_requeue_and_complete_on_the_planned_nodes(
        runner, slurm_cluster, tmp_path, marks):
    job = Job("train-7", "A1", 2, min_runtime_s=3600, resumable=True,
              command=("sh", str(script(tmp_path, JOB)), str(marks)))
    sid = runner.submit(job)
    held = squeue(slurm_cluster, sid)
    assert (held.name, held.state, held.reason, held.comment) == (
        "train-7", "PENDING", "JobHeldUser",
        "optalloc:project=A1;min_runtime=3600;resumable=1;priority=0")

    # epoch 1: the plan puts it on node3 with 2 GPUs
    res = runner.apply(plan(place("train-7", "node3", 2)), {"train-7": job}, time.time())
    assert (res.started, res.errors) == (("train-7",), {})
    obs, _ = observe_until(runner, lambda o, s: (marks / "train-7.run0").exists()
                           and "train-7" in o.running)
    placement, start = obs.running["train-7"]
    assert placement == Placement("train-7", "h100", (NodeAlloc("node3", (0, 1)),))
    assert (marks / "train-7.run0").read_text().split() == ["node3", "0,1", "train-7", "3600"]
    running = squeue(slurm_cluster, sid)
    assert (running.state, running.nodes, start) == ("RUNNING", ("node3",), running.start_time)

    # epoch 2: preempted with notice; the job's trap sees SIGTERM and it is requeued held
    res = runner.apply(plan(preempt=["train-7"]), {"train-7": job}, time.time())
    assert (res.preempting, res.errors) == (("train-7",), {})
    _, events = observe_until(runner, lambda o, s: any(e.kind is EventKind.REQUEUED for e in s))
    (ev,) = events
    assert (marks / "train-7.term0").read_text() == "TERM\n"
    assert (ev.job_id, ev.kind, ev.run_start, ev.placement) == (
        "train-7", EventKind.REQUEUED, running.start_time, placement)
    ended = squeue(slurm_cluster, sid)
    assert (ended.state, ended.reason, ended.restarts) == ("PENDING", "JobHeldUser", 1)
    assert ev.time >= ev.run_start and "preempted (PreemptedForFairShare)" in ev.message

    # epoch 3: placed again elsewhere (node1, 1 GPU); the second run completes by itself
    res = runner.apply(plan(place("train-7", "node1", 1)), {"train-7": job}, time.time())
    assert (res.started, res.errors) == (("train-7",), {})
    seen_running = []

    def done(o, s):
        if "train-7" in o.running and (marks / "train-7.run1").exists():
            seen_running.append(o.running["train-7"])
        return any(e.kind is EventKind.FINISHED for e in s)

    _, events = observe_until(runner, done)
    (fin,) = events
    assert (marks / "train-7.run1").read_text().split() == ["node1", "0", "train-7", "3600"]
    assert fin.kind is EventKind.FINISHED and fin.exit_code == 0
    assert fin.placement == Placement("train-7", "h100", (NodeAlloc("node1", (0,)),))
    # the run interval is Slurm's own start/end of the second run, after the first one ended
    done = squeue(slurm_cluster, sid)
    assert (done.state, fin.run_start, fin.time) == ("COMPLETED", done.start_time, done.end_time)
    assert ev.time <= fin.run_start <= fin.time
    assert fin.time - fin.run_start >= 1  # it slept 1 s before exiting
    assert runner.observe(time.time()).running == {}


def test_a_moved_job_is_requeued_first_and_its_new_placement_waits_for_a_later_epoch(
        runner, slurm_cluster, tmp_path, marks):
    """A plan that moves a running job (code Moved, placed again on other nodes): the notice
    goes out, the new placement is reported as waiting (not an error), and Slurm requeues the
    job held, for a later epoch to place: never two runs at once."""
    job = Job("move-1", "A1", 2, min_runtime_s=3600, resumable=True,
              command=("sh", str(script(tmp_path, JOB)), str(marks)))
    runner.submit(job)
    res = runner.apply(plan(place("move-1", "node3", 2)), {"move-1": job}, time.time())
    assert (res.started, res.errors) == (("move-1",), {})
    observe_until(runner, lambda o, s: (marks / "move-1.run0").exists() and "move-1" in o.running)
    move = Plan(now=time.time(), placements=(place("move-1", "node1", 2),), preemptions=(
        Preemption("move-1", ReasonCode.MOVED, "restarts on h100 (node1) in place of waiting",
                   30.0),))
    res = runner.apply(move, {"move-1": job}, time.time())
    assert (res.preempting, res.started, res.errors) == (("move-1",), (), {})
    assert res.waiting["move-1"].startswith("move-1 moves: it is stopping after its preemption")
    _, events = observe_until(runner, lambda o, s: any(e.kind is EventKind.REQUEUED for e in s))
    assert [e.kind for e in events] == [EventKind.REQUEUED]
    assert not (marks / "move-1.run1").exists()


def test_a_non_resumable_job_ignoring_the_notice_is_cancelled_after_the_grace_period(
        runner, slurm_cluster, tmp_path, marks):
    job = Job("stub-1", "A1", 1, resumable=False,
              command=("sh", str(script(tmp_path, STUBBORN, "stub.sh")), str(marks)))
    # placing a job Slurm has never seen submits it first
    res = runner.apply(plan(place("stub-1", "node2", 1)), {"stub-1": job}, time.time())
    assert res.started == ("stub-1",)
    observe_until(runner, lambda o, s: (marks / "stub-1.up").exists() and "stub-1" in o.running)
    t_notice = time.time()
    runner.apply(plan(preempt=["stub-1"], grace=2.0), {}, t_notice)
    wait_until(lambda: (marks / "stub-1.term").exists(), timeout=20)
    during = runner.observe(t_notice + 1.0)  # inside the grace period: still there
    assert "stub-1" in during.running and during.events == ()
    sid = runner.slurm_id("stub-1")
    runner.passive = True  # a dry run (optalloc epoch --dry-run) only looks: no scancel
    late = runner.observe(t_notice + 3.0)
    assert "stub-1" in late.running and late.events == ()
    assert squeue(slurm_cluster, sid).state == "RUNNING"
    runner.passive = False
    _, events = observe_until(runner, lambda o, s: bool(s))
    (ev,) = events
    assert ev.kind is EventKind.PREEMPTED
    assert "stopped by Slurm after the grace period" in ev.message
    assert wait_until(lambda: squeue(slurm_cluster, sid).state == "CANCELLED", timeout=30)


def test_held_jobs_with_an_optalloc_comment_are_discovered_and_foreign_jobs_reported(
        runner, slurm_cluster, tmp_path):
    env = slurm_cluster.env()
    body = script(tmp_path, "#!/bin/sh\nsleep 60\n", "plain.sh")
    sub = subprocess.run(
        ["sbatch", "--parsable", "-H", "-J", "user-job", "--gres=gpu:2", "-N1",
         "--comment=optalloc:project=A1;min_runtime=2h;resumable=0;priority=3",
         f"--chdir={tmp_path}", str(body)], env=env, capture_output=True, text=True, check=True)
    foreign = subprocess.run(
        ["sbatch", "--parsable", "-J", "squatter", "--gres=gpu:1", "-w", "node4",
         f"--chdir={tmp_path}", str(body)], env=env, capture_output=True, text=True, check=True)
    try:
        (job,) = runner.discover_jobs()
        assert (job.id, job.project, job.gpus, job.min_runtime_s, job.resumable, job.priority) == (
            "user-job", "A1", 2, 7200.0, False, 3)
        assert runner.discover_jobs() == ()  # once only
        assert runner.slurm_id("user-job") == sub.stdout.strip()
        fid = foreign.stdout.strip()
        obs, _ = observe_until(runner, lambda o, s: o.unknown)
        assert obs.unknown == (f"slurm job {fid} (squatter, user root) is running on node4 and "
                               "was not submitted through optalloc",)
        assert squeue(slurm_cluster, fid).state == "RUNNING"  # never touched
    finally:
        subprocess.run(["scancel", sub.stdout.strip(), foreign.stdout.strip()], env=env)


def test_drained_nodes_are_reported_and_bad_commands_become_errors(runner, slurm_cluster,
                                                                   tmp_path):
    env = slurm_cluster.env()
    subprocess.run(["scontrol", "update", "nodename=node4", "state=drain", "reason=test"],
                   env=env, check=True)
    try:
        states = runner.observe(time.time()).node_states
        assert states == {"node1": NodeState.UP, "node2": NodeState.UP,
                          "node3": NodeState.UP, "node4": NodeState.DRAIN}
    finally:
        subprocess.run(["scontrol", "update", "nodename=node4", "state=resume"], env=env,
                       check=True)
    job = Job("nowhere", "A1", 1, command=("true",))
    res = runner.apply(plan(place("nowhere", "node9", 1)), {"nowhere": job}, time.time())
    assert res.started == () and list(res.errors) == ["nowhere"]
    assert res.errors["nowhere"].startswith("`scontrol update jobid=")
    assert "failed (exit 1)" in res.errors["nowhere"]


def test_optalloc_submit_with_the_slurm_runner_queues_the_job_and_holds_it_in_slurm(
        slurm_cluster, tmp_path, monkeypatch, capsys):
    from optalloc.cli import main
    from optalloc.state import StateStore

    monkeypatch.chdir(tmp_path)
    (tmp_path / "cfg.yaml").write_text(
        "gpu_types: [{name: h100}]\n"
        "nodes: [{name: 'node[1-4]', gpu_type: h100, gpus: 8}]\n"
        "org: {name: root, children: [{name: A1}]}\n")
    code = main(["submit", "--config", "cfg.yaml", "--state", "st.db", "--runner", "slurm",
                 "--partition", "gpu", "--slurm-conf", str(slurm_cluster.conf), "--project", "A1",
                 "--gpus", "16", "--min-runtime", "30m", "--id", "big-1", "--", "sleep", "60"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("queued big-1: project A1, 16 GPUs, min_runtime 30m, "
                                        "resumable, slurm job ")
    sid = out.split("slurm job ")[1].split()[0]
    try:
        held = squeue(slurm_cluster, sid)
        assert (held.name, held.state, held.reason, held.node_count, held.gpus_per_node,
                held.comment) == ("big-1", "PENDING", "JobHeldUser", 2, 8,
                                  "optalloc:project=A1;min_runtime=1800;resumable=1;priority=0")
        with StateStore(tmp_path / "st.db") as store:
            assert store.get_job("big-1").gpus == 16
        r = SlurmRunner(tmp_path / "st.db", slurm_conf=str(slurm_cluster.conf))
        assert (r.slurm_id("big-1"), r.discover_jobs()) == (sid, ())  # known, not rediscovered
        r.close()
    finally:
        subprocess.run(["scancel", sid], env=slurm_cluster.env())


def test_events_are_handed_out_again_until_the_cycle_acknowledges_them(runner):
    """A crash between observe and the epoch's record must not lose a job's end: the runner
    keeps its events until `ack_events` (delivery at least once, like the local runner)."""
    job = Job("quick-1", "A1", 1, command=("true",))
    res = runner.apply(plan(place("quick-1", "node1", 1)), {"quick-1": job}, time.time())
    assert res.started == ("quick-1",)
    first = wait_until(lambda: runner.observe(time.time()).events or None, timeout=40,
                       interval=0.3)
    again = runner.observe(time.time()).events  # not acknowledged: the same events again
    runner.ack_events()
    after = runner.observe(time.time()).events
    assert ([e.kind for e in first], again, after) == ([EventKind.FINISHED], first, ())
