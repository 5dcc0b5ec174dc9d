"""The in-order caps on a pooled budget (optalloc.model.pooled, several gpu_types of one
billing weight and the same shares): applied as per type (stop 60, optalloc.model.targets),
one capped sibling of a family a pass, so what one's order cannot realize flows to the other
first (README rule 2). Until stop 61 the pooled path capped every short leaf at once."""

from __future__ import annotations

from optalloc.model.pooled import fair_targets, pooled_applies
from optalloc.model.requirements import compute_requirements
from optalloc.types import Node, OrgNode
from tests.test_scheme_order_property_s59 import H, M, _cfg, _outcome, _q, _run, snapshot_of


def test_on_a_pooled_budget_two_capped_siblings_are_capped_one_at_a_time():
    # stop 60's sibling case on two types of one billing weight: h0 4 h100, h1 8 b200, one
    # budget of 12. P0 = P1 (6 each), P0 ranked first (ratio 2.0 against 4.0). P0: A1 (share
    # 1) a11 (1, priority 1) and a14 (4); A2 (share 2) a22 (2, priority 1) and a26 (6). P1:
    # B1's b14 (4, past its protection) and b12 (2, protected) on h1, B2's b22 (2, protected)
    # on h0. Floors P0 6: A1 2, A2 4. A1's order on 2 realizes 1 (a14 would overshoot by 3),
    # A2's on 4 realizes 2 (a26 by 4). A2 loses more and is capped first; A1 on 4 then
    # realizes a11 + a14 = 5 (1 over is nearer than 3 under): A1 4, A2 2, P0 6 (rule 2).
    # The epoch (rule 1: P0, first and below its floor, gains 3 floor GPUs where P1 loses 2):
    # b14 stops for a14, a14 and a22 start on h1 beside b12, a11 on h0 beside b22; a26 waits
    # (A2 at its target). Capped together: A1 1, A2 2, P0 3 of its floor 6, one GPU in no
    # target, b14 kept and a14 waiting for capacity.
    jobs = [_q("a11", "A1", 1, mr=900.0, prio=1, submit=11.0),
            _q("a14", "A1", 4, prio=0, submit=1.0),
            _q("a22", "A2", 2, prio=1, submit=4.0),
            _q("a26", "A2", 6, prio=0, submit=9.0),
            _run("b14", "B1", [("h1", range(4))], 900.0, 3 * H, submit=6.0, gpu_type="b200"),
            _run("b12", "B1", [("h1", (4, 5))], 900.0, 10 * M, prio=2, submit=12.0,
                 gpu_type="b200"),
            _run("b22", "B2", [("h0", (2, 3))], 2 * H, 90 * M, prio=1, submit=8.0)]
    org = OrgNode("root", children=(
        OrgNode("P0", children=(OrgNode("A1", share=1.0), OrgNode("A2", share=2.0))),
        OrgNode("P1", children=(OrgNode("B1", share=2.0), OrgNode("B2", share=1.0)))))
    cfg = _cfg([Node("h0", "h100", 4), Node("h1", "b200", 8)], org, jobs,
               types=("h100", "b200"))
    ratio = {"P0": 2.0, "P1": 4.0, "A1": 2.0, "A2": 4.0, "B1": 0.0, "B2": 2.0}
    snap = snapshot_of(cfg, ratio)
    assert pooled_applies(snap)
    tg = fair_targets(snap, compute_requirements(snap))
    got = dict(zip(snap.org.names, tg.target.sum(axis=1).tolist()))
    assert got == {"root": 12.0, "P0": 6.0, "A1": 4.0, "A2": 2.0, "P1": 6.0, "B1": 4.0,
                   "B2": 2.0}
    runs, pre, pend, _ = _outcome(cfg, ratio)
    assert runs == {"a11": ("h100", (("h0", 1),)), "b22": ("h100", (("h0", 2),)),
                    "a14": ("b200", (("h1", 4),)), "a22": ("b200", (("h1", 2),)),
                    "b12": ("b200", (("h1", 2),))}
    assert pre == {"b14": ("PreemptedForFairShare", ("a14",))}
    assert pend == {"a26": "OverShare"}
