"""Seeded generator of epoch instances (cluster + org tree + queue with running jobs).

A "realistic mix": job sizes 1..256 GPUs weighted toward small jobs (as in the published
traces), some jobs restricted to one gpu_type, faster on newer types, 20% unallocated, 15%
debug (15 min), the rest protected for 2-8 h; about `running_frac` of the cluster busy with
running jobs packed onto nodes (multi-node ones on whole nodes), the rest queued. Usage
ratios are drawn per org node.

The keyword-only options (all off by default, so the reference instances behind models/*.mps
stay as they were) add what the scaling benchmark needs; they draw from a second generator
seeded `[seed, 1]`, so the default stream is untouched:
  * `divisions`: an org level above the programs (root -> division -> program -> project);
  * `per_node_gang_frac`: that share of multi-GPU jobs asks `gpus_per_node` 1, 2 or 4 that
    divides its GPUs, at most 16 pieces (a per-node gang: pieces on distinct nodes), queued
    and running;
  * `busy_drained_nodes` / `down_nodes`: nodes holding running jobs set to drain (the jobs may
    stay) or down (the jobs are displaced and may restart elsewhere), after packing;
  * `zero_share_project`: the last project has a zero share on the last gpu_type.

`SCALES` names the benchmark sizes S..XXL; `scale_instance(name, seed)` builds one.
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
    *,
    divisions: int = 0,
    per_node_gang_frac: float = 0.0,
    busy_drained_nodes: int = 0,
    down_nodes: int = 0,
    zero_share_project: bool = False,
) -> Snapshot:
    rng = np.random.default_rng(seed)
    extra = np.random.default_rng([seed, 1])  # draws of the keyword-only options
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
    usage = {nm: float(r) for nm, r in zip([f"P{p}" for p in range(n_programs)] + leaves,
                                            rng.gamma(2.0, 0.5, n_programs + len(leaves)))}
    if zero_share_project and leaves and n_types > 1:
        *head, last = programs
        *kids, lk = last.children
        lk = OrgNode(lk.name, lk.share, frozen_map({types[-1][0]: 0.0}))
        programs = [*head, OrgNode(last.name, last.share, children=(*kids, lk))]
    if divisions > 0:
        groups = [programs[d::divisions] for d in range(divisions)]
        programs = [OrgNode(f"D{d}", share=float(extra.integers(1, 4)), children=tuple(g))
                    for d, g in enumerate(groups) if g]
        usage.update({f"D{d}": float(r) for d, r in
                      enumerate(extra.gamma(2.0, 0.5, len(programs)))})
    org = OrgNode("root", children=tuple(programs))
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
        gpn = None
        if per_node_gang_frac > 0 and g >= 2 and extra.random() < per_node_gang_frac:
            opts = [p for p in (1, 2, 4)
                    if p < min(g, gpus_per_node) and g % p == 0 and g // p <= 16]
            gpn = int(extra.choice(opts)) if opts else None
        common = dict(
            id=f"j{k:05d}", project=leaves[int(rng.integers(len(leaves)))], gpus=g,
            gpu_types=allowed, speedup=speed, min_runtime_s=float(mr[k]),
            priority=int(rng.integers(0, 3)), submit_time=now - float(rng.uniform(0, 86400)),
            resumable=bool(rng.random() < 0.9), gpus_per_node=gpn,
        )
        pl = None
        if busy < target:
            pl = _pack(nodes, ntype, free, up, g, allowed, types, gpus_per_node, rng, gpn)
        if pl is not None:
            pl = Placement(common["id"], pl.gpu_type, pl.nodes, allocated=bool(mr[k] > 0))
            busy += g
            start = now - float(rng.uniform(0, 12 * 3600))
            jobs.append(Job(**common, state=JobState.RUNNING, start_time=start, placement=pl))
        else:
            jobs.append(Job(**common))
    for count, state in ((busy_drained_nodes, NodeState.DRAIN), (down_nodes, NodeState.DOWN)):
        busy_nodes = np.flatnonzero(up & (free < gpus_per_node))
        for i in extra.choice(busy_nodes, size=min(count, len(busy_nodes)), replace=False):
            nodes[i] = Node(nodes[i].name, nodes[i].gpu_type, nodes[i].gpus, state)
            up[i] = False
    config = Config(gpu_types, tuple(nodes), org, policy or Policy(), tuple(jobs))
    return build_snapshot(config, now=now, usage_ratio=usage)


def _pack(nodes, ntype, free, up, g, allowed, types, gpn, rng, job_gpn=None
          ) -> Placement | None:
    names = [t[0] for t in types]
    ok_t = [names.index(a) for a in allowed] if allowed else list(range(len(types)))
    t = ok_t[int(rng.integers(len(ok_t)))]
    sel = np.flatnonzero((np.asarray(ntype) == t) & up)
    if job_gpn is not None and job_gpn < g:  # per-node gang: pieces on distinct nodes
        fit = sel[free[sel] >= job_gpn]
        need = -(-g // job_gpn)
        if len(fit) < need:
            return None
        allocs, left = [], g
        for n in fit[np.argsort(free[fit], kind="stable")][:need]:
            take = min(job_gpn, left)
            used = gpn - free[n]
            free[n] -= take
            allocs.append(NodeAlloc(nodes[n].name, tuple(range(used, used + take))))
            left -= take
        return Placement("", names[t], tuple(allocs))
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


#: The scaling benchmark's sizes: GPUs = n_nodes x 8, three gpu_types, root -> division ->
#: program -> project, drained nodes (empty and busy), down nodes with running jobs.
SCALES: dict[str, dict] = {
    "S": dict(n_nodes=11, n_jobs=200, divisions=2, n_programs=4, projects_per_program=3,
              drained_nodes=1, busy_drained_nodes=1, down_nodes=1),
    "M": dict(n_nodes=128, n_jobs=2000, divisions=2, n_programs=4, projects_per_program=6,
              drained_nodes=1, busy_drained_nodes=2, down_nodes=1),
    "L": dict(n_nodes=1024, n_jobs=16000, divisions=3, n_programs=12, projects_per_program=8,
              drained_nodes=4, busy_drained_nodes=8, down_nodes=2),
    "XL": dict(n_nodes=2048, n_jobs=32000, divisions=4, n_programs=16, projects_per_program=10,
               drained_nodes=8, busy_drained_nodes=16, down_nodes=4),
    "XXL": dict(n_nodes=4096, n_jobs=64000, divisions=4, n_programs=24, projects_per_program=12,
                drained_nodes=16, busy_drained_nodes=32, down_nodes=8),
}
SCALE_COMMON = dict(per_node_gang_frac=0.15, zero_share_project=True)


def scale_instance(name: str, seed: int = 0) -> Snapshot:
    """The benchmark instance of size `name` (a key of SCALES)."""
    return make_instance(seed=seed, **SCALES[name], **SCALE_COMMON)


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
