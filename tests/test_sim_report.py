"""Reports: the terminal table, the what-if diff and the report folder, on the hand-checked
run of test_sim_metrics."""

from __future__ import annotations

import csv
import json

import pytest

from optalloc.sim.metrics import compute_metrics
from optalloc.sim.report import format_delta, format_diff, format_table, format_value, write_report
from test_sim_metrics import tiny_result


@pytest.fixture(scope="module")
def two_policies():
    results = {"greedy": tiny_result("greedy"), "ilp": tiny_result("ilp")}
    return results, {p: compute_metrics(r) for p, r in results.items()}


@pytest.mark.parametrize(
    "value, kind, text",
    [
        (0.75, "pct", "75.0%"),
        (None, "pct", "-"),
        (float("nan"), "ratio", "-"),
        (9.375, "ratio", "9.38"),
        (1800.0, "seconds", "30m"),
        (0.0, "seconds", "0s"),
        (5, "count", "5"),
        (1234.5, "hours", "1,234.5"),
    ],
)
def test_values_are_formatted_by_kind(value, kind, text):
    assert format_value(value, kind) == text


@pytest.mark.parametrize(
    "delta, kind, text",
    [(0.05, "pct", "+5.0pp"), (-0.125, "pct", "-12.5pp"), (-1800.0, "seconds", "-30m"), (None, "pct", "-")],
)
def test_differences_are_signed_and_fractions_in_points(delta, kind, text):
    assert format_delta(delta, kind) == text


def test_terminal_table_has_a_column_per_policy_and_a_row_per_headline_metric(two_policies):
    _, metrics = two_policies
    text = format_table(metrics)
    lines = text.splitlines()
    assert lines[0].split() == ["metric", "greedy", "ilp"]
    row = next(ln for ln in lines if ln.startswith("owed delivered (hourly)"))
    assert row.split()[-2:] == ["75.0%*", "75.0%*"]  # a tie marks both
    proj_a = next(ln for ln in lines if ln.startswith("A "))
    assert "83.3% / 83.3%" in proj_a
    proj_b = next(ln for ln in lines if ln.startswith("B "))
    assert "50.0% / 100.0%" in proj_b


def test_diff_shows_base_variant_and_change_per_metric_and_project(two_policies):
    _, metrics = two_policies
    variant = json.loads(json.dumps(metrics["ilp"]))
    variant["owed_delivered"]["hourly"] = 0.8
    variant["projects"]["B"]["hourly"] = 0.75
    text = format_diff(metrics["greedy"], variant)
    row = next(ln for ln in text.splitlines() if ln.startswith("owed delivered (hourly)"))
    assert row.split()[-3:] == ["75.0%", "80.0%", "+5.0pp"]
    proj_b = next(ln for ln in text.splitlines() if ln.startswith("B "))
    assert proj_b.split()[1:4] == ["50.0%", "75.0%", "+25.0pp"]


def test_report_folder_holds_every_file_non_empty_and_consistent(tmp_path, two_policies):
    results, metrics = two_policies
    paths = write_report(results, metrics, tmp_path / "out")
    assert sorted(paths) == sorted(
        ["summary.json", "timeseries.csv", "owed_delivered.png", "wait_cdf.png", "occupancy.png",
         "report.md", "report.html"]
    )
    assert (tmp_path / "out" / "plotly.min.js").stat().st_size > 1_000_000  # the page's charts
    for p in paths.values():
        assert p.exists() and p.stat().st_size > 0
    for name in ("owed_delivered.png", "wait_cdf.png", "occupancy.png"):
        assert paths[name].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads(paths["summary.json"].read_text())
    assert summary["policies"] == ["greedy", "ilp"]
    assert summary["metrics"]["greedy"]["owed_delivered"]["period"] == pytest.approx(7 / 8)
    with paths["timeseries.csv"].open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["policy"], r["hour"]) for r in rows] == [("greedy", "0"), ("greedy", "1"), ("ilp", "0"), ("ilp", "1")]
    assert [float(r["delivered_gpu_h:A"]) for r in rows[:2]] == [3.0, 2.0]
    assert [float(r["owed_gpu_h:B"]) for r in rows[:2]] == [1.0, 1.0]
    assert [float(r["occupancy_allocated"]) for r in rows[:2]] == [0.75, 1.0]
    md = paths["report.md"].read_text()
    for name in ("owed_delivered.png", "wait_cdf.png", "occupancy.png"):
        assert f"]({name})" in md
    assert "# Simulation report: tiny" in md


def test_report_needs_at_least_one_result(tmp_path):
    with pytest.raises(ValueError, match="at least one result"):
        write_report({}, {}, tmp_path)
