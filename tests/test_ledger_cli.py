"""`optalloc ledger report | record | import` end to end on a small config written here."""

from __future__ import annotations

import json
import re

import pytest

from optalloc.cli import main
from optalloc.state import StateStore
from optalloc.types import Job, JobState, NodeAlloc, Placement

CONFIG = """
gpu_types:
  - {name: h100, billing_weight: 1.0}
  - {name: b200, billing_weight: 2.0}
nodes:
  - {name: "h100-[01-02]", gpu_type: h100, gpus: 8}
org:
  name: lab
  children:
    - name: A
      share: 3
      children:
        - {name: A1}
        - {name: A2}
    - {name: B1, share: 1}
policy:
  lookback: 1d
"""
HEADER = "job_id,project,gpu_type,gpus,start,end,allocated\n"
DAY = 86400


@pytest.fixture
def paths(tmp_path):
    cfg = tmp_path / "lab.yaml"
    cfg.write_text(CONFIG)
    return str(cfg), str(tmp_path / "state.db"), tmp_path


def report_json(cfg, db, now, capsys) -> dict:
    assert main(["ledger", "report", "--config", cfg, "--state", db, "--now", str(now), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_imported_and_recorded_intervals_show_up_in_the_report(paths, capsys):
    cfg, db, tmp = paths
    csv_file = tmp / "runs.csv"
    csv_file.write_text(HEADER + "j1,A1,h100,8,0,3600,true\n"
                                 "j2,B1,h100,4,1970-01-01T00:00:00Z,7200,\n"
                                 "u1,A2,h100,4,0,7200,false\n")  # 16 of 16 GPUs at t=0
    assert main(["ledger", "import", "--config", cfg, "--state", db, str(csv_file)]) == 0
    assert "imported 3 intervals (16.0 allocated GPU-h)" in capsys.readouterr().out
    assert main(["ledger", "record", "--config", cfg, "--state", db, "--job", "j3", "--project",
                 "A2", "--gpu-type", "h100", "--gpus", "2", "--start", "3600", "--end", "5400"]) == 0
    capsys.readouterr()
    doc = report_json(cfg, db, 7200, capsys)
    rows = {r["name"]: r for r in doc["rows"]}
    assert [(r["name"], r["depth"]) for r in doc["rows"]] == [
        ("lab", 0), ("A", 1), ("A1", 2), ("A2", 2), ("B1", 1)]
    assert {n: r["usage_gpu_h"] for n, r in rows.items()} == {
        "lab": 17.0, "A": 9.0, "A1": 8.0, "A2": 1.0, "B1": 8.0}
    # 16 GPUs are up (no capacity recorded: the config's nodes apply); B1 is entitled to 1/4
    assert rows["B1"]["entitled_gpu_h"] == pytest.approx(16 * 24 * 0.25)
    assert rows["A"]["entitlement_pct"] == pytest.approx(75.0)
    assert doc["intervals"] == 4 and doc["usage"] == "window 1d"
    assert any("no capacity recorded" in n for n in doc["notes"])


def test_the_text_report_indents_org_nodes_by_depth(paths, capsys):
    cfg, db, tmp = paths
    assert main(["ledger", "record", "--config", cfg, "--state", db, "--job", "j", "--project", "B1",
                 "--gpu-type", "h100", "--gpus", "1", "--start", "0", "--end", "3600"]) == 0
    capsys.readouterr()
    assert main(["ledger", "report", "--config", cfg, "--state", db, "--now", "3600"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [re.match(r"^ *\S+", ln).group(0) for ln in lines[3:8]]
    assert names == ["lab", "  A", "    A1", "    A2", "  B1"]
    assert lines[1].split() == ["org", "node", "share", "ent", "%", "usage", "GPU-h", "entitled",
                                "GPU-h", "ratio", "owed", "GPU-h", "delivered", "GPU-h", "met",
                                "GPU-h", "met/owed", "period"]
    legend = " ".join(lines[8:])
    assert "owed, delivered, met: no demand sample yet, so nothing is owed" in legend
    assert "1.0 allocated GPU-h delivered in the window before tracking began" in legend


def test_running_jobs_in_the_state_db_are_charged_up_to_now(paths, capsys):
    cfg, db, _ = paths
    with StateStore(db) as s:
        s.add_job(Job("r", "A1", 8, min_runtime_s=3600, state=JobState.RUNNING, start_time=0.0,
                      placement=Placement("r", "h100", (NodeAlloc("h100-01", tuple(range(8))),))))
    doc = report_json(cfg, db, 1800, capsys)
    assert {r["name"]: r["usage_gpu_h"] for r in doc["rows"]}["A1"] == pytest.approx(4.0)
    assert doc["running"] == 1


@pytest.mark.parametrize(
    "case, rows, messages",
    [
        (
            "unknown project, gpu type and bad numbers are each reported with their line",
            "j1,A1,h100,8,0,3600,true\n"
            "j2,ZZ,b999,x,0,10,true\n"
            "j3,A,h100,0,20,10,maybe\n",
            [
                ":3: project 'ZZ' is not in the org tree",
                ":3: gpu_type 'b999' is not configured",
                ":3: gpus 'x' is not a whole number >= 1",
                ":4: project 'A' is a program, not a project",
                ":4: gpus '0' is not a whole number >= 1",
                ":4: end (10) is before start (20)",
                ":4: allocated 'maybe' is not true/false",
            ],
        ),
        (
            "a time that is neither seconds nor ISO-8601 is reported",
            "j1,A1,h100,8,yesterday,3600,true\n",
            [":2: start: expected a time"],
        ),
        (
            "a repeated job and start is reported as a duplicate of the first line",
            "j1,A1,h100,8,0,3600,true\nj1,A1,h100,8,0,7200,true\n",
            [":3: job 'j1' already has an interval starting at 0 (line 2)"],
        ),
    ],
)
def test_a_csv_with_bad_rows_imports_nothing_and_names_every_bad_line(paths, capsys, case, rows, messages):
    cfg, db, tmp = paths
    csv_file = tmp / "runs.csv"
    csv_file.write_text(HEADER + rows)
    assert main(["ledger", "import", "--config", cfg, "--state", db, str(csv_file)]) == 2
    err = capsys.readouterr().err
    assert "nothing was imported" in err
    for m in messages:
        assert m in err
    assert err.count("\n  - ") == len(messages)
    with StateStore(db) as s:
        assert s.n_intervals() == 0


def test_a_csv_without_the_needed_columns_is_refused(paths, capsys):
    cfg, db, tmp = paths
    csv_file = tmp / "runs.csv"
    csv_file.write_text("job,project\nj1,A1\n")
    assert main(["ledger", "import", "--config", cfg, "--state", db, str(csv_file)]) == 2
    assert "header lacks column(s) job_id, gpu_type, gpus, start, end" in capsys.readouterr().err


def test_recording_against_an_unknown_project_writes_nothing(paths, capsys):
    cfg, db, _ = paths
    assert main(["ledger", "record", "--config", cfg, "--state", db, "--job", "j", "--project", "nope",
                 "--gpu-type", "h100", "--gpus", "1", "--start", "0", "--end", "10"]) == 2
    assert "project 'nope' is not in the org tree" in capsys.readouterr().err
    with StateStore(db) as s:
        assert s.n_intervals() == 0


def test_report_needs_an_existing_state_db_or_demo(paths, capsys):
    cfg, db, _ = paths
    assert main(["ledger", "report", "--config", cfg, "--state", db]) == 2
    assert "no such state DB" in capsys.readouterr().err
    assert main(["ledger", "report", "--config", cfg]) == 2
    assert "give --state DB (or --demo" in capsys.readouterr().err
    assert main(["ledger", "report", "--config", cfg, "--demo", "--now", str(7 * DAY), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["intervals"] > 0 and doc["rows"][0]["usage_gpu_h"] > 0


def test_a_csv_that_is_not_utf8_is_refused_naming_the_file_and_line_and_writes_nothing(
        paths, capsys):
    cfg, db, tmp = paths
    csv_file = tmp / "runs.csv"
    csv_file.write_bytes(HEADER.encode() + b"j1,A1,h100,8,0,3600,true\nj\xff,A1,h100,1,0,50,true\n")
    assert main(["ledger", "import", "--config", cfg, "--state", db, str(csv_file)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"{csv_file}:3: byte 0xff is not UTF-8" in err and "nothing was imported" in err
    assert not (tmp / "state.db").exists()


def test_a_csv_saved_with_a_byte_order_mark_imports(paths, capsys):
    cfg, db, tmp = paths
    csv_file = tmp / "runs.csv"
    csv_file.write_bytes(b"\xef\xbb\xbf" + (HEADER + "j1,A1,h100,8,0,3600,true\n").encode())
    assert main(["ledger", "import", "--config", cfg, "--state", db, str(csv_file)]) == 0
    with StateStore(db) as s:
        assert s.n_intervals() == 1
