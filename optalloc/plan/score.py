"""A plan scored on the scheme's own order of goals, lexicographically (DESIGN.md section 8):

    (floors met, fair-share targets met, teams' own order, allocated GPUs, fill shares met,
     GPUs busy, teams' order of the running work kept, -work lost to preemption)

floors met = sum over org nodes and types of the floor GPUs met, each of the K segments of a
floor weighted omega_k (halving: a project's first quarter counts more than anyone's last, so
a shared shortfall beats one dumped on a single project); targets met = GPUs above the floor up
to the target, weighted by level (an ancestor's target first); teams' own order = allocated
GPUs weighted by their priority's place in their project (1 for its highest, 0 for its
lowest); allocated GPUs = every GPU of allocated work (rule 4: unallocated work yields to
allocated demand, whatever its priority in its project); fill shares met = each
project's unallocated GPUs up to its fill target (the idle GPUs shared among unallocated work,
rule 2, optalloc.model.fill; the epoch sets the targets from the greedy plan's idle GPUs,
`EpochModel.with_fill`): before GPUs busy, so a project whose jobs pack tighter does not take
the idle GPUs of one that ties with it (A's 4-GPU and B's 3-GPU jobs on 2 x 8 GPUs: 8 + 6,
not 16 + 0), as the objective already valued them; GPUs busy counts allocated and
unallocated work; teams' order of the running work kept = allocated GPUs of running jobs kept
where they run or moved (since stop 59: a move goes on running), each weighted by its place in its team's order (optalloc.model.order.team_place:
priority, then submit time), so of two plans equal in all above, the one whose team stops its
later submitted job of a priority wins (rule 3: a team that must give up GPUs stops its latest
submitted job, although an earlier one would lose less work; greedy does so too), and the work
lost decides only between jobs submitted at the same time. Only kept running work: which
queued jobs start is the model's to weigh (the debug allowance, a reservation's backfill),
and a tier over starts overrode it (a 15-minute debug job passes its team's earlier 8-hour job
beyond its target; a reserved node backfilled with a debug job, not a restart); work lost =
GPU-seconds since the last checkpoint of every preempted job.
Used by the dominance property (the optimizer never loses to the greedy baseline) and by
benchmarks; it reads any policy's Plan.
"""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel, build_model
from optalloc.model.constraints.fairshare import share_tiers
from optalloc.model.constraints.fill import fill_met
from optalloc.model.order import priority_class, team_place
from optalloc.snapshot import Snapshot
from optalloc.types import Plan


def score(em: EpochModel, jobs: np.ndarray, types: np.ndarray, preempted: np.ndarray) -> tuple:
    """The score of a plan that runs jobs[i] on types[i] (kept and started) and preempts the
    jobs `preempted` (moves included)."""
    snap = em.snap
    jobs, types = np.asarray(jobs, np.int64), np.asarray(types, np.int64)
    O, T = snap.org.n, len(snap.gpu_types)
    t1 = snap.job_tier1[jobs, types] if len(jobs) else np.zeros(0, bool)
    leaf = np.zeros((O, T))
    np.add.at(leaf, (snap.job_project[jobs[t1]], types[t1]), snap.job_gpus[jobs[t1]])
    got = snap.org.membership().astype(float) @ leaf
    if em.res.held:  # a waiting reservation counts as held (as in the model's share rows)
        got += em.res.holding(snap, jobs)
    # the share tiers as the model values them (a floor held by work that can move yields)
    floors, targets = share_tiers(em.imp, em.tg, got)
    pc, npc = priority_class(snap)
    prio = 1.0 - pc / np.maximum(npc - 1, 1)
    order = float((snap.job_gpus[jobs[t1]] * prio[jobs[t1]]).sum())
    # allocated GPUs: the order above weighs a project's lowest priority 0, so without them
    # its allocated work tied with unallocated work and the work lost kept the unallocated
    # job on GPUs it wanted (rule 4: unallocated work yields to allocated demand at once)
    alloc = int(snap.job_gpus[jobs[t1]].sum())
    fill = fill_met(snap, em.fill, jobs, types)
    busy = int(snap.job_gpus[jobs].sum())
    pre = np.asarray(preempted, np.int64)
    # running work that goes on: kept where it runs, or moved (restarted on another type or
    # node at once: it is not given up, so of two twins losing a type the later submitted
    # stops and the earlier moves; an outside judge, stop 59)
    stay = jobs[t1 & snap.job_running[jobs]]
    kept_in_team = float((snap.job_gpus[stay] * team_place(snap)[stay]).sum())
    churn = float((em.imp.lost_s[pre] * snap.job_gpus[pre]).sum())
    return (round(floors, 6), round(targets, 6), round(order, 6), alloc, round(fill, 6), busy,
            round(kept_in_team, 6), -round(churn, 3))


def placed_score(em: EpochModel, placed) -> tuple:
    """The score of a placement step's outcome (optalloc.plan.place.Placed)."""
    from optalloc.plan.holdings import plan_pairs

    req = em.req
    jobs, types = plan_pairs(em, placed)
    pre = np.concatenate([req.run_job[~placed.kept], np.flatnonzero(req.displaced)])
    return score(em, jobs, types, pre)


def plan_score(snap: Snapshot, plan: Plan, em: EpochModel | None = None) -> tuple:
    """The score of any policy's Plan."""
    em = build_model(snap) if em is None else em
    tidx = {n: i for i, n in enumerate(snap.type_names)}
    jobs = [snap.job_index[p.job_id] for p in plan.placements]
    types = [tidx[p.gpu_type] for p in plan.placements]
    pre = [snap.job_index[p.job_id] for p in plan.preemptions]
    return score(em, jobs, types, pre)
