"""The fair measure counts only demand that could run (optalloc.demand, stop 52).

`Ledger.shortfalls`' fair part (what each node was owed of its fair share: an idle sibling's
share flowing to the others, DESIGN.md rule 2) caps each project at its *placeable* demand:
GPUs of allocated jobs that fit at once on the up nodes (state up: not down, not draining)
of a type they may use and their project has a share of, by the shape rule (a gang runs on
one type), at most the up GPUs of the types they fit. The published owed (min(entitled,
demanded), the fairness metric and the floors' debt) keeps every allocated job's GPUs.

Every expectation is worked out by hand in its comment.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3

import numpy as np
import pytest

from optalloc.clock import SimClock
from optalloc.cycle import run_cycle
from optalloc.dashboard.readonly import ReadOnlyStore
from optalloc.demand import Demand
from optalloc.ledger import Ledger
from optalloc.org import OrgTree
from optalloc.sim.engine import simulate
from optalloc.sim.metrics import build_ledger
from optalloc.sim.policies import make_policy
from optalloc.sim.runner import SimulatedRunner
from optalloc.sim.scenario import NodeEvent, Scenario
from optalloc.state import SCHEMA_VERSION, StateStore
from optalloc.types import (Config, GpuType, Interval, Job, Node, NodeState, OrgNode, Policy,
                            SolverSettings)
from tests.test_fairness_over_time_judge_cases import _window, endless, flat
from tests.test_idle_share_judge_cases import only, typed

H = 3600.0
TYPES = (GpuType("h100"), GpuType("a100"))


def org3(**shares):
    return OrgTree.build(flat(**(shares or {"A": 1, "B": 1, "C": 1})), [g.name for g in TYPES])


def nodes(a100=NodeState.UP):
    """3 x 8 h100 (n1-n3) and one 8-GPU a100 node (n4) in state `a100`."""
    return (Node("n1", "h100", 8), Node("n2", "h100", 8), Node("n3", "h100", 8),
            Node("n4", "a100", 8, state=a100))


def job(jid, project, gpus, types=(), gpn=None, min_h=1.0):
    return Job(jid, project, gpus, min_runtime_s=min_h * H, gpu_types=tuple(types),
               gpus_per_node=gpn, duration_s=H)


JOBS = (
    job("a-gang", "A", 16),  # 8 + 8 on h100: fits
    job("a-pieces", "A", 8, ("h100",), gpn=4),  # 4 + 4 on two h100 nodes: fits
    job("c-a100", "C", 1, ("a100",)),  # only where n4 is up
    job("c-a100b", "C", 2, ("a100",)),
    job("d-gang", "B", 32),  # 4 whole nodes of one type: h100 has 3, a100 1 -> never
    job("b-one", "B", 1),  # anywhere
    job("b-unalloc", "B", 4, min_h=0.0),  # unallocated: no demand of either kind
)


# ------------------------------------------------------------------------------ the rule


@pytest.mark.parametrize("a100, placeable", [
    # n4 down: C's a100-only jobs fit nowhere; B's 32-GPU gang needs 4 whole nodes of one
    # type (h100 has 3): only B's 1 GPU counts. Owed demand: A 24, B 33, C 3 regardless. A
    # and B, both confined to the 24 up h100 GPUs then, want 25 of them: B its 1, A the
    # other 23 (optalloc.confined, stop 53)
    (NodeState.DOWN, {"A": 23, "B": 1}),
    # draining takes no new work (rule 5): as down
    (NodeState.DRAIN, {"A": 23, "B": 1}),
    # n4 up: C's 3 GPUs count again; B's gang still cannot run (a gang runs on one type)
    (NodeState.UP, {"A": 24, "B": 1, "C": 3}),
])
def test_a_job_counts_as_placeable_only_where_it_fits_the_up_nodes(a100, placeable):
    d = Demand.of(JOBS, org3(), nodes(a100))
    assert d.by_project() == {"A": 24, "B": 33, "C": 3}  # the published owed's: unchanged
    assert d.placeable_by_project() == placeable
    assert d.total == 24 + 33 + 3 + 4


def test_placeable_demand_follows_the_nodes_and_the_queue_kept_job_by_job():
    # the simulator's way (add / set_nodes) gives what cron's (Demand.of) gives
    d = Demand(org3(), nodes(NodeState.DOWN))
    for j in JOBS:
        d.add(j)
    assert d.placeable_by_project() == {"A": 23, "B": 1}
    assert d.set_nodes(nodes(NodeState.UP)) is True  # C's jobs can run again
    assert d.placeable_by_project() == Demand.of(JOBS, org3(), nodes()).placeable_by_project()
    assert d.set_nodes(nodes(NodeState.UP)) is False  # nothing changed
    d.add(JOBS[2], -1)  # c-a100 ends
    assert d.placeable_by_project() == {"A": 24, "B": 1, "C": 2}
    assert d.set_nodes(nodes(NodeState.DOWN)) is True
    assert d.placeable_by_project() == {"A": 23, "B": 1}
    d.add(JOBS[3], -1)  # c-a100b ends while it cannot run: the owed demand drops, no error
    assert d.by_project() == {"A": 24, "B": 33}
    # C asks nothing now, but A's gang may use the a100 node again: A and B no longer share
    # only the 24 h100 GPUs (optalloc.confined), A 24
    assert d.set_nodes(nodes(NodeState.UP)) is True
    assert d.placeable_by_project() == {"A": 24, "B": 1}


def test_a_project_confined_to_one_type_can_want_no_more_than_its_up_gpus():
    # 20 of C's 1-GPU a100 jobs: 20 GPUs asked, the one a100 node holds 8 at once
    jobs = [job(f"c{i}", "C", 1, ("a100",)) for i in range(20)]
    d = Demand.of(jobs, org3(), nodes())
    assert d.by_project() == {"C": 20}
    assert d.placeable_by_project() == {"C": 8}


def test_a_project_with_no_share_on_the_only_up_type_is_not_placeable():
    # C has shares only on a100 (share_by_type h100 0): its any-type job is owed demand (a100
    # is a shared type it may use) but with n4 down it could run only as unallocated work
    org = OrgTree.build(OrgNode("root", children=(
        OrgNode("A"), OrgNode("C", share_by_type={"h100": 0.0}))), [g.name for g in TYPES])
    d = Demand.of([job("c", "C", 2), job("a", "A", 2)], org, nodes(NodeState.DOWN))
    assert d.by_project() == {"A": 2, "C": 2}
    assert d.placeable_by_project() == {"A": 2}


# ------------------------------------------------------------------------------ the ledger


def ledger():
    led = Ledger(TYPES, org3(), Policy(lookback_s=24 * H))
    led.record_capacity(0.0, {"h100": 24, "a100": 0})
    return led


def test_the_fair_shortfall_leaves_out_unplaceable_demand_the_published_owed_keeps_it():
    # 24 h100 GPUs up, A = B = C: entitled 8 each an hour. A and B ask 100, C 8 that cannot
    # run. Over 2 h A gets 16 an hour, B 8, C 0.
    # fair: C's 8 flow: A 12, B 12 an hour -> B short 4 an hour = 8; A none (16 > 12)
    # published owed: min(8, demand): A 8, B 8, C 8 an hour -> C short 16, B none
    led = ledger()
    led.record_demand(0.0, {"A": 100, "B": 100, "C": 8}, {"A": 100, "B": 100})
    led.record_intervals([Interval("a", "A", "h100", 16, 0.0, 2 * H, True),
                          Interval("b", "B", "h100", 8, 0.0, 2 * H, True)])
    owed, fair = led.shortfalls(2 * H)
    assert owed == {"root": 0.0, "A": 0.0, "B": 0.0, "C": 16.0}
    assert fair == pytest.approx({"root": 0.0, "A": 0.0, "B": 8.0, "C": 0.0})
    # samples without a placeable part (a state DB from before) count all demand, as before:
    # C keeps its 8 (and is short 16 of it), A and B 8 each, B is not short
    old = ledger()
    old.record_demand(0.0, {"A": 100, "B": 100, "C": 8})
    old.record_intervals([Interval("a", "A", "h100", 16, 0.0, 2 * H, True),
                          Interval("b", "B", "h100", 8, 0.0, 2 * H, True)])
    assert old.shortfalls(2 * H) == (owed, {"root": 0.0, "A": 0.0, "B": 0.0, "C": 16.0})


def test_the_fair_shortfall_counts_a_project_again_once_its_jobs_can_run():
    # as above for 1 h; then n4 comes up (32 GPUs: 32/3 entitled each) and C's 8 can run,
    # C holds them: fair A 12, B 12 in hour 1 (B short 4); in hour 2 C's 8 is its own (capped
    # at 8 by the one a100 node) and A, B share 24: 12 each; B gets 12, A 12, C 8: no more
    # shortfall. The published owed: C short 8 in hour 1 (min(8, 8)), none in hour 2
    led = ledger()
    led.record_demand(0.0, {"A": 100, "B": 100, "C": 8}, {"A": 100, "B": 100})
    led.record_capacity(H, {"h100": 24, "a100": 8})
    led.record_demand(H, {"A": 100, "B": 100, "C": 8}, {"A": 100, "B": 100, "C": 8})
    led.record_intervals([Interval("a1", "A", "h100", 16, 0.0, H, True),
                          Interval("b1", "B", "h100", 8, 0.0, H, True),
                          Interval("a2", "A", "h100", 12, H, 2 * H, True),
                          Interval("b2", "B", "h100", 12, H, 2 * H, True),
                          Interval("c2", "C", "a100", 8, H, 2 * H, True)])
    owed, fair = led.shortfalls(2 * H)
    assert fair == pytest.approx({"root": 0.0, "A": 0.0, "B": 4.0, "C": 0.0})
    assert owed == pytest.approx({"root": 0.0, "A": 0.0, "B": 0.0, "C": 8.0})


# ------------------------------------------------------------------------------ over a day


def judge_cluster(c_jobs, events, hours=24.0):
    """The judge's case (tests/test_idle_share_judge_cases.py): 3 x 8 h100 + 1 x 8 a100, A = B
    = C, A two-node gangs, B 1-GPU jobs, the judges' policy."""
    sc = typed(endless("A", 60, gpus=16) + endless("B", 600) + c_jobs, flat(A=1, B=1, C=1),
               (("h100", 8), ("h100", 8), ("h100", 8), ("a100", 8)), TYPES)
    return dataclasses.replace(sc, node_events=events, duration_s=hours * H)


