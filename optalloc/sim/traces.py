"""Readers for the public GPU cluster traces, vectorized with pandas/numpy.

Every reader returns a `RawJobs`: column arrays of what a trace says about each job (id, submit
time, work, GPUs, team, per-type speed), before the mapping rules of `optalloc.sim.workload`
turn rows into `Job`s of a scenario's org tree.

Traces live outside the repository: `$OPTALLOC_TRACES`, or `<repo>/../shared/data/traces` when
that exists (`traces_dir`).

* ITP (`itp/clusterNN.csv`): `job_id,submission_time,duration,num_gpu`, seconds. Homogeneous:
  `duration` is the work at speed 1.0.
* Philly virtual clusters (`philly-vc/<team>.trace`, Gavel's MSR traces): tab-separated
  `job_type, command, steps_arg, needs_data_dir, total_steps, arrival_s, num_gpus`; the team is the
  file name. `simulation_throughputs.json` gives, per GPU type, the steps per second of the whole
  job for the key `"('<job_type>', <num_gpus>)"` (field `"null"`: running alone). A job's seconds on
  type t are `total_steps / throughput[t]`. With a base type b, `duration_s = total_steps /
  throughput[b]` (work at speed 1.0) and `speedup[t] = throughput[t] / throughput[b]`. A
  throughput of 0 means the job cannot run on that type (speedup 0 -> not an allowed type).
  Keys the file lacks (multi-GPU runs of single-GPU models, 16+ GPU jobs) are scaled linearly
  from the largest measured GPU count of the same job_type (smaller, else the smallest larger),
  i.e. perfect data-parallel scaling: throughput(g) = throughput(g0) * g / g0.

Bad rows are refused, never skipped (`optalloc.sim.trace_checks`): a row with the wrong number
of fields, a non-number, numbers out of range (submit times 0 to 2100, work over ten years,
GPUs 1 to 1,000,000), and ITP job ids that are empty, repeated or break the id rule (read as
text, exactly as written: `nan` and `NA` are ids, not missing values).
"""

from __future__ import annotations

import ast
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from optalloc.errors import ConfigError, OptallocError
from optalloc.sim.trace_checks import (TRACES_ENV, check_ids, check_regular, check_rows, numeric, read_table,
                                       rows_text, shown)
from optalloc.types import frozen_map
from optalloc.units import MAX_DURATION_S, text_problem
PHILLY_GPU_TYPES = ("k80", "p100", "v100")
ITP_COLUMNS = ("job_id", "submission_time", "duration", "num_gpu")
PHILLY_COLUMNS = (
    "job_type",
    "command",
    "steps_arg",
    "needs_data_dir",
    "total_steps",
    "arrival_s",
    "num_gpus",
)


@dataclass(frozen=True, eq=False)
class RawJobs:
    """Column arrays, one row per job, in submit order (ties keep file order).

    `team` is None when the trace has no team field (ITP); then projects come from the mapping
    rules. `speedup` maps gpu_type -> (n,) speed relative to the base type (0: cannot run there);
    empty for homogeneous traces (speed 1.0 everywhere).
    """

    job_id: np.ndarray  # (n,) str
    submit_time: np.ndarray  # (n,) float seconds
    duration_s: np.ndarray  # (n,) float work at speed 1.0
    gpus: np.ndarray  # (n,) int
    team: np.ndarray | None = None  # (n,) str
    speedup: Mapping[str, np.ndarray] = field(default_factory=frozen_map)
    source: str = ""

    def __len__(self) -> int:
        return len(self.job_id)

    def take(self, mask_or_index: np.ndarray) -> "RawJobs":
        """The rows selected by a boolean mask or an index array, same order."""
        sel = np.asarray(mask_or_index)
        return RawJobs(
            job_id=self.job_id[sel],
            submit_time=self.submit_time[sel],
            duration_s=self.duration_s[sel],
            gpus=self.gpus[sel],
            team=None if self.team is None else self.team[sel],
            speedup=frozen_map({t: v[sel] for t, v in self.speedup.items()}),
            source=self.source,
        )

    def shifted(self, offset: float) -> "RawJobs":
        """The same jobs with submit times moved by `offset` seconds."""
        return RawJobs(
            job_id=self.job_id,
            submit_time=self.submit_time + offset,
            duration_s=self.duration_s,
            gpus=self.gpus,
            team=self.team,
            speedup=self.speedup,
            source=self.source,
        )

    def rescaled_arrivals(self, factor: float) -> "RawJobs":
        """Submit times divided by `factor` (> 1 packs arrivals closer: offered load x factor)."""
        return RawJobs(
            job_id=self.job_id,
            submit_time=self.submit_time / float(factor),
            duration_s=self.duration_s,
            gpus=self.gpus,
            team=self.team,
            speedup=self.speedup,
            source=self.source,
        )

    @property
    def gpu_seconds(self) -> float:
        """Total work in GPU-seconds at speed 1.0."""
        return float(np.sum(self.gpus * self.duration_s))


