"""The team's order over scattered places (DESIGN.md rule 3; optalloc.plan.repack_order, step
4c of the epoch): a waiting job whose project's lower-priority starts hold single GPUs on
several nodes, none with room for it, starts once another queued start on one of those
nodes moves to a GPU they freed; the move keeps that start on its type, so nothing the model
counts changes. Found on the bench's 1,024-GPU epoch (seed 6): P1-3's priority-1 2-GPU job
waited while its priority-0 1 + 1 gang and 1-GPU job took three single h100 GPUs, told only
that its program held its b200 target (since stop 55 seed 6's plan holds other such cases)."""

from __future__ import annotations

import numpy as np

from optalloc.bench.instances import scale_instance
from optalloc.epoch import run_epoch
from optalloc.epoch_status import repack_team_order
from optalloc.model.build import build_model
from optalloc.plan.outcome import placed_outcome
from optalloc.plan.reasons import pending_reasons
from optalloc.plan.score import plan_score
from optalloc.types import Job, Node, ReasonCode

from test_epoch_toy import H, flat_org, running, snapshot

NOW = 10 * H


def _scattered():
    """3 x 4 GPUs, B's protected jobs leave 2 + 1 + 1 free; A's target is 2. A's priority-1
    2-GPU job (hi) and priority-0 1 + 1 gang (lo), B's 1-GPU job (b1). The plan the test
    starts from runs lo and b1: lo takes the single GPUs of n1 and n2, b1 one of n0's two."""
    jobs = [running("r0", "B", "h100", [("n0", range(2))], NOW - H, 8 * H),
            running("r1", "B", "h100", [("n1", range(3))], NOW - H, 8 * H),
            running("r2", "B", "h100", [("n2", range(3))], NOW - H, 8 * H),
            Job("hi", "A", 2, min_runtime_s=8 * H, priority=1, submit_time=3.0),
            Job("lo", "A", 2, gpus_per_node=1, min_runtime_s=8 * H, priority=0,
                submit_time=1.0),
            Job("b1", "B", 1, min_runtime_s=8 * H, submit_time=2.0)]
    snap = snapshot([Node(f"n{i}", "h100", 4) for i in range(3)], flat_org({"A": 1, "B": 5}),
                    jobs)
    return (snap,) + _lo_and_b1(snap)


def _lo_and_b1(snap):
    """(model, outcome): the solution that keeps every running job and starts lo and b1,
    placed."""
    em = build_model(snap)
    x = np.zeros(em.lm.n_vars)
    x[em.k] = 1.0
    for c in np.flatnonzero(np.isin(em.req.cand_job, [snap.job_index["lo"],
                                                       snap.job_index["b1"]])):
        x[em.x[c]] = 1.0
    return em, placed_outcome(em, x, "mip", backend="highs", status="optimal",
                              message="a plan")


def _starts(snap, placed) -> dict:
    return {snap.jobs[j].id: [(a.node, a.gpus) for a in p.nodes]
            for j, p in placed.placements.items()}


def test_a_waiting_job_is_told_of_its_teams_lower_priority_starts_on_the_type_they_use():
    """The plan as placed: hi waits beside lo, and its reason names lo's start on h100 (it
    does not fit in lo's places: one GPU on each of two nodes)."""
    snap, em, out = _scattered()
    assert _starts(snap, out.placed) == {"lo": [("n1", (3,)), ("n2", (3,))],
                                         "b1": [("n0", (2,))]}
    why = {r.job_id: (r.code, r.message) for r in pending_reasons(em, out.placed, None)}
    code, msg = why["hi"]
    assert code is ReasonCode.WAITING_FOR_CAPACITY or code is ReasonCode.OVER_SHARE
    assert msg.endswith(
        "; 2 of them run 1 of its jobs with a lower priority than 1 that start on h100 this "
        "epoch (lo): it does not fit in their places, alone or together with the free GPUs "
        "beside them, or a job ahead of it in its team's order waits"), msg


