"""Why large gangs wait under the lookahead (results/gangs.md, stop 61's diagnosis).

    python scripts/gangs_wait_causes.py --scenario scenarios/gangs.yaml --duration 7d --seed 5
        [--reservations 2] [--out causes.json]

Runs the ilp with `policy.max_reservations` (default 2, as gangs_compare's ilp-lookahead) and,
at every decision, puts each waiting job of >= 64 GPUs in one class, the first that holds:

* unallocated: min_runtime 0, never reserved (it runs only on GPUs no allocated job wants);
* reserved: the lookahead holds nodes for it;
* not placeable: no candidate (its shape fits no up nodes);
* order: a job of its project ahead of it in line waits (rule 3's `order` pairs); the class
  names the head of that chain (a waiting job with none ahead of it): its size, whether it is
  reserved, and whether the project runs at least its target now;
* slot: its project's other gang holds the project's one reservation;
* cap: it qualifies (run again with no cap it is reserved, or its project's other gang is)
  but the cap of reservations is taken by others;
* outranked: it fails both rank tests (share and budget) even with no cap.

Each class's hours are the time from one decision to the next, until the job's first start or
the horizon. The report: the hours per class of the large jobs (the metrics' class: >= 64 GPUs,
debug jobs aside) in the top 10% of waits and of all of them, and how reservations behaved
(node sets changed, held until the start, the start against the first expected one).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import sys

import numpy as np

import optalloc.model.build as build
from optalloc.cli.sim_cmd import load
from optalloc.model.job_groups import precedence_pairs
from optalloc.sim.engine import simulate
from optalloc.sim.metrics import job_waits
from optalloc.sim.policies import make_policy
from optalloc.sim.whatif import with_config

LARGE = 64


def _size(g: int) -> str:
    return "gang>=64" if g >= LARGE else "gang16-63" if g > 8 else "job<=8"


class Recorder:
    """Wraps the lookahead (build.compute_reservations) and records the classes."""

    def __init__(self):
        self.orig = build.compute_reservations
        self.log: list[tuple[float, str, str]] = []
        self.res: list[tuple[float, str, tuple, float]] = []  # (now, job, nodes, start)

    def __call__(self, snap, req, tg):
        R = self.orig(snap, req, tg)
        if snap.policy.max_reservations <= 0:
            return R
        for h in R.held:
            self.res.append((snap.now, snap.jobs[h.job].id, tuple(sorted(h.nodes.tolist())),
                             float(h.start)))
        waiting = np.flatnonzero(~snap.job_running & (snap.job_gpus >= LARGE)).tolist()
        if waiting:
            self._classify(snap, req, tg, R, waiting)
        return R

    def _classify(self, snap, req, tg, R, waiting):
        pol = dataclasses.replace(snap.policy, max_reservations=len(snap.jobs))
        R2 = self.orig(dataclasses.replace(snap, policy=pol), req, tg)
        held = {h.job for h in R.held}
        held2 = {h.job for h in R2.held}
        proj = {int(snap.job_project[h.job]) for h in R.held}
        proj2 = {int(snap.job_project[h.job]) for h in R2.held}
        a, b = precedence_pairs(snap, req)
        ahead = collections.defaultdict(list)
        for x, y in zip(a.tolist(), b.tolist()):
            ahead[y].append(x)
        cands = set(req.cand_job.tolist())
        for j in waiting:
            p = int(snap.job_project[j])
            if float(snap.job_min_runtime[j]) <= 0:
                st = "unallocated"
            elif j in held:
                st = "reserved"
            elif j not in cands:
                st = "not placeable"
            elif j in ahead:
                heads, seen, todo = set(), set(), [j]
                while todo:
                    for x in ahead[todo.pop()]:
                        if x in seen:
                            continue
                        seen.add(x)
                        if x in ahead:
                            todo.append(x)
                        else:
                            heads.add(x)
                g = max(int(snap.job_gpus[x]) for x in heads) if heads else 0
                run = float(snap.job_gpus[snap.job_running & (snap.job_project == p)
                                          & (snap.job_min_runtime > 0)].sum())
                st = (f"order: head {_size(g)}{' reserved' if heads & held else ''}, project "
                      f"{'at or over' if run >= tg.target[p].sum() - 0.5 else 'below'} target")
            elif p in proj:
                st = "slot: its project's other gang is reserved"
            elif j in held2 or p in proj2:
                st = "cap: qualifies, the cap is taken by others"
            else:
                st = "outranked: fails the share and budget tests"
            self.log.append((snap.now, snap.jobs[j].id, st))


def hours(log, jobs, end) -> dict[str, collections.Counter]:
    """Per job, hours in each class from submit to its first start (or the horizon)."""
    by = collections.defaultdict(list)
    for t, jid, st in log:
        by[jid].append((t, st))
    out = {}
    for r in jobs:
        stop = r.first_start if r.first_start is not None else end
        ev = [e for e in sorted(by.get(r.job_id, [])) if e[0] < stop]
        c = collections.Counter()
        for i, (t, st) in enumerate(ev):
            c[st] += ((ev[i + 1][0] if i + 1 < len(ev) else stop) - t) / 3600
        out[r.job_id] = c
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--duration")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--reservations", type=int, default=2)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    sc = load(a.scenario, duration=a.duration, seed=a.seed)
    pol = dataclasses.replace(sc.config.policy, max_reservations=a.reservations)
    sc = with_config(sc, dataclasses.replace(sc.config, policy=pol))
    rec = Recorder()
    build.compute_reservations = rec
    try:
        res = simulate(sc, make_policy("ilp"), progress=False)
    finally:
        build.compute_reservations = rec.orig
    # the metrics' large class (optalloc.sim.metrics.job_waits: debug jobs are their own class)
    w = job_waits(res)
    jobs = [r for r in res.jobs if r.submit_time <= res.end]
    large = [r for r, c in zip(jobs, w["cls"]) if c == "large"]
    wait = {r.job_id: s for r, s, c in zip(jobs, w["wait_s"], w["cls"]) if c == "large"}
    top = sorted(large, key=lambda r: -wait[r.job_id])[:max(1, round(0.1 * len(large)))]
    per = hours(rec.log, large, res.end)
    out = {"top": collections.Counter(), "all": collections.Counter()}
    for r in large:
        out["all"].update(per[r.job_id])
    for r in top:
        out["top"].update(per[r.job_id])
        print(f"{r.job_id} {r.project} {r.gpus} GPUs, min_runtime {r.min_runtime_s / 3600:.2f} h,"
              f" wait {wait[r.job_id] / 3600:.1f} h"
              f"{' (never started)' if r.first_start is None else ''}: "
              + ", ".join(f"{k} {v:.1f}" for k, v in per[r.job_id].most_common()))
    for k in ("top", "all"):
        print(f"{k}: " + ", ".join(f"{s} {v:.1f} h" for s, v in out[k].most_common()))
    by = collections.defaultdict(list)
    for t, jid, nodes, start in rec.res:
        by[jid].append((t, nodes, start))
    first = {r.job_id: r.first_start for r in res.jobs}
    moved = sum(1 for ev in by.values() if any(x[1] != y[1] for x, y in zip(ev, ev[1:])))
    held = [((first.get(j) or res.end) - ev[0][0]) / 3600 for j, ev in by.items()]
    slip = [((first.get(j) or res.end) - ev[0][2]) / 3600 for j, ev in by.items()]
    if by:
        print(f"reservations {len(by)}, node set changed in {moved}; held until the start: mean "
              f"{np.mean(held):.2f} h, max {np.max(held):.2f} h; start minus the first expected "
              f"start: mean {np.mean(slip):.2f} h, p90 {np.percentile(slip, 90):.2f} h")
    if a.out:
        json.dump({k: dict(v) for k, v in out.items()}, open(a.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
