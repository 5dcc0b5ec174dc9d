"""Unallocated work never displaces other unallocated work for nothing (DESIGN.md section 8,
rule 4), also where the model's solution trades it within the MIP's gap. Found by a helper's
random snapshot at stop 45: project p2 (no share) ran a 2-GPU h100 job; the MIP's solution
(0.0017% from the bound, inside the 1e-4 of an exact epoch) preempted it and started p2's
queued 2-GPU job of the same priority, submitted after it, and the placement let that start
take the running job's GPUs (`place._on_preempted_unallocated`): the same project, size and
GPUs, the running job first in its team's order, its work lost for nothing. Its message said
it yielded to work "that keeps more GPUs busy (2 GPUs where it ran 2)". The start now takes
such GPUs only where it holds more than every job it displaces together; else they stay and
it waits. A preempted job's message says what its unallocated takers gain, truly."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from optalloc.epoch import run_epoch
from optalloc.model.build import build_model
from optalloc.plan.holdings import Placed, as_solution
from optalloc.plan.place import place
from optalloc.plan.preemptions import preemptions
from optalloc.types import Job, NodeAlloc, Placement

from test_epoch_toy import H, flat_org, nodes_of, pending_codes, running, snapshot


def _snap(new: list[Job], org=None):
    """One 4-GPU h100 node: A's allocated 1-GPU job on GPU 0, Z's (no share) running 2-GPU job
    z_run on GPUs 1-2 (started 600 s ago, priority 0, first in Z's order), GPU 3 idle; `new`
    queued beside them."""
    jobs = [running("a_run", "A", "h100", [("n00", (0,))], start=9 * H, min_runtime_s=8 * H),
            running("z_run", "Z", "h100", [("n00", (1, 2))], start=10 * H - 600.0,
                    min_runtime_s=2 * H, submit_time=10.0)] + new
    return snapshot(nodes_of(1, 4), org or flat_org({"A": 1, "Z": 0}), jobs)


def _swap_x(em, stop: str, start: str) -> np.ndarray:
    """The model's point that keeps every running job but `stop` and starts `start` (on h100,
    no packing slot given): the solution the MIP returned within its gap."""
    snap, req = em.snap, em.req
    x = as_solution(em, place(em, None))
    i = int(np.flatnonzero(req.run_job == snap.job_index[stop])[0])
    c = int(np.flatnonzero(req.cand_job == snap.job_index[start])[0])
    x[em.k[i]] = 0.0
    x[em.x[c]] = 1.0
    return x


def _whole(em, placed):
    snap, req = em.snap, em.req
    where = {snap.jobs[j].id: tuple((a.node, a.gpus) for a in snap.jobs[j].placement.nodes)
             for j in req.run_job[placed.kept]}
    where.update({snap.jobs[j].id: tuple((a.node, a.gpus) for a in p.nodes)
                  for j, p in placed.placements.items()})
    return where


# (name, queued jobs, the start the solution makes, expected placements (job -> node, GPUs),
#  expected preemptions (job -> code, needed_by, message))
PLACEMENT_CASES = [
    ("same project, size and priority, ranked behind: z_run stays, z_new waits",
     [Job("z_new", "Z", 2, min_runtime_s=8 * H, submit_time=12.0)], "z_new",
     {"a_run": (("n00", (0,)),), "z_run": (("n00", (1, 2)),)},
     {}),
    ("another zero-share project's job of the same size: no more GPUs busy, it waits",
     [Job("y_new", "Y", 2, min_runtime_s=0.0, submit_time=12.0)], "y_new",
     {"a_run": (("n00", (0,)),), "z_run": (("n00", (1, 2)),)},
     {}),
    ("a 3-GPU start on z_run's GPUs and the idle one: 3 GPUs busy where 2 ran",
     [Job("z_big", "Z", 3, min_runtime_s=0.0, submit_time=12.0)], "z_big",
     {"a_run": (("n00", (0,)),), "z_big": (("n00", (1, 2, 3)),)},
     {"z_run": ("PreemptedUnallocated", ("z_big",),
                "unallocated work yields to unallocated work that keeps more GPUs busy "
                "(3 GPUs where it ran 2) (z_big)")}),
]


@pytest.mark.parametrize("name,new,start,where,pre", PLACEMENT_CASES,
                         ids=[c[0] for c in PLACEMENT_CASES])
def test_the_placement_of_a_solution_that_preempts_unallocated_work(name, new, start, where,
                                                                     pre):
    org = flat_org({"A": 1, "Y": 0, "Z": 0}) if start == "y_new" else None
    em = build_model(_snap(new, org))
    placed = place(em, _swap_x(em, "z_run", start))
    assert _whole(em, placed) == where
    got = {p.job_id: (p.code.value, p.needed_by, p.message)
           for p in preemptions(em, placed, 0.0)}
    assert got == pre
    assert em.lm.violation(as_solution(em, placed)) <= 1e-6  # a point of the model


@pytest.mark.parametrize("new,pending", [
    ([Job("z_new", "Z", 2, min_runtime_s=8 * H, submit_time=12.0)], {"z_new":
                                                                      "UnallocatedYields"}),
    ([Job("z_big", "Z", 3, min_runtime_s=0.0, submit_time=12.0)], {"z_big": "UnallocatedYields"}),
])
def test_the_epoch_keeps_the_running_unallocated_job(new, pending):
    """The whole plan of the epoch: z_run keeps its GPUs, nothing is preempted (the 3-GPU
    start would preempt 2 GPUs of work for 1 idle one: the model keeps what runs, worth more
    per GPU than any queued unallocated job)."""
    snap = _snap(new)
    plan = run_epoch(snap)
    assert {p.job_id: tuple((a.node, a.gpus) for a in p.nodes) for p in plan.placements} == {
        "a_run": (("n00", (0,)),), "z_run": (("n00", (1, 2)),)}
    assert plan.preemptions == ()
    assert pending_codes(plan) == pending


def _hand_placed(em, stop: str, start: str, gpus) -> Placed:
    """A plan (as greedy's might be) that stops `stop` and starts `start` on `gpus` of n00."""
    snap, req = em.snap, em.req
    kept = req.run_job != snap.job_index[stop]
    c = int(np.flatnonzero(req.cand_job == snap.job_index[start])[0])
    started = np.zeros(len(req.cand_job), bool)
    started[c] = True
    pl = Placement(start, "h100", (NodeAlloc("n00", tuple(gpus)),), allocated=False)
    return Placed(started, kept, {snap.job_index[start]: pl})


@pytest.mark.parametrize("org,new,start,fill,message", [
    (None, [Job("z_new", "Z", 2, min_runtime_s=0.0, submit_time=12.0)], "z_new", None,
     "unallocated work yields to unallocated work the plan starts on its GPUs (2 GPUs where "
     "it ran 2) (z_new)"),
    (None, [Job("z_hi", "Z", 2, min_runtime_s=0.0, priority=1, submit_time=12.0)], "z_hi",
     None, "unallocated work yields to a higher-priority job of project Z (priority 1 > 0; "
           "2 GPUs where it ran 2) (z_hi)"),
    (flat_org({"A": 1, "Y": 0, "Z": 0}),
     [Job("y_new", "Y", 2, min_runtime_s=0.0, submit_time=12.0),
      Job("z_more", "Z", 1, min_runtime_s=0.0, submit_time=13.0)], "y_new", {"Y": 2, "Z": 0},
     "unallocated work yields to unallocated work of a project below its share of the idle "
     "GPUs (Y runs 2 of 2 with it, Z 0 of 0 without; 2 GPUs where it ran 2) (y_new)"),
])
def test_a_preempted_unallocated_jobs_message_says_what_its_takers_gain(org, new, start,
                                                                         fill, message):
    """Never "keeps more GPUs busy" where the takers hold no more GPUs than they displace
    (the fault: "2 GPUs where it ran 2"); the placement no longer makes such a plan, but any
    plan's message is true: the fill share, the team's order, or only what the plan does."""
    em = build_model(_snap(new, org))
    if fill is not None:
        em = replace(em, fill=np.array([float(fill.get(n, 0)) for n in em.snap.org.names]))
    placed = _hand_placed(em, "z_run", start, (1, 2))
    got = [(p.job_id, p.code.value, p.needed_by, p.message)
           for p in preemptions(em, placed, 0.0)]
    assert got == [("z_run", "PreemptedUnallocated", (start,), message)]


def test_the_more_gpus_message_counts_every_job_the_takers_displace():
    """Z's running 2-GPU and 1-GPU jobs give way to one 3-GPU start: 3 GPUs where 3 ran, no
    gain (before, z_run's message read "3 GPUs where it ran 2": more GPUs busy, falsely)."""
    jobs = [running("z_two", "Z", "h100", [("n00", (3,))], start=10 * H - 600.0,
                    min_runtime_s=0.0, submit_time=11.0),
            Job("z_big", "Z", 3, min_runtime_s=0.0, submit_time=12.0)]
    em = build_model(_snap(jobs))
    snap, req = em.snap, em.req
    kept = ~np.isin(req.run_job, [snap.job_index["z_run"], snap.job_index["z_two"]])
    placed = _hand_placed(em, "z_run", "z_big", (1, 2, 3))
    placed = Placed(placed.started, kept, placed.placements)
    got = {p.job_id: p.message for p in preemptions(em, placed, 0.0)}
    assert got == {
        "z_run": "unallocated work yields to unallocated work the plan starts on its GPUs "
                 "(3 GPUs where it and 1 other job ran 3) (z_big)",
        "z_two": "unallocated work yields to unallocated work the plan starts on its GPUs "
                 "(3 GPUs where it and 1 other job ran 3) (z_big)"}
