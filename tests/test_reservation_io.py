"""Reservations outside the epoch: the plan file keeps them (and reads a plan written before
they existed), the cron turn hands the previous plan's to the next epoch, `explain` and the
jobs table show them, `whatif --set policy.max_reservations=0` turns the lookahead off, and the
simulator's metrics count them (kept, dropped by reason, GPU-hours held idle). An expected
start counts the 60 s notice (the policy's grace) of the jobs still on the reserved nodes when
their protections end (stop 55): t=39660 where b2's protection ends at t=39600."""

from __future__ import annotations

import pytest

from optalloc.clock import FixedClock
from optalloc.codec import plan_from_dict, plan_reservations_from_dict, plan_to_dict
from optalloc.cycle import run_cycle
from optalloc.epoch import run_epoch
from optalloc.state import StateStore
from optalloc.plan.explain import explain, format_explanation
from optalloc.sim.metrics import reservation_stats
from optalloc.sim.result import EpochRecord, SimResult
from optalloc.sim.whatif import apply_overrides
from optalloc.types import Config, GpuType, Node, OrgNode, Plan, Policy, Reservation
from optalloc.types import ReservationEnd

from test_cycle import ScriptedRunner
from test_epoch_reservations import NOW, H, cases

RES = Reservation("G", "h100", ("n00", "n01"), NOW + H, project="A", gpus=16, since=NOW - H,
                  idle_gpus=8, message="reserved", details={"due": False}, at=NOW,
                  idle_gpu_h=2.5)
END = ReservationEnd("X", "h100", ("n02",), NOW, "outranked", "A has room for 0", NOW - 2 * H)


def test_the_plan_file_keeps_reservations_and_the_ones_that_ended():
    plan = Plan(now=NOW, reservations=(RES,), reservations_ended=(END,))
    d = plan_to_dict(plan)
    assert d["reservations"][0]["nodes"] == ["n00", "n01"]
    assert {k: d["reservations"][0][k] for k in ("job_id", "gpu_type", "expected_start")} == {
        "job_id": "G", "gpu_type": "h100", "expected_start": NOW + H}
    back = plan_from_dict(d)
    assert back.reservations == (RES,) and back.reservations_ended == (END,)


def test_a_plan_written_before_reservations_existed_reads_with_none():
    d = plan_to_dict(Plan(now=NOW))
    for key in ("reservations", "reservations_ended"):
        del d[key]
    assert plan_from_dict(d).reservations == ()
    assert plan_reservations_from_dict(d) == ()
    assert plan_reservations_from_dict({"reservations": [{"job_id": "G"}]}) == ()  # unreadable


def test_the_cron_turn_hands_the_previous_plans_reservations_to_the_next_epoch(tmp_path):
    snap = cases()[0].snap
    cfg = Config((GpuType("h100"),), snap.nodes,
                 OrgNode("root", children=(OrgNode("A"), OrgNode("B"))), Policy(max_reservations=2),
                 snap.jobs)
    runner = ScriptedRunner()
    for j in snap.jobs:
        if j.running:
            runner.running[j.id] = (j.placement, j.start_time)
    with StateStore(str(tmp_path / "state.db")) as store:
        first = run_cycle(cfg, store, runner, FixedClock(NOW))
        second = run_cycle(cfg, store, runner, FixedClock(NOW + 300.0))
    assert [r.job_id for r in first.plan.reservations] == ["G"]
    assert second.snapshot.previous_reservations == first.plan.reservations
    (r,) = second.plan.reservations
    # the same nodes (listed in the order they free, which the first epoch's backfill moved)
    assert (r.since, sorted(r.nodes)) == (NOW, sorted(first.plan.reservations[0].nodes))


def test_explain_shows_the_reservation_of_a_reserved_gang():
    snap = cases()[0].snap
    plan = run_epoch(snap)
    d = explain(snap, plan, "G")
    assert d["code"] == "Reserved"
    assert d["reservation"]["nodes"] == "n[00-02]"
    text = format_explanation(d)
    assert "reason: Reserved: reserved nodes n[00-02] for job G" in text
    assert "  reservation: 3 h100 nodes n[00-02], expected start t=39660, held since t=36000; " \
           "8 of its GPUs idle after this plan" in text
    assert "    - b2 ends or loses protection at t=39600" in text
    assert d["changes"] == ["the 1 protected jobs on its reserved nodes must end or lose "
                            "protection (the last at t=39600); then the jobs still there get notice and keep "
                            "their GPUs through it: it starts there at t=39660"]
    kept_off = explain(snap, plan, "L")
    assert kept_off["code"] == "HeldForReservation"
    assert kept_off["changes"][0].startswith("the reservation of G must start or be dropped")


