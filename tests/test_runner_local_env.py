"""A job's environment is clean: the default allow-list of optalloc's variables, what the
config's `job_env` adds, and optalloc's own OPTALLOC_* / CUDA_VISIBLE_DEVICES. An operator's
secret in optalloc's environment never reaches a job (nor its log)."""

from __future__ import annotations

import os
import signal

import pytest

from optalloc.config import ConfigError, parse_config
from optalloc.runners.local import LocalRunner
from optalloc.runners.local_proc import DEFAULT_PATH, job_environment
from optalloc.types import Job, JobEnv, Node, NodeAlloc, Placement, Plan, frozen_map
from tests.conftest import wait_until

OWN = {"CUDA_VISIBLE_DEVICES": "1", "OPTALLOC_JOB_ID": "j"}


@pytest.mark.parametrize(
    "case, outside, job_env, expected",
    [
        ("an operator's secrets and optalloc's own settings stay behind",
         {"PATH": "/usr/bin", "HOME": "/root", "AWS_SECRET_ACCESS_KEY": "hunter2",
          "SSH_AUTH_SOCK": "/tmp/agent", "OPTALLOC_FAULT": "cycle.after_observe",
          "LD_PRELOAD": "/evil.so"},
         JobEnv(), {"PATH": "/usr/bin", "HOME": "/root", **OWN}),
        ("the locale, time zone, user and temp dir pass",
         {"LANG": "C.UTF-8", "LC_ALL": "C", "LC_CTYPE": "C", "TZ": "UTC", "USER": "ci",
          "LOGNAME": "ci", "TMPDIR": "/scratch", "SHELL": "/bin/sh", "TERM": "dumb"},
         JobEnv(), {"LANG": "C.UTF-8", "LC_ALL": "C", "LC_CTYPE": "C", "TZ": "UTC",
                    "USER": "ci", "LOGNAME": "ci", "TMPDIR": "/scratch", "SHELL": "/bin/sh",
                    "TERM": "dumb", "PATH": DEFAULT_PATH, **OWN}),
        ("the config allows a name and a prefix",
         {"HF_HOME": "/data/hf", "WANDB_API_KEY": "k", "WANDB_DIR": "/w", "WANDBX": "no",
          "PATH": "/bin"},
         JobEnv(allow=("HF_HOME", "WANDB_*")),
         {"HF_HOME": "/data/hf", "WANDB_API_KEY": "k", "WANDB_DIR": "/w", "PATH": "/bin", **OWN}),
        ("the config sets fixed values",
         {"OMP_NUM_THREADS": "64"}, JobEnv(set=frozen_map({"OMP_NUM_THREADS": "8"})),
         {"OMP_NUM_THREADS": "8", "PATH": DEFAULT_PATH, **OWN}),
        ("optalloc's own variables win over anything from outside",
         {"CUDA_VISIBLE_DEVICES": "0,1,2,3", "OPTALLOC_JOB_ID": "other"},
         JobEnv(allow=("CUDA_*",)), {"PATH": DEFAULT_PATH, **OWN}),
    ],
)
def test_a_jobs_environment_is_the_allow_list_the_config_and_optallocs_own(
        case, outside, job_env, expected):
    assert job_environment(outside, job_env, OWN) == expected