# --------------------------------------------------------------------------- locating


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def traces_dir(env: Mapping[str, str] | None = None) -> Path:
    """The traces folder: `$OPTALLOC_TRACES`, else `<repo>/../shared/data/traces` if it exists.

    Raises OptallocError naming the variable when neither is usable."""
    env = os.environ if env is None else env
    value = env.get(TRACES_ENV)
    if value:
        p = Path(value).expanduser()
        if not p.is_dir():
            raise OptallocError(
                f"{TRACES_ENV}={value} is not a directory; point {TRACES_ENV} at the folder that "
                "holds itp/ and philly-vc/ (e.g. export OPTALLOC_TRACES=/path/to/traces)"
            )
        return p
    default = repo_root().parent / "shared" / "data" / "traces"
    if default.is_dir():
        return default
    raise OptallocError(
        f"no trace folder found: {TRACES_ENV} is not set and {default} does not exist; "
        f"set {TRACES_ENV} to the folder that holds itp/ and philly-vc/"
    )


def traces_available(env: Mapping[str, str] | None = None) -> bool:
    try:
        traces_dir(env)
    except OptallocError:
        return False
    return True


# --------------------------------------------------------------------------- ITP


def read_itp(path: str | Path) -> RawJobs:
    """Read an ITP cluster CSV (`job_id,submission_time,duration,num_gpu`, seconds)."""
    path = Path(path)
    # ids as text, exactly as written: no NA conversion ('', 'nan', 'NA' stay themselves)
    df = read_table(path, sep=",", header=0, names=ITP_COLUMNS, dtype={"job_id": str}, keep_default_na=False)
    missing = [c for c in ITP_COLUMNS if c not in df.columns]
    if missing:
        raise ConfigError(
            [
                f"{path}: missing column(s) {', '.join(missing)} (found {', '.join(map(str, df.columns))}); "
                f"an ITP trace has the header {','.join(ITP_COLUMNS)}"
            ]
        )
    submit = numeric(df["submission_time"], path, "submission_time")
    duration = numeric(df["duration"], path, "duration")
    gpus = numeric(df["num_gpu"], path, "num_gpu")
    check_rows(path, submit, duration, gpus, names=("submission_time", "duration", "num_gpu"))
    ids = df["job_id"].astype(str).to_numpy()
    check_ids(path, ids, "job_id")
    order = np.argsort(submit, kind="stable")
    return RawJobs(
        job_id=ids[order],
        submit_time=submit[order],
        duration_s=duration[order],
        gpus=gpus.astype(np.int64)[order],
        team=None,
        source=str(path),
    )


# --------------------------------------------------------------------------- Philly