def test_whatif_can_turn_the_lookahead_on_and_off():
    cfg = Config((GpuType("h100"),), (Node("n0", "h100", 8),), OrgNode("root", children=(
        OrgNode("A"),)), Policy())
    assert cfg.policy.max_reservations == 0  # off unless asked for
    on = apply_overrides(cfg, ["policy.max_reservations=2"])
    assert on.policy.max_reservations == 2
    assert apply_overrides(on, ["policy.max_reservations=0"]).policy.max_reservations == 0


def _result(epochs, end=10 * H) -> SimResult:
    cfg = Config((GpuType("h100"),), (Node("n0", "h100", 8),),
                 OrgNode("root", children=(OrgNode("A"),)), Policy(max_reservations=2))
    return SimResult("ilp", "t", cfg, 0.0, end, (), (), tuple(epochs), (), ())


def _res(job, idle, since=0.0):
    return Reservation(job, "h100", ("n0",), 5 * H, since=since, idle_gpus=idle)


def _end(job, outcome, since=0.0):
    return ReservationEnd(job, "h100", ("n0",), 5 * H, outcome, "", since)


@pytest.mark.parametrize("epochs,expected", [
    ([], dict(made=0, kept=0, dropped=0, dropped_by={}, open_at_end=0, idle_gpu_h=0.0,
              held_to_start_mean_h=None, held_to_start_max_h=None)),
    # held 8 idle GPUs for 1 h, then 4 for 2 h, then started at 3 h
    ([EpochRecord(0.0, 0, "optimal", 1, 0, reservations=(_res("G", 8),)),
      EpochRecord(H, 0, "optimal", 1, 0, reservations=(_res("G", 4),)),
      EpochRecord(3 * H, 0, "optimal", 0, 1, reservations_ended=(_end("G", "started"),))],
     dict(made=1, kept=1, dropped=0, dropped_by={}, open_at_end=0, idle_gpu_h=16.0,
          held_to_start_mean_h=3.0, held_to_start_max_h=3.0)),
    # one dropped (outranked) after 2 h, one cancelled, one still open at the end (10 h)
    ([EpochRecord(0.0, 0, "optimal", 3, 0, reservations=(_res("G", 8), _res("H", 0))),
      EpochRecord(2 * H, 0, "optimal", 3, 0, reservations=(_res("K", 2, 2 * H),),
                  reservations_ended=(_end("G", "outranked"), _end("H", "cancelled")))],
     dict(made=3, kept=0, dropped=2, dropped_by={"outranked": 1, "cancelled": 1},
          open_at_end=1, idle_gpu_h=16.0 + 16.0, held_to_start_mean_h=None,
          held_to_start_max_h=None)),
], ids=["no reservations", "kept after 3 h", "dropped, cancelled and open"])
def test_the_simulator_counts_reservations_kept_dropped_and_the_gpu_hours_they_held_idle(
        epochs, expected):
    assert reservation_stats(_result(epochs)) == expected


def test_optalloc_jobs_shows_the_reserved_gang_with_its_nodes_and_start(tmp_path):
    from optalloc.cli.jobs_cmd import job_rows, jobs_table
    from optalloc.dashboard.readonly import ReadOnlyStore

    snap = cases()[0].snap
    cfg = Config((GpuType("h100"),), snap.nodes,
                 OrgNode("root", children=(OrgNode("A"), OrgNode("B"))), Policy(max_reservations=2), snap.jobs)
    runner = ScriptedRunner()
    for j in snap.jobs:
        if j.running:
            runner.running[j.id] = (j.placement, j.start_time)
    with StateStore(str(tmp_path / "state.db")) as store:
        run_cycle(cfg, store, runner, FixedClock(NOW))
    with ReadOnlyStore(str(tmp_path / "state.db")) as store:
        rows = {r["id"]: r for r in job_rows(store, False)}
    assert (rows["G"]["state"], rows["G"]["code"]) == ("pending", "Reserved")
    line = next(x for x in jobs_table(list(rows.values()), None).splitlines()
                if x.startswith("G "))
    assert line.endswith("Reserved: reserved nodes n[00-02] for job G (24 h100 GPUs of project "
                         "A), expected start t=39660 (in 1.02h); 1 job there ends or loses "
                         "protection by then")
    assert rows["L"]["code"] == "HeldForReservation"
