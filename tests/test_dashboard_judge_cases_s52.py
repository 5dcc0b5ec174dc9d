"""An outside judge's hand-worked cases (s52): are the numbers and words the dashboard, `serve`
and the Prometheus metrics show true to the state DB and the plan? Each case builds a tiny state
DB with a few `optalloc epoch` turns and checks the whole outcome, worked out by hand:

* two 4-GPU nodes, alpha and beta share 1:1, each with a running 4-GPU job and a pending one
  (epochs at t=0 and t=3600): each holds 4 of its 4.0 entitled GPUs, used 4 GPU-h of its
  672 entitled (8 GPUs x 168 h / 2), ratio 4/672, owed = delivered = met = 4 GPU-h;
* a drain and a fair-share preemption (t=7200, three alpha jobs since t=0, one on draining n3
  protected to 8 h): alpha used 3 x 4 GPU x 2 h = 24 GPU-h, a1 is preempted for beta's b1;
* a lookahead reservation (four nodes, B's 8-GPU gang G waits for n2 + n3 until C's job on n3
  loses its protection at t=63000 = 17:30 UTC and has had its 60 s notice: t=63060 = 17:31
  UTC, stop 55).
"""

from __future__ import annotations

import html
import json
import os
import re
import sqlite3
import stat
import warnings

import pytest
from prometheus_client.parser import text_string_to_metric_families

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from optalloc.cli import main
from optalloc.dashboard import app as app_module
from optalloc.dashboard.app import Source, create_app
from optalloc.dashboard.readonly import ReadOnlyStore

TWO = """
gpu_types: [{name: h100}]
nodes: [{name: "n[1-2]", gpu_type: h100, gpus: 4}]
org:
  name: root
  children:
    - {name: alpha, share: 1}
    - {name: beta, share: 1}
jobs:
  - {id: a1, project: alpha, gpus: 4, min_runtime: 1h}
  - {id: a2, project: alpha, gpus: 4, min_runtime: 1h}
  - {id: b1, project: beta, gpus: 4, min_runtime: 1h}
  - {id: b2, project: beta, gpus: 8, min_runtime: 1h}
"""

DRAIN = """
gpu_types: [{name: h100}]
nodes:
  - {name: "n[1-2]", gpu_type: h100, gpus: 4}
  - {name: n3, gpu_type: h100, gpus: 4, state: drain}
org:
  name: root
  children:
    - {name: alpha, share: 1}
    - {name: beta, share: 1}
jobs:
  - {id: a1, project: alpha, gpus: 4, min_runtime: 1h, state: running, start_time: 0,
     placement: {gpu_type: h100, nodes: [{node: n1, gpus: [0,1,2,3]}]}}
  - {id: a2, project: alpha, gpus: 4, min_runtime: 1h, state: running, start_time: 0,
     placement: {gpu_type: h100, nodes: [{node: n2, gpus: [0,1,2,3]}]}}
  - {id: a3, project: alpha, gpus: 4, min_runtime: 8h, state: running, start_time: 0,
     placement: {gpu_type: h100, nodes: [{node: n3, gpus: [0,1,2,3]}]}}
  - {id: b1, project: beta, gpus: 4, min_runtime: 1h}
"""

RESERVE = """
gpu_types: [{name: h100}]
nodes: [{name: "n[0-3]", gpu_type: h100, gpus: 4}]
policy: {max_reservations: 2}
org:
  name: root
  children:
    - {name: A, share: 1}
    - {name: B, share: 1}
    - {name: C, share: 1}
jobs:
  - {id: rb0, project: B, gpus: 4, min_runtime: 8h, state: running, start_time: 34200,
     placement: {gpu_type: h100, nodes: [{node: n0, gpus: [0,1,2,3]}]}}
  - {id: rb1, project: B, gpus: 4, min_runtime: 8h, state: running, start_time: 34200,
     placement: {gpu_type: h100, nodes: [{node: n1, gpus: [0,1,2,3]}]}}
  - {id: ry, project: C, gpus: 4, min_runtime: 8h, state: running, start_time: 34200,
     placement: {gpu_type: h100, nodes: [{node: n3, gpus: [0,1,2,3]}]}}
  - {id: G, project: B, gpus: 8, min_runtime: 8h}
"""

