"""Parsers and command wrapper of the Slurm CLI (no Slurm needed): hostlists, gres detail,
node states, the optalloc comment convention, squeue --json of 22.05 and 23.02+."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from optalloc.runners.slurm_submit import job_from_slurm
from optalloc.runners.slurm_cli import (
    SlurmCli,
    SlurmError,
    expand_hostlist,
    format_comment,
    parse_comment,
    parse_gres_detail,
    parse_job,
    parse_sinfo,
    slurm_node_state,
)
from optalloc.types import Job, NodeState


@pytest.mark.parametrize("hostlist, names", [
    ("", []),
    ("node3", ["node3"]),
    ("node[1-3]", ["node1", "node2", "node3"]),
    ("node[1-2,5],gpu-a01", ["node1", "node2", "node5", "gpu-a01"]),
    ("h100-[008-010]", ["h100-008", "h100-009", "h100-010"]),
    ("a[1,3],b[7-8]", ["a1", "a3", "b7", "b8"]),
])
def test_a_hostlist_expands_to_node_names(hostlist, names):
    assert expand_hostlist(hostlist) == names


@given(st.lists(st.integers(0, 999), min_size=1, max_size=20, unique=True))
def test_a_bracketed_range_list_expands_to_exactly_its_numbers(nums):
    spec = ",".join(str(n) for n in nums)
    assert expand_hostlist(f"n[{spec}]") == [f"n{n}" for n in nums]


@pytest.mark.parametrize("detail, parsed", [
    ("gpu:h100:3(IDX:0-2)", ("h100", (0, 1, 2))),
    ("gpu:2(IDX:1,3)", (None, (1, 3))),
    ("gpu:b200:4(IDX:0,2-3,7)", ("b200", (0, 2, 3, 7))),
    ("mps:100", (None, ())),
])
def test_gres_detail_gives_the_gpu_type_and_indices(detail, parsed):
    assert parse_gres_detail(detail) == parsed


@pytest.mark.parametrize("state, expected", [
    ("idle", NodeState.UP), ("mixed", NodeState.UP), ("allocated", NodeState.UP),
    ("completing", NodeState.UP), ("drained", NodeState.DRAIN), ("draining", NodeState.DRAIN),
    ("drain", NodeState.DRAIN), ("down", NodeState.DOWN), ("down*", NodeState.DOWN),
    ("idle*", NodeState.DOWN), ("fail", NodeState.DOWN), ("unknown", NodeState.DOWN),
])
def test_a_slurm_node_state_maps_to_up_drain_or_down(state, expected):
    assert slurm_node_state(state) is expected


def test_sinfo_output_lists_every_node_once():
    assert parse_sinfo("node1|idle\nnode2|drained\nnode[3-4]|down*\n") == {
        "node1": NodeState.UP, "node2": NodeState.DRAIN,
        "node3": NodeState.DOWN, "node4": NodeState.DOWN}


def test_the_comment_convention_round_trips():
    c = format_comment({"project": "A1", "min_runtime": 3600, "resumable": 1, "priority": 0})
    assert c == "optalloc:project=A1;min_runtime=3600;resumable=1;priority=0"
    assert parse_comment(c) == {"project": "A1", "min_runtime": "3600", "resumable": "1",
                                "priority": "0"}
    assert parse_comment("just a note") is None


@given(st.dictionaries(st.from_regex(r"[a-z_]{1,10}", fullmatch=True),
                       st.from_regex(r"[A-Za-z0-9_.,:-]{0,12}", fullmatch=True), max_size=6))
def test_any_plain_fields_survive_the_comment(fields):
    assert parse_comment(format_comment(fields)) == fields


def test_a_field_with_a_separator_is_refused():
    with pytest.raises(ValueError, match="may not contain"):
        format_comment({"project": "A;1"})


SQUEUE_2205 = {
    "job_id": 12, "name": "train-7", "job_state": "RUNNING", "state_reason": "None",
    "nodes": "node[1-2]", "gres_detail": ["gpu:h100:2(IDX:0-1)", "gpu:h100:2(IDX:4-5)"],
    "tres_per_node": "gres:gpu:2", "node_count": 2, "start_time": 1000, "end_time": 5000,
    "submit_time": 900, "exit_code": 0, "restart_cnt": 1, "user_name": "ana",
    "partition": "gpu", "comment": "optalloc:project=A1;min_runtime=2h;resumable=1;priority=2",
}
SQUEUE_2302 = {
    **SQUEUE_2205,
    "job_state": ["RUNNING"],
    "start_time": {"set": True, "infinite": False, "number": 1000},
    "end_time": {"set": True, "infinite": False, "number": 5000},
    "submit_time": {"set": True, "infinite": False, "number": 900},
    "node_count": {"set": True, "infinite": False, "number": 2},
    "restart_cnt": 1,
    "exit_code": {"status": ["SUCCESS"], "return_code": {"set": True, "number": 0}},
}


@pytest.mark.parametrize("raw", [SQUEUE_2205, SQUEUE_2302], ids=["22.05", "23.02+"])
def test_squeue_json_of_either_version_parses_to_the_same_job(raw):
    sj = parse_job(raw)
    assert (sj.slurm_id, sj.name, sj.state, sj.nodes, sj.gpu_idx, sj.gpu_type, sj.gpus_per_node,
            sj.node_count, sj.start_time, sj.end_time, sj.submit_time, sj.exit_code,
            sj.restarts, sj.held) == (
        "12", "train-7", "RUNNING", ("node1", "node2"), ((0, 1), (4, 5)), "h100", 2, 2,
        1000.0, 5000.0, 900.0, 0, 1, False)
    assert job_from_slurm(sj, sj.optalloc_fields) == Job(
        "train-7", "A1", 4, gpus_per_node=2, min_runtime_s=7200.0, resumable=True, priority=2,
        submit_time=900.0)


@pytest.mark.parametrize("comment, error", [
    ("optalloc:min_runtime=1h", "comment has no project= field"),
    ("optalloc:project=A1;min_runtime=soon", "comment: expected a duration"),
    ("optalloc:project=A1;resumable=maybe", "resumable='maybe' must be 1 or 0"),
    ("optalloc:project=A1;priority=high", "comment: invalid literal"),
])
def test_a_malformed_comment_names_the_field(comment, error):
    sj = parse_job({**SQUEUE_2205, "comment": comment})
    with pytest.raises(ValueError, match=error):
        job_from_slurm(sj, sj.optalloc_fields)


@pytest.mark.parametrize("argv, message", [
    (["no-such-slurm-command"],
     "`no-such-slurm-command` is not installed or not on PATH (install slurm-client)"),
    (["sh", "-c", "echo 'Invalid job id specified' >&2; exit 1"],
     "`sh -c echo 'Invalid job id specified' >&2; exit 1` failed (exit 1): "
     "Invalid job id specified"),
    (["sleep", "5"], "`sleep 5` did not answer within 0.2s (is slurmctld running?)"),
])
def test_a_failing_command_is_a_slurm_error_with_what_slurm_said(argv, message):
    with pytest.raises(SlurmError) as err:
        SlurmCli(timeout_s=0.2).run(argv)
    assert str(err.value) == message


def test_a_command_that_succeeds_returns_its_output_with_the_configured_slurm_conf(monkeypatch):
    monkeypatch.delenv("SLURM_CONF", raising=False)
    assert SlurmCli().run(["sh", "-c", 'echo "$SLURM_CONF"']) == "\n"
    assert SlurmCli(slurm_conf="/x").run(["sh", "-c", 'echo "$SLURM_CONF"']) == "/x\n"


def test_the_real_slurm_suite_says_why_it_cannot_run(monkeypatch):
    from tests import slurm_cluster

    monkeypatch.setattr(slurm_cluster.os, "geteuid", lambda: 1000)
    assert slurm_cluster.missing_requirements() == (
        "needs root (slurmd runs jobs as any user); run as root or in CI")
    monkeypatch.setattr(slurm_cluster.os, "geteuid", lambda: 0)
    monkeypatch.setattr(slurm_cluster.shutil, "which", lambda c: None)
    monkeypatch.setattr(slurm_cluster, "Path", lambda *a: type("P", (), {"exists": lambda s: False})())
    assert slurm_cluster.missing_requirements() == (
        "Slurm/munge not installed (missing slurmctld, slurmd, munged, mungekey, sbatch, squeue, "
        "scontrol, scancel, sinfo); run scripts/ci-slurm-setup.sh as root")
