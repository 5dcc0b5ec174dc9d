"""A Slurm job that ends on its own after the epoch observed it and before the plan's
preemption is applied is recorded as it ended, not as preempted: a resumable job reported
REQUEUED would run a second time (the local runner's twin fault, found by a helper's review
at stop 48). The runner reads Slurm's state when it applies the plan: a job already ended gets
no notice. `_preempt` and `_reconcile` are driven with Slurm's answers, no cluster needed (a
comparison of Slurm's end time with the notice's, tried first, misread jobs that ended within
the notice's second: Slurm's times are whole seconds)."""

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


def _job(state: str, exit_code: int | None, end: float | None) -> SlurmJob:
    return SlurmJob("41", "j", state, "None", ("n1",), ((0, 1),), "h100", 2, 1, 100.0, end,
                    50.0, exit_code, 0, "optalloc", "root", "gpu")


@dataclass(frozen=True)
class Case:
    name: str
    at_apply: SlurmJob  # what Slurm says when the plan's preemption is applied
    after: SlurmJob  # what it says at the next observation
    notice: bool
    kind: EventKind


NOTICE = 1000.0
CASES = [
    Case("a job that completed before the plan was applied is recorded finished, no notice",
         _job("COMPLETED", 0, 990.0), _job("COMPLETED", 0, 990.0), False, EventKind.FINISHED),
    Case("a job that failed before the plan was applied is recorded failed, no notice",
         _job("FAILED", 1, 990.0), _job("FAILED", 1, 990.0), False, EventKind.FAILED),
    Case("a running job gets its notice and, exiting 0 on it, is requeued",
         _job("RUNNING", None, None), _job("COMPLETED", 0, 1000.0), True, EventKind.REQUEUED),
    Case("a running job cancelled at the notice's end is requeued",
         _job("RUNNING", None, None), _job("CANCELLED", 0, 1900.0), True, EventKind.REQUEUED),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_job_is_preempted_only_if_slurm_still_runs_it(case: Case, tmp_path):
    cli = RecordingCli()
    r = SlurmRunner(cli=cli, workdir=tmp_path)
    r.table.add_held("j", "41", True)
    r.table.set("j", state="running", run_start=100.0)
    assert r._preempt(r.table.row("j"), case.at_apply, 600.0, "PreemptedForFairShare",
                      NOTICE) is None
    notice = [["scancel", "--signal=TERM", "--batch", "41"]]
    assert cli.calls == (notice if case.notice else [])
    assert r.table.row("j").state == ("stopping" if case.notice else "running")
    (ev,) = r._reconcile(r.table.row("j"), case.after, 2000.0)
    assert (ev.job_id, ev.kind) == ("j", case.kind)
    # only a preempted resumable job is put back, held, for optalloc's next placement
    requeue = [["scontrol", "requeuehold", "41"]] if case.kind is EventKind.REQUEUED else []
    assert cli.calls == (notice if case.notice else []) + requeue
