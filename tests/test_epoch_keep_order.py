"""A team's order holds for running jobs too (DESIGN.md rule 3, the model's `keep_order`
rows): a job of a project never takes the GPUs of a running job its team ranks above it (a
strictly higher declared priority, past its protection) for more of the project's floor or
target, alone or with others. Before, A's queued 16-GPU priority-0 job
preempted its running 8-GPU priority-2 job (16 floor GPUs against 8); greedy keeps it. Each
case asserts the whole outcome; the property checks every plan over random snapshots."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings

from optalloc.epoch import run_epoch
from optalloc.model.build import build_model
from optalloc.model.keep_displaced import gave_way
from optalloc.sim.invariants import check_plan
from optalloc.sim.policies.greedy import GreedyScheduler
from optalloc.types import Job
from tests.test_epoch_properties import instances
from tests.test_epoch_toy import H, flat_org, nodes_of, pending_codes, queued, running, snapshot


def _outcome(plan):
    return (sorted(p.job_id for p in plan.placements), sorted(p.job_id for p in plan.preemptions),
            pending_codes(plan))


def test_a_running_job_keeps_its_gpus_against_a_larger_lower_priority_job_of_its_project():
    """3 x 8 GPUs, A (share 2, lowest ratio) runs R (priority 2, 8 GPUs, past its protection)
    and queues Q (16 GPUs, priority 0); B (share 1) wants 8-GPU jobs. R stays. Q in R's
    place would meet A's floor (16) and leave B its own (8); with R kept, A's 16 floor GPUs
    (Q) or B's 8 and A's 8 leave 8 floor GPUs unmet either way, and the lower usage ratio
    wins the tie: A's Q starts, as under greedy. Before, R was preempted for Q."""
    r = running("R", "A", "h100", [("n00", range(8))], start=5 * H, priority=2)
    jobs = [r, Job("Q", "A", 16, min_runtime_s=H)] + queued("B", 2, 8)
    snap = snapshot(nodes_of(3, 8), flat_org({"A": 2, "B": 1}), jobs, usage={"A": 0.1, "B": 1.0})
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert _outcome(plan) == (["Q", "R"], [], {"B00": "WaitingForCapacity",
                                               "B01": "WaitingForCapacity"})
    greedy = GreedyScheduler().decide(snap)
    assert sorted(p.job_id for p in greedy.placements) == ["Q", "R"]


def test_a_running_per_node_gang_is_not_preempted_for_a_lower_priority_whole_node_gang():
    """A alone on 2 x 8 GPUs: its running priority-1 gang G (4 + 4, past its protection) and
    its queued priority-0 16-GPU gang W, which needs both nodes whole. G stays."""
    g = running("G", "A", "h100", [("n00", range(4)), ("n01", range(4))], start=5 * H,
                priority=1, gpus_per_node=4)
    jobs = [g, Job("W", "A", 16, gpus_per_node=8, min_runtime_s=H)]
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1}), jobs)
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert _outcome(plan) == (["G"], [], {"W": "LowerPriorityInProject"})


def test_a_lower_priority_job_that_fits_beside_the_running_one_still_starts():
    """A alone on 2 x 8 GPUs: R (priority 2, 8 GPUs) runs and Q (priority 0, 8 GPUs) waits:
    Q starts on the free node, R is not touched."""
    r = running("R", "A", "h100", [("n00", range(8))], start=5 * H, priority=2)
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1}), [r, Job("Q", "A", 8, min_runtime_s=H)])
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert _outcome(plan) == (["Q", "R"], [], {})


def test_a_higher_priority_waiting_job_still_takes_a_running_lower_priority_ones_place():
    """The other direction is the team's order too: A alone on 8 GPUs, its running priority-0
    job L (8 GPUs, past its protection) and its waiting priority-1 job P of the same size: P
    takes L's place."""
    low = running("L", "A", "h100", [("n00", range(8))], start=5 * H, priority=0)
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1}),
                    [low, Job("P", "A", 8, min_runtime_s=H, priority=1)])
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert _outcome(plan) == (["P"], ["L"], {})


