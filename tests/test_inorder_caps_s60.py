"""The in-order caps of the fair-share targets (optalloc.model.targets, optalloc.model.inorder),
stop 60: what a project's own order cannot realize flows to its siblings first (README rule 2),
so siblings are capped one at a time; a single-node job that fits no node beside the protected
jobs takes no part of the floors (a job that cannot run leaves its share to others)."""

from __future__ import annotations

import numpy as np

from optalloc.model.inorder import blocked_jobs
from optalloc.model.pooled import fair_targets
from optalloc.model.requirements import compute_requirements
from optalloc.model.targets import most_lost_per_family
from optalloc.types import Node, OrgNode
from tests.test_scheme_order_property_s59 import (
    H,
    M,
    _cfg,
    _outcome,
    _q,
    _run,
    snapshot_of,
)


def _targets(cfg, ratio) -> dict:
    snap = snapshot_of(cfg, ratio)
    tg = fair_targets(snap, compute_requirements(snap))
    return dict(zip(snap.org.names, tg.target.sum(axis=1).tolist()))


def test_two_capped_siblings_are_capped_one_at_a_time_so_the_first_takes_what_the_other_leaves():
    # 12 GPUs (h0 4, h1 8), P0 = P1 (6 each), P0 ranked first. P0: A1 (share 1) a11 (1,
    # priority 1) and a14 (4); A2 (share 2) a22 (2, priority 1) and a26 (6: it fits h1 beside
    # b12, protected). P1 as in the s59 sibling case: b14 (4, past protection) and b12 (2,
    # protected) on h1, b22 (2, protected) on h0. Floors P0 6: A1 2, A2 4. A1's order on 2
    # realizes 1 (a14 would overshoot by 3), A2's on 4 realizes 2 (a26 by 4): both lose. Capped
    # together, P0 held 3. A2 loses more and is capped first; A1 on 4 then realizes a11 + a14
    # = 5 (an overshoot of 1 nearer than the shortfall of 3): A1 4, A2 2, P0 6 (rule 2).
    # The epoch then, as in the s59 case (rule 1: P0, first and below its floor, gains 3 floor
    # GPUs where P1 loses 2): b14 stopped for a14, a14 and a22 on h1, a11 on h0; a26 waits
    # (A2 at its target). Capped together, b14 was kept and a14 waited.
    jobs = [_q("a11", "A1", 1, mr=900.0, prio=1, submit=11.0),
            _q("a14", "A1", 4, prio=0, submit=1.0),
            _q("a22", "A2", 2, prio=1, submit=4.0),
            _q("a26", "A2", 6, prio=0, submit=9.0),
            _run("b14", "B1", [("h1", range(4))], 900.0, 3 * H, submit=6.0),
            _run("b12", "B1", [("h1", (4, 5))], 900.0, 10 * M, prio=2, submit=12.0),
            _run("b22", "B2", [("h0", (2, 3))], 2 * H, 90 * M, prio=1, submit=8.0)]
    org = OrgNode("root", children=(
        OrgNode("P0", children=(OrgNode("A1", share=1.0), OrgNode("A2", share=2.0))),
        OrgNode("P1", children=(OrgNode("B1", share=2.0), OrgNode("B2", share=1.0)))))
    cfg = _cfg([Node("h0", "h100", 4), Node("h1", "h100", 8)], org, jobs)
    ratio = {"P0": 2.0, "P1": 4.0, "A1": 2.0, "A2": 4.0, "B1": 0.0, "B2": 2.0}
    got = _targets(cfg, ratio)
    assert (got["P0"], got["A1"], got["A2"]) == (6.0, 4.0, 2.0)
    runs, pre, pend, _ = _outcome(cfg, ratio)
    assert runs["a14"] == ("h100", (("h1", 4),)) and runs["a22"] == ("h100", (("h1", 2),))
    assert runs["a11"] == ("h100", (("h0", 1),))
    assert pre == {"b14": ("PreemptedForFairShare", ("a14",))}
    assert pend == {"a26": "OverShare"}


def test_of_capped_siblings_the_one_losing_most_is_capped_per_family():
    # root {P {x, y}, Q {z}}: x loses 1, y 2, z 0.5: y in P, z alone in Q
    names = ("root", "P", "x", "y", "Q", "z")

    class Org:
        parent = np.array([-1, 0, 1, 1, 0, 4])

    capped = np.array([False, False, True, True, False, True])
    lost = np.array([0.0, 0.0, 1.0, 2.0, 0.0, 0.5])
    out = most_lost_per_family(Org, capped, lost)
    assert [n for n, c in zip(names, out) if c] == ["y", "z"]


def test_a_gang_is_never_blocked_a_single_node_job_beside_protected_jobs_is():
    # 2 x 8: A's protected 4 on each node; B's 8-GPU job fits no node beside them, C's 16-GPU
    # gang neither: only B's is blocked (a gang keeps its claim while its nodes free)
    jobs = [_run("p0", "A", [("n0", range(4))], 2 * H, 30 * M),
            _run("p1", "A", [("n1", range(4))], 2 * H, 30 * M),
            _q("b8", "B", 8), _q("c16", "C", 16), _q("b4", "B", 4, submit=1.0)]
    org = OrgNode("root", children=(OrgNode("A"), OrgNode("B"), OrgNode("C")))
    cfg = _cfg([Node("n0", "h100", 8), Node("n1", "h100", 8)], org, jobs)
    snap = snapshot_of(cfg, {"A": 0.0, "B": 0.0, "C": 0.0})
    got = blocked_jobs(snap, compute_requirements(snap))
    assert [j.id for j, b in zip(snap.jobs, got) if b] == ["b8"]
