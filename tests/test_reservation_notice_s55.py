"""A reservation's expected start counts the notice of the jobs it waits for (stop 55; the
time-slicing contract, DESIGN.md section 1 part 3, and optalloc.model.free_times
.expected_start).

A gang's reserved nodes are *clear* when nothing protected is left there: the reservation is
due then (its gang starts in that epoch's plan) and that time is the nodes' deadline for new
work. The jobs still on the nodes then get notice in that plan and keep their GPUs through
`policy.grace_s`: the expected start is the clear time plus the grace, unless those jobs end
on their own sooner (a job expected to end before its protection does gets no notice at
all). Until stop 55 the expected start was the clear time, early by the grace; the plans
themselves (what starts, stops and waits, and when the gang is due) are unchanged.

Each case is a whole plan on nodes of 8 h100 GPUs at now = 10 h (t=36000), projects A and B
1:1, B (usage 0) ranked first with a queued 16-GPU gang g (1 h protection), A's jobs running;
the lookahead on (max_reservations 1). The working is in each case's comment. Helpers: the
snapshot helpers of tests/test_scheme_judge_cases_s51.py (`decide` checks the ilp's and the
greedy's plans with optalloc.sim.invariants.check_plan).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from optalloc.snapshot import build_snapshot
from optalloc.types import Config, GpuType, Job, NodeState, Policy, Reservation
from tests.test_epoch_toy import H, flat_org, nodes_of, running
from tests.test_scheme_judge_cases_s51 import decide, pend, pre, where

NOW = 10 * H  # t=36000
AB = flat_org({"A": 1, "B": 1})
GANG = Job("g", "B", 16, min_runtime_s=H)
G12 = Job("g12", "B", 12, min_runtime_s=H)


def _snap(nodes, jobs, grace: float = 60.0, prev=(), gang: Job = GANG):
    cfg = Config((GpuType("h100"),), tuple(nodes), AB,
                 Policy(max_reservations=1, grace_s=grace), tuple(jobs) + (gang,))
    return build_snapshot(cfg, now=NOW, usage_ratio={"A": 1.0, "B": 0.0}, reservations=prev)


def _a(jid: str, allocs, start: float, **kw) -> Job:
    """A's running job (1 h protection unless `min_runtime_s` says)."""
    return running(jid, "A", "h100", allocs, start=start, **kw)


def _full(jid: str, node: str, start: float, **kw) -> Job:
    return _a(jid, [(node, range(8))], start, **kw)


@dataclass
class Case:
    name: str
    snap: object
    where: dict  # job -> (type, nodes, allocated): every job running after the plan
    reserved: dict  # gang -> (nodes, expected start, clear time)
    pending: dict = field(default_factory=lambda: {"g": "Reserved"})
    preempted: dict = field(default_factory=dict)  # job -> (code, needed_by)
    ended: dict = field(default_factory=dict)  # gang -> (outcome, expected start)


def _on(*nodes) -> tuple:
    return ("h100", tuple(nodes), True)