def test_several_smaller_lower_priority_jobs_do_not_take_a_running_jobs_place_together():
    """A alone on 8 GPUs: R (priority 2, 6 GPUs, past its protection) runs, Q0 and Q1
    (priority 0, 4 GPUs each) wait. Q0 and Q1 would meet 8 of A's floor where R meets 6; R
    stays, as under greedy (found by a hand-written case after the first keep_order rows,
    which linked only a job at least as large as the running one)."""
    r = running("R", "A", "h100", [("n00", range(6))], start=5 * H, priority=2)
    jobs = [r, Job("Q0", "A", 4, min_runtime_s=H, submit_time=0.0),
            Job("Q1", "A", 4, min_runtime_s=H, submit_time=1.0)]
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1}), jobs)
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert _outcome(plan) == (["R"], [], {"Q0": "LowerPriorityInProject",
                                          "Q1": "LowerPriorityInProject"})


def test_a_running_gang_keeps_its_nodes_against_two_lower_priority_whole_node_jobs():
    g = running("G", "A", "h100", [("n00", range(4)), ("n01", range(4))], start=5 * H,
                priority=2, gpus_per_node=4)
    jobs = [g, Job("Q0", "A", 8, min_runtime_s=H, submit_time=0.0),
            Job("Q1", "A", 8, min_runtime_s=H, submit_time=1.0)]
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1}), jobs)
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert _outcome(plan)[:2] == (["G"], [])


def test_a_lower_priority_job_does_not_move_onto_a_running_higher_priority_jobs_gpus():
    """8 h100 + 8 b200, one budget over both: A runs R (priority 2, 4 h100 GPUs) and L
    (priority 0, 8 b200 GPUs), both past their protection; B wants b200. L is preempted for
    B, as under greedy. Before, L moved onto h100 and R was preempted for it (a move was no
    start the keep_order rows linked)."""
    from tests.test_epoch_toy import queued

    nodes = nodes_of(1, 8, "h100") + nodes_of(1, 8, "b200", prefix="m")
    r = running("R", "A", "h100", [("n00", range(4))], start=5 * H, priority=2)
    low = running("L", "A", "b200", [("m00", range(8))], start=5 * H, priority=0)
    snap = snapshot(nodes, flat_org({"A": 1, "B": 1}), [r, low] + queued("B", 1, 8, gpu_types=("b200",)),
                    usage={"A": 0.5, "B": 0.5}, types=("h100", "b200"))
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert sorted((p.job_id, p.gpu_type) for p in plan.placements) == [("B00", "b200"),
                                                                       ("R", "h100")]
    assert [p.job_id for p in plan.preemptions] == ["L"]


def _plan_arrays(em, snap, plan):
    """(started (C,), kept (K,)) of the model's candidates and running jobs in the plan: a
    running job kept where it runs; a queued job's start, or a running job's restart or move
    (a placement other than its own), on its type."""
    req = em.req
    on = {p.job_id: p for p in plan.placements}
    kept = np.array([snap.jobs[j].id in on and on[snap.jobs[j].id].nodes
                     == snap.jobs[j].placement.nodes for j in req.run_job.tolist()], bool)
    started = np.zeros(len(req.cand_job), bool)
    for c, (j, t) in enumerate(zip(req.cand_job.tolist(), req.cand_type.tolist())):
        job = snap.jobs[j]
        p = on.get(job.id)
        if p is None or p.gpu_type != snap.type_names[t]:
            continue
        if not job.running:
            started[c] = True
        elif p.nodes != job.placement.nodes and (req.cand_restart[c] or req.cand_move[c]):
            started[c] = True
    return started, kept


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_no_plan_starts_a_job_below_a_running_one_of_its_team_that_it_preempts(snap):
    """Every `keep_order` link of the model holds in the epoch's plan: a start on the linked
    type only while the running job runs (kept where it is, or moved), or, on the running
    job's own type, where it gave way there (it does not fit beside the allocated work the
    plan runs there but its team's jobs below it: optalloc.model.keep_displaced, the rule
    itself, not a stand-in); a start is a queued job's, or a running job's move or restart
    (not its keep: a placement other than its own). Whose GPUs the start then takes is the
    team_order property's (optalloc.sim.invariants.team_order_breaks)."""
    plan = run_epoch(snap)
    em = build_model(snap)
    req = em.req
    on = {p.job_id: p.gpu_type for p in plan.placements}
    new = {p.job_id for p in plan.placements
           if p.nodes != getattr(snap.jobs[snap.job_index[p.job_id]].placement, "nodes", None)}
    started, kept = _plan_arrays(em, snap, plan)
    starts = {int(req.cand_job[c]): next(p for p in plan.placements
                                         if p.job_id == snap.jobs[int(req.cand_job[c])].id)
              for c in np.flatnonzero(started).tolist()}
    gave = gave_way(em, em.keep_i, em.keep_c, started, kept, starts)  # node by node too
    for i, c, g in zip(em.keep_i.tolist(), em.keep_c.tolist(), gave.tolist()):
        b, t = snap.jobs[int(req.cand_job[c])], snap.type_names[int(req.cand_type[c])]
        a = snap.jobs[int(req.run_job[i])]
        if on.get(b.id) == t and b.id in new and not g:
            assert a.id in on, f"{b.id} started on {t} while {a.id} was preempted"
        if g and on.get(b.id) == t and b.id in new and a.id not in on:
            assert plan.report.status != "optimal"  # beyond the model's bound


