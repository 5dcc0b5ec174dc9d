"""Jobs the current config no longer fits: held, so the epoch goes on for everyone else.

A queued job stays in the state DB after the config changes; if it names a project the org
tree no longer has (or that is no longer a leaf), or only gpu_types the config no longer has,
no snapshot can hold it. Such jobs are **held**: kept queued, left out of the snapshot, and
given a pending reason (`UnknownProject` / `UnknownGpuType`) until the config has what they
name again or they are cancelled. Unknown types among several allowed ones, and speedups for
unknown types, are just dropped from the snapshot's copy.

Running jobs are never stopped for a config change: one whose project was removed joins the
snapshot under a zero-share stand-in leaf of that name (so its GPUs stay taken and it yields
to anyone with a share), and one on a node or gpu_type the config no longer has is left out
of the snapshot (those GPUs are not in it either) and keeps running until it ends.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterable, Mapping

from optalloc.org import walk
from optalloc.types import Config, Job, OrgNode, PendingReason, ReasonCode, frozen_map


@dataclass(frozen=True)
class Holds:
    config: Config  # the config the snapshot is built from (plus stand-in leaves)
    jobs: tuple[Job, ...]  # the jobs the snapshot may hold
    held: tuple[PendingReason, ...]  # queued jobs left out, with their reason
    outside: tuple[Job, ...]  # running jobs left out (their node or gpu_type is gone)


def hold_unknown(config: Config, jobs: Iterable[Job]) -> Holds:
    names = {n.name: n for n, _, _ in walk(config.org)}
    leaves = {nm for nm, n in names.items() if n.is_leaf}
    types = {g.name for g in config.gpu_types}
    nodes = {n.name: n for n in config.nodes}
    keep: list[Job] = []
    held: list[PendingReason] = []
    outside: list[Job] = []
    stand_ins: dict[str, str] = {}  # removed project -> stand-in leaf name
    for job in jobs:
        if job.running:
            if not _placement_fits(job, types, nodes):
                outside.append(job)
                continue
            if job.project not in leaves:
                stand = stand_ins.setdefault(
                    job.project, job.project if job.project not in names else f"{job.project}~removed")
                job = dataclasses.replace(job, project=stand)
            keep.append(_known_types_only(job, types))
            continue
        if job.project not in leaves:
            what = ("is an inner node of the org tree now, not a project" if job.project in names
                    else "is not in the org tree any more")
            held.append(PendingReason(
                job.id, ReasonCode.UNKNOWN_PROJECT,
                f"held: its project {job.project!r} {what}; it waits until the config has the "
                "project again, or cancel it", frozen_map({"project": job.project})))
            continue
        if job.gpu_types and not set(job.gpu_types) & types:
            held.append(PendingReason(
                job.id, ReasonCode.UNKNOWN_GPU_TYPE,
                f"held: none of its gpu_types ({', '.join(job.gpu_types)}) is configured any "
                "more; it waits until the config has one of them again, or cancel it",
                frozen_map({"gpu_types": list(job.gpu_types)})))
            continue
        keep.append(_known_types_only(job, types))
    if stand_ins:
        extra = tuple(OrgNode(stand, share=0.0) for stand in stand_ins.values())
        root = dataclasses.replace(config.org, children=config.org.children + extra)
        config = dataclasses.replace(config, org=root)
    return Holds(config, tuple(keep), tuple(held), tuple(outside))


def hold_refused(holds: Holds, refused: Mapping[str, str], runner: str) -> Holds:
    """`holds` with the queued jobs the runner could never start as they are (Runner.refuses:
    job id -> why) held too: kept queued, left out of the snapshot (no plan gives them GPUs
    that would stay idle while a job that fits waits), pending with `RunnerRefused`. The
    runner is asked again every epoch, so a job starts once what it lacked is there."""
    if not refused:
        return holds
    keep = tuple(j for j in holds.jobs if j.running or j.id not in refused)
    held = tuple(PendingReason(
        j.id, ReasonCode.RUNNER_REFUSED,
        f"held: the {runner} runner cannot start it: {refused[j.id]}; the runner is asked "
        "again at every epoch (or cancel it)", frozen_map({"runner": runner}))
        for j in holds.jobs if not j.running and j.id in refused)
    return dataclasses.replace(holds, jobs=keep, held=holds.held + held)


def _placement_fits(job: Job, types: set[str], nodes: dict) -> bool:
    pl = job.placement
    if pl is None or pl.gpu_type not in types:
        return False
    for a in pl.nodes:
        node = nodes.get(a.node)
        # max(), not any() over a generator: every running job of every decision passes here
        if node is None or node.gpu_type != pl.gpu_type or (a.gpus and max(a.gpus) >= node.gpus):
            return False
    return True


def _known_types_only(job: Job, types: set[str]) -> Job:
    # the common case first, nothing built: every job of every decision passes here (10 days
    # of ITP cluster04 under ilp: 363,647 calls, 0.75 s of 2.0 s in hold_unknown, profiled)
    if (type(job.gpu_types) is tuple and types.issuperset(job.gpu_types)
            and types.issuperset(job.speedup)):
        return job
    allowed = tuple(t for t in job.gpu_types if t in types)
    speedup = {t: s for t, s in job.speedup.items() if t in types}
    if allowed == job.gpu_types and len(speedup) == len(job.speedup):
        return job
    return dataclasses.replace(job, gpu_types=allowed, speedup=frozen_map(speedup))
