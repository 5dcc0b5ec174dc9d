"""The team's order across type sets inside one priority: submit order (DESIGN.md rule 3,
"declared priority, then submit time"). optalloc.model.type_order links a job b to the latest
job of its own priority ahead of it in its project's order whose type set meets b's and that
fits b's place there, and past a debug job to the latest longer one; never a debug b to a
longer job (the debug allowance: a debug job may start while a longer job of its priority
waits). Until stop 55 only strictly higher priorities were linked across type sets, and a
later teammate of the same priority took an earlier one's place (the stop-54 judge's case,
tests/test_scheme_vs_greedy_judge_s54.py)."""

from __future__ import annotations

import pytest

from optalloc.model.requirements import compute_requirements
from optalloc.model.type_order import type_links
from optalloc.types import Job, Node

from test_scheme_vs_greedy_judge_s54 import H, _toy

NODES = [Node("h100-0", "h100", 4), Node("b200-0", "b200", 8), Node("b200-1", "b200", 8)]
DEBUG = 600.0  # min_runtime 10 min: a debug job


def _links(jobs) -> set[tuple[str, str, str]]:
    """(job ahead, job behind, the type of the behind job's start it holds back)."""
    _, snap = _toy(NODES, {"A": 1.0}, jobs, types=("h100", "b200"))
    req = compute_requirements(snap)
    a, c = type_links(snap, req)
    return {(snap.jobs[x].id, snap.jobs[req.cand_job[y]].id, snap.type_names[req.cand_type[y]])
            for x, y in zip(a.tolist(), c.tolist())}


def _job(jid, gpus, submit, types=None, mr=2 * H, prio=0):
    return Job(jid, "A", gpus, min_runtime_s=mr, submit_time=submit, priority=prio,
               gpu_types=types)


CASES = {
    "a later job of the same priority on fewer types waits for the earlier one":
        ([_job("a1", 4, 1.0), _job("a2", 16, 2.0, ("b200",))],
         {("a1", "a2", "b200")}),
    "an earlier job on fewer types is not held back by a later one":
        ([_job("a2", 16, 1.0, ("b200",)), _job("a1", 4, 2.0)],
         set()),
    "a debug job may pass a longer job of its priority on other types":
        ([_job("a1", 4, 1.0), _job("d", 1, 2.0, ("b200",), mr=DEBUG)],
         set()),
    "a longer job after a debug job is held back by both the debug job and the longer one "
    "before it":
        ([_job("a0", 1, 0.0), _job("d", 1, 1.0, mr=DEBUG), _job("b", 1, 2.0, ("b200",))],
         {("a0", "b", "b200"), ("d", "b", "b200")}),
    "a higher priority still comes first whatever the submit order":
        ([_job("b", 1, 0.0, ("b200",)), _job("a", 1, 5.0, prio=1)],
         {("a", "b", "b200")}),
    "a job ahead that does not fit the later job's place holds nothing back":
        ([_job("big", 16, 1.0), _job("s", 4, 2.0, ("b200",))],
         set()),
}


@pytest.mark.parametrize("name", list(CASES))
def test_type_order_links_inside_one_priority(name):
    jobs, want = CASES[name]
    assert _links(jobs) == want
