"""An outside judge of `whatif` and `sweep`: their numbers must equal separate `simulate` runs
of the original scenario and of a hand-edited copy of its YAML (the override written into the
file), every printed change must be variant minus base as `format_delta` documents it, sweep
rows must equal a `simulate --seed` of their cell, and summaries must be mean/sample sd/min/max
over seeds. Tiny scenarios only (2 nodes, a few hours)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from optalloc.cli import main
from optalloc.sim.compare import HEADLINE, lookup
from optalloc.sim.report_tables import format_delta, format_value
from tests.test_sim_whatif_cli import SCENARIO as JOBS  # 2 nodes, 4 hand-made jobs, 8 h
from tests.test_sweep_cli import SCENARIO as SYN  # 2 nodes, synthetic, 6 h

SCENARIOS = {"jobs": JOBS, "synthetic": SYN}
TIMING = ("solver.mean_s", "solver.p50_s", "solver.p99_s", "solver.max_s", "solver.total_s")


def flat(d, pre=""):
    out = {}
    for k, v in d.items():
        out.update(flat(v, f"{pre}{k}.") if isinstance(v, dict) else {f"{pre}{k}": v})
    return out


def comparable(metrics):
    return {k: v for k, v in flat(metrics).items() if k not in TIMING and k != "scenario"}


def write(tmp_path, name, text):
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    return p


def simulate(path, policy, out, capsys, seed=None):
    """What `optalloc simulate --seed S` computes (cli/sim_cmd.py cmd_simulate), without the
    report files: load, simulate, compute_metrics, made JSON-like as summary.json is."""
    from optalloc.cli.sim_cmd import load
    from optalloc.sim.engine import simulate as run
    from optalloc.sim.metrics import compute_metrics
    from optalloc.sim.policies import make_policy
    from optalloc.sim.report_tables import _clean

    return json.loads(json.dumps(_clean(compute_metrics(run(load(str(path), seed=seed), make_policy(policy))))))


def whatif(path, sets, policy, out, capsys):
    argv = ["whatif", "--scenario", str(path), "--policy", policy, "--out", str(out), "--no-progress"]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    read = lambda side: json.loads((out / side / "summary.json").read_text())["metrics"][policy]  # noqa: E731
    return read("base"), read("variant"), printed


WHATIF_CASES = [
    # (situation, scenario, overrides, the same change written into the YAML, policy)
    ("B's share up by half", "jobs", ["org.B.share=+50%"],
     ("{name: B, share: 1,", "{name: B, share: 1.5,"), "greedy"),
    ("a one-hour lookback", "jobs", ["policy.lookback=1h"], ("lookback: 1d}", "lookback: 1h}"), "greedy"),
    ("a ten-minute epoch", "jobs", ["policy.epoch=10m"], ("epoch: 5m,", "epoch: 10m,"), "greedy"),
    ("a two-hour lookback under the ilp", "synthetic", ["policy.lookback=2h"],
     ("lookback: 12h", "lookback: 2h"), "ilp"),
    ("a nested share tripled", "synthetic", ["org.A.A1.share=*3"],
     ("{name: A1, share: 50}", "{name: A1, share: 150}"), "greedy"),
    ("a switch to decayed usage", "synthetic",
     ["policy.usage_mode=decay", "policy.half_life=1h"],
     ("lookback: 12h,", "lookback: 12h, usage_mode: decay, half_life: 1h,"), "greedy"),
]


@pytest.mark.parametrize("situation, kind, sets, edit, policy", WHATIF_CASES, ids=[c[0] for c in WHATIF_CASES])
def test_whatif_base_and_variant_equal_two_simulations_and_every_change_is_variant_minus_base(
        tmp_path, capsys, situation, kind, sets, edit, policy):
    text = SCENARIOS[kind]
    assert text.count(edit[0]) == 1
    original = write(tmp_path, "orig", text)
    edited = write(tmp_path, "edited", text.replace(*edit))
    base, variant, printed = whatif(original, sets, policy, tmp_path / "wi", capsys)
    sim_base = simulate(original, policy, tmp_path / "sb", capsys)
    sim_variant = simulate(edited, policy, tmp_path / "sv", capsys)
    assert comparable(base) == comparable(sim_base)
    assert comparable(variant) == comparable(sim_variant)
    lines = printed.splitlines()
    assert lines[0] == f"what if {'; '.join(sets)}  (orig, policy {policy})"
    for row in HEADLINE:
        if row.key in TIMING:
            continue
        a, b = lookup(sim_base, row.key), lookup(sim_variant, row.key)
        delta = b - a if a is not None and b is not None else None
        line = next(ln for ln in lines if ln.startswith(row.label + "  "))
        assert line[len(row.label):].split() == [
            format_value(a, row.kind), format_value(b, row.kind), format_delta(delta, row.kind)]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("project "))
    for ln in lines[start + 2:]:
        if not ln.strip():
            break
        proj, *cells = ln.split()
        want = []
        for key, kind_ in (("hourly", "pct"), ("period", "pct"), ("delivered_gpu_h", "hours")):
            a, b = sim_base["projects"][proj][key], sim_variant["projects"][proj][key]
            want += [format_value(a, kind_), format_value(b, kind_), format_delta(b - a, kind_)]
        assert cells == want


def test_whatif_b_share_up_half_prints_these_whole_rows(tmp_path, capsys):
    _, _, printed = whatif(write(tmp_path, "tiny", JOBS), ["org.B.share=+50%"], "greedy", tmp_path / "wi", capsys)
    rows = {ln.split("  ")[0]: ln.split()[-3:] for ln in printed.splitlines() if "  " in ln}
    assert rows["owed delivered (hourly)"][-3:] == ["66.7%", "63.5%", "-3.1pp"]  # 0.66667 -> 0.63542
    assert rows["worst project (period)"][-3:] == ["54.2%", "47.4%", "-6.7pp"]
    assert rows["jobs completed"] == ["4", "4", "+0"]
    b1 = next(ln for ln in printed.splitlines() if ln.startswith("B1 "))
    assert b1.split() == ["B1", "50.0%", "47.4%", "-2.6pp", "54.2%", "47.4%", "-6.7pp", "8.7", "8.7", "+0.0"]


def test_whatif_refuses_a_node_override_with_one_clear_message(tmp_path, capsys):
    rc = main(["whatif", "--scenario", str(write(tmp_path, "tiny", JOBS)), "--set", "nodes.n3.gpus=8",
               "--policy", "greedy", "--no-progress"])
    assert rc == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "  - --set: nodes.n3.gpus=8: unknown section 'nodes'; overrides start with org. or policy.")


GRID = ["--grid", "org.B.share=+0%,+50%", "--grid", "policy.lookback=2h,12h", "--policies", "greedy",
        "--seeds", "0-1", "--jobs", "1", "--no-progress"]
SWEEP_ROWS = [
    # (cell, label, B share in the YAML, lookback in the YAML, seed, owed delivered hourly)
    (0, "org.B.share=+0%, policy.lookback=2h", 40, "2h", 0, 0.984283),
    (0, "org.B.share=+0%, policy.lookback=2h", 40, "2h", 1, 0.950328),
    (1, "org.B.share=+0%, policy.lookback=12h", 40, "12h", 0, 0.984283),
    (1, "org.B.share=+0%, policy.lookback=12h", 40, "12h", 1, 0.950328),
    (2, "org.B.share=+50%, policy.lookback=2h", 60, "2h", 0, 0.974633),
    (2, "org.B.share=+50%, policy.lookback=2h", 60, "2h", 1, 0.934215),
    (3, "org.B.share=+50%, policy.lookback=12h", 60, "12h", 0, 0.974633),
    (3, "org.B.share=+50%, policy.lookback=12h", 60, "12h", 1, 0.916113),
]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    scenario = d / "syn.yaml"
    scenario.write_text(SYN)
    assert main(["sweep", "--scenario", str(scenario), *GRID, "--out", str(d / "out")]) == 0
    return scenario, d / "out"


def test_sweep_has_one_row_per_cell_and_seed_with_the_labels_of_its_overrides(swept):
    table = pd.read_csv(swept[1] / "results.csv")
    got = [(r["cell"], r["label"], r["seed"], round(r["owed_delivered.hourly"], 6))
           for _, r in table.iterrows()]
    assert got == [(c, lab, s, v) for c, lab, _, _, s, v in SWEEP_ROWS]
    assert list(table["status"]) == ["ok"] * 8


@pytest.mark.parametrize("cell, label, share, lookback, seed, owed", SWEEP_ROWS,
                         ids=[f"{r[1]} seed {r[4]}" for r in SWEEP_ROWS])
def test_each_sweep_row_equals_a_separate_simulate_of_its_hand_edited_cell_and_seed(
        swept, tmp_path, capsys, cell, label, share, lookback, seed, owed):
    table = pd.read_csv(swept[1] / "results.csv")
    row = table[(table["cell"] == cell) & (table["seed"] == seed)].iloc[0]
    text = SYN.replace("{name: B, share: 40,", f"{{name: B, share: {share},"
                       ).replace("lookback: 12h,", f"lookback: {lookback},")
    sim = comparable(simulate(write(tmp_path, "cell", text), "greedy", tmp_path / "s", capsys, seed=seed))
    for key, value in sim.items():
        if key in ("policy", "seed"):
            continue
        if value is None:
            assert pd.isna(row[key]), key
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            assert math.isclose(float(row[key]), value, rel_tol=1e-12, abs_tol=1e-12), key
        else:
            assert str(row[key]) == str(value), key
    assert row["owed_delivered.hourly"] == pytest.approx(owed, abs=5e-7)


@pytest.mark.parametrize("metric", ["owed_delivered.hourly", "owed_delivered.worst_hourly.value",
                                    "preemptions.per_1000_gpu_h", "jobs.completed", "waits.debug.p90_s"])
def test_the_summary_is_count_mean_sample_sd_min_and_max_over_the_seeds(swept, metric):
    table = pd.read_csv(swept[1] / "results.csv")
    summary = pd.read_csv(swept[1] / "summary.csv")
    for cell in range(4):
        vals = table[table["cell"] == cell][metric].dropna()
        got = summary[(summary["cell"] == cell) & (summary["metric"] == metric)].iloc[0]
        assert got["n"] == len(vals) == 2
        for name, want in (("mean", vals.mean()), ("std", vals.std(ddof=1)), ("min", vals.min()),
                           ("max", vals.max())):
            assert math.isclose(got[name], want, rel_tol=1e-12, abs_tol=1e-12), (cell, name)


def test_a_rerun_in_the_same_folder_reuses_every_run_and_a_changed_axis_value_runs_only_its_cells(
        swept, capsys):
    scenario, out = swept
    before = pd.read_csv(out / "results.csv")
    capsys.readouterr()
    assert main(["sweep", "--scenario", str(scenario), *GRID, "--out", str(out)]) == 0
    assert "8 finished earlier in" in capsys.readouterr().err
    again = pd.read_csv(out / "results.csv").drop(columns=["wall_s"])
    pd.testing.assert_frame_equal(again, before.drop(columns=["wall_s"]))
    changed = [g.replace("policy.lookback=2h,12h", "policy.lookback=2h,6h") for g in GRID]
    assert main(["sweep", "--scenario", str(scenario), *changed, "--out", str(out)]) == 0
    assert "4 finished earlier in" in capsys.readouterr().err and len(list((out / "runs").glob("*.json"))) == 12