DOWN = (NodeEvent(0.0, ("n4",), NodeState.DOWN),)


def test_a_sibling_whose_gangs_are_larger_than_any_type_leaves_its_share_all_day():
    # C's jobs 32-GPU gangs, any type: 4 whole nodes of one type, never there (n4 down till
    # 12 h, then 3 h100 + 1 a100). First half 24 GPUs: C's 8 split, A's gang and B's 8 take
    # turns with B's 24, 144 / 144. Second half 32 GPUs: fair 16 / 16, A's gang + B's 16
    # fit together every hour: 192 / 192. A 336, B 336 (stop 51's code: 384 / 288)
    sc = judge_cluster(endless("C", 10, gpus=32),
                       DOWN + (NodeEvent(12 * H, ("n4",), NodeState.UP),))
    res = simulate(sc, make_policy("ilp"), check=True)
    got = {p: _window(res, p, 0.0, 24 * H) for p in "ABC"}
    assert got == {p: pytest.approx(v, abs=16.0) for p, v in
                   {"A": 336.0, "B": 336.0, "C": 0.0}.items()}


def test_when_the_down_type_comes_back_its_project_counts_again():
    # C's jobs a100-only; n4 down until 12 h. Morning: the judge's case, 144 / 144. At 12 h
    # C's placeable demand (0 till then) is back, capped at the a100 node's 8, in the samples
    # the simulator keeps and in its ledger's fair measure
    sc = judge_cluster(only(("a100",), endless("C", 100)),
                       DOWN + (NodeEvent(12 * H, ("n4",), NodeState.UP),), hours=13.0)
    res = simulate(sc, make_policy("ilp"), check=True)
    morning = {p: _window(res, p, 0.0, 12 * H) for p in "AB"}
    assert morning == {p: pytest.approx(144.0, abs=16.0) for p in "AB"}
    before = [d for d in res.demand if d.time < 12 * H]
    after = [d for d in res.demand if d.time >= 12 * H]
    assert before and all("C" not in d.placeable_by_project for d in before)
    assert all(d.allocated_by_project["C"] > 0 for d in res.demand)  # the published owed's
    assert after and all(d.placeable_by_project["C"] == 8 for d in after)
    # the fair measure: C short nothing in the morning (it wants nothing that can run),
    # the published owed 8 an hour (its 8 entitled of 24)
    owed, fair = build_ledger(res).shortfalls(12 * H)
    assert fair["C"] == 0.0 and owed["C"] == pytest.approx(96.0)