def read_throughputs(path: str | Path, gpu_types: Sequence[str] = PHILLY_GPU_TYPES) -> pd.DataFrame:
    """Gavel's `simulation_throughputs.json` as a table (job_type, gpus, gpu_type, throughput):
    steps/s of the whole job running alone."""
    path = Path(path)
    check_regular(path, "point the workload at a philly-vc folder holding the original file")
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError([f"{path}: file not found; the Philly traces need their simulation_throughputs.json"]) from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise ConfigError([f"{path}: not valid JSON ({err}); restore the original file"]) from None
    except OSError as err:  # a directory, permissions, I/O
        raise ConfigError([f"{path}: cannot read it ({err.strerror or err}); make it readable or "
                           "restore the original file"]) from None
    if not isinstance(data, dict):
        raise ConfigError(
            [f"{path}: the top level is a {_json_kind(data)}; expected a mapping of gpu_type -> "
             "{\"('<job_type>', <num_gpus>)\": {\"null\": <steps/s>}}; restore the original file"]
        )
    rows: list[tuple[str, int, str, float]] = []
    for t in gpu_types:
        per_type = data.get(t)
        if not isinstance(per_type, dict):
            raise ConfigError(
                [f"{path}: no throughputs for gpu_type {t!r} (has {', '.join(map(str, data))}); "
                 f"use gpu types the file measures"]
            )
        for key, entry in per_type.items():
            try:
                job_type, g = ast.literal_eval(key)
                thr = float(entry["null"])
                if not (isinstance(g, int) and g >= 1 and np.isfinite(thr) and thr >= 0):
                    raise ValueError
            except (ValueError, SyntaxError, TypeError, KeyError, MemoryError, RecursionError):
                raise ConfigError(
                    [f"{path}: {t}.{key}: expected a key \"('<job_type>', <num_gpus>)\" with a "
                     "\"null\" throughput (a number >= 0); restore the original file"]
                ) from None
            rows.append((str(job_type), int(g), t, thr))
    return pd.DataFrame(rows, columns=["job_type", "gpus", "gpu_type", "throughput"])


def philly_teams(folder: str | Path) -> tuple[str, ...]:
    """Team names (file stems of `*.trace`) in a philly-vc folder, sorted."""
    return tuple(sorted(p.stem for p in Path(folder).glob("*.trace")))


def read_philly(
    folder: str | Path,
    teams: Sequence[str] | None = None,
    *,
    base_type: str = "v100",
    gpu_types: Sequence[str] = PHILLY_GPU_TYPES,
    throughputs: str | Path | None = None,
) -> RawJobs:
    """Read Philly virtual-cluster traces (`<team>.trace`) of `teams` (default: all) with
    per-type speedups relative to `base_type`. Job ids are `<team>-<row>`. An empty team file
    (no header to miss) is a team without jobs."""
    folder = Path(folder)
    gpu_types = tuple(gpu_types)
    if base_type not in gpu_types:
        raise ConfigError([f"base gpu type {base_type!r} is not one of {', '.join(gpu_types)}; pick one of them"])
    all_teams = philly_teams(folder)
    teams = all_teams if teams is None else tuple(teams)
    unknown = [t for t in teams if t not in all_teams]
    if unknown:
        raise ConfigError(
            [f"{folder}: no trace for team(s) {', '.join(unknown)}; teams here: {', '.join(all_teams) or '(none)'}"]
        )
    frames = []
    for team in teams:
        p = folder / f"{team}.trace"
        df = read_table(p, sep="\t", header=None, expected=len(PHILLY_COLUMNS), names=PHILLY_COLUMNS)
        if df.shape[1] != len(PHILLY_COLUMNS):
            raise ConfigError(
                [f"{p}: expected {len(PHILLY_COLUMNS)} tab-separated columns "
                 f"({', '.join(PHILLY_COLUMNS)}), found {df.shape[1]}; is this a Gavel .trace file?"]
            )
        df.columns = list(PHILLY_COLUMNS)
        last_id = f"{team}-{max(len(df) - 1, 0)}"  # job ids are <team>-<row>
        bad_name = text_problem(last_id)
        if bad_name:
            raise ConfigError([f"{p}: the job id {shown(last_id)} made from the file name {bad_name}; "
                               "rename the file (printable UTF-8, without control characters)"])
        # numbers checked file by file, so that data rows are rows of this file
        nums = {c: numeric(df[c], p, c) for c in ("total_steps", "arrival_s", "num_gpus")}
        check_rows(p, nums["arrival_s"], nums["total_steps"], nums["num_gpus"],
                   names=("arrival_s", "total_steps", "num_gpus"), work_is_duration=False)
        for c, v in nums.items():
            df[c] = v
        df["team"] = team
        df["row"] = np.arange(len(df))
        frames.append(df)
    if not frames:
        raise ConfigError([f"{folder}: no *.trace files; point the workload at a philly-vc folder"])
    df = pd.concat(frames, ignore_index=True)
    src = str(folder)
    if df.empty:  # every team file is empty: no jobs (the scenario reports it)
        none = np.zeros(0)
        return RawJobs(job_id=none.astype(object), submit_time=none, duration_s=none,
                       gpus=none.astype(np.int64), team=none.astype(object),
                       speedup=frozen_map({t: none for t in gpu_types}), source=src)
    steps = df["total_steps"].to_numpy(dtype=np.float64)
    arrival = df["arrival_s"].to_numpy(dtype=np.float64)
    gpus = df["num_gpus"].to_numpy(dtype=np.float64)
    gpus = gpus.astype(np.int64)
    thr_table = read_throughputs(throughputs or folder / "simulation_throughputs.json", gpu_types)
    job_types = df["job_type"].astype(str).to_numpy()
    thr = throughput_matrix(thr_table, job_types, gpus, gpu_types, source=src)  # (n, T)
    b = gpu_types.index(base_type)
    if np.any(thr[:, b] <= 0):
        bad = sorted(set(job_types[thr[:, b] <= 0]))
        raise ConfigError(
            [f"{src}: job types {', '.join(bad)} cannot run on base type {base_type!r}; choose a base "
             "type every job runs on (v100)"]
        )
    duration = steps / thr[:, b]
    _check_philly_durations(folder, df, duration, base_type)
    speed = thr / thr[:, [b]]
    order = np.lexsort((np.arange(len(df)), arrival))
    ids = (df["team"].astype(str) + "-" + df["row"].astype(str)).to_numpy()
    return RawJobs(
        job_id=ids[order],
        submit_time=arrival[order],
        duration_s=duration[order],
        gpus=gpus[order],
        team=df["team"].astype(str).to_numpy()[order],
        speedup=frozen_map({t: speed[order, i] for i, t in enumerate(gpu_types)}),
        source=src,
    )


