"""`optalloc bench --sizes ...`: the scaling suite's table, JSON and MPS export, and clear errors
for bad flags (exit 2, the flag named, nothing written)."""

from __future__ import annotations

import json

import pytest

from optalloc.cli import main

BAD = [
    (["--sizes", "S,Q"], "--sizes: unknown Q; choose among S, M, L, XL, XXL"),
    (["--sizes", "S", "--backends", "gurobi"], "--backends: unknown gurobi"),
    (["--sizes", "S", "--naive-sizes", "XXXL"], "--naive-sizes: unknown XXXL"),
    (["--sizes", "S", "--repeat", "0"], "--repeat: must be positive, got 0"),
    (["--suite", "nope"], "--suite: unknown nope; choose among ledger, epoch, scale, sim"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[b[1].split(":")[0] for b in BAD])
def test_a_bad_flag_is_named_with_exit_2_and_nothing_is_written(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert main(["bench", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_sizes_alone_run_the_scale_suite_and_export_each_instance_as_mps(tmp_path, capsys):
    import highspy

    out = tmp_path / "out"
    argv = ["bench", "--sizes", "S", "--backends", "none", "--naive-sizes", "none", "--export",
            "--out", str(out)]
    assert main(argv) == 0
    rows = json.loads((out / "scale.json").read_text())["rows"]
    assert [(r["size"], r["row"], r["status"], r["invariants"]) for r in rows] == [
        ("S", "lp", "optimal", ""), ("S", "epoch", "optimal", "ok"),
        ("S", "epoch/lookahead", "optimal", "ok")]
    md = (out / "bench.md").read_text()
    assert "## scale" in md and "| S | 88 | 200 | epoch | optimal |" in md
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(out / "instances" / "S-seed0.mps"))
    assert (h.getNumCol(), h.getNumRow()) == (rows[0]["vars"], rows[0]["cons"])
