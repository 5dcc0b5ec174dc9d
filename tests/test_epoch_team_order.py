"""A team's order holds between a running job and the queued jobs of its own priority
(DESIGN.md rule 3: declared priority, then jobs already running, then submit time): the plan
never stops a running job for jobs its team ranks below it (optalloc.plan.team_order). The
model's work and target tiers value GPUs, so before, a larger queued job of the same
priority took a running job's place. Where another project takes the GPUs, the stop stands
and the team fills what is left. Each case asserts the whole outcome beside greedy's; the
property checks every plan over random snapshots."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from optalloc.epoch import run_epoch
from optalloc.sim.invariants import check_plan, proxy_order_breaks, team_order_breaks
from optalloc.sim.policies.greedy import GreedyScheduler
from optalloc.types import Job
from tests.test_epoch_properties import instances
from tests.test_epoch_toy import H, flat_org, nodes_of, pending_codes, running, snapshot


def _outcome(plan):
    return (sorted(p.job_id for p in plan.placements), sorted(p.job_id for p in plan.preemptions),
            pending_codes(plan))


def _both(snap):
    plan, greedy = run_epoch(snap), GreedyScheduler().decide(snap)
    check_plan(snap, plan)
    assert team_order_breaks(snap, plan) == []
    return plan, greedy


def test_a_running_job_is_not_stopped_for_a_larger_queued_gang_of_its_priority():
    """The helper's case (stop 37): A alone on 2 x 8 GPUs runs R (priority 2, 6 GPUs, past its
    protection, not resumable: 18 h of work would be lost) and queues G (priority 2, 8 GPUs as
    4 + 4, submitted later), which fits only where R runs, and S (priority 0, 2 GPUs). R stays
    and S starts beside it, as under greedy; G waits. Before, R was stopped for G and S was
    held back behind it: floors and targets were the same either way, and the work tier
    counted G's 8 GPUs over R's 6."""
    jobs = [running("R", "A", "h100", [("n01", range(6))], start=2 * H, min_runtime_s=4 * H,
                    resumable=False, priority=2, submit_time=0.0),
            Job("G", "A", 8, gpus_per_node=4, min_runtime_s=H, submit_time=1.0, priority=2),
            Job("S", "A", 2, min_runtime_s=H, submit_time=4.0, priority=0)]
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), jobs,
                    usage={"A": 0.1, "B": 0.5})
    plan, greedy = _both(snap)
    assert _outcome(plan) == (["R", "S"], [], {"G": "GangDoesNotFit"})
    assert _outcome(greedy)[:2] == (["R", "S"], [])


def test_a_running_job_is_not_stopped_for_a_whole_node_job_of_its_priority_below_its_floor():
    """A (floor 8 of the one node) runs R (2 GPUs, past its protection) and queues W (8 GPUs,
    the same priority, submitted later). W would meet A's whole floor where R meets 2; R
    stays all the same (the team's order is A's own: R first), as under greedy."""
    jobs = [running("R", "A", "h100", [("n00", range(2))], start=5 * H),
            Job("W", "A", 8, min_runtime_s=H, submit_time=1.0)]
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1}), jobs)
    plan, greedy = _both(snap)
    assert _outcome(plan) == (["R"], [], {"W": "LowerPriorityInProject"})
    assert plan.pending[0].message == (
        "2 h100 GPUs are held by running jobs of project A ranked above it in the team's order "
        "(priority, then running jobs, then submit time): R; the team's order never stops a "
        "running job for a job it ranks above, and this 8-GPU job would fit in their place "
        "(6 h100 GPUs are free)")
    # the model learns the rule from the placement (optalloc.model.team_rows): the plan is
    # certified against the bound of the plans that keep it, not 300% below a bound that
    # counted W's floor
    assert plan.report.status == "optimal"
    assert _outcome(greedy)[:2] == (["R"], [])


def test_another_projects_start_on_its_gpus_lets_its_teammates_fill_the_rest():
    """One 8-GPU node: A's R (8 GPUs, past its protection) runs; B (ranked first, below its
    floor of 4) queues a 4-GPU job, and A a 4-GPU job of R's priority. B's job takes half of
    R's place, so R stops, and A's queued job takes the other half: R was stopped for B, not
    for its teammate (greedy: the same)."""
    jobs = [running("R", "A", "h100", [("n00", range(8))], start=5 * H),
            Job("Aq", "A", 4, min_runtime_s=H, submit_time=1.0),
            Job("Bq", "B", 4, min_runtime_s=H, submit_time=1.0)]
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1, "B": 1}), jobs,
                    usage={"A": 2.0, "B": 0.1})
    plan, greedy = _both(snap)
    assert _outcome(plan) == (["Aq", "Bq"], ["R"], {})
    assert _outcome(greedy) == (["Aq", "Bq"], ["R"], {})


def test_a_higher_priority_teammate_still_takes_a_running_jobs_place_whatever_its_size():
    """A alone on 8 GPUs: its running priority-0 job L (6 GPUs, past its protection) and its
    queued priority-1 job P (8 GPUs): P ranks above L in the team's order and takes its
    place, as under greedy."""
    jobs = [running("L", "A", "h100", [("n00", range(6))], start=5 * H, priority=0),
            Job("P", "A", 8, min_runtime_s=H, priority=1)]
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1}), jobs)
    plan, greedy = _both(snap)
    assert _outcome(plan) == (["P"], ["L"], {})
    assert _outcome(greedy) == (["P"], ["L"], {})


def test_a_row_added_for_the_order_still_lets_another_project_displace_and_the_team_fill():
    """A helper's case (stop 38): one 8-GPU node, A runs j1 (8 GPUs, past its protection) and
    queues j7 (2 GPUs, j1's priority); B, below its floor of 3, queues j9 (4 GPUs). A placed
    rounding put j7 alone on j1's GPUs, so the row for (j1, j7) was added; written pairwise it
    forbade j7 whenever j1 stops, also where B takes j1's place, and the epoch called a plan
    24% below the best `optimal` with B below its floor. The row now lets j7 start where
    another project's job starts on the type: B's job displaces j1, j7 fills the rest."""
    jobs = [running("j1", "A", "h100", [("n00", range(8))], start=5 * H, priority=1,
                    submit_time=1.0),
            Job("j7", "A", 2, min_runtime_s=900.0, resumable=False, priority=1, submit_time=7.0),
            Job("j9", "B", 4, min_runtime_s=2 * H, submit_time=9.0)]
    snap = snapshot(nodes_of(1, 8), flat_org({"A": 3, "B": 2}), jobs,
                    usage={"A": 1.0, "B": 1.0})
    plan, _ = _both(snap)
    assert _outcome(plan) == (["j7", "j9"], ["j1"], {})
    assert plan.report.status == "optimal"


def test_a_running_job_is_not_moved_to_another_type_for_a_queued_teammate():
    """A helper's case (stop 38): A alone, R (8 GPUs, past its protection) on the h100 node,
    an idle a100 node, and Aq (8 GPUs, R's priority, h100 only). R was moved to a100 so that
    Aq could take its place (a move only where a job would be displaced anyway: README rule
    8). R stays; greedy the same."""
    from optalloc.types import Node, NodeState
    nodes = [Node("n00", "h100", 8, NodeState.UP), Node("a00", "a100", 8, NodeState.UP)]
    jobs = [running("R", "A", "h100", [("n00", range(8))], start=5 * H, submit_time=0.0),
            Job("Aq", "A", 8, gpu_types=("h100",), min_runtime_s=H, submit_time=1.0)]
    snap = snapshot(nodes, flat_org({"A": 1}), jobs, types=("h100", "a100"))
    plan, greedy = _both(snap)
    assert _outcome(plan) == (["R"], [], {"Aq": "LowerPriorityInProject"})
    assert _outcome(greedy)[:2] == (["R"], [])


def test_a_job_that_would_not_fit_without_its_teammates_is_not_told_they_hold_it():
    """A helper's case (stop 38): B's protected jobs split both nodes (2 on n00, 6 on n01), so
    A's 8-GPU single-node job fits nowhere even if A's running R (4 GPUs on n00) left: its
    reason names the capacity, not R."""
    jobs = [running("R", "A", "h100", [("n00", range(4))], start=5 * H, submit_time=0.0),
            running("Bx", "B", "h100", [("n00", (4, 5))], start=9.5 * H, min_runtime_s=2 * H),
            running("By", "B", "h100", [("n01", range(6))], start=9.5 * H, min_runtime_s=2 * H),
            Job("Aq", "A", 8, min_runtime_s=H, submit_time=2.0)]
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 3, "B": 1}), jobs,
                    usage={"A": 0.1, "B": 1.0})
    plan, _ = _both(snap)
    assert _outcome(plan) == (["Bx", "By", "R"], [], {"Aq": "WaitingForCapacity"})


def test_a_running_job_is_not_stopped_for_another_project_that_fits_beside_it():
    """A helper's case (stop 38): R (A, 6 GPUs on n00, past its protection) runs, n01 is idle;
    B (ranked first) queues a 4-GPU job and A an 8-GPU job of R's priority. The solution
    stopped R "for" B's job on n00 so that A's queued job took n01 whole: the team's order
    broken by proxy. B's job moves to n01 and R stays, as under greedy; A's job waits behind
    R. The model cannot see nodes (its row lets A's job start where B starts on h100), so
    the plan is honestly not called optimal against a bound that counts the other plan."""
    jobs = [running("R", "A", "h100", [("n00", range(6))], start=5 * H, submit_time=0.0),
            Job("Aq", "A", 8, min_runtime_s=H, submit_time=1.0),
            Job("Bq", "B", 4, min_runtime_s=H, submit_time=1.0)]
    snap = snapshot(nodes_of(2, 8), flat_org({"A": 1, "B": 1}), jobs,
                    usage={"A": 0.5, "B": 0.1})
    plan, greedy = _both(snap)
    assert proxy_order_breaks(snap, plan) == []
    assert _outcome(plan) == (["Bq", "R"], [], {"Aq": "LowerPriorityInProject"})
    assert {p.job_id: p.nodes[0].node for p in plan.placements} == {"Bq": "n01", "R": "n00"}
    assert plan.report.status == "feasible" and plan.report.gap > 0
    assert _outcome(greedy)[:2] == (["Bq", "R"], [])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_no_plan_stops_a_running_job_for_the_jobs_its_team_ranks_below_it(snap):
    """Over random snapshots (1-2 types, drains, gangs, priorities 0-2, the lookahead on or
    off): no running allocated job is stopped for fair share with only its own project's
    queued jobs of its priority or lower on its GPUs after the plan, under the optimizer or
    greedy (the base code broke it in 13 of 400 such snapshots); nor by proxy, its GPUs
    given to another project's start that would fit on the GPUs its teammates took (stop
    38's code broke that in 5 of 400)."""
    plan = run_epoch(snap)
    greedy = GreedyScheduler().decide(snap)
    assert team_order_breaks(snap, plan) == []
    assert team_order_breaks(snap, greedy) == []
    assert proxy_order_breaks(snap, plan) == []
    assert proxy_order_breaks(snap, greedy) == []
