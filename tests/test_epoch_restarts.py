"""A running job whose GPUs the plan gives away restarts at once on GPUs of its own type that
nobody else takes (DESIGN.md rule 6: no idle GPU while a job that fits waits), where before it
was preempted to the queue and waited beside them for a later epoch (found at stop 34: 37 of
3,000 random tiny snapshots). A restart is a preemption whose job starts again at once (the model's
`cand_restart` columns): like a preemption it counts in no share row, so a job restarts only
where the scheme would take its GPUs anyway, never to pack unallocated work (which yields to
allocated work); it is worth less than the keep by the work it loses; only a resumable job
past its protection restarts. Each case asserts the whole outcome and is
compared with greedy, which preempts and leaves the GPUs idle until the next epoch."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from optalloc.epoch import run_epoch
from optalloc.model.build import build_model
from optalloc.sim.invariants import check_plan
from optalloc.sim.policies.greedy import GreedyScheduler
from optalloc.types import Job, ReasonCode
from tests.test_epoch_properties import instances
from tests.test_epoch_toy import H, flat_org, nodes_of, pending_codes, running, snapshot


def _outcome(plan):
    """(placements as job -> nodes, preemptions as job -> (code, needed_by), pending codes)."""
    return ({p.job_id: tuple((a.node, len(a.gpus)) for a in p.nodes) for p in plan.placements},
            {p.job_id: (p.code.value, p.needed_by) for p in plan.preemptions},
            pending_codes(plan))


def _two_nodes(r: Job, queued: Job, usage=None):
    """2 x 8 GPUs: R (B, 4 GPUs) on n00, Y (A, 4 GPUs, past its protection) on n01, and one
    queued job that needs a whole node."""
    y = running("Y", "A", "h100", [("n01", range(4))], start=5 * H)
    return snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), [r, y, queued], usage=usage)


def test_a_job_displaced_by_a_higher_priority_gang_restarts_on_the_idle_gpus_of_its_type():
    """B's priority-1 8-GPU job G needs a whole node; only R's node (B's priority-0 job, past
    its protection) can be emptied for it without touching A. R restarts at once on the 4
    idle GPUs of n01 and G starts on n00: every GPU busy. Greedy preempts R and leaves those
    4 GPUs idle until the next epoch."""
    r = running("R", "B", "h100", [("n00", range(4))], start=5 * H, priority=0)
    snap = _two_nodes(r, Job("G", "B", 8, gpus_per_node=8, min_runtime_s=H, priority=1))
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert _outcome(plan) == ({"Y": (("n01", 4),), "R": (("n01", 4),), "G": (("n00", 8),)},
                              {"R": ("Moved", ("G",))}, {})
    (p,) = plan.preemptions
    assert p.message == ("restarts at once on other h100 GPUs (n01): the plan gives the GPUs "
                         "where it ran to G")
    new_r = next(p for p in plan.placements if p.job_id == "R")
    assert set(new_r.nodes[0].gpus) == {4, 5, 6, 7}  # Y keeps 0-3
    greedy = GreedyScheduler().decide(snap)
    assert sorted(p.job_id for p in greedy.placements) == ["G", "Y"]
    assert [p.job_id for p in greedy.preemptions] == ["R"]


def test_a_job_whose_gpus_nobody_needs_stays_where_it_is():
    """The same with a third, empty node: G starts there and R is not touched (a restart
    loses work; it is never made for nothing)."""
    r = running("R", "B", "h100", [("n00", range(4))], start=5 * H, priority=0)
    y = running("Y", "A", "h100", [("n01", range(4))], start=5 * H)
    g = Job("G", "B", 8, gpus_per_node=8, min_runtime_s=H, priority=1)
    snap = snapshot(nodes_of(3, 8), flat_org({"A": 1, "B": 1}), [r, y, g])
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert _outcome(plan) == ({"R": (("n00", 4),), "Y": (("n01", 4),), "G": (("n02", 8),)},
                              {}, {})


def test_a_protected_job_never_restarts_and_the_job_past_its_protection_does():
    """R is inside its protection, so it stays; Y (A, past its protection) restarts beside it
    on n00 and G starts on n01. Greedy leaves G waiting beside 8 idle GPUs."""
    r = running("R", "B", "h100", [("n00", range(4))], start=9.5 * H, priority=0)
    snap = _two_nodes(r, Job("G", "B", 8, gpus_per_node=8, min_runtime_s=H, priority=1))
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert _outcome(plan) == ({"R": (("n00", 4),), "Y": (("n00", 4),), "G": (("n01", 8),)},
                              {"Y": ("Moved", ("G",))}, {})
    greedy = GreedyScheduler().decide(snap)
    assert sorted(p.job_id for p in greedy.placements) == ["R", "Y"]


def test_a_job_that_cannot_resume_is_preempted_not_restarted():
    """R cannot resume (stopping it ends it): its own project's higher-priority G takes its
    place and it is preempted, as under greedy; A's Y is not restarted in its stead."""
    r = running("R", "B", "h100", [("n00", range(4))], start=5 * H, priority=0,
                resumable=False)
    snap = _two_nodes(r, Job("G", "B", 8, gpus_per_node=8, min_runtime_s=H, priority=1))
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert _outcome(plan) == ({"Y": (("n01", 4),), "G": (("n00", 8),)},
                              {"R": ("PreemptedForFairShare", ("G",))}, {})


