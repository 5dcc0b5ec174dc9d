"""The dashboard's pages and static site: every page and org node page is written, names from
the config and jobs render as text (never as markup), the queue's filters and sort orders, and
the site writer's atomic, idempotent writes."""

from __future__ import annotations

import os
import re
import stat

import pytest

from optalloc.cli import main
from optalloc.config import load_config
from optalloc.dashboard.data import gather
from optalloc.dashboard.pages import PAGES, render_site
from optalloc.dashboard.queue import QueueQuery, parse_query, select
from optalloc.dashboard.readonly import ReadOnlyStore
from optalloc.dashboard.site import write_site
from optalloc.errors import OptallocError


@pytest.fixture(scope="module")
def dash(demo_state):
    with ReadOnlyStore(demo_state.state) as store:
        return gather(load_config(demo_state.config), store)


@pytest.fixture(scope="module")
def site(dash):
    return render_site(dash)


def test_the_site_has_every_page_and_a_page_per_org_node(dash, site):
    assert set(site) == set(PAGES) | {f"org-{r.slug}.html" for r in dash.org}
    for name, page in site.items():
        assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>"), name
        for href in re.findall(r'href="([^"#?]+)', page):
            assert href in site, (name, href)  # every link resolves inside the site


def test_a_project_page_lists_its_jobs_and_a_program_page_its_projects(dash, site):
    vlm = site["org-vlm.html"]
    jobs = [r.job_id for r in dash.queue if r.project == "vlm"]
    assert sorted(re.findall(r'data-job="([^"]+)"', vlm)) == sorted(jobs)
    program = site["org-multimodal.html"]
    assert re.findall(r'data-org="([^"]+)"', program) == [
        "multimodal", "vlm", "video", "speech", "robotics", "ocr"]


EVIL_PROJECT = "<script>alert('p')</script>"
EVIL_JOB = 'j"><img src=x onerror=alert(1)>'
EVIL_CONFIG = f"""
gpu_types: [{{name: h100}}]
nodes: [{{name: "n[1-2]", gpu_type: h100, gpus: 4}}]
org:
  name: "lab & <co>"
  children:
    - {{name: "{EVIL_PROJECT}", share: 1}}
    - {{name: "B's \\"quoted\\" team", share: 1}}
jobs:
  - {{id: '{EVIL_JOB}', project: "{EVIL_PROJECT}", gpus: 8, min_runtime: 1h}}
  - {{id: "<b>second</b>", project: "{EVIL_PROJECT}", gpus: 8, min_runtime: 1h}}
  - {{id: "q'1", project: "B's \\"quoted\\" team", gpus: 8, min_runtime: 1h}}
"""


@pytest.fixture(scope="module")
def evil_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("evil")
    (root / "c.yaml").write_text(EVIL_CONFIG)
    assert main(["epoch", "--config", str(root / "c.yaml"), "--state", str(root / "s.db"),
                 "--now", "1000", "--dashboard", str(root / "site")]) == 0
    return root / "site"


def test_names_from_config_and_jobs_render_as_text_on_every_page(evil_site):
    pages = {p.name: p.read_text() for p in evil_site.glob("*.html")}
    assert len(pages) == len(PAGES) + 3  # root and two projects
    for name, page in pages.items():
        assert "<script>alert" not in page and "<img src=x" not in page, name
        assert "<b>second</b>" not in page and "<co>" not in page, name
    queue = pages["queue.html"]
    assert "&lt;script&gt;alert(&#39;p&#39;)&lt;/script&gt;" in queue
    assert "j&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in queue
    assert "&lt;b&gt;second&lt;/b&gt;" in queue
    # the project path is JSON in a single-quoted attribute: quotes inside cannot close it
    assert re.search(r"data-path='\[[^']*\\u0027[^']*\]'", queue)


@pytest.mark.parametrize(
    "case, params, expected",
    [
        ("nothing given sorts by rank", {}, QueueQuery()),
        ("every filter", {"project": "vlm", "state": "pending", "code": "OverShare",
                          "class": "large", "sort": "wait", "order": "desc"},
         QueueQuery("vlm", "pending", "OverShare", "large", "wait", "desc")),
        ("empty values mean no filter", {"project": "", "state": ""}, QueueQuery()),
    ],
)
def test_queue_queries_are_parsed(case, params, expected):
    assert parse_query(params, ["institute", "vlm"], ["OverShare"]) == expected


