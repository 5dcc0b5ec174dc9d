"""`optalloc jobs` and `optalloc gpus --state` show a drain's progress from the latest plan: who
stays (protected), who leaves, when the node is empty, and when it is ready for repair (the
README's drain rule promises both commands say so)."""

from __future__ import annotations

import textwrap

from optalloc.cli import main

BASE = """
gpu_types: [{name: h100}]
nodes:
  - {name: n1, gpu_type: h100, gpus: 8}
  - {name: n2, gpu_type: h100, gpus: 8, state: STATE}
org: {name: root, children: [{name: a, share: 1}, {name: b, share: 1}]}
policy: {solver: {backend: highs, time_limit: 10s}}
jobs:
  - {id: a1, project: a, gpus: 8, min_runtime: 1h, duration: 5h, gpu_types: [h100]}
  - {id: b1, project: b, gpus: 8, min_runtime: 1h, duration: 5h}
"""


def _run(tmp_path, capsys, state: str, now: str) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(textwrap.dedent(BASE.replace("STATE", state)))
    assert main(["epoch", "--config", str(cfg), "--state", str(tmp_path / "s.db"),
                 "--now", now]) == 0
    capsys.readouterr()


def _out(capsys, argv) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def test_jobs_and_gpus_show_who_stays_on_a_drain_node_and_when_it_is_empty(tmp_path, capsys):
    _run(tmp_path, capsys, "up", "2026-06-01T08:00:00Z")  # both start, one per node
    _run(tmp_path, capsys, "drain", "2026-06-01T08:10:00Z")  # n2 drains; its job is protected
    db, cfg = str(tmp_path / "s.db"), str(tmp_path / "c.yaml")
    jobs = _out(capsys, ["jobs", "--state", db])
    (line,) = [x for x in jobs.splitlines() if x.startswith("drain ")]
    assert line.startswith("drain n2: 1 protected job(s) stay: ")
    assert line.endswith("; empty by 2026-06-01 09:01 UTC")  # protection end + 60 s grace
    gpus = _out(capsys, ["gpus", "--config", cfg, "--node", "n2", "--state", db])
    assert line in gpus.splitlines()
    other = _out(capsys, ["gpus", "--config", cfg, "--node", "n1", "--state", db])
    assert "drain: n1 not draining in the latest plan" in other.splitlines()
    # past the protection the job leaves; once it has, the node is ready for repair
    _run(tmp_path, capsys, "drain", "2026-06-01T09:10:00Z")
    assert "leaving after their notice: " in _out(capsys, ["jobs", "--state", db])


def test_an_unknown_node_is_named_with_the_config_nodes_as_ranges(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(textwrap.dedent(BASE.replace("STATE", "up")).replace(
        "  - {name: n1, gpu_type: h100, gpus: 8}", "  - {name: 'h100-[001-128]', gpu_type: h100, gpus: 8}"))
    assert main(["gpus", "--config", str(cfg), "--node", "nope"]) == 2
    err = capsys.readouterr().err
    assert "(nodes: h100-[001-128],n2)" in err
