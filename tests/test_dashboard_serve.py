"""`optalloc serve`: every page and /metrics answer, bad paths and query values get a 4xx with
the reason (never a traceback), nothing is ever written, pages follow new epochs, and the real
server binds 127.0.0.1."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time

import warnings

import httpx
import pytest

with warnings.catch_warnings():  # starlette 1.x suggests its httpx fork; httpx is what is pinned
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from optalloc.cli import main
from optalloc.dashboard.app import Source, create_app
from optalloc.dashboard.pages import PAGES


@pytest.fixture
def state_copy(demo_state, tmp_path):
    """A copy of the demo state this test may add epochs to."""
    db = tmp_path / "state.db"
    import sqlite3

    src, dst = sqlite3.connect(demo_state.state), sqlite3.connect(db)
    src.backup(dst)
    src.close()
    dst.close()
    return db


@pytest.fixture(scope="module")
def client(demo_state):
    with TestClient(create_app(Source(str(demo_state.config), str(demo_state.state))),
                    raise_server_exceptions=False) as c:
        yield c


def test_every_page_the_static_site_has_is_served(client):
    for page in PAGES + ("org-vlm.html", "org-institute.html"):
        r = client.get(f"/{page}")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), page
        assert r.headers["x-content-type-options"] == "nosniff"
    assert client.get("/").text == client.get("/index.html").text
    assert client.get("/plotly.min.js").headers["content-type"].startswith("application/javascript")
    assert client.get("/history.json").json()["epochs"][-1]["epoch_id"] == 2
    assert client.head("/queue.html").status_code == 200


@pytest.mark.parametrize(
    "case, method, url, status, text",
    [
        ("an unknown page", "GET", "/nope.html", 404, "no page nope.html"),
        ("an unknown path", "GET", "/etc/passwd", 404, "Not Found"),
        ("a climb out of the site", "GET", "/..%2F..%2Fetc%2Fpasswd", 404, ""),
        ("an org page of no org node", "GET", "/org-nobody.html", 404, "no page org-nobody.html"),
        ("a bad state filter", "GET", "/queue.html?state=sleeping", 400,
         "state='sleeping' is not one of: pending, preempted, queued, running"),
        ("an unknown project filter", "GET", "/queue.html?project=%3Cscript%3E", 400,
         "project='<script>' is not one of"),
        ("an unknown parameter", "GET", "/queue.html?limit=5", 400,
         "unknown query parameter 'limit'"),
        ("a parameter given twice", "GET", "/queue.html?state=pending&state=running", 400,
         "query parameter 'state' given more than once"),
        ("a query on a page that takes none", "GET", "/map.html?x=1", 400,
         "this page takes no query parameters"),
        ("a query on /metrics", "GET", "/metrics?name=x", 400, "takes no query parameters"),
        ("a write", "POST", "/queue.html", 405, "Method Not Allowed"),
        ("a delete", "DELETE", "/metrics", 405, "Method Not Allowed"),
    ],
)
def test_bad_requests_get_a_4xx_with_the_reason_and_no_traceback(client, case, method, url,
                                                                 status, text):
    r = client.request(method, url)
    assert r.status_code == status
    assert text in r.text and "Traceback" not in r.text and 'File "' not in r.text
    assert r.headers["content-type"].startswith("text/plain")


def test_the_queue_filters_on_the_server_with_the_same_names_as_the_static_page(client, demo_state):
    import json

    plan = json.loads(demo_state.plans[-1].read_text())
    r = client.get("/queue.html?state=pending&sort=wait&order=desc")
    assert r.status_code == 200
    jobs = re.findall(r'<tr data-state="([^"]+)" data-code="([^"]*)" data-class="[^"]*" '
                      r'data-job="([^"]+)"', r.text)
    assert {s for s, _, _ in jobs} == {"pending"}
    assert sorted(j for _, _, j in jobs) == sorted(p["job_id"] for p in plan["pending"])
    code = plan["pending"][0]["code"]
    r = client.get(f"/queue.html?code={code}&project=foundation")
    assert r.status_code == 200
    assert {c for _, c, _ in re.findall(r'<tr data-state="([^"]+)" data-code="([^"]*)" '
                                        r'data-class="[^"]*" data-job="([^"]+)"', r.text)} == {code}


def test_an_unexpected_error_is_a_plain_500_without_a_traceback(demo_state):
    class Broken(Source):
        def current(self):
            raise RuntimeError("secret internals /etc/shadow")

    with TestClient(create_app(Broken(str(demo_state.config), str(demo_state.state))),
                    raise_server_exceptions=False) as c:
        r = c.get("/index.html")
    assert r.status_code == 500
    assert r.text == "500: internal error (details are in the server's log)\n"


def test_pages_follow_new_epochs_and_serving_writes_nothing(demo_state, state_copy, capsys):
    source = Source(str(demo_state.config), str(state_copy))
    with TestClient(create_app(source)) as c:
        first = c.get("/index.html").text
        assert "epoch 2 at 2026-11-29 13:00 UTC" in first
        before = state_copy.read_bytes()
        for page in PAGES:
            c.get(f"/{page}")
        c.get("/metrics")
        assert state_copy.read_bytes() == before
        assert main(["epoch", "--config", str(demo_state.config), "--state", str(state_copy),
                     "--now", "2026-11-29T13:05:00Z"]) == 0
        capsys.readouterr()
        assert "epoch 3 at 2026-11-29 13:05 UTC" in c.get("/index.html").text
        assert "optalloc_epoch_id 3.0" in c.get("/metrics").text


def test_a_config_saved_half_edited_keeps_the_last_pages(demo_state, state_copy, tmp_path):
    cfg = tmp_path / "demo.yaml"
    shutil.copy(demo_state.config, cfg)
    with TestClient(create_app(Source(str(cfg), str(state_copy)))) as c:
        assert c.get("/index.html").status_code == 200
        cfg.write_text("org: [not, a, tree\n")
        r = c.get("/index.html")
        assert r.status_code == 200 and "epoch 2" in r.text
    with TestClient(create_app(Source(str(cfg), str(state_copy))),
                    raise_server_exceptions=False) as c:
        r = c.get("/index.html")  # no good pages yet: the reason, as a 503
        assert r.status_code == 503 and str(cfg) in r.text and "Traceback" not in r.text


def test_the_server_binds_localhost_and_serves_pages_and_metrics(demo_state):
    proc = subprocess.Popen(
        [sys.executable, "-m", "optalloc", "serve", "--config", str(demo_state.config),
         "--state", str(demo_state.state), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert m, (line, proc.poll())
        base = f"http://127.0.0.1:{m.group(1)}"
        deadline = time.monotonic() + 30
        while True:
            try:
                r = httpx.get(f"{base}/queue.html", timeout=5)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert r.status_code == 200 and 'id="queue"' in r.text
        assert httpx.get(f"{base}/metrics", timeout=5).text.startswith("# HELP optalloc_")
        assert httpx.get(f"{base}/queue.html?state=zzz", timeout=5).status_code == 400
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--port", "70000"], "--port 70000: give a port between 1 and 65535"),
        (["--history", "-1"], "--history -1: give a number of epochs >= 1"),
    ],
)
def test_serve_refuses_bad_flags_before_listening(demo_state, capsys, argv, message):
    assert main(["serve", "--config", str(demo_state.config), "--state", str(demo_state.state),
                 *argv]) == 2
    assert message in capsys.readouterr().err


def test_serve_refuses_a_port_in_use_with_a_clear_message(demo_state, capsys):
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        assert main(["serve", "--config", str(demo_state.config), "--state",
                     str(demo_state.state), "--port", str(port)]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