def throughput_matrix(
    table: pd.DataFrame,
    job_types: np.ndarray,
    gpus: np.ndarray,
    gpu_types: Sequence[str],
    *,
    source: str = "",
) -> np.ndarray:
    """(n, T) throughput of each job on each type; unmeasured GPU counts scale linearly from the
    largest measured count <= g of the same job type (else the smallest measured count)."""
    n, T = len(job_types), len(gpu_types)
    out = np.zeros((n, T))
    jobs = pd.DataFrame({"job_type": job_types, "gpus": gpus, "pos": np.arange(n)})
    for i, t in enumerate(gpu_types):
        ref = table[table["gpu_type"] == t][["job_type", "gpus", "throughput"]]
        ref = ref.rename(columns={"gpus": "ref_gpus"}).sort_values("ref_gpus")
        known = set(ref["job_type"])
        missing = sorted(set(job_types) - known)
        if missing:
            raise ConfigError(
                [f"{source}: no throughput for job type(s) {', '.join(missing)} on {t}; "
                 "the throughputs file does not match this trace"]
            )
        # largest measured count <= g (backward), else the smallest measured one (forward)
        left = jobs.sort_values("gpus")
        back = pd.merge_asof(left, ref, left_on="gpus", right_on="ref_gpus", by="job_type", direction="backward")
        fwd = pd.merge_asof(left, ref, left_on="gpus", right_on="ref_gpus", by="job_type", direction="forward")
        use_back = back["ref_gpus"].notna().to_numpy()
        ref_g = np.where(use_back, back["ref_gpus"], fwd["ref_gpus"]).astype(float)
        ref_thr = np.where(use_back, back["throughput"], fwd["throughput"]).astype(float)
        thr = ref_thr * back["gpus"].to_numpy() / ref_g
        out[back["pos"].to_numpy(), i] = thr
    return out


def _check_philly_durations(folder: Path, df: pd.DataFrame, duration: np.ndarray, base_type: str) -> None:
    """Work (total_steps / base-type throughput) at most ten years; rows named in the first
    team file that has such rows."""
    bad = np.flatnonzero(~(duration <= MAX_DURATION_S))
    if len(bad):
        team = df["team"].iloc[bad[0]]
        rows = df["row"].to_numpy()[bad][df["team"].to_numpy()[bad] == team]
        raise ConfigError(
            [f"{folder / f'{team}.trace'}: column total_steps: {len(bad)} row(s) need more than "
             f"{MAX_DURATION_S:.0f} s (ten years) on {base_type} (total_steps / throughput; data rows "
             f"{rows_text(rows)}, e.g. {duration[bad[0]]:g} s); fix or remove those rows"]
        )


def _json_kind(value) -> str:
    return {list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")
