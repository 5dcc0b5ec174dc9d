"""A Slurm job that ends on its own after the epoch observed it and before the plan's
preemption notice went out is recorded as it ended, not as preempted: a resumable job
reported REQUEUED would run a second time (the local runner's twin fault, found by a
helper's review at stop 48). `_reconcile` is driven directly with Slurm's answer, no
cluster needed."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from optalloc.runners.base import EventKind
from optalloc.runners.slurm import SlurmRunner
from optalloc.runners.slurm_cli import SlurmJob


class RecordingCli:
    def __init__(self):
        self.calls = []

    def run(self, argv, *a, **k):
        self.calls.append(list(argv))
        return ""


def _job(state: str, exit_code: int, end: float) -> SlurmJob:
    return SlurmJob("41", "j", state, "None", ("n1",), ((0, 1),), "h100", 2, 1, 100.0, end,
                    50.0, exit_code, 0, "optalloc", "root", "gpu")


@dataclass(frozen=True)
class Case:
    name: str
    state: str
    exit_code: int
    end: float
    kind: EventKind


NOTICE = 1000.0
CASES = [
    Case("a job that completed before its notice finished", "COMPLETED", 0, 990.0,
         EventKind.FINISHED),
    Case("a job that failed before its notice failed", "FAILED", 1, 990.0, EventKind.FAILED),
    Case("a job that exited after its notice was preempted and is requeued", "COMPLETED", 0,
         1010.0, EventKind.REQUEUED),
    Case("a job cancelled by the notice's end was preempted and is requeued", "CANCELLED", 0,
         1900.0, EventKind.REQUEUED),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_stopping_job_is_recorded_by_when_it_ended(case: Case, tmp_path):
    cli = RecordingCli()
    r = SlurmRunner(cli=cli, workdir=tmp_path)
    r.table.add_held("j", "41", True)
    r.table.set("j", state="stopping", run_start=100.0, notice_time=NOTICE,
                kill_deadline=NOTICE + 600, preempt_code="PreemptedForFairShare")
    (ev,) = r._reconcile(r.table.row("j"), _job(case.state, case.exit_code, case.end), 2000.0)
    assert (ev.job_id, ev.kind) == ("j", case.kind)
    # only a preempted resumable job is put back, held, for optalloc's next placement
    assert cli.calls == ([["scontrol", "requeuehold", "41"]]
                         if case.kind is EventKind.REQUEUED else [])
