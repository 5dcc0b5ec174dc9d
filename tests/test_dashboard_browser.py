"""The dashboard in a real browser (headless Chromium, Debian's `chromium`) on the demo state:
the org tree shows every project with its usage ratio, the queue every pending job with its
reason (and filters itself from the query string), the map every node, the charts draw, and
names that look like markup stay text. One page comes from `optalloc serve` (its security
headers must not stop the charts)."""

from __future__ import annotations

import html
import json
import re
import signal
import subprocess
import sys
import time

import httpx
import pytest

from optalloc.cli import main
from optalloc.config import load_config

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(demo_state, tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    assert main(["dashboard", "--config", str(demo_state.config), "--state",
                 str(demo_state.state), "--out", str(out)]) == 0
    return out


def rows(dom: str, table_id: str) -> list[str]:
    body = re.search(rf'<table[^>]*id="{table_id}".*?<tbody>(.*?)</tbody>', dom, re.S).group(1)
    return re.findall(r"<tr\b[^>]*>.*?</tr>", body, re.S)


def text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).replace("\xa0", " ").strip()


def test_the_org_tree_shows_every_project_with_its_usage_ratio(browser, site, demo_state, capsys):
    dom = browser.dom((site / "index.html").as_uri())
    assert main(["ledger", "report", "--config", str(demo_state.config), "--state",
                 str(demo_state.state), "--now", demo_state.now, "--json"]) == 0
    report = {r["name"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    shown = {}
    for tr in rows(dom, "org"):
        name = re.search(r'data-org="([^"]+)"', tr).group(1)
        ratio = re.search(r'<td class="ratio"[^>]*>(.*?)</td>', tr, re.S).group(1)
        shown[html.unescape(name)] = text(ratio)
    assert shown == {n: f"{r['ratio']:.3f}" for n, r in report.items()}
    assert dom.count('class="main-svg"') >= 2  # plotly drew the two charts


def test_the_queue_shows_every_pending_job_with_its_reason(browser, site, demo_state):
    plan = json.loads(demo_state.plans[-1].read_text())
    dom = browser.dom((site / "queue.html").as_uri())
    shown = {}
    for tr in rows(dom, "queue"):
        if 'data-state="pending"' not in tr:
            continue
        job = html.unescape(re.search(r'data-job="([^"]+)"', tr).group(1))
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
        shown[job] = (text(cells[3]), text(cells[4]))  # reason code, message
    assert shown == {p["job_id"]: (p["code"], p["message"]) for p in plan["pending"]}


def test_the_queue_page_filters_itself_from_its_query_string(browser, site, demo_state):
    plan = json.loads(demo_state.plans[-1].read_text())
    code = plan["pending"][0]["code"]
    dom = browser.dom((site / "queue.html").as_uri() + f"?state=pending&code={code}")
    visible = [tr for tr in rows(dom, "queue") if " hidden" not in tr.split(">")[0]]
    want = sorted(p["job_id"] for p in plan["pending"] if p["code"] == code)
    assert sorted(re.search(r'data-job="([^"]+)"', tr).group(1) for tr in visible) == want
    assert re.search(r'<span id="queue-count">(\d+)</span>', dom).group(1) == str(len(want))


def test_the_map_shows_every_node_and_the_drain_table_its_nodes(browser, site, demo_state):
    config = load_config(demo_state.config)
    dom = browser.dom((site / "map.html").as_uri())
    nodes = re.findall(r'<div class="node (\w+)" data-node="([^"]+)">', dom)
    assert [n for _, n in nodes] == [n.name for n in config.nodes]
    assert {n for s, n in nodes if s == "drain"} == {n.name for n in config.nodes
                                                      if n.state.value == "drain"}
    drains = [re.search(r'data-node="([^"]+)"', tr).group(1) for tr in rows(dom, "drains")]
    assert drains == ["h100-127", "h100-128"]


def test_the_history_and_utilization_pages_load(browser, site):
    dom = browser.dom((site / "history.html").as_uri())
    assert dom.count('class="main-svg"') >= 4  # owed/delivered, occupancy, solver, preemptions
    assert len(rows(dom, "epochs")) == 2
    dom = browser.dom((site / "utilization.html").as_uri())
    assert "No utilization samples for the running jobs" in dom  # the noop runner measures none


def test_markup_in_names_stays_text_in_the_browser(browser, tmp_path):
    from test_dashboard_pages import EVIL_CONFIG, EVIL_JOB, EVIL_PROJECT

    (tmp_path / "c.yaml").write_text(EVIL_CONFIG)
    assert main(["epoch", "--config", str(tmp_path / "c.yaml"), "--state", str(tmp_path / "s.db"),
                 "--now", "1000", "--dashboard", str(tmp_path / "site")]) == 0
    doms = {page: browser.dom((tmp_path / "site" / page).as_uri())
            for page in ("queue.html", "map.html")}
    for page, dom in doms.items():
        assert "<img src=" not in dom and "<script>alert" not in dom, page
    dom = doms["queue.html"]
    jobs = [html.unescape(j) for j in re.findall(r'data-job="([^"]+)"', dom)]
    assert sorted(jobs) == sorted([EVIL_JOB, "<b>second</b>", "q'1"])
    assert EVIL_PROJECT in html.unescape(dom)  # shown, as text


def test_a_served_page_draws_its_charts_under_the_security_headers(browser, demo_state):
    proc = subprocess.Popen(
        [sys.executable, "-m", "optalloc", "serve", "--config", str(demo_state.config),
         "--state", str(demo_state.state), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = re.search(r":(\d+)/", proc.stdout.readline()).group(1)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base}/", timeout=5)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        dom = browser.dom(f"{base}/history.html")
        assert dom.count('class="main-svg"') >= 4
        dom = browser.dom(f"{base}/queue.html?state=running")
        assert {s for s in re.findall(r'data-state="(\w+)"', dom)} == {"running"}
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
