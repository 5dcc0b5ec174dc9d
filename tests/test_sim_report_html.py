"""The simulation / what-if HTML page: the same numbers as report.md, side by side per policy,
names escaped, and `optalloc whatif --out` writing base and variant on one page."""

from __future__ import annotations

import dataclasses
import re

import pytest

from optalloc.sim.metrics import compute_metrics
from optalloc.sim.report_html import write_html_report
from optalloc.sim.report import format_value
from test_sim_metrics import tiny_result


@pytest.fixture(scope="module")
def two_policies():
    results = {"greedy": tiny_result("greedy"), "ilp": tiny_result("ilp")}
    return results, {p: compute_metrics(r) for p, r in results.items()}


def cells(html: str, table_id: str) -> list[list[str]]:
    body = re.search(rf'<table id="{table_id}">.*?<tbody>(.*?)</tbody>', html, re.S).group(1)
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]


def test_the_page_shows_every_headline_metric_and_project_for_each_policy(tmp_path, two_policies):
    results, metrics = two_policies
    page = write_html_report(results, metrics, tmp_path / "report.html").read_text()
    rows = {r[0]: r[1:] for r in cells(page, "headline")}
    hourly = [format_value(m["owed_delivered"]["hourly"], "pct") for m in metrics.values()]
    assert rows["owed delivered (hourly)"] == hourly
    assert rows["jobs completed"] == [str(m["jobs"]["completed"]) for m in metrics.values()]
    projects = {r[0]: r[1:] for r in cells(page, "projects")}
    assert sorted(projects) == sorted(metrics["greedy"]["projects"])
    b = metrics["ilp"]["projects"]["B"]
    assert projects["B"][2] == (f"{format_value(b['hourly'], 'pct')} / "
                                f"{format_value(b['period'], 'pct')}")
    for div in ("sim-owed", "sim-waits", "sim-occupancy"):
        assert f'id="{div}"' in page
    assert '<script src="plotly.min.js"></script>' in page
    assert (tmp_path / "plotly.min.js").exists()


def test_names_from_the_scenario_render_as_text(tmp_path, two_policies):
    results, metrics = two_policies
    evil = "<script>alert(1)</script>"
    res = {evil: dataclasses.replace(results["ilp"], scenario=f'x"{evil}')}
    page = write_html_report(res, {evil: metrics["ilp"]}, tmp_path / "r.html").read_text()
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.slow  # two simulations and three report folders: ~15 s
def test_whatif_writes_base_and_variant_side_by_side(tmp_path, capsys):
    from optalloc.cli import main
    from test_sim_whatif_cli import SCENARIO

    sc = tmp_path / "tiny.yaml"
    sc.write_text(SCENARIO)
    out = tmp_path / "wi"
    assert main(["whatif", "--scenario", str(sc), "--set", "org.B.share=+100%", "--policy",
                 "greedy", "--out", str(out), "--no-progress"]) == 0
    assert f"side by side: {out / 'report.html'}" in capsys.readouterr().out
    page = (out / "report.html").read_text()
    head = re.search(r"<thead><tr>(.*?)</tr></thead>", page, re.S).group(1)
    assert re.findall(r"<th>(.*?)</th>", head) == ["base", "variant"]
    assert "variant = org.B.share=+100%" in page
    for d in ("base", "variant"):
        assert (out / d / "report.html").exists() and (out / d / "report.md").exists()
