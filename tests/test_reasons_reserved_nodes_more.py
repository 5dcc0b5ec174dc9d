"""A job kept off reserved nodes is told so truly: whoever backfills them, all the GPUs its shape
needs, every reservation whose nodes it would take, and, in the reason it would have had
without the lookahead, that the reservation is what keeps it out of its teammates' places
(DESIGN.md section 8, rules 6 and 7). A reviewer's open message faults after stop 46, each
written out as a whole expected outcome: starts, reservations and every pending reason.

The base case is that of tests/test_reasons_reserved_nodes.py: four 4-GPU h100 nodes; B runs
n0 and n1, C a protected job on n3 until t=63000; B's 8-GPU gang G reserves n2 + n3; A queues
a priority-1 8-hour job `a`, which would hold n2 past G's start. The expected starts count the
60 s notice (the policy's grace) of the jobs still on the nodes when they are clear (stop 55):
t=63060, not 63000."""

from __future__ import annotations

import pytest

from optalloc.types import Job, ReasonCode

from test_epoch_toy import H, running
from test_reasons_reserved_nodes import Case, _nodes, check_case

NOW = 10 * H
R = ReasonCode
SHARES = {"A": 1, "B": 6, "C": 1}
USAGE = {"A": 1.0, "B": 0.0, "C": 1.0}
SHARES5 = {"A": 1, "B": 6, "C": 1, "D": 6, "E": 2}
USAGE5 = {"A": 1.0, "B": 0.0, "C": 1.0, "D": 0.0, "E": 1.0}
HOLD = "this job would hold its GPUs until t=64800 (in 8h) (its protection, or its expected end "
G_AT_63000 = "job G's reservation (expected start t=63060 (in 7.52h))"
G_AT_46800 = "job G's reservation (expected start t=46860 (in 3.02h))"


def _b_c_running() -> list[Job]:
    return [running("rb0", "B", "h100", [("n0", range(4))], NOW - 0.5 * H, 8 * H),
            running("rb1", "B", "h100", [("n1", range(4))], NOW - 0.5 * H, 8 * H),
            running("ry", "C", "h100", [("n3", range(4))], NOW - 0.5 * H, 8 * H)]


def _eight_nodes_running() -> list[Job]:
    """n0, n1: B; n3: C (all protected until t=63000); n4, n7: E (until t=50400, t=46800);
    n5: D (until t=61200); n6: E's 2-GPU job (until t=57600), 2 GPUs free beside it."""
    return _b_c_running() + [
        running("re", "E", "h100", [("n4", range(4))], NOW - 4 * H, 8 * H),
        running("rd", "D", "h100", [("n5", range(4))], NOW - H, 8 * H),
        running("rg", "E", "h100", [("n6", range(2))], NOW - 2 * H, 8 * H),
        running("rf", "E", "h100", [("n7", range(4))], NOW - 5 * H, 8 * H)]


def _gangs(gd_gpus: int = 12) -> list[Job]:
    return [Job("G", "B", 8, min_runtime_s=8 * H, submit_time=0.0),
            Job("GD", "D", gd_gpus, min_runtime_s=8 * H, submit_time=0.5)]


def _long(gpus: int = 4, gpus_per_node: int | None = None) -> Job:
    return Job("a", "A", gpus, gpus_per_node=gpus_per_node, min_runtime_s=8 * H, priority=1,
               submit_time=5.0)


def _shorts(project: str = "A", n: int = 2) -> list[Job]:
    return [Job(f"c{i}", project, 2, min_runtime_s=600, duration_s=600, submit_time=float(i))
            for i in range(1, n + 1)]




G_RESERVED = ("reserved nodes n[2-3] for job G (8 h100 GPUs of project B), expected start "
              "t=63060 (in 7.52h); 1 job there ends or loses protection by then")
G_N27 = ("reserved nodes n[2,7] for job G (8 h100 GPUs of project B), expected start t=46860 "
         "(in 3.02h); 1 job there ends or loses protection by then")
GD_N013 = ("reserved nodes n[0-1,3] for job GD (12 h100 GPUs of project D), expected start "
           "t=63060 (in 7.52h); 3 jobs there end or lose protection by then")