QUOTED = 'q\\"b\\\\s ü'  # yaml for q"b\s ü
QUOTED_NAME = 'q"b\\s ü'
EVIL_PROJECT = "</script><img src=x onerror=alert(7)>"
EVIL_JOB = "j</script><svg onload=alert(8)>"
EVIL = f"""
gpu_types: [{{name: h100}}]
nodes: [{{name: "n[1-2]", gpu_type: h100, gpus: 4}}]
org:
  name: root
  children:
    - {{name: "{QUOTED}", share: 1}}
    - {{name: "{EVIL_PROJECT}", share: 1}}
jobs:
  - {{id: "{EVIL_JOB}", project: "{EVIL_PROJECT}", gpus: 4, min_runtime: 1h,
     command: [python, secret-argv-token.py, --key, hunter2-secret]}}
  - {{id: "j2", project: "{EVIL_PROJECT}", gpus: 8, min_runtime: 1h}}
  - {{id: "k1", project: "{QUOTED}", gpus: 4, min_runtime: 1h}}
"""

TREE = """
gpu_types: [{name: h100}]
nodes: [{name: "n[1-3]", gpu_type: h100, gpus: 4}]
org:
  name: lab
  children:
    - name: vision
      share: 2
      children:
        - {name: det, share: 1}
        - {name: seg, share: 1}
    - {name: nlp, share: 1}
jobs:
  - {id: d1, project: det, gpus: 4, min_runtime: 1h}
  - {id: s1, project: seg, gpus: 4, min_runtime: 1h}
  - {id: n1, project: nlp, gpus: 4, min_runtime: 1h}
  - {id: n2, project: nlp, gpus: 4, min_runtime: 1h}
"""


def run_epochs(root, text, times, *extra):
    root.mkdir(parents=True, exist_ok=True)
    cfg = root / "c.yaml"
    cfg.write_text(text)
    plans = []
    for t in times:
        plan = root / f"plan-{t}.json"
        assert main(["epoch", "--config", str(cfg), "--state", str(root / "s.db"), "--now",
                     str(t), "--out", str(plan), *extra]) == 0
        plans.append(json.loads(plan.read_text()))
    return cfg, root / "s.db", plans