# ------------------------------------------------------------------------------ cron = simulator


EPOCH = 300.0
SIM_END = 2 * H
SAME_EVENTS = (NodeEvent(600.0, ("n4",), NodeState.DOWN), NodeEvent(3600.0, ("n4",), NodeState.UP))


def same_config() -> Config:
    return Config(gpu_types=TYPES, nodes=nodes(), org=flat(A=1, B=1, C=1),
                  policy=Policy(epoch_s=EPOCH, grace_s=0.0, checkpoint_interval_s=600.0,
                                min_runtime_cap_s=1800.0, lookback_s=2 * H,
                                solver=SolverSettings(backend="highs", time_limit_s=10.0)))


SAME_JOBS = tuple(
    [dataclasses.replace(job(f"a{i}", "A", 16, ("h100",), min_h=0.25), submit_time=10.0 * i,
                         duration_s=1800.0) for i in range(4)]
    + [dataclasses.replace(job(f"b{i}", "B", 1, min_h=0.25), submit_time=20.0 + i,
                           duration_s=1500.0) for i in range(40)]
    + [dataclasses.replace(job(f"c{i}", "C", 2, ("a100",), min_h=0.25), submit_time=30.0 + i,
                           duration_s=1200.0) for i in range(8)])


class Seen:
    def __init__(self, inner):
        self.inner, self.name, self.fair = inner, inner.name, {}

    def decide(self, snap):
        self.fair[snap.now] = np.array(snap.fair_owed_shortfall)
        return self.inner.decide(snap)


