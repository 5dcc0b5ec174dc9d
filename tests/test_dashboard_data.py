"""What the dashboard gathers from the demo state, checked against independent sources: the
ledger report (`optalloc ledger report --json`), the plan files `optalloc epoch --out` wrote and
the config. Plus the read-only store, the plan's drains/reservations read tolerantly, and the
history cache."""

from __future__ import annotations

import json
import math
import sqlite3
from collections import Counter

import pytest

from optalloc.cli import main
from optalloc.config import load_config
from optalloc.dashboard.cluster import plan_drains, plan_reservations
from optalloc.dashboard.data import gather, slug
from optalloc.dashboard.history import HistoryRow, cache_text, history_rows, load_cache
from optalloc.dashboard.readonly import ReadOnlyStore
from optalloc.errors import StateError


@pytest.fixture(scope="module")
def demo(demo_state):
    config = load_config(demo_state.config)
    with ReadOnlyStore(demo_state.state) as store:
        dash = gather(config, store)
    plans = [json.loads(p.read_text()) for p in demo_state.plans]
    return demo_state, config, dash, plans


def recorded_inputs(demo_state) -> dict:
    """The inputs the last epoch recorded in the state DB (the plan file does not carry them)."""
    conn = sqlite3.connect(demo_state.state)
    (plan,) = conn.execute("SELECT plan FROM epochs ORDER BY id DESC LIMIT 1").fetchone()
    conn.close()
    return json.loads(plan)["inputs"]