@pytest.mark.parametrize(
    "case, params, message",
    [
        ("an unknown parameter", {"colour": "red"}, "unknown query parameter 'colour'"),
        ("an unknown state", {"state": "sleeping"},
         "state='sleeping' is not one of: pending, preempted, queued, running"),
        ("an unknown project", {"project": "<x>"}, "project='<x>' is not one of: institute, vlm"),
        ("a code not in the queue", {"code": "Nope"}, "code='Nope' is not one of: OverShare"),
        ("an unknown sort key", {"sort": "colour"}, "sort='colour' is not one of: rank, job"),
        ("an unknown order", {"order": "up"}, "order='up' is not one of: asc, desc"),
    ],
)
def test_bad_queue_queries_name_the_value_and_the_choices(case, params, message):
    with pytest.raises(OptallocError) as err:
        parse_query(params, ["institute", "vlm"], ["OverShare"])
    assert str(err.value).startswith(message)


def test_queue_selection_filters_by_subtree_state_and_code_and_sorts(dash):
    subtree = dash.subtree()
    rows = select(dash.queue, QueueQuery(project="multimodal", state="pending"), subtree)
    assert rows and {r.project for r in rows} <= subtree["multimodal"]
    assert {r.state for r in rows} == {"pending"}
    expected = sorted((r for r in dash.queue if r.project in subtree["multimodal"]
                       and r.state == "pending"), key=lambda r: (r.wait_s, r.job_id), reverse=True)
    assert select(dash.queue, QueueQuery(project="multimodal", state="pending", sort="wait",
                                         order="desc"), subtree) == expected
    by_rank = select(dash.queue, QueueQuery(), subtree)
    states = [r.state for r in by_rank]
    assert states == sorted(states, key=["pending", "preempted", "queued", "running"].index)
    pending = [r for r in by_rank if r.state == "pending"]
    keys = [tuple(v for _, v in r.path) for r in pending]
    assert keys == sorted(keys)  # lower usage ratios up the tree first


def test_the_site_writer_replaces_files_atomically_and_only_when_they_change(dash, tmp_path):
    out = tmp_path / "site"
    paths = write_site(dash, out)
    assert set(p.name for p in paths.values()) == set(render_site(dash))
    names = {p.name for p in out.iterdir()}
    assert {"plotly.min.js", "history.json"} <= names
    assert not [n for n in names if n.startswith(".")]  # no temporary files left
    for p in out.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o644
    stamps = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    (out / "org-gone.html").write_text("a page of an org node that left the config")
    os.utime(out / "index.html", ns=(1, 1))
    write_site(dash, out)
    assert not (out / "org-gone.html").exists()
    after = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert after["plotly.min.js"] == stamps["plotly.min.js"]  # unchanged: not rewritten
    assert after["queue.html"] == stamps["queue.html"]
    assert after["index.html"] == 1  # same bytes: left alone


def test_the_dashboard_command_writes_the_site_and_refuses_bad_paths(demo_state, tmp_path, capsys):
    out = tmp_path / "site"
    assert main(["dashboard", "--config", str(demo_state.config), "--state",
                 str(demo_state.state), "--out", str(out)]) == 0
    assert f"open {out / 'index.html'}" in capsys.readouterr().out
    (tmp_path / "file").write_text("x")
    for argv, message in (
        (["--out", str(tmp_path / "file")], "is a file, not a directory"),
        (["--out", str(tmp_path / "no" / "such" / "dir")], "does not exist; create it first"),
        (["--out", str(out), "--history", "0"], "--history 0: give a number of epochs >= 1"),
        (["--out", str(out), "--metrics-file", str(tmp_path)], "is a directory"),
    ):
        assert main(["dashboard", "--config", str(demo_state.config), "--state",
                     str(demo_state.state), *argv]) == 2
        assert message in capsys.readouterr().err
    assert main(["dashboard", "--config", str(demo_state.config), "--state",
                 str(tmp_path / "none.db"), "--out", str(out)]) == 2
    assert "no such state DB" in capsys.readouterr().err


def test_epoch_writes_the_dashboard_after_recording_and_nothing_on_a_dry_run(tmp_path, capsys):
    (tmp_path / "c.yaml").write_text(EVIL_CONFIG)
    argv = ["epoch", "--config", str(tmp_path / "c.yaml"), "--state", str(tmp_path / "s.db"),
            "--now", "1000", "--dashboard", str(tmp_path / "site"),
            "--metrics-file", str(tmp_path / "o.prom")]
    assert main(argv + ["--dry-run"]) == 0
    assert not (tmp_path / "site").exists() and not (tmp_path / "o.prom").exists()
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "dashboard: 8 pages in" in out and f"metrics: {tmp_path / 'o.prom'}" in out
    assert "epoch 1 at" in (tmp_path / "site" / "index.html").read_text()
    assert main(argv[:-2] + ["--metrics-file", str(tmp_path / "no" / "o.prom")]) == 2
    assert "directory" in capsys.readouterr().err
