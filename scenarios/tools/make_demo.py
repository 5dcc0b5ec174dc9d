"""Write scenarios/demo.yaml: a cluster shaped like the published setup, with a committed queue.

    python scenarios/tools/make_demo.py            # rewrites scenarios/demo.yaml
    python scenarios/tools/make_demo.py --check    # fails if the committed file differs

Deterministic (seeded). The shape:
* gpu_types h100 and b200; 128 x 8 H100 in compact form (two nodes drained for maintenance,
  one still finishing a job) and 11 x 8 B200 (88 GPUs).
* org: root -> 3 programs -> 15 projects with uneven shares; `pretrain` holds ~35% of the
  cluster; the `science` program has no B200 share (a per-type override).
* policy: the published defaults (7-day window, 8 h min_runtime cap, 5-minute epochs).
* ~120 jobs at `now` = 2026-11-29T12:00:00Z: debug jobs (1-8 GPUs, min_runtime <= 15 min),
  medium jobs (8-32 GPUs), a few whole-node gangs of 64-256 GPUs, ~20% unallocated
  (min_runtime 0); the cluster is nearly full of running jobs (valid, non-overlapping
  placements that started a few hours before now) and demand is 2-3x capacity.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "scenarios" / "demo.yaml"
NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)
SEED = 20261129

H100_NODES = [f"h100-{i:03d}" for i in range(1, 129)]
H100_DRAINED = {"h100-127", "h100-128"}
B200_NODES = [f"b200-{i:02d}" for i in range(1, 12)]

# program -> (share, share_by_type, {project: share})
ORG = {
    "foundation": (60, {}, {"pretrain": 58, "posttrain": 14, "midtrain": 10, "evals": 8, "data": 6, "safety": 4}),
    "multimodal": (25, {}, {"vlm": 38, "video": 27, "speech": 17, "robotics": 12, "ocr": 6}),
    "science": (15, {"b200": 0}, {"climate": 35, "bio": 30, "materials": 20, "theory": 15}),
}
PROGRAM_OF = {p: prog for prog, (_, _, projects) in ORG.items() for p in projects}

# jobs per project: (debug, medium, unallocated); large gangs are listed separately
MIX = {
    "pretrain": (3, 8, 3), "posttrain": (3, 7, 2), "midtrain": (2, 5, 1), "evals": (4, 3, 2),
    "data": (2, 3, 2), "safety": (2, 2, 1), "vlm": (3, 6, 2), "video": (2, 4, 2),
    "speech": (2, 3, 1), "robotics": (2, 3, 1), "ocr": (1, 1, 1), "climate": (2, 4, 2),
    "bio": (2, 3, 1), "materials": (1, 2, 1), "theory": (1, 1, 1),
}  # fmt: skip
LARGE = [("pretrain", 256), ("pretrain", 256), ("pretrain", 192), ("pretrain", 128),
         ("midtrain", 128), ("vlm", 128), ("posttrain", 128), ("posttrain", 64), ("video", 64),
         ("climate", 64)]  # fmt: skip


@dataclass
class J:
    id: str
    project: str
    gpus: int
    min_runtime: str
    submit: dt.datetime
    kind: str
    gpus_per_node: int | None = None
    gpu_types: list[str] = field(default_factory=list)
    speedup: dict[str, float] = field(default_factory=dict)
    resumable: bool = True
    priority: int = 0
    duration: str | None = None
    command: list[str] = field(default_factory=list)
    start: dt.datetime | None = None
    placement: tuple[str, list[tuple[str, list[int]]]] | None = None


def make_jobs(rng: random.Random) -> list[J]:
    jobs: list[J] = []
    count: dict[str, int] = {}

    def new_id(project: str) -> str:
        count[project] = count.get(project, 0) + 1
        return f"{project}-{count[project]:03d}"

    def ago(lo_h: float, hi_h: float) -> dt.datetime:
        return NOW - dt.timedelta(seconds=round(rng.uniform(lo_h, hi_h) * 3600 / 60) * 60)

    def types_for(project: str) -> tuple[list[str], dict[str, float]]:
        if PROGRAM_OF[project] == "science":
            return ["h100"], {}
        r = rng.random()
        if r < 0.15:
            return ["b200"], {}
        if r < 0.5:
            return [], {"b200": rng.choice([1.6, 1.8, 2.0])}
        return [], {}

    for project, (n_debug, n_medium, n_unalloc) in MIX.items():
        for _ in range(n_debug):
            gt, sp = types_for(project)
            jobs.append(J(new_id(project), project, rng.choice([1, 1, 2, 4, 8]),
                          rng.choice(["5m", "10m", "15m"]), ago(0.05, 1.0), "debug",
                          gpu_types=gt, speedup=sp, duration=rng.choice(["10m", "20m", "45m"]),
                          command=["python", "-m", "debug_run", "--steps", "200"]))  # fmt: skip
        for _ in range(n_medium):
            gt, sp = types_for(project)
            gpus = rng.choice([8, 8, 16, 16, 24, 32])
            jobs.append(J(new_id(project), project, gpus, rng.choice(["1h", "2h", "4h", "8h"]),
                          ago(0.5, 30), "medium", gpus_per_node=8 if gpus > 8 else None,
                          gpu_types=gt, speedup=sp, resumable=rng.random() < 0.9,
                          priority=rng.choice([0, 0, 0, 1, 2]),
                          duration=rng.choice(["6h", "12h", "24h", "48h"]),
                          command=["torchrun", f"--nproc-per-node={min(gpus, 8)}", "train.py"]))  # fmt: skip
        for _ in range(n_unalloc):
            gt, sp = types_for(project)
            jobs.append(J(new_id(project), project, rng.choice([1, 2, 4, 8, 8, 16]), "0",
                          ago(0.2, 40), "unallocated", gpu_types=gt, speedup=sp,
                          duration=rng.choice(["2h", "6h", "12h"]),
                          command=["python", "sweep.py", "--trial", str(rng.randint(1, 99))]))  # fmt: skip
    for project, gpus in LARGE:
        gt = ["h100"] if PROGRAM_OF[project] == "science" or gpus > 88 else []
        jobs.append(J(new_id(project), project, gpus, rng.choice(["4h", "8h"]), ago(2, 36), "large",
                      gpus_per_node=8, gpu_types=gt, speedup={} if gt else {"b200": 1.8},
                      duration=rng.choice(["48h", "96h"]),
                      command=["torchrun", "--nnodes", str(gpus // 8), "--nproc-per-node=8", "pretrain.py"]))  # fmt: skip
    for j in jobs:
        if j.gpus > 8 and j.gpus % 8:
            j.gpus_per_node = 8
    for j in jobs:  # medium jobs that do not fill whole nodes keep one node when they fit
        if j.gpus_per_node and j.gpus % j.gpus_per_node:
            raise AssertionError(j)
    return jobs


class Cluster:
    def __init__(self) -> None:
        self.free = {n: list(range(8)) for n in H100_NODES + B200_NODES}
        self.type = {n: n.split("-")[0] for n in self.free}

    def up_nodes(self, gtype: str) -> list[str]:
        return [n for n in self.free if self.type[n] == gtype and n not in H100_DRAINED]

    def place(self, job: J, gtype: str, nodes: list[str] | None = None):
        """Whole free nodes for gangs; the fullest node that fits for single-node jobs."""
        pool = nodes or self.up_nodes(gtype)
        if job.gpus_per_node or job.gpus > 8:
            per = job.gpus_per_node or 8
            whole = [n for n in pool if len(self.free[n]) == 8][: job.gpus // per]
            if len(whole) < job.gpus // per:
                return None
            allocs = [(n, self.take(n, per)) for n in whole]
        else:
            fits = [n for n in pool if len(self.free[n]) >= job.gpus]
            if not fits:
                return None
            n = min(fits, key=lambda x: (len(self.free[x]), x))
            allocs = [(n, self.take(n, job.gpus))]
        return gtype, allocs

    def take(self, node: str, k: int) -> list[int]:
        got, self.free[node] = self.free[node][:k], self.free[node][k:]
        return got


def choose_running(jobs: list[J], rng: random.Random) -> None:
    """Start jobs, oldest submissions first, until the cluster is nearly full."""
    cl = Cluster()
    # one job keeps running on a node drained for maintenance (drain lets it finish)
    drained_job = next(j for j in jobs if j.kind == "medium" and j.gpus == 8 and "b200" not in j.gpu_types)
    _start(drained_job, cl.place(drained_job, "h100", ["h100-127"]), rng)
    target = {"h100": 0.93 * 8 * (128 - 2), "b200": 0.9 * 88}
    used = {"h100": 0, "b200": 0}
    for j in sorted(jobs, key=lambda j: j.submit):
        if j.start is not None or j.kind == "debug" and rng.random() < 0.5:
            continue
        for gtype in j.gpu_types or (["b200", "h100"] if j.speedup else ["h100", "b200"]):
            if used[gtype] + j.gpus > target[gtype]:
                continue
            where = cl.place(j, gtype)
            if where:
                _start(j, where, rng)
                used[gtype] += j.gpus
                break


def _start(j: J, where, rng: random.Random) -> None:
    if j.kind == "debug":
        j.start = NOW - dt.timedelta(minutes=rng.randint(2, 40))
    else:
        j.start = NOW - dt.timedelta(minutes=rng.randint(30, 7 * 60))
    j.submit = min(j.submit, j.start - dt.timedelta(minutes=rng.randint(1, 180)))
    j.placement = where


# --------------------------------------------------------------------------- writing


def _iso(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _flow_list(xs) -> str:
    return "[" + ", ".join(str(x) for x in xs) + "]"


def _job_yaml(j: J) -> list[str]:
    head = f"  - {{id: {j.id}, project: {j.project}, gpus: {j.gpus}"
    if j.gpus_per_node:
        head += f", gpus_per_node: {j.gpus_per_node}"
    head += f", min_runtime: {j.min_runtime}"
    if j.gpu_types:
        head += f", gpu_types: {_flow_list(j.gpu_types)}"
    if j.speedup:
        head += ", speedup: {" + ", ".join(f"{k}: {v}" for k, v in j.speedup.items()) + "}"
    if not j.resumable:
        head += ", resumable: false"
    if j.priority:
        head += f", priority: {j.priority}"
    head += f", submit_time: {_iso(j.submit)}, duration: {j.duration}"
    lines = [head + ","]
    lines.append(f"     command: {_flow_list(j.command)}" + ("," if j.placement else "}"))
    if j.placement:
        gtype, allocs = j.placement
        lines.append(f"     state: running, start_time: {_iso(j.start)},")
        lines.append(f"     placement: {{gpu_type: {gtype}, nodes: [")
        for k, (node, gpus) in enumerate(allocs):
            end = "," if k < len(allocs) - 1 else "]}}"
            lines.append(f"       {{node: {node}, gpus: {_flow_list(gpus)}}}{end}")
    return lines


def render(jobs: list[J]) -> str:
    running = [j for j in jobs if j.placement]
    demand = sum(j.gpus for j in jobs)
    cap = 8 * (128 - len(H100_DRAINED)) + 88
    out = [
        "# optalloc demo scenario: generated by scenarios/tools/make_demo.py (seed "
        f"{SEED}); edit the script, not this file.",
        "# A 1024-GPU H100 cluster (2 nodes drained) plus an 88-GPU B200 cluster, an org tree of",
        "# 3 programs and 15 projects, the published policy defaults, and the queue at",
        f"# now = {_iso(NOW)}: {len(jobs)} jobs, {len(running)} running; demand "
        f"{demand} GPUs = {demand / cap:.1f}x the {cap} GPUs that are up.",
        "gpu_types:",
        "  - {name: h100, billing_weight: 1.0}",
        "  - {name: b200, billing_weight: 1.6}   # see data/gpu_types.yaml",
        "nodes:",
        '  - {name: "h100-[001-126]", gpu_type: h100, gpus: 8}',
        '  - {name: "h100-[127-128]", gpu_type: h100, gpus: 8, state: drain}   # maintenance',
        '  - {name: "b200-[01-11]", gpu_type: b200, gpus: 8}',
        "org:",
        "  name: institute",
        "  children:",
    ]
    for prog, (share, by_type, projects) in ORG.items():
        out.append(f"    - name: {prog}")
        out.append(f"      share: {share}")
        if by_type:
            out.append("      share_by_type: {" + ", ".join(f"{k}: {v}" for k, v in by_type.items()) + "}"
                       + "   # no B200 budget: its work runs on H100")  # fmt: skip
        out.append("      children:")
        for p, s in projects.items():
            out.append(f"        - {{name: {p}, share: {s}}}")
    out += [
        "policy:",
        "  lookback: 7d",
        "  usage_mode: window",
        "  half_life: 7d",
        "  min_runtime_cap: 8h",
        "  epoch: 5m",
        "  grace: 60s",
        "  restart_overhead: 5m",
        "  checkpoint_interval: 1h",
        "  solver: {backend: highs, time_limit: 10s, mip_gap: 0.005, threads: 1}",
        "simulation:",
        f"  start: {_iso(NOW)}   # the demo's `now`",
        "jobs:",
    ]
    for j in sorted(jobs, key=lambda j: (j.submit, j.id)):
        out += _job_yaml(j)
    out += [
        "# Simulation workload (appended by the simulation-workload engineer): replay the queue above",
        "# from `now` (simulation.start) for a day; jobs submitted before `now` wait from `now`.",
        "workload:",
        "  source: jobs",
    ]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if scenarios/demo.yaml differs")
    args = ap.parse_args(argv)
    rng = random.Random(SEED)
    jobs = make_jobs(rng)
    choose_running(jobs, rng)
    text = render(jobs)
    if args.check:
        same = OUT.exists() and OUT.read_text() == text
        print("scenarios/demo.yaml is up to date" if same else "scenarios/demo.yaml differs: rerun the script")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}: {text.splitlines()[3][2:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