def test_cron_and_the_simulator_count_the_same_placeable_demand(tmp_path):
    # C's a100 jobs run, n4 fails at 600 s (they are requeued and cannot run: C's placeable
    # demand 0, its owed demand kept) and returns at 1 h. Cron, epoch by epoch on a state DB,
    # and the simulator record the same placeable samples and their decisions see the same
    # fair shortfalls
    cfg = same_config()
    store = StateStore(tmp_path / "state.db")
    runner = SimulatedRunner(cfg.nodes, grace_s=0.0, checkpoint_interval_s=600.0)
    clock, cron = SimClock(0.0), Seen(make_policy("greedy"))
    todo = sorted(SAME_JOBS, key=lambda j: (j.submit_time, j.id))
    t = 0.0
    while t <= SIM_END:
        clock.advance_to(t)
        for ev in SAME_EVENTS:
            if ev.time == t:
                for name in ev.nodes:
                    runner.set_node_state(name, ev.state, t)
        while todo and todo[0].submit_time <= t:
            store.add_job(todo.pop(0))
        run_cycle(cfg, store, runner, clock, scheduler=cron)
        t += EPOCH
    sim = Seen(make_policy("greedy"))
    res = simulate(Scenario("same", cfg, SAME_JOBS, duration_s=SIM_END, early_solve=False,
                            node_events=SAME_EVENTS), sim, check=True, refresh_s=EPOCH)

    sim_fit = [(d.time, dict(d.placeable_by_project)) for d in res.demand]
    stored = store.placeable_demand_samples()
    for t, fit in stored:
        assert fit == [v for s, v in sim_fit if s <= t][-1], f"placeable demand at t={t}"
    by_t = dict(stored)
    assert "C" not in by_t[900.0] and "C" in by_t[600.0 - EPOCH] and by_t[3600.0]["C"] == 8
    assert len(sim.fair) >= 6
    for t, fair in sim.fair.items():
        np.testing.assert_allclose(cron.fair[t], fair, atol=1e-9, err_msg=f"t={t}")
    assert any(f.any() for f in sim.fair.values())  # B was short of its fair share
    store.close()


