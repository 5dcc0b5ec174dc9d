"""A running job restarted on its own type so that a start could take its GPUs stays where it
is when that start is undone (optalloc.plan.team_order.restarts_stay): a restart that no start
needs loses its work for nothing. A fresh draw of the plan property at stop 44, written out;
the whole plan asserted."""

from __future__ import annotations

from optalloc.epoch import run_epoch
from optalloc.types import Job, Node, ReasonCode

from test_epoch_toy import H, flat_org, running, snapshot

SPEED = {"b200": 1.5}


def _running(i, p, g, start, node, gpus, t="h100", types=()):
    return running(i, p, t, [(node, gpus)], start, 900.0, gpu_types=types, speedup=SPEED,
                   priority=0, submit_time=float(i[1:]))


def _queued(i, p, g, mr=900.0, prio=0, types=()):
    return Job(id=i, project=p, gpus=g, gpu_types=types, speedup=SPEED, min_runtime_s=mr,
               priority=prio, submit_time=float(i[1:]))


def test_a_restart_whose_taker_gave_way_for_the_team_order_stays_where_it_ran():
    """h100 nodes of 4 and 8 GPUs, two b200 nodes of 8. p0 runs four 1-GPU jobs on the
    4-GPU node (j4, j5 past their protection) and queues a 2-GPU h100-only job j8. The MIP
    starts j8 on j4's and j5's GPUs and restarts j5 on the other node; the placement undoes
    j8 (running jobs come first in the team's order) and restores j4. Before, j5 ran on
    elsewhere beside its own free GPU, told 'the GPUs where it ran are not free to it'; now
    it stays, and nothing is preempted."""
    nodes = [Node("h100-0", "h100", 4), Node("h100-1", "h100", 8), Node("b200-0", "b200", 8),
             Node("b200-1", "b200", 8)]
    jobs = [_running("j0", "p0", 1, 71400.0, "h100-0", (0,)),
            _running("j1", "p0", 1, 71400.0, "h100-0", (1,)),
            _queued("j2", "p0", 1, 0.0), _queued("j3", "p0", 2, 0.0),
            _running("j4", "p0", 1, 61200.0, "h100-0", (2,)),
            _running("j5", "p0", 1, 61200.0, "h100-0", (3,)),
            _running("j6", "p1", 1, 71400.0, "b200-0", (0,), "b200", ("b200",)),
            _queued("j7", "p1", 8), _queued("j8", "p0", 2, types=("h100",)),
            _queued("j9", "p0", 8), _queued("j10", "p1", 1, prio=1), _queued("j11", "p0", 2, 0.0),
            _queued("j12", "p1", 1), _running("j13", "p1", 4, 71400.0, "h100-1", (0, 1, 2, 3)),
            _queued("j14", "p0", 1, 0.0), _queued("j15", "p1", 2), _queued("j16", "p0", 1, 0.0),
            _queued("j17", "p1", 2, types=("h100",)),
            _running("j18", "p0", 1, 71400.0, "h100-1", (4,))]
    snap = snapshot(nodes, flat_org({"p0": 1.0, "p1": 1.0}), jobs, now=20 * H,
                    usage={"p0": 1.0, "p1": 0.0}, types=("h100", "b200"))
    plan = run_epoch(snap)
    placed = {p.job_id: (p.gpu_type, tuple((a.node, a.gpus) for a in p.nodes))
              for p in plan.placements}
    for j in ("j0", "j1", "j4", "j5", "j6", "j13", "j18"):  # every running job stays put
        job = snap.jobs[snap.job_index[j]]
        assert placed.pop(j) == (job.placement.gpu_type,
                                 tuple((a.node, a.gpus) for a in job.placement.nodes)), j
    # p0's unallocated work: since stop 56's step 3f (the MIP with the team's order held pair
    # by pair: j8 only while j4 and j5 run) the plan runs j3 (2 GPUs, submitted 3) where it ran
    # j16 (1 GPU, submitted 16) on b200, and j14 on h100: one GPU more busy, the rest equal.
    # Floors 14 each (28 GPUs, p1 ranked first: usage 0). Only b200-1 takes an 8-GPU job:
    # p1's j7 (p1 11 -> 14 of its floor, j17 left out) or p0's j9 (p0 7 -> 13): 3 floor GPUs
    # of p1 at twice the weight against 6 of p0, an exact tie of the tilt, which goes to the
    # better-ranked floor (README rule 1: "a floor up to twice as large loses"). Until stop
    # 60 the tie-break, added per GPU, summed to more for p0's 6 and j9 ran (j7 and j8
    # waited, floors 5321.25 against 5328.75 now); p0's j8 starts on h100-1's free GPUs
    assert {j: t for j, (t, _) in placed.items()} == {
        "j2": "b200", "j3": "b200", "j7": "b200", "j8": "h100", "j10": "b200", "j12": "b200",
        "j14": "h100", "j15": "b200"}
    assert plan.preemptions == ()
    assert {r.job_id: r.code for r in plan.pending} == {
        "j16": ReasonCode.UNALLOCATED_YIELDS, "j9": ReasonCode.WAITING_FOR_CAPACITY,
        "j17": ReasonCode.OVER_SHARE, "j11": ReasonCode.UNALLOCATED_YIELDS}
