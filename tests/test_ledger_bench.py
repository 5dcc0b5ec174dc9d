"""The ledger benchmark runs end to end on a tiny size and reports every documented column."""

from __future__ import annotations

import numpy as np

from optalloc.bench import ledger_bench


def test_the_benchmark_reports_each_column_for_each_size():
    rows = ledger_bench.run(sizes=[(2000, 30, 2)], repeat=1, store=True)
    assert [r["name"] for r in rows] == ["2,000 intervals x 30 projects, 2 d"]
    row = rows[0]
    assert (row["intervals"], row["projects"], row["days"]) == (2000, 30, 2)
    for key in ("build_s", "report_s", "usage_ratios_s", "owed_delivered_s", "store_load_s",
                "peak_mem_mb"):
        assert row[key] > 0, key


def test_the_synthetic_ledger_charges_what_its_intervals_hold():
    tree = ledger_bench.synthetic_tree(45)
    data = ledger_bench.synthetic_data(500, 45, 1.0, seed=4)
    led = ledger_bench.build(tree, data, ledger_bench.Policy(lookback_s=2 * 86400.0))
    weights = np.array([1.0, 1.6])[data["type_code"]]
    expected = np.sum(data["gpus"] * weights * (data["end"] - data["start"]) * data["allocated"]) / 3600
    assert tree.n == 1 + 3 + 45
    np.testing.assert_allclose(led.usage(data["span"])[0], expected)