def _b_run_gives_way(resumable: bool) -> None:
    """Three 8-GPU nodes: B's priority-1 6-GPU job B_run (past its protection) on n00, C's
    protected jobs of 4 and 5 GPUs on n01 and n02. A (ranked first) queues an 8-GPU job A_q,
    which fits only in B_run's place; B_run fits in none of the 7 free GPUs (4 + 3), so it
    was stopped for A, not for B's priority-0 1-GPU job B_small, which starts in them at
    once, as under greedy. Until stop 45 the test counted the type's GPUs (17 of 24 run
    without B_run: it 'fit'), and B_small waited an epoch behind B_run; it is judged node by
    node now (optalloc.model.keep_displaced._no_room_on_nodes,
    tests/test_epoch_gave_way_fill.py). The whole outcome is asserted, greedy's too."""
    jobs = [running("B_run", "B", "h100", [("n00", range(6))], start=8 * H, priority=1,
                    resumable=resumable),
            running("C4", "C", "h100", [("n01", range(4))], start=9.5 * H),
            running("C5", "C", "h100", [("n02", range(5))], start=9.5 * H),
            Job("A_q", "A", 8, min_runtime_s=H, submit_time=1.0),
            Job("B_small", "B", 1, min_runtime_s=H, priority=0, submit_time=2.0)]
    snap = snapshot(nodes_of(3, 8), flat_org({"A": 1, "B": 1, "C": 1}), jobs,
                    usage={"A": 0.5, "B": 3.0, "C": 1.0})
    plan, greedy = run_epoch(snap), GreedyScheduler().decide(snap)
    check_plan(snap, plan)
    assert _outcome(plan) == (["A_q", "B_small", "C4", "C5"], ["B_run"], {})
    assert _outcome(greedy) == _outcome(plan)
    assert plan.report.status == "feasible"  # the model's rows forbid it: no bound for it


def test_a_job_behind_its_preempted_teammate_fills_the_gpus_its_shape_cannot_use():
    """B_run gives way to A's job (A ranks first) and cannot restart in the GPUs left (found
    by a hand-written case at stop 35; until stop 45 B_small waited, told that B_run "lost
    its h100 GPUs this epoch and waits")."""
    _b_run_gives_way(resumable=True)


def test_a_job_behind_a_stopped_teammate_that_is_not_resumable_fills_what_is_left():
    """The same, B_run not resumable: stopped, it ends (until stop 45 B_small waited, told
    the team's order kept it off h100 this epoch; a helper's case at stop 36)."""
    _b_run_gives_way(resumable=False)


def test_a_lower_priority_job_fills_what_is_left_when_its_teammate_gives_way_to_another():
    """One 8-GPU node: B's priority-1 6-GPU job B_run (past its protection) gives way to A's
    6-GPU job (A ranks first) and cannot restart in the 2 GPUs left; B's priority-0 1-GPU
    job takes one of them at once, as under greedy: B_run does not fit beside A's job, so it
    was stopped for A, not for B_small (keep_displaced). Before, B_small waited an epoch
    behind it."""
    jobs = [running("B_run", "B", "h100", [("n00", range(6))], start=8 * H, priority=1),
            Job("A_q", "A", 6, min_runtime_s=H, submit_time=1.0),
            Job("B_small", "B", 1, min_runtime_s=H, priority=0, submit_time=2.0)]
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1, "B": 1}), jobs,
                    usage={"A": 1.0, "B": 3.0})
    plan, greedy = run_epoch(snap), GreedyScheduler().decide(snap)
    check_plan(snap, plan)
    assert _outcome(plan) == (["A_q", "B_small"], ["B_run"], {})
    assert _outcome(greedy) == (["A_q", "B_small"], ["B_run"], {})