def ledger_json(demo_state, capsys) -> dict:
    assert main(["ledger", "report", "--config", str(demo_state.config), "--state",
                 str(demo_state.state), "--now", demo_state.now, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_org_tree_carries_the_ledger_reports_figures_for_every_node(demo, capsys):
    demo_state, config, dash, _ = demo
    report = {r["name"]: r for r in ledger_json(demo_state, capsys)["rows"]}
    assert [r.name for r in dash.org] == list(report)
    for r in dash.org:
        want = report[r.name]
        for key in ("share", "usage_gpu_h", "entitled_gpu_h", "owed_gpu_h", "delivered_gpu_h",
                    "met_gpu_h", "untracked_gpu_h"):
            assert getattr(r.report, key) == pytest.approx(want[key]), (r.name, key)
        assert r.report.ratio == pytest.approx(want["ratio"])
        for key in ("met_owed", "period_owed"):
            got = getattr(r.report, key)
            assert (want[key] is None and math.isnan(got)) or got == pytest.approx(want[key])


def test_gpus_held_per_org_node_and_type_are_the_plans_placements(demo):
    _, config, dash, plans = demo
    projects = {j.id: j.project for j in config.jobs}
    held: Counter = Counter()
    unalloc: Counter = Counter()
    for p in plans[-1]["placements"]:
        target = held if p["allocated"] else unalloc
        n = sum(len(a["gpus"]) for a in p["nodes"])
        for org in dash.org_row(projects[p["job_id"]]).path + (dash.cluster,):
            target[(org, p["gpu_type"])] += n
    for r in dash.org:
        for t in dash.gpu_types:
            assert (r.held[t], r.unallocated[t]) == (held[(r.name, t)], unalloc[(r.name, t)])
    assert sum(dash.org[0].held.values()) + sum(dash.org[0].unallocated.values()) == sum(
        sum(len(a["gpus"]) for a in p["nodes"]) for p in plans[-1]["placements"])


def test_the_queue_shows_every_pending_and_preempted_job_with_the_plans_words(demo):
    demo_state, _, dash, plans = demo
    rows = {r.job_id: r for r in dash.queue}
    plan = plans[-1]
    for p in plan["pending"]:
        assert (rows[p["job_id"]].state, rows[p["job_id"]].code, rows[p["job_id"]].message) == (
            "pending", p["code"], p["message"])
    for p in plan["preemptions"]:
        assert (rows[p["job_id"]].state, rows[p["job_id"]].code) == ("preempted", p["code"])
    placed = {p["job_id"] for p in plan["placements"]}
    assert {r.job_id for r in dash.queue if r.state == "running"} <= placed
    ratios = recorded_inputs(demo_state)["usage_ratio"]
    for r in dash.queue:
        assert [v for _, v in r.path] == [ratios[o] for o, _ in r.path]
        assert r.path[-1][0] == r.project and len(r.path) == 2  # program, project


def test_the_map_has_every_node_with_its_state_and_drain_progress(demo):
    demo_state, config, dash, plans = demo
    assert [n.name for n in dash.nodes] == [n.name for n in config.nodes]
    recorded = {d["name"]: d["state"] for d in recorded_inputs(demo_state)["nodes"]}
    assert {n.name: n.state for n in dash.nodes} == recorded
    on_node: dict[str, set] = {}
    for p in plans[-1]["placements"]:
        for a in p["nodes"]:
            on_node.setdefault(a["node"], set()).add(p["job_id"])
    drains = {d.node: d for d in dash.drains}
    assert set(drains) == {n for n, s in recorded.items() if s != "up"}
    planned = {d["node"]: d for d in plans[-1].get("drains", ())}
    for name, d in drains.items():
        if planned:  # the optimizer reports drain progress: shown as it says
            p = planned[name]
            assert (d.jobs_left, d.ready, d.source) == (
                tuple(p["staying"]) + tuple(p["leaving"]), p["ready"], "plan")
        else:  # derived from what still runs there
            assert (set(d.jobs_left), d.ready, d.source) == (
                on_node.get(name, set()), not on_node.get(name), "derived")
    # the lookahead's reservations as the last plan has them (the demo's gangs may hold some)
    assert [r.job_id for r in dash.reservations] == [
        r["job_id"] for r in plans[-1].get("reservations", ())]


def test_history_has_one_row_per_epoch_with_the_plans_counts(demo):
    _, _, dash, plans = demo
    assert [h.epoch_id for h in dash.history] == [1, 2]
    for h, plan in zip(dash.history, plans):
        assert dict(h.preemptions) == dict(Counter(p["code"] for p in plan["preemptions"]))
        assert h.pending == len(plan["pending"])
        assert (h.status, h.gap) == (plan["report"]["status"], plan["report"]["gap"])
        assert h.gpus_allocated + h.gpus_unallocated == sum(
            len(a["gpus"]) for p in plan["placements"] for a in p["nodes"])


def test_history_rows_already_known_are_reused_and_plans_read_only_for_new_epochs(demo_state):
    with ReadOnlyStore(demo_state.state) as store:
        t1 = dict(store.epoch_ids(10))[1]
        sentinel = HistoryRow(1, t1, "cached", "cached", None, None, None, None, None, 0, 0, 0, 0)
        rows = history_rows(store, 10, 0, {1: sentinel})
        assert rows[0] is sentinel and rows[1].epoch_id == 2 and rows[1].status == "optimal"
        # a row cached from another state DB (same id, another time) is read again
        stale = HistoryRow(1, t1 - 1, "cached", "cached", None, None, None, None, None, 0, 0, 0, 0)
        assert history_rows(store, 10, 0, {1: stale})[0].status == "optimal"
        assert [r.epoch_id for r in history_rows(store, 1, 0)] == [2]


def test_the_history_cache_round_trips_and_a_broken_one_is_ignored(demo, tmp_path):
    _, _, dash, _ = demo
    path = tmp_path / "history.json"
    path.write_text(cache_text(list(dash.history)))
    assert list(load_cache(path).values()) == list(dash.history)
    for broken in ("", "{", '{"epochs": [{"epoch_id": 1}]}', '{"other": 1}'):
        path.write_text(broken)
        assert load_cache(path) == {}
    assert load_cache(tmp_path / "missing.json") == {}


@pytest.mark.parametrize(
    "case, plan, expected",
    [
        ("no drains key", {}, {}),
        ("the optimizer's drains with job ids",
         {"drains": [{"node": "n1", "jobs_left": ["a", "b"], "protected_until": 50,
                      "ready_for_repair": False}]},
         {"n1": (("a", "b"), 2, 50.0, False)}),
        ("a count instead of ids, ready derived from it",
         {"drains": [{"node": "n2", "jobs_left": 0}, {"name": "n3", "jobs": 3}]},
         {"n2": ((), 0, None, True), "n3": ((), 3, None, False)}),
        ("entries without a node are skipped", {"drains": [{"jobs_left": 1}, "n4", None]}, {}),
        ("optalloc's DrainStatus: staying and leaving jobs, when it empties",
         {"drains": [{"node": "n5", "staying": ["s1"], "leaving": ["l1", "l2"], "empty_at": 900,
                      "ready": False},
                     {"node": "n6", "staying": [], "leaving": [], "empty_at": None,
                      "ready": True}]},
         {"n5": (("s1", "l1", "l2"), 3, 900.0, False), "n6": ((), 0, None, True)}),
    ],
)
def test_plan_drains_are_read_tolerantly(case, plan, expected):
    got = plan_drains(plan, {"n1": "drain", "n2": "down"})
    assert {k: (d.jobs_left, d.n_left, d.empty_at, d.ready) for k, d in got.items()} == expected
    if "n5" in got:
        assert got["n5"].leaving == ("l1", "l2")
    assert all(d.source == "plan" for d in got.values())


@pytest.mark.parametrize(
    "case, plan, expected",
    [
        ("no reservations key", {}, []),
        ("job, nodes and expected start",
         {"reservations": [{"job_id": "big", "nodes": ["n1", "n2"], "expected_start": 100}]},
         [("big", ("n1", "n2"), 100.0)]),
        ("other spellings: job, node dicts, start",
         {"reservations": [{"job": "g", "nodes": [{"node": "n3"}], "start": "7"}]},
         [("g", ("n3",), 7.0)]),
        ("an unreadable start is unknown, a nameless entry skipped",
         {"reservations": [{"job_id": "x", "start": "soon"}, {"nodes": ["n1"]}]},
         [("x", (), None)]),
    ],
)
def test_plan_reservations_are_read_tolerantly(case, plan, expected):
    assert [(r.job_id, r.nodes, r.expected_start) for r in plan_reservations(plan)] == expected


def test_reservations_and_plan_drains_reach_the_map(demo_state, tmp_path):
    db = tmp_path / "state.db"
    src = sqlite3.connect(demo_state.state)
    dst = sqlite3.connect(db)
    src.backup(dst)
    src.close()
    (plan_text,) = dst.execute("SELECT plan FROM epochs ORDER BY id DESC LIMIT 1").fetchone()
    plan = json.loads(plan_text)
    plan["reservations"] = [{"job_id": "midtrain-009", "nodes": ["h100-128"],
                             "expected_start": plan["now"] + 3600}]
    plan["drains"] = [{"node": "h100-127", "staying": [], "leaving": ["pretrain-008"],
                       "empty_at": plan["now"] + 60, "ready": False}]
    dst.execute("UPDATE epochs SET plan = ? WHERE id = (SELECT MAX(id) FROM epochs)",
                (json.dumps(plan),))
    dst.commit()
    dst.close()
    with ReadOnlyStore(db) as store:
        dash = gather(load_config(demo_state.config), store)
    (res,) = dash.reservations
    assert (res.job_id, res.nodes) == ("midtrain-009", ("h100-128",))
    node = next(n for n in dash.nodes if n.name == "h100-128")
    assert {c.reserved_for for c in node.cells} == {"midtrain-009"}
    d127 = next(d for d in dash.drains if d.node == "h100-127")
    assert (d127.source, d127.jobs_left, d127.leaving) == ("plan", ("pretrain-008",),
                                                           ("pretrain-008",))


def test_the_read_only_store_reads_everything_and_writes_nothing(demo_state, tmp_path):
    before = demo_state.state.read_bytes()
    with ReadOnlyStore(demo_state.state) as store:
        assert store.last_epoch_id() == 2 and [i for i, _ in store.epoch_ids(1)] == [2]
        assert len(store.list_jobs()) > 0
        with pytest.raises(StateError, match="readonly"):
            store.record_event(0.0, None, "x")
        assert store.utilization_samples(0.0) == []  # the noop runner never sampled
    assert demo_state.state.read_bytes() == before
    with pytest.raises(StateError, match="no such state DB"):
        ReadOnlyStore(tmp_path / "missing.db")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(StateError, match="not an optalloc state file"):
        ReadOnlyStore(other)


@pytest.mark.parametrize(
    "name, expected",
    [("pretrain", "pretrain"), ("A_1-b", "A_1-b"), ("a b", "a_b-"), ("<script>", "_script_-")],
)
def test_org_pages_have_file_safe_names(name, expected):
    s = slug(name)
    assert s.startswith(expected) and all(c.isalnum() or c in "_-" for c in s)
    assert slug("a b") != slug("a_b")


def test_a_drain_without_a_plan_entry_empties_at_the_last_protection_end_plus_the_grace():
    # n1 drains with no drains entry in the plan; a (allocated, min_runtime 1 h) started at
    # 1000 stays until its protection ends at 4600, then its notice runs 60 s: empty at 4660
    # (the plan's own drains count the grace the same way: optalloc.plan.drain)
    from optalloc.dashboard.cluster import node_views
    from optalloc.types import Job, JobState, Node, NodeAlloc, NodeState, Placement, Policy

    pl = Placement("a", "h100", (NodeAlloc("n1", (0, 1)),), allocated=True)
    a = Job("a", "p", 2, min_runtime_s=3600.0, state=JobState.RUNNING, start_time=1000.0,
            placement=pl)
    _, drains, _ = node_views([Node("n1", "h100", 8, NodeState.DRAIN)], [a], None,
                              Policy(grace_s=60.0))
    (d,) = drains if isinstance(drains, list) else drains.values()
    assert (d.node, d.jobs_left, d.empty_at, d.ready, d.source) == ("n1", ("a",), 4660.0,
                                                                     False, "derived")
