"""`optalloc jobs`: one line per job that fits the terminal (nodes as Slurm writes them, the
reason code whole and its message cut), --wide for whole lines, --json for everything."""

from __future__ import annotations

import json

import pytest

from optalloc.cli import main
from optalloc.cli.jobs_cmd import jobs_table
from optalloc.hostlist import compress_placement

LONG = "past its min_runtime; " + "x" * 300


def row(**kw):
    base = {"id": "j1", "project": "A1", "gpus": 8, "gpu_type": None, "types": "any",
            "state": "pending", "start": None, "wait_s": 3600.0, "nodes": "", "util_pct": None,
            "idle_s": None, "reason": f"OverShare: {LONG}"}
    return {**base, **kw}


@pytest.mark.parametrize(
    "case, rows, width, expected_lines",
    [
        ("a pending job's message is cut to the width, its code kept",
         [row()], 80,
         ["JOB  PROJECT  GPUS   STATE    START/WAIT  NODES:GPUS  REASON",
          "j1   A1       8 any  pending  wait 1h     -           OverShare: past its min..."]),
        ("--wide keeps the whole line", [row(reason="OverShare: short")], None,
         ["JOB  PROJECT  GPUS   STATE    START/WAIT  NODES:GPUS  REASON",
          "j1   A1       8 any  pending  wait 1h     -           OverShare: short"]),
        ("a running job shows its start, compact nodes and utilization with the idle flag",
         [row(state="running", start=0.0, wait_s=None, gpu_type="h100",
              nodes="h100-[018-033]:0-7", util_pct=2.4, idle_s=2700.0, reason="")], 120,
         ["JOB  PROJECT  GPUS    STATE    START/WAIT   NODES:GPUS          UTIL         REASON",
          "j1   A1       8 h100  running  01-01 00:00  h100-[018-033]:0-7  2% IDLE 45m"]),
        ("a long node list is cut at whole groups",
         [row(state="running", start=0.0, wait_s=None, gpu_type="h100", reason="",
              nodes="a[1-4]:0-7 b[10-19]:0-3 c7:1 d8:2-5"),
          row(id="j2", reason="WaitingForCapacity: " + "y" * 200)], 90,
         ["JOB  PROJECT  GPUS    STATE    START/WAIT   NODES:GPUS            REASON",
          "j1   A1       8 h100  running  01-01 00:00  a[1-4]:0-7 +3",
          "j2   A1       8 any   pending  wait 1h      -                     WaitingForCapacity: y..."]),
        ("a terminal too narrow for the message still shows the whole code",
         [row(reason="PreemptedForFairShare: because")], 40,
         ["JOB  PROJECT  GPUS   STATE    START/WAIT  NODES:GPUS  REASON",
          "j1   A1       8 any  pending  wait 1h     -           PreemptedForFairShare: ..."]),
    ],
)
def test_the_table_fits_the_width(case, rows, width, expected_lines):
    assert jobs_table(rows, width).splitlines() == expected_lines


def test_the_demo_queue_fits_a_terminal_with_compact_nodes(demo_state, capsys, monkeypatch):
    from optalloc.config import load_config

    monkeypatch.setenv("COLUMNS", "120")
    assert main(["jobs", "--state", str(demo_state.state)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(ln) for ln in lines) <= 120
    plan = json.loads(demo_state.plans[-1].read_text())
    codes = {p["job_id"]: p["code"] for p in plan["pending"] + plan["preemptions"]}
    by_id = {ln.split()[0]: ln for ln in lines[1:]}
    for job_id, code in codes.items():
        assert f"  {code}: " in by_id[job_id]
    vlm = next(j for j in load_config(demo_state.config).jobs if j.id == "vlm-012")
    assert by_id["vlm-012"].split()[-1] == "h100-[018-033]:0-7"
    assert compress_placement([(a.node, a.gpus) for a in vlm.placement.nodes]) == \
        "h100-[018-033]:0-7"


def test_jobs_json_carries_everything_and_wide_the_whole_message(demo_state, capsys):
    assert main(["jobs", "--state", str(demo_state.state), "--config", str(demo_state.config),
                 "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    plan = json.loads(demo_state.plans[-1].read_text())
    p = plan["pending"][0]
    r = rows[p["job_id"]]
    assert (r["state"], r["code"], r["message"], r["reason"]) == (
        "pending", p["code"], p["message"], f"{p['code']}: {p['message']}")
    assert list(r["ratios"]) == ["foundation", "evals"] and r["wait_s"] > 0
    assert main(["jobs", "--state", str(demo_state.state), "--wide"]) == 0
    wide = capsys.readouterr().out
    assert all(f"{q['code']}: {q['message']}" in wide for q in plan["pending"])


def test_jobs_needs_an_existing_state_db(tmp_path, capsys):
    assert main(["jobs", "--state", str(tmp_path / "none.db")]) == 2
    assert "no such state DB" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()