def parse(text: str) -> dict[tuple, float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def metrics_of(cfg, db, tmp_path, capsys) -> dict[tuple, float]:
    prom = tmp_path / "m.prom"
    site = tmp_path / "m-site"
    assert main(["dashboard", "--config", str(cfg), "--state", str(db), "--out", str(site),
                 "--metrics-file", str(prom)]) == 0
    capsys.readouterr()
    return parse(prom.read_text())


def v(m, name, **labels):
    return m[(name, tuple(sorted(labels.items())))]


def org_cells(page: str, org: str) -> list[str]:
    """The data-v values (else the text) of the org table's row for `org`."""
    row = re.search(rf'<tr class="[a-z]+" data-org="{re.escape(html.escape(org, quote=True))}">'
                    r"(.*?)</tr>", page, re.S).group(1)
    out = []
    for m in re.finditer(r"<td([^>]*)>(.*?)</td>", row, re.S):
        dv = re.search(r'data-v="([^"]*)"', m.group(1))
        out.append(dv.group(1) if dv else m.group(2).strip())
    return out


def queue_rows(page: str) -> dict[str, dict]:
    out = {}
    for m in re.finditer(r'<tr data-state="([^"]+)" data-code="([^"]*)" data-class="[^"]*" '
                         r'data-job="([^"]+)"[^>]*>(.*?)</tr>', page, re.S):
        msg = re.search(r'<td class="msg">(.*?)</td>', m.group(4), re.S).group(1)
        out[html.unescape(m.group(3))] = {"state": m.group(1), "code": m.group(2),
                                          "message": html.unescape(msg)}
    return out


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    root = tmp_path_factory.mktemp("two")
    cfg, db, plans = run_epochs(root, TWO, (0, 3600), "--dashboard", str(root / "site"),
                                "--metrics-file", str(root / "o.prom"))
    return root, cfg, db, plans


@pytest.fixture(scope="module")
def drain(tmp_path_factory):
    root = tmp_path_factory.mktemp("drain")
    cfg, db, plans = run_epochs(root, DRAIN, (7200,), "--dashboard", str(root / "site"),
                                "--metrics-file", str(root / "o.prom"))
    return root, cfg, db, plans


@pytest.fixture(scope="module")
def evil(tmp_path_factory):
    root = tmp_path_factory.mktemp("evil")
    cfg, db, plans = run_epochs(root, EVIL, (1000,), "--dashboard", str(root / "site"),
                                "--metrics-file", str(root / "o.prom"))
    return root, cfg, db, plans


# ------------------------------------------------------------------ numbers of the org tree


def test_two_even_projects_each_show_4_of_4_gpus_4_gpu_hours_used_of_672_and_all_owed_met(
        two, capsys):
    root, cfg, db, _ = two
    page = (root / "site" / "index.html").read_text()
    ratio = 4 / 672
    for org in ("alpha", "beta"):
        cells = org_cells(page, org)
        # name, share, entitlement, held/entitled, unallocated, usage, entitled GPU-h, ratio,
        # owed, delivered, met, met/owed, period, running, waiting
        assert cells[1:5] == ["1.0", "50.0", "4", "0"]
        assert "4 / 4.0" in page.split(f'data-org="{org}"')[1].split("</tr>")[0]
        assert [float(x) for x in cells[5:13]] == pytest.approx(
            [4.0, 672.0, ratio, 4.0, 4.0, 4.0, 1.0, 1.0])
        assert cells[13:] == ["1", "1"]
    assert org_cells(page, "root")[3:6] == ["8", "0", "8.0"]
    assert "8 + 0 of 8 up" in page and "2 running, 2 pending" in page
    # the ledger report says the same
    assert main(["ledger", "report", "--config", str(cfg), "--state", str(db), "--now", "3600",
                 "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    for org in ("alpha", "beta"):
        assert (rows[org]["usage_gpu_h"], rows[org]["entitled_gpu_h"], rows[org]["owed_gpu_h"],
                rows[org]["delivered_gpu_h"], rows[org]["met_gpu_h"]) == (4.0, 672.0, 4.0, 4.0,
                                                                          4.0)


def test_the_metrics_of_two_even_projects_hold_the_hand_worked_gauges(two):
    root, _, _, _ = two
    m = parse((root / "o.prom").read_text())
    for org in ("alpha", "beta"):
        assert v(m, "optalloc_org_share", org=org) == 1
        assert v(m, "optalloc_org_entitlement_ratio", org=org, gpu_type="h100") == 0.5
        assert v(m, "optalloc_org_entitled_gpus", org=org, gpu_type="h100") == 4
        assert v(m, "optalloc_org_gpus_held", org=org, gpu_type="h100", allocated="true") == 4
        assert v(m, "optalloc_org_gpus_held", org=org, gpu_type="h100", allocated="false") == 0
        assert v(m, "optalloc_org_usage_gpu_hours", org=org) == 4
        assert v(m, "optalloc_org_entitled_gpu_hours", org=org) == 672
        assert v(m, "optalloc_org_usage_ratio", org=org) == pytest.approx(4 / 672)
        for name in ("owed", "delivered", "met"):
            assert v(m, f"optalloc_org_{name}_gpu_hours", org=org) == 4
        assert v(m, "optalloc_org_owed_delivered_ratio", org=org, form="hourly") == 1
        assert v(m, "optalloc_org_owed_delivered_ratio", org=org, form="period") == 1
    assert v(m, "optalloc_queue_jobs", state="running", **{"class": "other"}) == 2
    assert v(m, "optalloc_queue_jobs", state="pending", **{"class": "other"}) == 2
    assert v(m, "optalloc_queue_gpus", state="pending", **{"class": "other"}) == 12  # 4 + 8
    assert v(m, "optalloc_queue_reason_jobs", code="OverShare") == 2
    for q in ("0.5", "0.9", "1"):
        assert v(m, "optalloc_queue_wait_seconds", quantile=q, **{"class": "other"}) == 3600
    assert (v(m, "optalloc_epoch_id"), v(m, "optalloc_epoch_timestamp_seconds"),
            v(m, "optalloc_history_epochs")) == (2, 3600, 2)
    assert v(m, "optalloc_cluster_gpus", gpu_type="h100", state="up") == 8
    assert v(m, "optalloc_cluster_gpus_in_use", gpu_type="h100", allocated="true") == 8
    assert not [k for k in m if k[0] in ("optalloc_drain_jobs_left", "optalloc_epoch_preemptions")]
    assert v(m, "optalloc_reservations") == 0


def test_each_pending_job_shows_the_plans_reason_code_and_message_word_for_word(two):
    root, _, _, plans = two
    rows = queue_rows((root / "site" / "queue.html").read_text())
    plan = plans[-1]
    assert {j: r["state"] for j, r in rows.items()} == {
        "a1": "running", "b1": "running", "a2": "pending", "b2": "pending"}
    assert sorted(p["job_id"] for p in plan["pending"]) == ["a2", "b2"]
    for p in plan["pending"]:
        assert (rows[p["job_id"]]["code"], rows[p["job_id"]]["message"]) == (
            "OverShare", p["message"])
    assert rows["a2"]["message"].startswith("alpha holds 4 h100 GPUs, its fair-share target")
    assert (rows["a1"]["code"], rows["a1"]["message"]) == ("", "")


def test_a_three_level_tree_sums_its_projects_into_the_program_and_paths_name_both(
        tmp_path, capsys):
    cfg, db, plans = run_epochs(tmp_path, TREE, (0, 3600), "--dashboard", str(tmp_path / "site"))
    capsys.readouterr()
    site = tmp_path / "site"
    index = (site / "index.html").read_text()
    # 12 GPUs: vision 2/3 (det 4, seg 4), nlp 1/3 (4); each running project used 4 GPU-h
    for org, held, ent, usage in (("vision", 8, 8.0, 8.0), ("det", 4, 4.0, 4.0),
                                  ("seg", 4, 4.0, 4.0), ("nlp", 4, 4.0, 4.0)):
        cells = org_cells(index, org)
        assert (int(cells[3]), float(cells[5])) == (held, usage), org
        assert f"{held} / {ent:.1f}" in index.split(f'data-org="{org}"')[1].split("</tr>")[0]
    assert org_cells(index, "vision")[13:] == ["2", "0"]
    assert org_cells(index, "nlp")[13:] == ["1", "1"]
    program = (site / "org-vision.html").read_text()
    assert re.findall(r'data-org="([^"]+)"', program) == ["vision", "det", "seg"]
    assert sorted(re.findall(r'data-job="([^"]+)"', program)) == ["d1", "s1"]
    queue = (site / "queue.html").read_text()
    paths = {j: json.loads(html.unescape(p)) for j, p in
             re.findall(r"data-job=\"([^\"]+)\" data-path='([^']*)'", queue)}
    assert paths == {"d1": ["lab", "vision", "det"], "s1": ["lab", "vision", "seg"],
                     "n1": ["lab", "nlp"], "n2": ["lab", "nlp"]}


# ------------------------------------------------------------ preemption, drain, reservation


def test_a_fair_share_preemption_and_a_drain_show_the_plans_words_and_the_jobs_left(drain):
    root, _, _, (plan,) = drain
    site = root / "site"
    rows = queue_rows((site / "queue.html").read_text())
    (pre,) = plan["preemptions"]
    assert pre["job_id"] == "a1" and pre["code"] == "PreemptedForFairShare"
    assert rows["a1"] == {"state": "preempted", "code": "PreemptedForFairShare",
                          "message": pre["message"]}
    assert {j: r["state"] for j, r in rows.items() if j != "a1"} == {
        "a2": "running", "a3": "running", "b1": "running"}
    index = (site / "index.html").read_text()
    # 12 GPUs held (n1: b1, n2: a2, n3: a3) of 8 up; 4 of them on the draining n3
    assert "12 + 0 of 8 up" in index and "4 held on drain/down nodes" in index
    assert "3 running, 0 pending" in index and "1 preempted this epoch" in index
    # alpha: a1, a2, a3, 4 GPUs each for 2 h = 24 GPU-h of 672 entitled
    assert [float(x) for x in org_cells(index, "alpha")[5:8]] == pytest.approx(
        [24.0, 672.0, 24 / 672])
    m = parse((root / "o.prom").read_text())
    assert (v(m, "optalloc_drain_jobs_left", node="n3"), v(m, "optalloc_drain_ready", node="n3")
            ) == (1, 0)
    assert v(m, "optalloc_cluster_gpus", gpu_type="h100", state="drain") == 4
    assert v(m, "optalloc_epoch_preemptions", code="PreemptedForFairShare") == 1
    assert v(m, "optalloc_queue_reason_jobs", code="PreemptedForFairShare") == 1
    assert v(m, "optalloc_org_gpus_held", org="alpha", gpu_type="h100", allocated="true") == 8
    mp = (site / "map.html").read_text()
    node = re.search(r'<div class="node [^"]*" data-node="n3">.*?</div>', mp, re.S).group(0)
    assert "drain" in node and node.count('title="GPU') == 4 and "a3 (alpha)" in node


def test_a_lookahead_reservation_shows_its_nodes_start_and_held_gpus_everywhere(tmp_path):
    cfg, db, (plan,) = run_epochs(tmp_path, RESERVE, (36000,), "--dashboard",
                                  str(tmp_path / "site"), "--metrics-file",
                                  str(tmp_path / "o.prom"))
    (res,) = plan["reservations"]
    assert (res["job_id"], res["nodes"], res["expected_start"]) == ("G", ["n2", "n3"], 63060.0)
    mp = (tmp_path / "site" / "map.html").read_text()
    table = re.search(r'<table id="reservations">.*?</table>', mp, re.S).group(0)
    assert re.findall(r"<td[^>]*>(.*?)</td>", table) == ["G", "n[2-3]", "1970-01-01 17:31 UTC"]
    n2 = re.search(r'data-node="n2">.*?</div>', mp, re.S).group(0)
    assert n2.count('class="g reserved" title="GPU') == 4 and n2.count("reserved for G") == 4
    rows = queue_rows((tmp_path / "site" / "queue.html").read_text())
    assert rows["G"] == {"state": "pending", "code": "Reserved",
                         "message": plan["pending"][0]["message"]}
    assert rows["G"]["message"].startswith("reserved nodes n[2-3] for job G (8 h100 GPUs")
    m = parse((tmp_path / "o.prom").read_text())
    assert v(m, "optalloc_reservations") == 1
    assert v(m, "optalloc_queue_reason_jobs", code="Reserved") == 1


# ------------------------------------------------------------------- exposition and escaping


def test_every_metric_is_an_optalloc_gauge_with_help_and_valid_label_names(two, drain):
    for root in (two[0], drain[0]):
        text = (root / "o.prom").read_text()
        fams = list(text_string_to_metric_families(text))
        assert fams and all(f.type == "gauge" and f.name.startswith("optalloc_") and f.documentation
                            for f in fams)
        assert all(re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", f.name) for f in fams)
        labels = {k for f in fams for s in f.samples for k in s.labels}
        assert all(re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", k) and not k.startswith("__")
                   for k in labels)
        names = [f.name for f in fams]
        assert len(names) == len(set(names))  # one family per name
        for line in text.splitlines():
            if line.startswith("# TYPE"):
                assert line.endswith(" gauge")


def test_quotes_backslashes_and_unicode_in_a_project_name_round_trip_through_the_labels(evil):
    root = evil[0]
    text = (root / "o.prom").read_text(encoding="utf-8")
    assert 'org="q\\"b\\\\s ü"' in text  # escaped once, UTF-8 kept
    m = parse(text)
    for org in (QUOTED_NAME, EVIL_PROJECT):
        assert v(m, "optalloc_org_gpus_held", org=org, gpu_type="h100", allocated="true") == 4
        assert v(m, "optalloc_org_share", org=org) == 1


def test_markup_in_project_names_and_job_ids_never_becomes_a_tag_on_any_page(evil):
    site = evil[0] / "site"
    pages = {p.name: p.read_text() for p in site.glob("*.html")}
    assert len(pages) == 8  # 5 pages + root + two projects
    for name, page in pages.items():
        assert "<img src=x" not in page and "<svg onload" not in page, name
        # every script block is one of ours: the evil name never closes one early
        assert page.count("<script") == page.count("</script>"), name
    queue = pages["queue.html"]
    rows = queue_rows(queue)
    assert set(rows) == {EVIL_JOB, "j2", "k1"}
    assert "j&lt;/script&gt;&lt;svg onload=alert(8)&gt;" in queue


def test_a_jobs_command_is_on_no_page_history_or_metric_and_the_modes_are_as_documented(evil):
    root = evil[0]
    site = root / "site"
    assert stat.S_IMODE(site.stat().st_mode) == 0o700  # created by the epoch: private
    for p in site.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, p.name
        if p.name != "plotly.min.js":
            body = p.read_text()
            assert "secret-argv-token" not in body and "hunter2" not in body, p.name
    prom = root / "o.prom"
    assert stat.S_IMODE(prom.stat().st_mode) == 0o600
    assert "secret-argv-token" not in prom.read_text()
    assert not [p for p in root.iterdir() if p.name.startswith(".")]  # no temp files left


# ------------------------------------------------------------------------------------ serve


@pytest.mark.parametrize(
    "case, make, expected",
    [
        ("a missing file", None, "no such state DB; run `optalloc epoch` first"),
        ("an empty SQLite file", "empty", "is not an optalloc state file (no meta table)"),
        ("random bytes", "junk", "is not a usable SQLite database (file is not a database)"),
    ],
)
def test_serve_answers_503_naming_a_missing_or_corrupt_state_db_and_creates_nothing(
        two, tmp_path, case, make, expected):
    db = tmp_path / "state.db"
    if make == "empty":
        sqlite3.connect(db).close()
    elif make == "junk":
        db.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 8)
    before = sorted(p.name for p in tmp_path.iterdir())
    with TestClient(create_app(Source(str(two[1]), str(db))), raise_server_exceptions=False) as c:
        for url in ("/", "/queue.html", "/metrics", "/history.json"):
            r = c.get(url)
            assert r.status_code == 503 and r.headers["content-type"].startswith("text/plain")
            assert r.text == f"503: dashboard unavailable: {r.text.split(': ', 2)[2]}"
            assert expected in r.text and str(db) in r.text
            assert "Traceback" not in r.text and 'File "' not in r.text
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_serve_answers_503_saying_the_state_db_stayed_locked(two, tmp_path, monkeypatch):
    db = tmp_path / "state.db"
    src, dst = sqlite3.connect(two[2]), sqlite3.connect(db)
    src.backup(dst)
    src.close()
    dst.close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA journal_mode=DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(app_module, "ReadOnlyStore",
                        lambda path: ReadOnlyStore(path, busy_timeout_s=0.2))
    try:
        with TestClient(create_app(Source(str(two[1]), str(db))),
                        raise_server_exceptions=False) as c:
            r = c.get("/metrics")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert r.status_code == 503
    assert "stayed locked by another process" in r.text and "Traceback" not in r.text


@pytest.mark.parametrize(
    "method, url, status",
    [("OPTIONS", "/", 405), ("PUT", "/index.html", 405), ("PATCH", "/metrics", 405),
     ("POST", "/history.json", 405), ("GET", "/index", 404), ("GET", "/.html", 404),
     ("GET", "/org-alpha.HTML", 404), ("GET", "/%2e%2e/s.db", 404),
     ("GET", "/index.html%00", 404), ("GET", "/s.db", 404),
     ("GET", "/plotly.min.js?v=2", 400), ("GET", "/queue.html?code=Nope", 400)],
)
def test_serve_refuses_odd_methods_and_paths_with_a_plain_reason(two, method, url, status):
    with TestClient(create_app(Source(str(two[1]), str(two[2]))),
                    raise_server_exceptions=False) as c:
        r = c.request(method, url)
    assert r.status_code == status
    assert r.headers["content-type"].startswith("text/plain")
    assert r.text.startswith(f"{status}: ") and "Traceback" not in r.text
    if url.endswith("code=Nope"):
        assert r.text == "400: code='Nope' is not one of: OverShare\n"


def test_serve_shows_the_next_epochs_numbers_and_never_writes_the_state_db(two, tmp_path,
                                                                         capsys):
    _, cfg, db0, _ = two
    db = tmp_path / "state.db"
    src, dst = sqlite3.connect(db0), sqlite3.connect(db)
    src.backup(dst)
    src.close()
    dst.close()
    with TestClient(create_app(Source(str(cfg), str(db)))) as c:
        before = db.read_bytes()
        m = parse(c.get("/metrics").text)
        assert v(m, "optalloc_org_usage_gpu_hours", org="alpha") == 4
        c.get("/index.html")
        c.get("/queue.html?state=pending")
        assert db.read_bytes() == before
        assert main(["epoch", "--config", str(cfg), "--state", str(db), "--now", "7200"]) == 0
        capsys.readouterr()
        m = parse(c.get("/metrics").text)
        # a1 and b1 ran 0..7200: 8 GPU-h each, all of it owed and delivered
        for org in ("alpha", "beta"):
            assert [v(m, f"optalloc_org_{k}", org=org) for k in (
                "usage_gpu_hours", "owed_gpu_hours", "delivered_gpu_hours", "met_gpu_hours")
            ] == [8, 8, 8, 8]
        assert (v(m, "optalloc_epoch_id"), v(m, "optalloc_history_epochs")) == (3, 3)
        assert v(m, "optalloc_queue_wait_seconds", quantile="1", **{"class": "other"}) == 7200
        page = c.get("/index.html").text
        assert "epoch 3 at 1970-01-01 02:00 UTC" in page
        assert [float(x) for x in org_cells(page, "alpha")[5:8]] == pytest.approx(
            [8.0, 672.0, 8 / 672])


# ----------------------------------------------------------------------- the static site


def test_the_dashboard_command_on_a_corrupt_state_db_writes_no_folder_and_no_metrics(
        two, tmp_path, capsys):
    db = tmp_path / "bad.db"
    db.write_text("not a database at all\n")
    out, prom = tmp_path / "site", tmp_path / "m.prom"
    assert main(["dashboard", "--config", str(two[1]), "--state", str(db), "--out", str(out),
                 "--metrics-file", str(prom)]) == 2
    err = capsys.readouterr().err
    assert "is not a usable SQLite database" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.db"]


def test_a_project_renamed_in_the_config_loses_its_page_and_its_metrics(two, tmp_path, capsys):
    _, cfg, db0, _ = two
    db = tmp_path / "state.db"
    src, dst = sqlite3.connect(db0), sqlite3.connect(db)
    src.backup(dst)
    src.close()
    dst.close()
    site = tmp_path / "site"
    assert main(["dashboard", "--config", str(cfg), "--state", str(db), "--out", str(site)]) == 0
    assert (site / "org-beta.html").exists()
    renamed = tmp_path / "c.yaml"
    renamed.write_text(TWO.replace("beta", "gamma"))
    prom = tmp_path / "m.prom"
    assert main(["dashboard", "--config", str(renamed), "--state", str(db), "--out", str(site),
                 "--metrics-file", str(prom)]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in site.glob("org-*.html")) == [
        "org-alpha.html", "org-gamma.html", "org-root.html"]
    m = parse(prom.read_text())
    assert not [k for k in m if ("org", "beta") in k[1]]
    assert v(m, "optalloc_org_share", org="gamma") == 1


# ------------------------------------------------------------------------------ the browser


@pytest.mark.browser
def test_a_project_name_that_closes_a_script_stays_text_in_the_org_charts_in_chromium(
        browser, evil):
    dom = browser.dom((evil[0] / "site" / "index.html").as_uri())
    assert "<img src=x" not in dom and "<svg onload" not in dom
    assert 'class="plot-container' in dom or "plotly" in dom  # the charts drew
    assert EVIL_PROJECT in html.unescape(dom)
