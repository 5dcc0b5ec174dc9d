"""Prometheus exposition of the demo state: /metrics and the node_exporter textfile parse with
the official client's parser, and hold the values of the independent sources (the ledger
report's JSON, the plan files, the config)."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families

from optalloc.cli import main
from optalloc.config import load_config
from optalloc.dashboard.data import gather
from optalloc.dashboard.metrics import exposition
from optalloc.dashboard.readonly import ReadOnlyStore


def parse(text: str) -> dict[tuple, float]:
    """{(name, ((label, value), ...)): value} of every sample."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


@pytest.fixture(scope="module")
def metrics(demo_state):
    with ReadOnlyStore(demo_state.state) as store:
        dash = gather(load_config(demo_state.config), store)
    return parse(exposition(dash).decode())


def value(metrics, name, **labels):
    return metrics[(name, tuple(sorted(labels.items())))]


def test_every_org_node_has_the_ledger_reports_figures(metrics, demo_state, capsys):
    assert main(["ledger", "report", "--config", str(demo_state.config), "--state",
                 str(demo_state.state), "--now", demo_state.now, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    for r in rows:
        o = r["name"]
        assert value(metrics, "optalloc_org_share", org=o) == r["share"]
        assert value(metrics, "optalloc_org_usage_ratio", org=o) == pytest.approx(r["ratio"])
        assert value(metrics, "optalloc_org_usage_gpu_hours", org=o) == pytest.approx(r["usage_gpu_h"])
        assert value(metrics, "optalloc_org_owed_gpu_hours", org=o) == pytest.approx(r["owed_gpu_h"])
        assert value(metrics, "optalloc_org_delivered_gpu_hours", org=o) == pytest.approx(
            r["delivered_gpu_h"])
        assert value(metrics, "optalloc_org_met_gpu_hours", org=o) == pytest.approx(r["met_gpu_h"])
        if r["met_owed"] is not None:
            assert value(metrics, "optalloc_org_owed_delivered_ratio", org=o,
                         form="hourly") == pytest.approx(r["met_owed"])


def test_gpus_held_and_the_queue_match_the_plan(metrics, demo_state):
    plan = json.loads(demo_state.plans[-1].read_text())
    config = load_config(demo_state.config)
    project = {j.id: j.project for j in config.jobs}
    held: Counter = Counter()
    for p in plan["placements"]:
        held[(project[p["job_id"]], p["gpu_type"], str(p["allocated"]).lower())] += sum(
            len(a["gpus"]) for a in p["nodes"])
    for (proj, t, alloc), n in held.items():
        assert value(metrics, "optalloc_org_gpus_held", org=proj, gpu_type=t, allocated=alloc) == n
    reasons = Counter(p["code"] for p in plan["pending"] + plan["preemptions"])
    assert {k[1][0][1]: v for k, v in metrics.items()
            if k[0] == "optalloc_queue_reason_jobs"} == dict(reasons)
    pending = sum(v for k, v in metrics.items()
                  if k[0] == "optalloc_queue_jobs" and ("state", "pending") in k[1])
    assert pending == len(plan["pending"])


def test_the_epoch_solver_and_cluster_figures(metrics, demo_state):
    plan = json.loads(demo_state.plans[-1].read_text())
    rep = plan["report"]
    assert value(metrics, "optalloc_epoch_id") == 2
    assert value(metrics, "optalloc_epoch_solver_gap_ratio") == pytest.approx(rep["gap"])
    assert value(metrics, "optalloc_epoch_solver_seconds", phase="solve") == pytest.approx(
        rep["solve_s"])
    assert value(metrics, "optalloc_epoch_solver_info", backend=rep["backend"],
                 status=rep["status"]) == 1
    assert value(metrics, "optalloc_epoch_degraded") == (1 if plan["degraded"] else 0)
    for code, n in Counter(p["code"] for p in plan["preemptions"]).items():
        assert value(metrics, "optalloc_epoch_preemptions", code=code) == n
    both = Counter(p["code"] for d in demo_state.plans
                   for p in json.loads(d.read_text())["preemptions"])
    for code, n in both.items():
        assert value(metrics, "optalloc_history_preemptions", code=code) == n
    config = load_config(demo_state.config)
    for t in ("h100", "b200"):
        for s in ("up", "drain", "down"):
            assert value(metrics, "optalloc_cluster_gpus", gpu_type=t, state=s) == sum(
                n.gpus for n in config.nodes if n.gpu_type == t and n.state.value == s)
    planned = {d["node"]: d for d in plan.get("drains", ())}
    for node in (n.name for n in config.nodes if n.state.value != "up"):
        if planned:  # the optimizer's drain progress
            left = len(planned[node]["staying"]) + len(planned[node]["leaving"])
        else:  # what still runs there after the plan
            left = sum(any(a["node"] == node for a in p["nodes"]) for p in plan["placements"])
        assert value(metrics, "optalloc_drain_jobs_left", node=node) == left
        assert value(metrics, "optalloc_drain_ready", node=node) == (1 if left == 0 else 0)


def test_waits_by_class_are_quantiles_of_the_waiting_jobs(metrics, demo_state):
    import numpy as np

    with ReadOnlyStore(demo_state.state) as store:
        dash = gather(load_config(demo_state.config), store)
    for cls in ("debug", "large", "other", "unallocated"):
        w = [r.wait_s for r in dash.queue if r.state != "running" and r.cls == cls]
        if not w:
            continue
        assert value(metrics, "optalloc_queue_wait_seconds", **{"class": cls, "quantile": "1"}) == max(w)
        assert value(metrics, "optalloc_queue_wait_seconds",
                     **{"class": cls, "quantile": "0.5"}) == pytest.approx(np.quantile(w, 0.5))


def test_the_textfile_from_epoch_is_the_same_exposition(demo_state, tmp_path, capsys):
    import sqlite3

    db = tmp_path / "state.db"
    src, dst = sqlite3.connect(demo_state.state), sqlite3.connect(db)
    src.backup(dst)
    src.close()
    dst.close()
    prom = tmp_path / "optalloc.prom"
    assert main(["epoch", "--config", str(demo_state.config), "--state", str(db), "--now",
                 "2026-11-29T13:05:00Z", "--metrics-file", str(prom)]) == 0
    capsys.readouterr()
    text = prom.read_text()
    got = parse(text)
    assert value(got, "optalloc_epoch_id") == 3
    assert value(got, "optalloc_epoch_timestamp_seconds") == 1795957500.0
    with ReadOnlyStore(db) as store:
        same = exposition(gather(load_config(demo_state.config), store)).decode()
    assert text == same
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file left


def test_label_values_from_names_are_escaped_and_infinite_ratios_are_inf(tmp_path, capsys):
    (tmp_path / "c.yaml").write_text(
        'gpu_types: [{name: h100}]\nnodes: [{name: n1, gpu_type: h100, gpus: 4}]\n'
        'org: {name: root, children: [{name: "a\\"b\\\\c d", share: 1}, '
        '{name: zero, share: 0}, {name: other, share: 1}]}\n'
        'jobs: [{id: z, project: zero, gpus: 4, min_runtime: 1h, state: running, '
        'start_time: 0, placement: {gpu_type: h100, nodes: [{node: n1, gpus: [0,1,2,3]}]}}]\n')
    prom = tmp_path / "o.prom"
    assert main(["epoch", "--config", str(tmp_path / "c.yaml"), "--state", str(tmp_path / "s.db"),
                 "--now", "3600", "--metrics-file", str(prom)]) == 0
    capsys.readouterr()
    got = parse(prom.read_text())
    assert value(got, "optalloc_org_share", org='a"b\\c d') == 1
    assert math.isinf(value(got, "optalloc_org_usage_ratio", org="zero"))