# ------------------------------------------------------------------------------ old state DBs


def test_a_state_db_from_before_opens_reads_and_gains_the_column(tmp_path):
    path = tmp_path / "state.db"
    with StateStore(path) as s:  # then made as an older optalloc made it: no placeable column
        s.record_capacity(0.0, {"h100": 24, "a100": 0})
    raw = sqlite3.connect(path)
    raw.execute("DROP TABLE demand")
    raw.execute("CREATE TABLE demand (t REAL PRIMARY KEY, by_project TEXT NOT NULL)")
    raw.execute("INSERT INTO demand (t, by_project) VALUES (0.0, ?)",
                (json.dumps({"A": 100, "B": 100, "C": 8}),))
    raw.commit()
    raw.close()
    tree = org3()
    # read-only (the dashboard): nothing written, the old samples read as all demand
    ro = ReadOnlyStore(path)
    assert ro.placeable_demand_samples() == [(0.0, None)]
    led = ro.ledger(TYPES, tree, Policy(lookback_s=24 * H))
    assert led.shortfalls(H)[1] == {"root": 24.0, "A": 8.0, "B": 8.0, "C": 8.0}
    ro.close()
    # a writable store adds the column; the version stays (an older optalloc still reads
    # and writes the file: it leaves the column NULL, read as all demand)
    with StateStore(path) as s:
        assert s.schema_version() == SCHEMA_VERSION == 1
        assert s.demand_samples() == [(0.0, {"A": 100, "B": 100, "C": 8})]
        assert s.placeable_demand_samples() == [(0.0, None)]
        s.record_demand(H, {"A": 100, "B": 100, "C": 8}, {"A": 100, "B": 100})
        s.record_intervals([Interval("a", "A", "h100", 12, 0.0, 2 * H, True),
                            Interval("b", "B", "h100", 12, 0.0, 2 * H, True)])
        assert s.placeable_demand_samples() == [(0.0, None), (H, {"A": 100, "B": 100})]
        # hour 0 counts C's 8 (all demand), hour 1 not: A, B fair 8 then 12, got 12 each;
        # C fair 8 then 0, got nothing: short 8 (the published owed: 8 both hours)
        owed, fair = s.ledger(TYPES, tree, Policy(lookback_s=24 * H)).shortfalls(2 * H)
    assert fair == pytest.approx({"root": 0.0, "A": 0.0, "B": 0.0, "C": 8.0})
    assert owed == pytest.approx({"root": 0.0, "A": 0.0, "B": 0.0, "C": 16.0})
    with StateStore(path) as s:  # opened again: nothing more to add
        assert s.placeable_demand_samples()[-1] == (H, {"A": 100, "B": 100})