SHARE_LINE_8 = (
    "its fair-share target this epoch is 1 (entitled 2.0, usage ratio 1.00; its floor of 2 is "
    "cut to the target this epoch: protected jobs hold more GPUs than their projects' floors "
    "(E 10 of floor 4, C 4 of floor 2), so the floors share what is left in proportion); "
    "starting this 6-GPU job would exceed it; the rest goes to B (usage ratio 0.00, holds 16 "
    "of target 10, 8 of them for its reserved gangs), D (usage ratio 0.00, holds 16 of target "
    "7, 12 of them for its reserved gangs), C (usage ratio 1.00, holds 4 of target 4); ")
NOT_IN_PLACES = ("it does not fit in their places, alone or together with the free GPUs beside "
                 "them, or a job ahead of it in its team's order waits, or ")

CASES = [
    Case("another project's short jobs backfilling the one free node, reserved, do not make the "
         "job wait for their project's target: the reservation keeps it off, as it would off "
         "the node were they not there, and their backfill is allowed",
         _nodes(4), SHARES, _b_c_running() + [_gangs()[0], _long()] + _shorts("C"), USAGE,
         started={"c1": ("n2",), "c2": ("n2",)},
         reserved={"G": (("n2", "n3"), 63060.0)},
         pending={"G": (R.RESERVED, G_RESERVED),
                  "a": (R.HELD_FOR_RESERVATION,
                        f"the 4 h100 GPUs on n2 (4 running c1, c2 until then) are held for "
                        f"{G_AT_63000}; {HOLD}if sooner), past that start; c1, c2 of project C "
                        "end by that start, so they may backfill there and this job may not")},
         underlying={"a": (R.WAITING_FOR_CAPACITY,
                           "A is below its h100 floor (0 of 2 GPUs; its target 1, cut below the "
                           "floor this epoch: protected jobs hold more GPUs than their "
                           "projects' floors (C 4 of floor 2), so the floors share what is left "
                           "in proportion) and this job needs 4 more: 12 h100 GPUs are "
                           "protected (the first protection ends at t=63000), 0 free; the rest "
                           "are held by C (8 of target 4, 4 of them protected): past a target "
                           "by 4 GPUs, in jobs that could shrink to it, which with the 0 free "
                           "are as many as this job needs (4); B holds nodes reserved for "
                           "waiting gangs")}),
    Case("a 6-GPU job kept off a reserved node its teammates backfill is told of the 2 free "
         "GPUs beside it that its shape also needs, not of the reserved 4 alone",
         _nodes(8), SHARES5, _eight_nodes_running() + _gangs() + [_long(6)] + _shorts(), USAGE5,
         started={"c1": ("n2",), "c2": ("n2",)},
         reserved={"G": (("n2", "n7"), 46860.0), "GD": (("n0", "n1", "n3"), 63060.0)},
         pending={"G": (R.RESERVED, G_N27), "GD": (R.RESERVED, GD_N013),
                  "a": (R.HELD_FOR_RESERVATION,
                        f"the 4 h100 GPUs on n2 (4 running c1, c2 until then) are held for "
                        f"{G_AT_46800}; {HOLD}if sooner), past that start; this 6-GPU job, a "
                        "whole-node gang, needs GPUs of both these and the 2 free h100 GPUs on "
                        "n6, which it may use: neither alone holds it; c1, c2 of project A rank "
                        "below it in its team's order but end by that start, so they may "
                        "backfill there and this job may not; besides, A holds 4 h100 GPUs, its "
                        "fair-share target this epoch is 1, and this 6-GPU job would exceed "
                        "it")},
         underlying={"a": (R.OVER_SHARE,
                           "A holds 4 h100 GPUs, " + SHARE_LINE_8 + "4 of them run 2 of its "
                           "jobs with a lower priority than 1 that start on h100 this epoch "
                           "(c1, c2): " + NOT_IN_PLACES + "they backfill nodes reserved for a "
                           "gang, which end or may be preempted before its start and this job "
                           "would not")}),
    Case("a 6-GPU job alone beside a free reserved node is told of the free reserved 4 GPUs "
         "and the free 2 it may use, which together would hold it",
         _nodes(8), SHARES5, _eight_nodes_running() + _gangs() + [_long(6)], USAGE5,
         started={},
         reserved={"G": (("n2", "n7"), 46860.0), "GD": (("n0", "n1", "n3"), 63060.0)},
         pending={"G": (R.RESERVED, G_N27), "GD": (R.RESERVED, GD_N013),
                  "a": (R.HELD_FOR_RESERVATION,
                        f"the 4 free h100 GPUs on n2 are held for {G_AT_46800}; {HOLD}if "
                        "sooner), past that start; this 6-GPU job, a whole-node gang, needs "
                        "GPUs of both these and the 2 free h100 GPUs on n6, which it may use: "
                        "neither alone holds it")}),
    Case("a job that fits its lower-priority teammate's place beside a free reserved node is "
         "told the reservation keeps it off, and its reason without the lookahead no longer "
         "says only that it fits in none of its teammates' places",
         _nodes(8), SHARES5, _eight_nodes_running() + _gangs() + [
             _long(6), Job("c1", "A", 2, min_runtime_s=4 * H, submit_time=1.0)], USAGE5,
         started={"c1": ("n6",)},
         reserved={"G": (("n2", "n7"), 46860.0), "GD": (("n0", "n1", "n3"), 63060.0)},
         pending={"G": (R.RESERVED, G_N27), "GD": (R.RESERVED, GD_N013),
                  "a": (R.HELD_FOR_RESERVATION,
                        f"the 4 free h100 GPUs on n2 are held for {G_AT_46800}; {HOLD}if "
                        "sooner), past that start; this 6-GPU job, a whole-node gang, needs "
                        "GPUs of both these and the 2 h100 GPUs on n6 (2 running c1), which it "
                        "may use (c1 ranks below it in its team's order): neither alone holds "
                        "it; besides, A holds 2 h100 GPUs, its fair-share target this epoch is "
                        "1, and this 6-GPU job would exceed it")},
         underlying={"a": (R.OVER_SHARE,
                           "A holds 2 h100 GPUs, " + SHARE_LINE_8 + "2 of them run 1 of its "
                           "jobs with a lower priority than 1 that start on h100 this epoch "
                           "(c1): " + NOT_IN_PLACES + "it would fit there only with free GPUs "
                           "of nodes reserved for a gang, which starts before this job would "
                           "end")}),
    Case("a job whose GPUs would sit on the nodes of two reservations is told of each gang with "
         "its own nodes, not of the nearer one alone",
         _nodes(6), SHARES5, [
             running("rb0", "B", "h100", [("n0", range(4))], NOW - 0.1 * H, 8 * H),
             running("rb1", "B", "h100", [("n1", range(4))], NOW - 0.1 * H, 8 * H),
             running("rx", "E", "h100", [("n2", range(2))], NOW - 5 * H, 8 * H),
             running("ry", "C", "h100", [("n3", range(4))], NOW - 0.5 * H, 8 * H),
             running("rz", "C", "h100", [("n4", range(2))], NOW - 0.5 * H, 8 * H),
             running("rf", "E", "h100", [("n5", range(4))], NOW - 5 * H, 8 * H)]
         + _gangs(8) + [_long(4, gpus_per_node=2)], USAGE5,
         started={},
         reserved={"GD": (("n2", "n5"), 46860.0), "G": (("n3", "n4"), 63060.0)},
         pending={"G": (R.RESERVED, "reserved nodes n[3-4] for job G (8 h100 GPUs of project B), "
                        "expected start t=63060 (in 7.52h); 2 jobs there end or lose protection "
                        "by then"),
                  "GD": (R.RESERVED, "reserved nodes n[2,5] for job GD (8 h100 GPUs of project "
                         "D), expected start t=46860 (in 3.02h); 2 jobs there end or lose "
                         "protection by then"),
                  "a": (R.HELD_FOR_RESERVATION,
                        "the 2 free h100 GPUs on n2 are held for job GD's reservation (expected "
                        "start t=46860 (in 3.02h)), and the 2 free h100 GPUs on n4 for job G's "
                        f"(expected start t=63060 (in 7.52h)); {HOLD}if sooner), past those "
                        "starts")}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reserved_nodes(case: Case):
    check_case(case)
