"""Seeded generator of epoch instances (cluster + org tree + queue with running jobs).

A "realistic mix": job sizes 1..256 GPUs weighted toward small jobs (as in the published
traces), some jobs restricted to one gpu_type, faster on newer types, 20% unallocated, 15%
debug (15 min), the rest protected for 2-8 h; about `running_frac` of the cluster busy with
running jobs packed onto nodes (multi-node ones on whole nodes), the rest queued. Usage
ratios are drawn per org node.
"""

from __future__ import annotations

import numpy as np

from optalloc.snapshot import Snapshot, build_snapshot
from optalloc.types import (
    Config,
    GpuType,
    Job,
    JobState,
    Node,
    NodeAlloc,
    NodeState,
    OrgNode,
    Placement,
    Policy,
    frozen_map,
)

SIZES = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256])
SIZE_P = np.array([0.30, 0.15, 0.18, 0.20, 0.07, 0.05, 0.03, 0.015, 0.005])
TYPES = (("h100", 1.0, 1.0), ("b200", 1.6, 1.8), ("b300", 2.0, 2.2))  # name, billing, speed


def make_instance(
    seed: int = 0,
    n_nodes: int = 128,
    gpus_per_node: int = 8,
    n_types: int = 3,
    n_jobs: int = 2000,
    n_programs: int = 4,
    projects_per_program: int = 6,
    running_frac: float = 0.92,
    drained_nodes: int = 2,
    policy: Policy | None = None,
) -> Snapshot:
    rng = np.random.default_rng(seed)
    types = TYPES[:n_types]
    gpu_types = tuple(GpuType(n, b) for n, b, _ in types)
    # nodes split across types (newest types fewer)
    share = np.array([0.5, 0.3, 0.2][:n_types])
    per_type = np.floor(share / share.sum() * n_nodes).astype(int)
    per_type[0] += n_nodes - per_type.sum()
    nodes, ntype = [], []
    for t, cnt in enumerate(per_type):
        for i in range(cnt):
            nodes.append(Node(f"{types[t][0]}-{i:03d}", types[t][0], gpus_per_node))
            ntype.append(t)
    for i in rng.choice(len(nodes), size=min(drained_nodes, len(nodes)), replace=False):
        nodes[i] = Node(nodes[i].name, nodes[i].gpu_type, nodes[i].gpus, NodeState.DRAIN)
    # org: programs x projects, random shares, one zero-share project
    programs, leaves = [], []
    for p in range(n_programs):
        kids = []
        for q in range(projects_per_program):
            nm = f"P{p}-{q}"
            kids.append(OrgNode(nm, share=float(rng.integers(1, 10))))
            leaves.append(nm)
        programs.append(OrgNode(f"P{p}", share=float(rng.integers(1, 5)), children=tuple(kids)))
    org = OrgNode("root", children=tuple(programs))
    usage = {nm: float(r) for nm, r in zip([f"P{p}" for p in range(n_programs)] + leaves,
                                            rng.gamma(2.0, 0.5, n_programs + len(leaves)))}
    now = 30 * 86400.0
    cap = n_nodes * gpus_per_node
    sizes = rng.choice(SIZES, size=n_jobs, p=SIZE_P / SIZE_P.sum())
    sizes = np.minimum(sizes, max(1, cap // 4))
    mr = rng.choice([0.0, 900.0, 7200.0, 4 * 3600.0, 8 * 3600.0], size=n_jobs,
                    p=[0.2, 0.15, 0.25, 0.2, 0.2])
    free = np.full(len(nodes), gpus_per_node)
    up = np.array([n.state is NodeState.UP for n in nodes])
    jobs = []
    busy, target = 0, running_frac * cap
    for k in range(n_jobs):
        g = int(sizes[k])
        restricted = rng.random() < 0.4
        allowed = (types[int(rng.integers(n_types))][0],) if restricted else ()
        speed = frozen_map({n: float(s * rng.uniform(0.9, 1.1)) for n, _, s in types[1:]})
        common = dict(
            id=f"j{k:05d}", project=leaves[int(rng.integers(len(leaves)))], gpus=g,
            gpu_types=allowed, speedup=speed, min_runtime_s=float(mr[k]),
            priority=int(rng.integers(0, 3)), submit_time=now - float(rng.uniform(0, 86400)),
            resumable=bool(rng.random() < 0.9),
        )
        pl = None
        if busy < target:
            pl = _pack(nodes, ntype, free, up, g, allowed, types, gpus_per_node, rng)
        if pl is not None:
            pl = Placement(common["id"], pl.gpu_type, pl.nodes)
            busy += g
            start = now - float(rng.uniform(0, 12 * 3600))
            jobs.append(Job(**common, state=JobState.RUNNING, start_time=start, placement=pl))
        else:
            jobs.append(Job(**common))
    config = Config(gpu_types, tuple(nodes), org, policy or Policy(), tuple(jobs))
    return build_snapshot(config, now=now, usage_ratio=usage)


def _pack(nodes, ntype, free, up, g, allowed, types, gpn, rng) -> Placement | None:
    names = [t[0] for t in types]
    ok_t = [names.index(a) for a in allowed] if allowed else list(range(len(types)))
    t = ok_t[int(rng.integers(len(ok_t)))]
    sel = np.flatnonzero((np.asarray(ntype) == t) & up)
    if g <= gpn:
        fit = sel[free[sel] >= g]
        if not len(fit):
            return None
        n = int(fit[np.argmin(free[fit])])
        used = gpn - free[n]
        free[n] -= g
        return Placement("", names[t], (NodeAlloc(nodes[n].name, tuple(range(used, used + g))),))
    need = -(-g // gpn)
    whole = sel[free[sel] == gpn][:need]
    if len(whole) < need:
        return None
    allocs, left = [], g
    for n in whole:
        take = min(gpn, left)
        free[n] = 0
        allocs.append(NodeAlloc(nodes[n].name, tuple(range(take))))
        left -= take
    return Placement("", names[t], tuple(allocs))


def _toy() -> Snapshot:
    """The published toy: 4 projects each asking 60 GPUs on 100, shares 40/30/20/10."""
    nodes = tuple(Node(f"n{i:02d}", "h100", 10) for i in range(10))
    org = OrgNode("root", children=tuple(
        OrgNode(p, share=s) for p, s in (("A", 40), ("B", 30), ("C", 20), ("D", 10))))
    jobs = tuple(Job(f"{p}{i:02d}", p, 5, min_runtime_s=3600.0, submit_time=float(i))
                 for p in "ABCD" for i in range(12))
    cfg = Config((GpuType("h100"),), nodes, org, Policy(), jobs)
    return build_snapshot(cfg, now=36000.0, usage_ratio={"A": 0.5, "B": 1.0, "C": 0.2})


def _contract() -> Snapshot:
    """Protected, expired and unallocated running jobs, a gang, a drained node, two types."""
    H = 3600.0
    nodes = tuple(Node(f"h{i}", "h100", 8) for i in range(4)) + (
        Node("b0", "b200", 8), Node("b1", "b200", 8, NodeState.DRAIN))

    def run(jid, proj, t, allocs, start, mr):
        pl = Placement(jid, t, tuple(NodeAlloc(n, tuple(g)) for n, g in allocs))
        return Job(jid, proj, sum(len(g) for _, g in allocs), min_runtime_s=mr,
                   state=JobState.RUNNING, start_time=start, placement=pl)

    jobs = (
        run("prot", "B", "h100", [("h0", range(4))], 9.5 * H, 2 * H),
        run("old", "B", "h100", [("h1", range(8))], 2 * H, 2 * H),
        run("unal", "A", "h100", [("h2", range(4))], 9.9 * H, 0.0),
        run("drn", "C", "b200", [("b1", range(8))], 5 * H, 2 * H),
        Job("gang", "A", 16, min_runtime_s=H, submit_time=1.0),
        Job("fast", "C", 8, gpu_types=("b200",), speedup={"b200": 1.8}, min_runtime_s=H),
        Job("any", "C", 4, speedup={"b200": 1.5}, min_runtime_s=H, submit_time=2.0),
        Job("small", "B", 2, min_runtime_s=900.0, priority=2),
    )
    org = OrgNode("root", children=(
        OrgNode("P", share=2, children=(OrgNode("A", share=1), OrgNode("B", share=1))),
        OrgNode("C", share=1),
    ))
    cfg = Config((GpuType("h100"), GpuType("b200", 1.6)), nodes, org, Policy(), jobs)
    return build_snapshot(cfg, now=10 * H, usage_ratio={"P": 1.2, "A": 0.3, "B": 2.0, "C": 0.4})


def reference_instances() -> dict[str, Snapshot]:
    """The snapshots behind models/*.mps (name -> snapshot)."""
    return {
        "toy": _toy(),
        "contract": _contract(),
        "mixed64": make_instance(seed=7, n_nodes=8, n_jobs=60, n_programs=2,
                                 projects_per_program=2, drained_nodes=1),
    }
