"""Local worker processes: a worker that dies (killed for memory, a crash in native code) does
not end the sweep. The runs its broken pool held get one more try in a fresh pool; a run that
kills its worker every time ends as a failed record, and the sweep does not hang."""

from __future__ import annotations

import os
from pathlib import Path

from optalloc.sim.scenario import Scenario
from optalloc.sim.sweep import ProcessExecutor
from optalloc.sim.sweep.executors import Task
from optalloc.types import Config, GpuType, Job, Node, OrgNode, Policy


def tiny() -> Scenario:
    org = OrgNode("lab", children=(OrgNode("A", children=(OrgNode("A1"),)), OrgNode("B", children=(OrgNode("B1"),))))
    cfg = Config((GpuType("h100"),), (Node("n1", "h100", 8),), org, Policy(epoch_s=300.0, grace_s=0.0))
    jobs = (Job("a", "A1", 8, min_runtime_s=3600.0, duration_s=3600.0),
            Job("b", "B1", 4, min_runtime_s=3600.0, submit_time=60.0, duration_s=1800.0))
    return Scenario("tiny", cfg, jobs, duration_s=4 * 3600.0)


def _arrive(marker: str, always: bool, scenario):
    """Unpickled in the worker: kill it (the first time only, unless `always`)."""
    if always or not os.path.exists(marker):
        Path(marker).touch()
        os._exit(9)
    return scenario


class Lethal:
    """A scenario whose arrival in a worker process kills that process."""

    def __init__(self, scenario, marker: Path, always: bool):
        self.scenario, self.marker, self.always = scenario, str(marker), always

    def __reduce__(self):
        return _arrive, (self.marker, self.always, self.scenario)


TASKS = [Task(f"k{i}", 0, (f"org.B.share={i + 1}",), "greedy") for i in range(3)]


def test_runs_of_a_worker_that_died_once_are_retried_and_succeed(tmp_path):
    scenarios = {0: Lethal(tiny(), tmp_path / "died", always=False)}
    with ProcessExecutor(2) as ex:
        records = {t.key: r for t, r in ex.run(TASKS, scenarios)}
    assert (tmp_path / "died").exists()  # a worker did die
    assert {k: r["status"] for k, r in records.items()} == {"k0": "ok", "k1": "ok", "k2": "ok"}


def test_a_run_that_always_kills_its_worker_is_a_failed_record_not_a_hang(tmp_path):
    scenarios = {0: Lethal(tiny(), tmp_path / "died", always=True)}
    with ProcessExecutor(2) as ex:
        records = {t.key: r for t, r in ex.run(TASKS, scenarios)}
    assert {k: r["status"] for k, r in records.items()} == {"k0": "failed", "k1": "failed", "k2": "failed"}
    assert {r["error"].split(":")[0] for r in records.values()} == {"BrokenProcessPool"}
