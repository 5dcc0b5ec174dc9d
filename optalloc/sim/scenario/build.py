"""The jobs a scenario submits, from its workload section: a trace (ITP, Philly) cut to the
window, rescaled, sampled and mapped to Jobs, a synthetic workload, or the config's own jobs."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Mapping

import numpy as np

from optalloc.config.problems import Loc, Problems, show_list
from optalloc.errors import ConfigError
from optalloc.sim import generate as gen
from optalloc.sim.trace_checks import TRACES_ENV
from optalloc.sim.traces import RawJobs, philly_teams, read_itp, read_philly, traces_available, traces_dir
from optalloc.sim.workload import build_jobs, stable_uniform
from optalloc.types import Config, Job


def build_workload(wl: dict, config: Config, sim: dict, source: str, base_dir: Path,
                    env: Mapping[str, str] | None, problems: Problems):
    src, loc, seed = wl["source"], wl["loc"], sim["seed"]
    start, end = wl["window"]
    if src == "jobs":
        jobs = tuple(sorted((_shifted(j, -sim["start"]) for j in config.jobs), key=lambda j: j.submit_time))
        if not jobs:
            problems.add(loc.key("source"), "source 'jobs' but the config has no `jobs:`", "add jobs or pick another source")
        return jobs, None, max((j.submit_time for j in jobs), default=0.0)
    raw = _read_raw(wl, config, sim, base_dir, env, problems)
    if raw is None:
        return (), None, 0.0
    if src != "synthetic":
        at = next((loc.key(k) for k in ("file", "cluster") if k in wl), loc)
        if len(raw) == 0:
            problems.add(at, f"{raw.source}: the trace has no jobs (no data rows)",
                         "point the workload at a trace with jobs")
            return (), None, 0.0
        keep = raw.submit_time >= start
        if end is not None:
            keep &= raw.submit_time < end
        if not keep.any():
            until = "end" if end is None else f"{end:g}s"
            problems.add(loc.key("window"), f"no job of {raw.source} is submitted in [{start:g}s, "
                         f"{until}) (its {len(raw)} jobs come from "
                         f"{raw.submit_time.min():g}s to {raw.submit_time.max():g}s)",
                         "move workload.window over the trace's submit times")
            return (), None, 0.0
        raw = raw.take(keep).shifted(-start)
        if wl["load_scale"] != 1.0:
            raw = raw.rescaled_arrivals(wl["load_scale"])
    if wl["sample"] < 1.0:
        raw = raw.take(stable_uniform(raw.job_id, "sample", seed) < wl["sample"])
    if wl["max_jobs"] is not None:
        raw = raw.take(np.arange(min(len(raw), wl["max_jobs"])))
    if len(raw) == 0:
        problems.add(loc, "no jobs left after window/sample/max_jobs", "widen workload.window or raise sample")
        return (), None, 0.0
    jobs, summary = build_jobs(raw, wl["mapping"], config, seed=seed, loc=loc.key("mapping"), problems=problems)
    if not jobs and summary is not None and summary.dropped:  # validated as a scenario of 0 jobs
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(summary.dropped.items()))
        problems.add(loc, f"every one of the {len(raw)} jobs of {raw.source} was dropped ({why})",
                     "point the workload at jobs this cluster can run, or add the nodes they need")
        return (), None, 0.0
    return jobs, summary, float(raw.submit_time.max())


def _shifted(job: Job, offset: float) -> Job:
    if offset == 0:
        return job
    return replace(
        job,
        submit_time=job.submit_time + offset,
        start_time=None if job.start_time is None else job.start_time + offset,
    )


def _read_raw(wl: dict, config: Config, sim: dict, base_dir: Path, env, problems: Problems) -> RawJobs | None:
    src, loc = wl["source"], wl["loc"]
    if src == "synthetic":
        kw = dict(wl.get("synthetic", {}))
        spec = gen.SyntheticSpec(**kw)
        capacity = sum(n.gpus for n in config.nodes)
        horizon = sim["duration_s"]
        if horizon is None:
            w = wl["window"]
            horizon = (w[1] - w[0]) if w[1] is not None else None
        if horizon is None:
            problems.add(Loc(loc.source, "simulation.duration"), "a synthetic workload needs the simulated horizon",
                         "add `simulation: {duration: 7d}`")
            return None
        try:
            return gen.generate(replace(spec, max_gpus=capacity), capacity_gpus=capacity,
                                horizon_s=horizon, seed=sim["seed"])
        except ValueError as err:  # e.g. no size left for a cluster resized after parsing
            problems.add(loc.key("synthetic"), str(err), "fit the sizes to the cluster")
            return None
    try:
        if src == "itp":
            if "file" in wl:
                p = _resolve(wl["file"], base_dir, env)
            else:
                p = traces_dir(env) / "itp" / f"{wl['cluster']}.csv"
                if not p.exists():
                    have = sorted(q.stem for q in p.parent.glob("*.csv"))
                    problems.add(loc.key("cluster"), f"no trace {p}", f"ITP clusters there: {show_list(have)}; "
                                 + _traces_fix(env, f"itp/{wl['cluster']}.csv"))
                    return None
            return read_itp(p)
        if src == "philly":
            folder = _resolve(wl["file"], base_dir, env) if "file" in wl else traces_dir(env) / "philly-vc"
            if "file" not in wl and not philly_teams(folder):
                problems.add(loc.key("source"), f"no Philly traces in {folder} (no *.trace files)",
                             _traces_fix(env, "philly-vc/"))
                return None
            teams = wl.get("teams")
            if teams:
                have = philly_teams(folder)
                bad = [t for t in teams if t not in have]
                if bad:
                    for i, t in enumerate(teams):
                        if t in bad:
                            problems.add(loc.key("teams").idx(i), f"no trace for team {t!r} in {folder}",
                                         f"teams there: {show_list(have)}")
                    return None
            tnames = tuple(g.name for g in config.gpu_types)
            base = wl.get("base_gpu_type", "v100" if "v100" in tnames else tnames[0])
            return read_philly(folder, teams, base_type=base, gpu_types=tnames)
    except ConfigError as err:
        at = next((loc.key(k) for k in ("file", "cluster") if k in wl), loc)  # the key to fix
        for p in err.problems:
            problems.add(at, p)
        return None
    return None


def _traces_fix(env, wanted: str) -> str:
    """How to point the workload at the traces folder: where the folder came from."""
    value = (os.environ if env is None else env).get(TRACES_ENV)
    how = (f"the folder comes from {TRACES_ENV}={value}: point it at the folder that holds {wanted}"
           if value else f"{TRACES_ENV} is not set: set it to the folder that holds {wanted}")
    return f"{how}, or give the trace's path as `file:`"


def _resolve(name: str, base_dir: Path, env) -> Path:
    """`file:` relative to the scenario file, else to the traces folder when it is there; found
    in neither, the scenario's own (documented) place is the one the reader reports missing."""
    p = Path(name).expanduser()
    if p.is_absolute():
        return p
    if (base_dir / p).exists() or not traces_available(env) or not (traces_dir(env) / p).exists():
        return base_dir / p  # a missing file is reported by the reader
    return traces_dir(env) / p
