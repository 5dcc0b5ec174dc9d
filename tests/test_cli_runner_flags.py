"""The runner flags of `epoch` and `submit` (--runner, --node, --runner-dir, --slurm-conf) are
checked before anything is written: a bad one is exit status 2 naming the flag, with no state
DB, lock or log directory left behind. A dry run on a missing state DB writes nothing either.
What `submit --runner slurm` creates is private, and a job id cannot steer its log path. Slurm
is faked by small scripts on PATH."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from optalloc.cli import main
from tests.conftest import make_lab
from tests.test_cli_input_ranges import entries, refused

CONFIG = """gpu_types: [{name: h100}]
nodes: [{name: "n[1-2]", gpu_type: h100, gpus: 4}]
org: {name: lab, children: [{name: A1, share: 1}, {name: B1, share: 1}]}
"""


@pytest.fixture
def lab(tmp_path, monkeypatch):
    return make_lab(tmp_path, monkeypatch, CONFIG)


def fake_slurm(d: Path, monkeypatch, *, fail: bool = False) -> Path:
    """sbatch/squeue/sinfo/scontrol stand-ins on PATH; sbatch records its argv in args.txt."""
    bin_ = d / "bin"
    bin_.mkdir()
    for cmd in ("sbatch", "squeue", "sinfo", "scontrol"):
        body = (f'echo "{cmd}: fatal: Could not establish a configuration source" >&2\nexit 1\n'
                if fail else
                f'for a in "$@"; do echo "$a"; done > "{d}/args.txt"\ncat >/dev/null\necho 4242\n')
        (bin_ / cmd).write_text("#!/bin/sh\n" + body)
        (bin_ / cmd).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:{os.environ['PATH']}")
    return bin_


EPOCH = ["epoch", "--config", "cfg.yaml", "--state", "st.db", "--now", "2000"]


@pytest.mark.parametrize("flags, needles", [
    (["--runner", "foo"], ["--runner 'foo' is unknown", "noop, local, slurm"]),
    (["--runner", "local", "--node", "zz"], ["--node 'zz' is not a node of the config",
                                             "n[1-2]"]),
    (["--runner", "local", "--node", "n1", "--runner-dir", "cfg.yaml"],
     ["--runner-dir cfg.yaml is not a directory"]),
    (["--runner", "local", "--node", "n1", "--runner-dir", "no/such/dir"],
     ["--runner-dir no/such/dir", "does not exist"]),
])
def test_epoch_refuses_bad_runner_flags_before_creating_the_state_db_or_its_lock(
        lab, capsys, flags, needles):
    before = entries(lab)
    refused(capsys, EPOCH + flags, *needles)
    assert entries(lab) == before


SUBMIT = ["submit", "--config", "cfg.yaml", "--state", "st.db", "--project", "A1", "--gpus", "1",
          "--runner", "slurm"]


@pytest.mark.parametrize("conf, needle", [
    ("/nonexistent/slurm.conf", "No such file or directory"),
    (".", "is not a regular file"),
])
def test_submit_to_slurm_refuses_a_slurm_conf_that_is_not_a_readable_file_before_writing(
        lab, capsys, monkeypatch, conf, needle):
    fake_slurm(lab, monkeypatch, fail=True)
    before = entries(lab)
    refused(capsys, SUBMIT + ["--slurm-conf", conf, "--", "true"], f"--slurm-conf {conf}",
            needle, "slurm.conf")
    assert entries(lab) == before  # no st.db, no slurm-logs/


def test_epoch_with_slurm_refuses_a_missing_slurm_conf_before_creating_the_state_db(
        lab, capsys, monkeypatch):
    fake_slurm(lab, monkeypatch, fail=True)
    before = entries(lab)
    refused(capsys, EPOCH + ["--runner", "slurm", "--slurm-conf", "/nonexistent/slurm.conf"],
            "--slurm-conf /nonexistent/slurm.conf", "No such file or directory")
    assert entries(lab) == before


def test_a_dry_run_on_a_missing_state_db_plans_from_an_empty_state_and_writes_nothing(
        lab, capsys):
    before = entries(lab)
    assert main(EPOCH + ["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dry run: nothing written or started" in out
    assert entries(lab) == before  # no st.db, no st.db.lock


def test_a_dry_run_on_a_missing_state_db_refuses_a_real_runner_naming_the_flags(
        lab, capsys):
    before = entries(lab)
    refused(capsys, EPOCH + ["--dry-run", "--runner", "local", "--node", "n1"],
            "--dry-run --runner local", "st.db does not exist yet", "--runner noop")
    assert entries(lab) == before


def test_submit_to_slurm_creates_its_log_directory_private_under_umask_000(
        lab, capsys, monkeypatch):
    fake_slurm(lab, monkeypatch)
    old = os.umask(0)
    try:
        assert main(SUBMIT + ["--", "echo", "hi"]) == 0, capsys.readouterr().err
    finally:
        os.umask(old)
    assert stat.S_IMODE((lab / "slurm-logs").stat().st_mode) == 0o700


def test_a_job_id_cannot_steer_the_slurm_log_path_out_of_slurm_logs_or_into_patterns(
        lab, capsys, monkeypatch):
    fake_slurm(lab, monkeypatch)
    assert main(SUBMIT + ["--id", "../../../tmp/x%u", "--", "echo", "hi"]) == 0
    args = (lab / "args.txt").read_text().splitlines()
    output = next(a for a in args if a.startswith("--output="))
    assert output == f"--output={lab / 'slurm-logs' / '.._.._.._tmp_x_u.%j.log'}"
    assert "-J" in args and args[args.index("-J") + 1] == "../../../tmp/x%u"  # the id itself
