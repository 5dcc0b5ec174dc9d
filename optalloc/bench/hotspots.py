"""Where an epoch's (or a simulation's) time goes: cProfile, then the top functions by own time
and by cumulative time, each as a share of the profiled total.

    python -m optalloc.bench.hotspots --size XL [--top 10]
    python -m optalloc.bench.hotspots --scenario scenarios/itp-cluster04.yaml --duration 3d

cProfile adds a per-call overhead, so Python-heavy functions look somewhat bigger than they
are; compare shares, and confirm a proposal with the benchmark's wall times.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time


def profile(fn) -> tuple[pstats.Stats, float]:
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.runcall(fn)
    wall = time.perf_counter() - t0
    return pstats.Stats(prof), wall


def _name(func: tuple) -> str:
    path, line, name = func
    if path == "~":
        return name  # a builtin, e.g. <method 'run' of 'highspy...' objects>
    parts = os.path.normpath(path).split(os.sep)
    short = "/".join(parts[parts.index("optalloc"):]) if "optalloc" in parts else "/".join(parts[-2:])
    return f"{short}:{line} {name}"


def hotspots(stats: pstats.Stats, top: int = 10) -> dict[str, list[dict]]:
    """{'own': [...], 'cumulative': [...]}: function, calls, seconds, % of the total."""
    raw = stats.stats  # func -> (prim calls, calls, tottime, cumtime, callers)
    total = max((v[3] for v in raw.values()), default=0.0) or 1.0  # the outermost call
    rows = [{"function": _name(f), "calls": v[1], "own_s": v[2], "own_pct": 100 * v[2] / total,
             "cum_s": v[3], "cum_pct": 100 * v[3] / total} for f, v in raw.items()]
    own = sorted(rows, key=lambda r: -r["own_s"])[:top]
    cum = sorted((r for r in rows if "optalloc/" in r["function"]), key=lambda r: -r["cum_s"])
    return {"own": own, "cumulative": cum[:top], "total_s": total}


def epoch_profile(size: str, seed: int = 0, top: int = 10) -> dict:
    from optalloc.bench.instances import scale_instance
    from optalloc.epoch import run_epoch

    snap = scale_instance(size, seed)
    plan = None

    def go():
        nonlocal plan
        plan = run_epoch(snap)

    stats, wall = profile(go)
    out = hotspots(stats, top)
    rep = plan.report
    out.update(wall_s=wall, what=f"run_epoch on {size} (seed {seed})",
               split=dict(build_s=rep.build_s, solve_s=rep.solve_s, place_s=rep.place_s))
    return out


def sim_profile(scenario: str, duration: str, policy: str = "ilp", top: int = 10) -> dict:
    from optalloc.sim.engine import simulate
    from optalloc.sim.policies import make_policy
    from optalloc.sim.scenario import load_scenario, with_horizon
    from optalloc.units import parse_duration

    sc = with_horizon(load_scenario(scenario), parse_duration(duration))
    stats, wall = profile(lambda: simulate(sc, make_policy(policy)))
    out = hotspots(stats, top)
    out.update(wall_s=wall, what=f"simulate {os.path.basename(scenario)} {duration} {policy}")
    return out


def render(res: dict) -> str:
    from optalloc.bench.table import markdown_table

    head = f"### {res['what']}: {res['wall_s']:.2f} s under the profiler"
    if "split" in res:
        head += " (" + ", ".join(f"{k} {v:.2f} s" for k, v in res["split"].items()) + ")"
    own = [{k: r[k] for k in ("function", "calls", "own_s", "own_pct")} for r in res["own"]]
    cum = [{k: r[k] for k in ("function", "calls", "cum_s", "cum_pct")} for r in res["cumulative"]]
    return (f"{head}\n\nBy own time:\n\n{markdown_table(own)}\nBy cumulative time (optalloc "
            f"functions):\n\n{markdown_table(cum)}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m optalloc.bench.hotspots")
    ap.add_argument("--size", help="benchmark size (S, M, L, XL, XXL): profile one run_epoch")
    ap.add_argument("--scenario", help="scenario YAML: profile a simulation")
    ap.add_argument("--duration", default="3d")
    ap.add_argument("--policy", default="ilp")
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args(argv)
    if a.size:
        print(render(epoch_profile(a.size, top=a.top)))
    if a.scenario:
        print(render(sim_profile(a.scenario, a.duration, a.policy, a.top)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
