"""A 512-GPU gang that the published greedy system starves for the whole horizon, and that the
optimizer's lookahead starts once the protected jobs on one set of nodes have expired (a short
simulation through the production epoch code, every plan checked against the invariants).

The cluster: 128 nodes of 8 GPUs shared by projects A and B (equal shares). B runs one 8-GPU
job per node, each protected for its whole 8 h run, started one every 225 s, and always has
the next one queued a minute before a node frees; so at every moment every node holds a
protected job and exactly one node frees at a time. A's 512-GPU gang (64 whole nodes, A's
whole share) arrives at 8.5 h. Greedy ranks it first but never finds 64 nodes free or
preemptible at once, so each freed node goes to B's next job; the ilp without lookahead does
the same. With lookahead the gang reserves the 64 nodes that free soonest, B's new jobs (8 h
holds) stay off them, and the gang starts when the last of them frees."""

from __future__ import annotations

import pytest

from optalloc.sim.engine import check_conservation, simulate
from optalloc.sim.scenario import Scenario
from optalloc.sim.metrics import compute_metrics
from optalloc.sim.policies import make_policy
from optalloc.types import Config, GpuType, Job, Node, OrgNode, Policy

H = 3600.0
NODES = 128
EPOCH = 600.0
HORIZON = 18 * H
GANG_AT = 8.5 * H


def starving(max_reservations: int) -> Scenario:
    nodes = tuple(Node(f"h100-{i:03d}", "h100", 8) for i in range(NODES))
    org = OrgNode("root", children=(OrgNode("A", share=1.0), OrgNode("B", share=1.0)))
    step = 8 * H / NODES
    jobs, k = [], 0
    while (sub := k * step - (60.0 if k >= NODES else 0.0)) < HORIZON:
        jobs.append(Job(f"b{k:04d}", "B", 8, min_runtime_s=8 * H, duration_s=8 * H,
                        submit_time=sub))
        k += 1
    jobs.append(Job("gang", "A", 512, min_runtime_s=8 * H, duration_s=4 * H,
                    submit_time=GANG_AT))
    cfg = Config((GpuType("h100"),), nodes, org, Policy(max_reservations=max_reservations))
    return Scenario("starving-gang", cfg, tuple(jobs), duration_s=HORIZON, epoch_s=EPOCH,
                       early_solve=False)


def _soonest_64_free(res) -> float:
    """When 64 nodes are free if none takes new work after the gang's arrival: the nodes free
    then, and the ends of the B runs in progress then, soonest first."""
    ends = sorted(iv.end for iv in res.intervals if iv.start <= GANG_AT < iv.end)
    free_then = NODES - len(ends)
    return GANG_AT if free_then >= 64 else ends[64 - free_then - 1]


@pytest.mark.parametrize("policy,lookahead,starts", [
    ("greedy", 2, False), ("ilp", 0, False), ("ilp", 2, True),
], ids=["greedy starves it", "ilp without lookahead starves it too",
        "ilp with lookahead starts it once its nodes' protections expire"])
def test_a_512_gpu_gang_starves_without_lookahead_and_starts_with_it(policy, lookahead, starts):
    res = simulate(starving(lookahead), make_policy(policy), check=True)
    check_conservation(res)
    gang = next(j for j in res.jobs if j.job_id == "gang")
    if not starts:
        assert gang.first_start is None
        return
    free = _soonest_64_free(res)  # it starts at the first decision once they are free
    assert free <= gang.first_start <= free + EPOCH
    assert gang.first_start - GANG_AT <= 8 * H  # at most one protection period
    assert gang.completed and gang.preemptions == 0
    m = compute_metrics(res)["reservations"]
    assert (m["made"], m["kept"], m["dropped"], m["open_at_end"]) == (1, 1, 0, 0)
    # while it waited, the nodes it reserved freed one by one and were held for it
    assert m["idle_gpu_h"] > 0
