"""Placement step 2's late pass for an unallocated start of the solution that fits only on
GPUs of running unallocated work the solution preempts (optalloc.plan.place)."""

from __future__ import annotations

import numpy as np

from optalloc.plan.fit import alloc, nodes_for


def on_preempted_unallocated(pool, em, c, reserved, advisory, kept, run_nodes):
    """An unallocated start of the solution that fits only on GPUs of running unallocated work
    the solution preempts (kept so far: that preemption is advisory, step 1): the jobs whose
    GPUs it takes leave, the others stay. Unallocated work never evicts other unallocated work
    on its own (NodePool), but the model may trade it, e.g. four idle-filling GPUs for a
    24-GPU gang on three empty nodes; without this such a start never placed (ITP cluster04,
    30 days: 163 unallocated starts of 132 MIP solutions, a 16-GPU job among them on 5
    days). Never for nothing (DESIGN.md section 8, rule 4): where the start holds no more
    GPUs than the running jobs whose GPUs it would take, they stay and it waits (the model,
    within its gap, is indifferent to such a swap: a random snapshot at stop 45 stopped p2's
    running 2-GPU job for its queued 2-GPU teammate ranked behind it, the same GPUs). Fill
    targets never justify it either: what runs stays (optalloc.model.fill). Returns the
    placement, or None (the pool unchanged)."""
    req = em.req
    j = int(req.cand_job[c])
    mine = np.flatnonzero(advisory & kept).tolist()
    for i in mine:
        pool.release(int(req.run_job[i]))
    nodes = nodes_for(pool, em, c, reserved, {}, evict=False)
    pl = None if nodes is None else alloc(pool, em, j, int(req.cand_type[c]), nodes)
    took = [i for i in mine if not all(pool.is_free(n, g) for n, g in run_nodes[i])]
    if pl is not None and int(em.snap.job_gpus[j]) <= sum(
            int(em.snap.job_gpus[req.run_job[i]]) for i in took):
        pool.release_placement(pl, j)  # no more GPUs busy: a swap for nothing
        pl, took = None, []
    for i in mine:
        if i not in took:
            for n, g in run_nodes[i]:
                pool.hold(n, g, int(req.run_job[i]))
        else:  # the start took some of its GPUs: it is preempted, as the solution says
            kept[i] = False
            for n, _ in run_nodes[i]:
                pool.freed[n] = True
    return pl