CASES = [
    # 2 x 8: n00 free; a2 on n01 protected to 10.5 h (t=37800), no expected end. g reserves
    # n00 + n01, clear at 37800; a2 gets notice then and keeps n01 for the grace.
    Case("with no grace the gang starts when its nodes are clear",
         _snap(nodes_of(2, 8), [_full("a2", "n01", 9.5 * H)], grace=0.0),
         {"a2": _on("n01")}, {"g": ({"n00", "n01"}, 37800.0, 37800.0)}),
    Case("a job stopped at its protection end keeps its gpus through a 60 s notice",
         _snap(nodes_of(2, 8), [_full("a2", "n01", 9.5 * H)]),
         {"a2": _on("n01")}, {"g": ({"n00", "n01"}, 37860.0, 37800.0)}),
    Case("a five minute grace puts the expected start five minutes after the clear time",
         _snap(nodes_of(2, 8), [_full("a2", "n01", 9.5 * H)], grace=300.0),
         {"a2": _on("n01")}, {"g": ({"n00", "n01"}, 38100.0, 37800.0)}),
    # a2 is expected to run 45 min (from 9.5 h: ends at 10.25 h = t=36900), before its
    # protection ends: it ends on its own, no notice: start = clear = 36900
    Case("a job expected to end before its protection ends frees its gpus at its end with no "
         "notice",
         _snap(nodes_of(2, 8), [_full("a2", "n01", 9.5 * H, duration_s=2700.0)]),
         {"a2": _on("n01")}, {"g": ({"n00", "n01"}, 36900.0, 36900.0)}),
    # a2 is expected to end 30 s after its protection (t=37830): notice at 37800 (clear), it
    # ends inside it, at 37830, before the grace is over (37860)
    Case("a job expected to end inside its notice frees its gpus at its end",
         _snap(nodes_of(2, 8), [_full("a2", "n01", 9.5 * H, duration_s=H + 30.0)]),
         {"a2": _on("n01")}, {"g": ({"n00", "n01"}, 37830.0, 37800.0)}),
    # 3 x 8: a1 on n00 protected to 10.25 h, a2 on n01 to 10.5 h, a3 on n02 to 12 h. g takes
    # the two that free first, clear at 37800 (a2's end). a1 is past its protection from
    # 36900 on but nothing stops it before the gang is due: both get notice at 37800 and keep
    # their GPUs through the grace: 37860
    Case("two jobs on two reserved nodes with different protection ends both get notice when "
         "the gang is due",
         _snap(nodes_of(3, 8), [_full("a1", "n00", 9.25 * H), _full("a2", "n01", 9.5 * H),
                                _full("a3", "n02", 11 * H)]),
         {"a1": _on("n00"), "a2": _on("n01"), "a3": _on("n02")},
         {"g": ({"n00", "n01"}, 37860.0, 37800.0)}),
    # the same, a2 protected 2 h (to 11.5 h) but expected to end at 10.5 h (1 h run): the
    # nodes are clear at a2's own end, 37800, when a1 (past its protection since 36900) gets
    # notice: 37860, though the last job there ends on its own
    Case("a job past its protection is stopped only when the gang is due so its notice counts "
         "even when the last job ends on its own",
         _snap(nodes_of(3, 8), [_full("a1", "n00", 9.25 * H),
                                _full("a2", "n01", 9.5 * H, min_runtime_s=2 * H, duration_s=H),
                                _full("a3", "n02", 11 * H)]),
         {"a1": _on("n00"), "a2": _on("n01"), "a3": _on("n02")},
         {"g": ({"n00", "n01"}, 37860.0, 37800.0)}),
    # both end on their own: a1 at 10.25 h (45 min run), a2 at 10.5 h (1 h run), both
    # protected 2 h: no notice, start = clear = 37800
    Case("two jobs that both end on their own need no notice",
         _snap(nodes_of(3, 8), [
             _full("a1", "n00", 9.5 * H, min_runtime_s=2 * H, duration_s=0.75 * H),
             _full("a2", "n01", 9.5 * H, min_runtime_s=2 * H, duration_s=H),
             _full("a3", "n02", 11 * H)]),
         {"a1": _on("n00"), "a2": _on("n01"), "a3": _on("n02")},
         {"g": ({"n00", "n01"}, 37800.0, 37800.0)}),
    # A's unallocated u (min_runtime 0) on n00 keeps running beside the reservation (no idle
    # GPU, rule 6: preemptible at once, it may use a reserved node); a2 on n01 ends on its own
    # at 10.5 h. Clear at 37800; u gets its notice then: 37860
    Case("unallocated work on a reserved node gets its notice when the gang is due",
         _snap(nodes_of(2, 8), [
             _full("u", "n00", 9 * H, min_runtime_s=0.0),
             _full("a2", "n01", 9.5 * H, min_runtime_s=2 * H, duration_s=H)]),
         {"u": ("h100", ("n00",), False), "a2": _on("n01")},
         {"g": ({"n00", "n01"}, 37860.0, 37800.0)}),
    # 3 x 8, B's gang is g12, 12 GPUs (8 + a 4-GPU remainder): n00 free; n01 holds p (4 GPUs,
    # protected to 18 h: it stays beside the gang) and q (4 GPUs, protected to 10.5 h); n02
    # a3 (to 12 h). Reserved n00 + n01 (4 of it), clear at 37800 when q's protection ends:
    # q is stopped, 37860; p never needs to leave
    Case("a job that stays beside the gang on its remainder node needs no notice, the one "
         "that leaves does",
         _snap(nodes_of(3, 8), [_a("p", [("n01", range(4))], 10 * H, min_runtime_s=8 * H),
                                _a("q", [("n01", range(4, 8))], 9.5 * H),
                                _full("a3", "n02", 11 * H)], gang=G12),
         {"p": _on("n01"), "q": _on("n01"), "a3": _on("n02")},
         {"g12": ({"n00", "n01"}, 37860.0, 37800.0)},
         pending={"g12": "Reserved"}),
    # the same, q expected to end at 10.5 h on its own (protected 2 h, 1 h run): p stays, q
    # ends, nobody is stopped: 37800
    Case("a remainder node whose leaving job ends on its own needs no notice",
         _snap(nodes_of(3, 8), [_a("p", [("n01", range(4))], 10 * H, min_runtime_s=8 * H),
                                _a("q", [("n01", range(4, 8))], 9.5 * H, min_runtime_s=2 * H,
                                   duration_s=H),
                                _full("a3", "n02", 11 * H)], gang=G12),
         {"p": _on("n01"), "q": _on("n01"), "a3": _on("n02")},
         {"g12": ({"n00", "n01"}, 37800.0, 37800.0)},
         pending={"g12": "Reserved"}),
    # n00 free; B's own priority-1 job t (16 GPUs on n01 and draining d00, protected to
    # 10.5 h) ranks above g in B's order, so it is never stopped for g, but the drain stops it
    # at its protection end (rule 5): notice at 37800, gone at 37860. g reserves n00 + n01
    Case("a teammate ranked above the gang on a draining node leaves with its notice at its "
         "protection end",
         _snap(nodes_of(2, 8) + nodes_of(1, 8, prefix="d", state=NodeState.DRAIN), [
             running("t", "B", "h100", [("n01", range(8)), ("d00", range(8))],
                     start=9.5 * H, priority=1, submit_time=-1.0)]),
         {"t": ("h100", ("d00", "n01"), True)}, {"g": ({"n00", "n01"}, 37860.0, 37800.0)}),
    # due: the previous plan reserved n00 + n01 for g; a2 on n01 has been past its protection
    # since now (started 9 h). The reservation is due at once: g starts in this plan (no
    # epoch's wait), a2 gets notice now and the runner starts g when it has left; the ended
    # reservation's start is now
    Case("a due gang starts in this plan and the job on its nodes gets its notice now",
         _snap(nodes_of(2, 8), [_full("a2", "n01", 9 * H)],
               prev=[Reservation("g", "h100", ("n00", "n01"), NOW + 60.0, since=NOW - H)]),
         {"g": _on("n00", "n01")}, {}, pending={},
         preempted={"a2": ("PreemptedForFairShare", ("g",))},
         ended={"g": ("started", NOW)}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_expected_start_counts_the_notice(case: Case):
    plan = decide(case.snap, dominance=False)
    assert where(plan) == case.where
    assert pre(plan) == case.preempted
    assert pend(plan) == case.pending
    assert {r.job_id: (set(r.nodes), r.expected_start, dict(r.details)["clear_at"])
            for r in plan.reservations} == case.reserved
    assert {e.job_id: (e.outcome, e.expected_start)
            for e in plan.reservations_ended} == case.ended
    for r in plan.reservations:  # the message names the same start
        assert f"expected start t={r.expected_start:.0f} " in r.message