def test_a_real_job_sees_exactly_that_environment_and_no_secret(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    outside = {"PATH": os.environ["PATH"], "HOME": "/home/op", "HF_HOME": "/data/hf",
               "GITHUB_TOKEN": "ghp_secret", "OPTALLOC_FAULT": "runner.after_spawn"}
    r = LocalRunner(tmp_path / "state.db", Node("box", "h100", 2), run_dir=tmp_path / "runs",
                    base_env=outside, job_env=JobEnv(allow=("HF_HOME",)))
    job = Job("j", "p", 1, command=("sh", "-c", f'env > "{marks}/env.tmp"; '
                                                f'mv "{marks}/env.tmp" "{marks}/env"'))
    try:
        pl = Placement("j", "h100", (NodeAlloc("box", (1,)),))
        assert r.apply(Plan(now=0.0, placements=(pl,)), {"j": job}, 0.0).started == ("j",)
        text = wait_until(lambda: (marks / "env").exists() and (marks / "env").read_text())
        env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        for shell_own in ("PWD", "SHLVL", "_", "OLDPWD"):  # set by the shell itself
            env.pop(shell_own, None)
        assert set(env) == {"PATH", "HOME", "HF_HOME", "CUDA_VISIBLE_DEVICES",
                            "OPTALLOC_JOB_ID", "OPTALLOC_GPUS", "OPTALLOC_MIN_RUNTIME",
                            "OPTALLOC_PROTECTED_UNTIL", "OPTALLOC_CHECKPOINT_INTERVAL",
                            "OPTALLOC_RESUMABLE", "OPTALLOC_PREEMPT_SIGNAL", "OPTALLOC_GRACE",
                            "OPTALLOC_REQUEUE_EXIT_CODE", "OPTALLOC_RESTART_COUNT"}
        assert (env["HOME"], env["HF_HOME"], env["CUDA_VISIBLE_DEVICES"]) == (
            "/home/op", "/data/hf", "1")
        assert "ghp_secret" not in text
    finally:
        for (pid,) in r.conn.execute("SELECT pid FROM runner_local_runs WHERE pid IS NOT NULL"):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in r._children.values():
            proc.wait(timeout=10)
        r.close()


BASE = {
    "gpu_types": [{"name": "h100"}],
    "nodes": [{"name": "box", "gpu_type": "h100", "gpus": 2}],
    "org": {"name": "lab", "children": [{"name": "A1"}]},
}


@pytest.mark.parametrize(
    "case, job_env, problems",
    [
        ("names, prefixes and fixed values are accepted",
         {"allow": ["HF_HOME", "WANDB_*"], "set": {"OMP_NUM_THREADS": 8}}, []),
        ("a name that is not a variable name is refused",
         {"allow": ["HF-HOME", "*"]},
         ["t.yaml: job_env.allow[0]: 'HF-HOME' is not an environment variable name (or NAME_*); "
          "use letters, digits and _, optionally ending in * for a prefix",
          "t.yaml: job_env.allow[1]: '*' is not an environment variable name (or NAME_*); "
          "use letters, digits and _, optionally ending in * for a prefix"]),
        ("optalloc's own variables cannot be let in from outside",
         {"allow": ["OPTALLOC_FAULT", "OPT*", "CUDA_VISIBLE_DEVICES"]},
         ["t.yaml: job_env.allow[0]: 'OPTALLOC_FAULT' would pass optalloc's own variables "
          "through; optalloc sets OPTALLOC_* and CUDA_VISIBLE_DEVICES for each job; remove it",
          "t.yaml: job_env.allow[1]: 'OPT*' would pass optalloc's own variables through; "
          "optalloc sets OPTALLOC_* and CUDA_VISIBLE_DEVICES for each job; remove it",
          "t.yaml: job_env.allow[2]: 'CUDA_VISIBLE_DEVICES' would pass optalloc's own "
          "variables through; optalloc sets OPTALLOC_* and CUDA_VISIBLE_DEVICES for each job; "
          "remove it"]),
        ("optalloc's own variables cannot be set",
         {"set": {"OPTALLOC_JOB_ID": "x", "OK": [1]}},
         ["t.yaml: job_env.set.OPTALLOC_JOB_ID: OPTALLOC_JOB_ID is set by optalloc for each "
          "job; remove it",
          "t.yaml: job_env.set.OK: expected a string or number, got a list; quote it"]),
        ("an unknown key suggests the right one",
         {"alow": ["X"]}, ["t.yaml: job_env.alow: unknown key 'alow'; did you mean 'allow'?"]),
    ],
)
def test_the_job_env_section_is_validated_with_located_messages(case, job_env, problems):
    data = {**BASE, "job_env": job_env}
    if problems:
        with pytest.raises(ConfigError) as err:
            parse_config(data, "t.yaml")
        assert err.value.problems == problems
    else:
        config, _ = parse_config(data, "t.yaml")
        assert config.job_env == JobEnv(allow=("HF_HOME", "WANDB_*"),
                                        set=frozen_map({"OMP_NUM_THREADS": "8"}))