def test_a_projects_gang_starts_where_its_own_job_restarts_beside_another_projects():
    """A's queued 8-GPU job Z, A below its floor (4 of 8, ratio 0.5 against B's 1.0): A's own
    Y restarts beside B's R and Z takes n01; B keeps its job where it is. Greedy preempts B's
    R for Z and leaves 4 GPUs idle."""
    r = running("R", "B", "h100", [("n00", range(4))], start=5 * H, priority=0)
    snap = _two_nodes(r, Job("Z", "A", 8, gpus_per_node=8, min_runtime_s=H),
                      usage={"A": 0.5, "B": 1.0})
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert _outcome(plan) == ({"R": (("n00", 4),), "Y": (("n00", 4),), "Z": (("n01", 8),)},
                              {"Y": ("Moved", ("Z",))}, {})
    greedy = GreedyScheduler().decide(snap)
    assert [p.job_id for p in greedy.preemptions] == ["R"]


def test_allocated_work_is_never_restarted_to_make_room_for_unallocated_work():
    """C has no share: its queued 8-GPU job U is unallocated work and needs a whole node. R
    and Y (allocated, past their protection) could share one node and free the other, but
    unallocated work yields to allocated work: nothing restarts, U waits."""
    r = running("R", "B", "h100", [("n00", range(4))], start=5 * H)
    y = running("Y", "A", "h100", [("n01", range(4))], start=5 * H)
    u = Job("U", "C", 8, gpus_per_node=8, min_runtime_s=H)
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1, "C": 0}), [r, y, u])
    plan = run_epoch(snap)
    check_plan(snap, plan)
    placed, pre, pending = _outcome(plan)
    assert (placed, pre) == ({"R": (("n00", 4),), "Y": (("n01", 4),)}, {})
    assert list(pending) == ["U"]


def test_a_restart_never_lets_a_lower_priority_job_of_its_project_ahead_of_it():
    """The team's order holds for restarts: B's running priority-2 job R (past its protection)
    and its queued priority-0 job Q, both 4 GPUs, B alone on one 8-GPU node half held by A's
    protected job P. Q does not take R's GPUs, and R is not restarted for it."""
    r = running("R", "B", "h100", [("n00", range(4))], start=5 * H, priority=2)
    p = running("P", "A", "h100", [("n00", range(4, 8))], start=9.5 * H)
    q = Job("Q", "B", 4, min_runtime_s=H, priority=0)
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1, "B": 1}), [r, p, q])
    plan = run_epoch(snap)
    check_plan(snap, plan)
    assert _outcome(plan) == ({"R": (("n00", 4),), "P": (("n00", 4),)}, {},
                              {"Q": "LowerPriorityInProject"})


def test_the_model_has_a_restart_column_only_for_resumable_allocated_jobs_past_protection():
    """One restart candidate per running job that may restart: allocated on its type, past
    its protection, resumable, not leaving a drain node; none for queued jobs."""
    jobs = [running("R", "B", "h100", [("n00", range(4))], start=5 * H),
            running("P", "B", "h100", [("n00", range(4, 6))], start=9.5 * H),
            running("N", "B", "h100", [("n00", range(6, 8))], start=5 * H, resumable=False),
            Job("Q", "B", 4, min_runtime_s=H)]
    snap = snapshot(nodes_of(2, 8), flat_org({"B": 1}), jobs)
    em = build_model(snap)
    req = em.req
    assert [snap.jobs[j].id for j in req.cand_job[req.cand_restart]] == ["R"]
    assert not (req.cand_restart & req.cand_move).any()


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(instances())
def test_no_running_job_is_preempted_to_the_queue_beside_idle_gpus_it_fits(snap):
    """Property: a resumable allocated job past its protection that the plan preempts (not a
    drain leaver, not moved or restarted) does not fit the GPUs of its type the plan leaves
    idle on nodes that take new work, unless a reservation holds them."""
    plan = run_epoch(snap)
    check_plan(snap, plan)
    if plan.reservations:
        return
    placed = {p.job_id for p in plan.placements}
    free: dict[str, int] = {}
    for n in snap.nodes:
        if n.state.value == "up":
            free[n.name] = n.gpus
    for p in plan.placements:
        for a in p.nodes:
            if a.node in free:
                free[a.node] -= len(a.gpus)
    for pre in plan.preemptions:
        if pre.job_id in placed or pre.code != ReasonCode.PREEMPTED_FAIR_SHARE:
            continue
        job = snap.jobs[snap.job_index[pre.job_id]]
        j = snap.job_index[pre.job_id]
        t = job.placement.gpu_type
        if not job.resumable or snap.job_protected[j]:
            continue
        room = [free[n.name] for n in snap.nodes if n.gpu_type == t and n.name in free]
        if job.gpus_per_node in (None, job.gpus) and job.gpus <= max(
                n.gpus for n in snap.nodes if n.gpu_type == t):  # a single-node job
            assert max(room, default=0) < job.gpus, (pre.job_id, pre.message, room)
