"""Single-node jobs (and a gang's remainder) go to the tightest node that holds them (best fit),
the model's own packing only where best fit finds none. The model is indifferent to which of
several nodes with room a small job takes, so its packing broke open empty nodes while partly
used ones had room: whole nodes then were missing for gangs later (philly-teams, 7 days: a
16-GPU job waited 15 h with 30 v100 GPUs free and no node entirely free; the gang-heavy
scenario, 4 days: the worst project got 77.5% of what it was owed over the period, 90.3% with
best fit). Each case asserts the whole plan: where every new job starts."""

from __future__ import annotations

import pytest

from optalloc.epoch import run_epoch
from optalloc.types import Job

from test_epoch_toy import H, flat_org, nodes_of, running, snapshot


def _snap(sizes: list[int]):
    # n00 has 4 GPUs free, n01 6, n02 2, n03 is empty
    jobs = [running("r0", "A", "h100", [("n00", [0, 1, 2, 3])], start=9.9 * H),
            running("r1", "B", "h100", [("n01", [0, 1])], start=9.9 * H),
            running("r2", "B", "h100", [("n02", [0, 1, 2, 3, 4, 5])], start=9.9 * H)]
    jobs += [Job(f"q{i}", "AB"[i % 2], g, min_runtime_s=H, submit_time=float(i))
             for i, g in enumerate(sizes)]
    return snapshot(nodes_of(4, 8), flat_org({"A": 1, "B": 1}), jobs)


CASES = [
    ("a 4-GPU job fills the node with 4 free, not the empty one", [4, 2],
     {"q0": "n00", "q1": "n02"}),
    ("a 6-GPU job fills the node with 6 free, not the empty one", [6, 2],
     {"q0": "n01", "q1": "n02"}),
    ("five small jobs pack into the three partly used nodes", [1, 1, 2, 4, 4],
     {"q0": "n02", "q1": "n02", "q2": "n01", "q3": "n01", "q4": "n00"}),
]


@pytest.mark.parametrize("sizes,where", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_new_jobs_pack_into_partly_used_nodes_and_the_empty_node_stays_whole(sizes, where):
    snap = _snap(sizes)
    plan = run_epoch(snap)
    new = {p.job_id: [a.node for a in p.nodes] for p in plan.placements if p.job_id[0] == "q"}
    assert new == {j: [n] for j, n in where.items()}
    assert plan.preemptions == ()
    assert plan.pending == ()
    assert plan.report.status == "optimal"


def test_a_start_takes_free_gpus_before_those_a_preemption_frees_and_the_preempted_job_stays():
    # the solution preempts R (B's, past its protection) and starts S (A's 2-GPU job); S fits
    # on n01's 4 free GPUs, so R's 2 GPUs on n00, though the tighter fit, are left to R
    import numpy as np

    from optalloc.model.build import build_model
    from optalloc.plan.place import place

    jobs = [running("R", "B", "h100", [("n00", [0, 1])], start=5 * H),
            running("P0", "B", "h100", [("n00", [2, 3, 4, 5, 6, 7])], start=9.9 * H),
            running("P1", "A", "h100", [("n01", [0, 1, 2, 3])], start=9.9 * H),
            Job("S", "A", 2, min_runtime_s=H)]
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), jobs)
    em = build_model(snap)
    x = np.zeros(em.lm.n_vars)
    x[em.x[[c for c, j in enumerate(em.req.cand_job) if snap.jobs[j].id == "S"][0]]] = 1.0
    for i, j in enumerate(em.req.run_job):
        x[em.k[i]] = 0.0 if snap.jobs[j].id == "R" else 1.0
    placed = place(em, x, backfill=True)
    new = {snap.jobs[j].id: [a.node for a in p.nodes] for j, p in placed.placements.items()}
    assert new == {"S": ["n01"]}
    assert bool(placed.kept.all())  # R stays: nobody needed its GPUs
    assert placed.restored.sum() == 1