def test_a_lower_priority_job_never_takes_the_type_its_displaced_teammate_could_move_to():
    """h0 (8 h100): A's protected 7-GPU job RA and B's priority-1 1-GPU job R (past its
    protection); a0 (8 a100) empty. A queues QA (1 GPU, h100 only), B its priority-0 8-GPU
    job Lo (any type). Before, R gave way on h100 to QA and was requeued while Lo took the
    a100 node R could move to (found by a helper's random search, seed 101). Now Lo starts on
    a100 only while R runs: with B first in the Fair-Tree order (ratio 0.2 against 1.0) R
    stays and Lo starts beside it, as under greedy; with the ratios tied, the same."""
    from optalloc.types import Node

    nodes = [Node("h0", "h100", 8), Node("a0", "a100", 8)]
    jobs = [running("RA", "A", "h100", [("h0", range(7))], start=9.5 * H),
            Job("QA", "A", 1, min_runtime_s=H, submit_time=0.0, gpu_types=("h100",)),
            running("R", "B", "h100", [("h0", [7])], start=7 * H, priority=1),
            Job("Lo", "B", 8, min_runtime_s=H, priority=0, submit_time=0.0)]
    for usage in ({"A": 1.0, "B": 0.2}, {"A": 0.5, "B": 0.5}):
        snap = snapshot(nodes, flat_org({"A": 1, "B": 1}), jobs, usage=usage,
                        types=("h100", "a100"))
        plan = run_epoch(snap)
        check_plan(snap, plan)
        assert _outcome(plan) == (["Lo", "R", "RA"], [], {"QA": "WaitingForCapacity"}), usage
    greedy = GreedyScheduler().decide(snapshot(nodes, flat_org({"A": 1, "B": 1}), jobs,
                                               usage={"A": 1.0, "B": 0.2},
                                               types=("h100", "a100")))
    assert sorted(p.job_id for p in greedy.placements) == ["Lo", "R", "RA"]


def test_a_job_whose_teammate_gave_way_to_another_project_starts_beside_its_job():
    """A helper's case (stop 37): B (ranked first) takes h100 for its floor and A's running
    priority-2 8-GPU job gives way; A's priority-0 2-GPU job may use h100 or a100, a100 is
    full (C's protected job). A_run does not fit beside B's job, so A_small takes 2 of the
    4 GPUs it leaves, as under greedy (keep_displaced). Before, the team's order kept it off
    h100 for an epoch."""
    from optalloc.types import Node

    nodes = [Node("n00", "h100", 8), Node("a00", "a100", 4)]
    jobs = [running("A_run", "A", "h100", [("n00", range(8))], start=2 * H,
                    min_runtime_s=4 * H, priority=2),
            Job("B_q", "B", 4, min_runtime_s=H, submit_time=1.0),
            Job("A_small", "A", 2, min_runtime_s=H, submit_time=4.0, priority=0),
            running("C_a", "C", "a100", [("a00", range(4))], start=9.9 * H, min_runtime_s=4 * H)]
    snap = snapshot(nodes, flat_org({"A": 1, "B": 3, "C": 1}), jobs,
                    usage={"A": 0.5, "B": 0.1, "C": 0.3}, types=("h100", "a100"))
    plan, greedy = run_epoch(snap), GreedyScheduler().decide(snap)
    check_plan(snap, plan)
    assert _outcome(plan) == (["A_small", "B_q", "C_a"], ["A_run"], {})
    assert _outcome(greedy) == (["A_small", "B_q", "C_a"], ["A_run"], {})


def _displaced_r(displacer: Job, usage=None):
    """Two 8-GPU nodes: A's R (priority 1, 8 GPUs, past its protection) fills n00; n01 holds
    B's protected 4-GPU job X and 4 free GPUs. A also queues Q (priority 0, 4 GPUs), which
    fits only beside X. `displacer` (a whole node) fits only in R's place."""
    jobs = [running("R", "A", "h100", [("n00", range(8))], start=5 * H, priority=1),
            running("X", "B", "h100", [("n01", range(4))], start=9.5 * H),
            displacer,
            Job("Q", "A", 4, min_runtime_s=H, submit_time=2.0, priority=0)]
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), jobs,
                    usage=usage or {"A": 0.1, "B": 0.5})
    plan, greedy = run_epoch(snap), GreedyScheduler().decide(snap)
    check_plan(snap, plan)
    return plan, greedy


