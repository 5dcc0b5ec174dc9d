"""A runner that starts nothing: for dry runs, demos and the cron path before real runners.

It is not authoritative about what runs (`authoritative = False`): the state DB's view is kept.
Plans are taken as applied at once; a running job with a known `duration_s` is reported
finished once that much work has elapsed at its type's speed, so a sequence of `optalloc epoch
--now T` calls on a demo shows jobs completing.
"""

from __future__ import annotations

from typing import Mapping

from optalloc.runners.base import ApplyResult, EventKind, JobEvent, Observation, Runner
from optalloc.types import Job, Plan


class NoopRunner(Runner):
    name = "noop"
    authoritative = False  # observe() does not list running jobs; the store's view stands

    def __init__(self, jobs: Mapping[str, Job] | None = None):
        self._jobs = dict(jobs or {})

    def set_jobs(self, jobs: Mapping[str, Job]) -> None:
        """The jobs the store believes are running (the runner reports their completions)."""
        self._jobs = dict(jobs)

    def observe(self, now: float) -> Observation:
        events = []
        for job in self._jobs.values():
            if not job.running or job.duration_s is None or job.start_time is None:
                continue
            speed = job.speedup.get(job.placement.gpu_type, 1.0) if job.placement else 1.0
            end = job.start_time + job.duration_s / max(speed, 1e-9)
            if end <= now:
                events.append(
                    JobEvent(job.id, EventKind.FINISHED, end, job.placement, 0, "work done")
                )
        return Observation(now=now, events=tuple(sorted(events, key=lambda e: e.time)))

    def apply(self, plan: Plan, jobs: Mapping[str, Job], now: float) -> ApplyResult:
        running = {j for j, job in jobs.items() if job.running}
        started = tuple(p.job_id for p in plan.placements if p.job_id not in running)
        events = []
        for pre in plan.preemptions:
            job = jobs.get(pre.job_id)
            if job is None:
                continue
            kind = EventKind.REQUEUED if job.resumable else EventKind.PREEMPTED
            events.append(JobEvent(job.id, kind, now, job.placement, None, pre.message))
        return ApplyResult(started=started, events=tuple(events))
