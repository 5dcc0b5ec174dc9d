"""An --out that passes the path checks but cannot be created (a 300-character name, a
directory under /proc) is refused before anything runs: exit status 2 naming --out, no
traceback, nothing created. The up-front check tries for real and leaves nothing behind; the
later mkdir of the report folder never raises a bare OSError either."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from optalloc.cli import main
from optalloc.cli.sim_cmd import private_output
from optalloc.errors import OptallocError
from optalloc.outdir import check_out_dir, make_private_dirs
from tests.test_trace_input_stop42 import write_trace

LONG = "x" * 300  # longer than NAME_MAX (255) on every common file system

COMMANDS = {
    "simulate": ["simulate", "--policies", "greedy", "--no-progress"],
    "whatif": ["whatif", "--policy", "greedy", "--set", "org.a.share=+10%", "--no-progress"],
    "sweep": ["sweep", "--policies", "greedy", "--grid", "policy.lookback=1d", "--jobs", "1",
              "--no-progress"],
}


@pytest.fixture
def lab(tmp_path, monkeypatch):
    write_trace(tmp_path, ["j1,100,600,1"])  # and its scenario, sc.yaml
    monkeypatch.chdir(tmp_path)
    return tmp_path


def tree(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


@pytest.mark.parametrize("out, needle", [
    (f"{LONG}/r", f"--out {LONG}/r cannot be created (a name in the path is too long); choose "
                  "another directory"),
    (f"deep/{LONG}", f"--out deep/{LONG} cannot be created (a name in the path is too long)"),
    ("/proc/nope", "--out /proc/nope "),
], ids=["a 300-character folder name", "a 300-character name under a missing folder",
        "a folder under /proc"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_out_that_cannot_be_created_is_refused_before_any_work(lab, capsys, command, out, needle):
    before = tree(lab)
    argv = [COMMANDS[command][0], "--scenario", "sc.yaml", *COMMANDS[command][1:], "--out", out]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert captured.err.startswith(f"optalloc {command}: ")
    assert needle in captured.err
    assert "scenario sc" not in captured.err and captured.out == ""  # nothing simulated
    assert tree(lab) == before  # no folder left behind (not even deep/)


def test_the_check_leaves_a_missing_out_missing_and_an_existing_one_unchanged(tmp_path):
    check_out_dir(tmp_path / "a" / "b" / "c")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "f").write_text("mine")
    check_out_dir(tmp_path / "keep")
    assert tree(tmp_path) == {"keep", "keep/f"}
    assert (tmp_path / "keep" / "f").read_text() == "mine"


@pytest.mark.skipif(os.geteuid() != 0, reason="as root, os.access says /proc is writable")
def test_as_root_an_existing_unwritable_out_is_refused_by_the_probe():
    with pytest.raises(OptallocError, match=r"^--out /proc cannot be written \("):
        check_out_dir("/proc")


def test_make_private_dirs_turns_an_os_error_into_a_located_message(tmp_path):
    with pytest.raises(OptallocError) as err:
        make_private_dirs(tmp_path / LONG / "r")
    assert str(err.value) == (f"cannot create the directory {tmp_path / LONG / 'r'} (a name in "
                              "the path is too long); choose another directory")
    assert list(tmp_path.iterdir()) == []


def test_a_write_error_inside_the_report_folder_is_exit_2_not_a_traceback(tmp_path):
    with pytest.raises(OptallocError, match=r"^--out .*/out: cannot write the report \(No space "
                                            r"left on device\); free space or choose another"):
        with private_output(tmp_path / "out"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