def test_a_higher_priority_job_takes_its_teammates_place_while_a_lower_one_fills_the_rest():
    """A helper's case (stop 37): A queues H (priority 2, a whole node) beside R and Q above.
    H takes R's place and Q the 4 free GPUs beside X, as under greedy. Before, Q's
    keep_order row tied its start to R, so the model could not have H and Q together: it
    kept R, started Q, and H, A's first job, waited ("OverShare", with A at its target of
    12 either way)."""
    plan, greedy = _displaced_r(Job("H", "A", 8, min_runtime_s=H, submit_time=1.0, priority=2,
                                    gpus_per_node=8))
    assert _outcome(plan) == (["H", "Q", "X"], ["R"], {})
    placed = {p.job_id: [(a.node, a.gpus) for a in p.nodes] for p in plan.placements}
    assert placed["H"] == [("n00", tuple(range(8)))]
    assert placed["Q"] == [("n01", (4, 5, 6, 7))]
    (pre,) = plan.preemptions
    assert pre.message == ("past its protection; a higher-priority job of project A takes its "
                           "place (priority 2 > 1) (H)")
    # the greedy baseline's plan: the model keeps Q off h100 while R is stopped, and the plan
    # is eligible by the scheme's rule (optalloc.model.keep_displaced), beyond its bound
    assert plan.report.status == "feasible" and plan.report.source == "greedy"
    assert ("the plan starts a lower-priority job on a type where a running job of its "
            "project gave way to work ranked above it") in plan.report.message
    assert _outcome(greedy) == (["H", "Q", "X"], ["R"], {})


def test_another_project_below_its_floor_takes_the_place_while_a_lower_job_fills_the_rest():
    """The same with B's whole-node job Bw. B ranked first (ratio 0.1 against 0.9) and below
    its floor (4 of 8): Bw takes R's place and Q the 4 free GPUs beside X, as under greedy.
    Before, Q's row tied its start to R: the model kept R and Q, and B stayed below its floor
    while A held 12 GPUs of a target of 8. With A ranked first, R and Q run and Bw waits
    (the two floors short by 4 either way, the better-ranked one's met), as under greedy."""
    bw = Job("Bw", "B", 8, min_runtime_s=H, submit_time=1.0, gpus_per_node=8)
    plan, greedy = _displaced_r(bw, usage={"A": 0.9, "B": 0.1})
    assert _outcome(plan) == (["Bw", "Q", "X"], ["R"], {})
    assert _outcome(greedy) == (["Bw", "Q", "X"], ["R"], {})
    plan, greedy = _displaced_r(bw, usage={"A": 0.1, "B": 0.5})
    assert _outcome(plan) == (["Q", "R", "X"], [], {"Bw": "WaitingForCapacity"})
    assert _outcome(greedy) == (["Q", "R", "X"], [], {"Bw": "WaitingForCapacity"})


def test_a_job_whose_teammate_started_in_the_place_left_is_not_told_the_order_holds_it():
    """A helper's case (stop 40): as above, with B's second priority-0 job B_two (2 GPUs).
    B_small takes one of the 2 GPUs B_run leaves, as under greedy; B_two waits for GPUs, and
    is told so. Before, it was told the team's order kept it off h100 this epoch, which its
    teammate's start there contradicts (the row holds nothing back in such a plan)."""
    for resumable in (True, False):
        jobs = [running("B_run", "B", "h100", [("n00", range(6))], start=8 * H, priority=1,
                        resumable=resumable),
                Job("A_q", "A", 6, min_runtime_s=H, submit_time=1.0),
                Job("B_small", "B", 1, min_runtime_s=H, priority=0, submit_time=2.0),
                Job("B_two", "B", 2, min_runtime_s=H, priority=0, submit_time=3.0)]
        snap = snapshot(nodes_of(1, 8), flat_org({"A": 1, "B": 1}), jobs,
                        usage={"A": 1.0, "B": 3.0})
        plan = run_epoch(snap)
        check_plan(snap, plan)
        assert _outcome(plan) == (["A_q", "B_small"], ["B_run"],
                                  {"B_two": "WaitingForCapacity"}), resumable
        (r,) = plan.pending
        assert "team's order" not in r.message
        assert r.message.endswith("(1 free)")