def test_a_higher_priority_job_takes_scattered_lower_places_with_another_start_moved():
    """Step 4c: b1 moves from n0 to a GPU lo freed, hi takes n0's two GPUs, lo waits (A holds
    2 GPUs either way); the plan scores better by the teams' order, the floors and targets
    the same."""
    snap, em, out = _scattered()
    before = out.score
    alt = repack_team_order(em, out, snap.policy.solver)
    assert _starts(snap, alt.placed) == {"hi": [("n0", (2, 3))], "b1": [("n1", (3,))]}
    assert alt.score[:2] == before[:2] and alt.score[2] > before[2]
    assert "1 job (hi) started in the places of lower-priority starts of its team" in alt.message


def test_it_is_not_done_where_its_project_would_hold_fewer_gpus():
    """4 x 4 GPUs, B's protected jobs leave 2 + 1 + 1 + 1 free; A's target is 3. The plan
    runs A's priority-0 1 + 1 + 1 gang (lo) on n1-n3 and B's b1 on n0. hi (2 GPUs) would fit
    n0 with b1 moved, but lo cannot start again on the one GPU left: A would hold 2 GPUs of
    the 3 the plan gave it, floor or target GPUs, which the scheme's order puts first. The
    plan stays."""
    jobs = [running("r0", "B", "h100", [("n0", range(2))], NOW - H, 8 * H)]
    jobs += [running(f"r{i}", "B", "h100", [(f"n{i}", range(3))], NOW - H, 8 * H)
             for i in range(1, 4)]
    jobs += [Job("hi", "A", 2, min_runtime_s=8 * H, priority=1, submit_time=3.0),
             Job("lo", "A", 3, gpus_per_node=1, min_runtime_s=8 * H, priority=0,
                 submit_time=1.0),
             Job("b1", "B", 1, min_runtime_s=8 * H, submit_time=2.0)]
    snap = snapshot([Node(f"n{i}", "h100", 4) for i in range(4)], flat_org({"A": 3, "B": 13}),
                    jobs)
    em, out = _lo_and_b1(snap)
    assert sorted(_starts(snap, out.placed)) == ["b1", "lo"]
    assert repack_team_order(em, out, snap.policy.solver) is out


def test_on_the_1024_gpu_bench_epoch_seed_6_the_priority_2_jobs_take_their_teams_h100_places():
    """The bench's seed 6: P1-4's priority-2 any-type 2-GPU job j01939 waited while its
    priority-1 jobs j00290 (h100 only) and j00155 (a debug job) started on single h100 GPUs,
    GPU 7 of h100-010 and GPU 5 of h100-014, at teams' order 830.5. Now P3-2's start j00110
    moves from GPU 5 of h100-010 to the one j00155 freed, j01939 takes h100-010's two, and
    j00290 and j00155 wait; P3-1's priority-2 j00648 likewise starts in the places of its
    priority-1 j00463 and j00859, single GPUs of h100-019 and h100-018, with P2-0's start
    j00566 moved (teams' order 832.5); the floors and targets are those of before. (Until
    stop 55 the case was P1-3's priority-1 j01310 in the places of its priority-0 j00352 and
    j00242, teams' order 812.5 -> 822.5: the same-priority type-order links,
    optalloc.model.type_order, moved the plan, and all three wait in it now.)"""
    snap = scale_instance("M", 6)
    plan = run_epoch(snap)
    on = {p.job_id: (p.gpu_type, [(a.node, a.gpus) for a in p.nodes]) for p in plan.placements}
    assert on.get("j01939") == ("h100", [("h100-010", (5, 7))])
    assert on.get("j00110") == ("h100", [("h100-014", (5,))])
    assert on.get("j00648", ("",))[0] == "h100"
    assert not {"j00290", "j00155", "j00463", "j00859"} & set(on)
    score = plan_score(snap, plan)
    assert score[:2] == (4342279.944047, 577.5) and score[2] >= 832.5
