"""Phase 5: a machine-readable reason and a human message for every job not simply placed.

Pending (queued job not started), checked in this order:
  NoMatchingGpuType / NodeDraining   no up node of an allowed type can hold its shape
  GangDoesNotFit                     chosen, or enough free GPUs, but not in the right nodes
  UnallocatedYields                  unallocated (or zero-share) job: idle capacity only
  OverShare                          GPUs of its types are held by another project that ranks
                                     higher (the message names the deciding org level)
  LowerPriorityInProject             held by jobs of its own project ahead of it in line
  WaitingForCapacity                 held by protected jobs / share floors / bigger gangs
  SolverDegraded                     the plan is a fallback (the above stays in details)

Preempted (running job not kept): PreemptedNodeDrain (its node went down), Moved (and
restarted elsewhere), PreemptedUnallocated, PreemptedForFairShare, with `needed_by` = the
jobs now on its GPUs.
"""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.requirements import SHAPE_NAMES
from optalloc.plan.place import Placed
from optalloc.snapshot import Snapshot
from optalloc.types import (
    FloorViolation,
    PendingReason,
    Placement,
    Preemption,
    ReasonCode,
    frozen_map,
)


def path_ratios(snap: Snapshot, project: int, W: np.ndarray | None = None) -> list[dict]:
    """[{org, usage_ratio, share_weight}] from the top level down to the project. `W`: the
    fair-share weight per org node when the caller has it (Impact.weight), else computed."""
    from optalloc.model.objective.impact import fairshare_weight

    W = fairshare_weight(snap) if W is None else W
    names = snap.org.path(snap.org.names[project])[1:]
    return [
        {
            "org": nm,
            "usage_ratio": round(float(snap.usage_ratio[snap.org.index[nm]]), 4),
            "weight": round(float(W[snap.org.index[nm]]), 6),
        }
        for nm in names
    ]


def free_by_type(snap: Snapshot, free: np.ndarray) -> dict[str, dict]:
    out = {}
    for t, name in enumerate(snap.type_names):
        sel = snap.node_up & (snap.node_type == t)
        f = free[sel]
        out[name] = {
            "free_gpus": int(f.sum()),
            "largest_free_node": int(f.max()) if len(f) else 0,
            "free_whole_nodes": int((f == snap.node_gpus[sel]).sum()) if len(f) else 0,
        }
    return out


def _holders(snap: Snapshot, em: EpochModel, placed: Placed):
    """Jobs on GPUs after the plan that could be displaced: (job, type) arrays."""
    req = em.req
    kj = req.run_job[placed.kept]
    kt = req.run_type[placed.kept]
    unprot = ~snap.job_protected[kj]
    nj = np.fromiter(placed.placements.keys(), dtype=np.int64, count=len(placed.placements))
    tidx = {n: i for i, n in enumerate(snap.type_names)}
    nt = np.array([tidx[p.gpu_type] for p in placed.placements.values()], dtype=np.int64)
    return np.concatenate([kj[unprot], nj]), np.concatenate([kt[unprot], nt])


def _deciding(snap: Snapshot, p: int, q: int) -> tuple[str, float, str, float]:
    """The org nodes where the paths of projects p and q diverge (siblings compared)."""
    pa = snap.org.path(snap.org.names[p])
    qa = snap.org.path(snap.org.names[q])
    i = 0
    while i < min(len(pa), len(qa)) and pa[i] == qa[i]:
        i += 1
    a, b = pa[min(i, len(pa) - 1)], qa[min(i, len(qa) - 1)]
    r = snap.usage_ratio
    return a, float(r[snap.org.index[a]]), b, float(r[snap.org.index[b]])


def pending_reasons(
    em: EpochModel, placed: Placed, degraded: str | None, got: np.ndarray | None = None
) -> tuple[PendingReason, ...]:
    snap, req, imp = em.snap, em.req, em.imp
    waiting = ~snap.job_running.copy()
    waiting[list(placed.placements)] = False
    if not waiting.any():
        return ()
    free = placed.free
    free_t = free_by_type(snap, free)
    got = got_by_org(em, placed) if got is None else got
    entitled = snap.org.entitlement * snap.capacity_by_type(up_only=True)[None, :]
    hj, ht = _holders(snap, em, placed)
    W, proj = imp.job_weight, snap.job_project
    T = len(snap.gpu_types)
    # per type: the best-ranked holder project (W) and the best other; per (type, project) the
    # best within-project rank among holders
    best_w: dict = {}
    for t in range(T):
        sel = (ht == t) & (imp.tier[hj, t] >= 1.0) if len(hj) else np.zeros(0, bool)
        pj = proj[hj[sel]]
        wj = W[hj[sel]]
        by_proj: dict[int, float] = {}
        rk: dict[int, int] = {}  # highest declared priority among the project's holders
        prio = snap.job_priority[hj[sel]]
        for p_, w_, r_ in zip(pj.tolist(), wj.tolist(), prio.tolist()):
            by_proj[p_] = max(by_proj.get(p_, 0.0), w_)
            rk[p_] = max(rk.get(p_, r_), r_)
        best_w[t] = (sorted(by_proj.items(), key=lambda kv: -kv[1])[:2], rk)
    cand_types: dict[int, list[int]] = {}
    for j, t in zip(req.cand_job.tolist(), req.cand_type.tolist()):
        cand_types.setdefault(j, []).append(t)

    out = []
    for j in np.flatnonzero(waiting):
        job = snap.jobs[j]
        g = int(snap.job_gpus[j])
        types = cand_types.get(int(j), [])
        details: dict = {
            "gpus": g,
            "project": job.project,
            "path": path_ratios(snap, int(proj[j]), imp.weight),
            "weight": round(float(W[j]), 6),
            "free_by_type": {snap.type_names[t]: free_t[snap.type_names[t]] for t in types}
            or free_t,
        }
        code, msg = _classify(snap, em, placed, int(j), types, best_w, details, got, entitled)
        if degraded:
            details["underlying"] = code.value
            details["underlying_message"] = msg
            code, msg = ReasonCode.SOLVER_DEGRADED, f"solver degraded ({degraded}); {msg}"
        out.append(PendingReason(job.id, code, msg, frozen_map(details)))
    return tuple(out)


def _classify(snap, em, placed, j, types, best_w, details, got, entitled):
    req, imp = em.req, em.imp
    job = snap.jobs[j]
    g = int(snap.job_gpus[j])
    tn = snap.type_names
    allowed = [tn[t] for t in np.flatnonzero(snap.job_allowed[j])]
    code = req.no_fit_code[j]
    if code is ReasonCode.NODE_DRAINING:
        return code, (f"needs {g} GPUs of {'/'.join(allowed)}; the nodes that could hold it "
                      "are draining or down")
    if code is ReasonCode.NO_MATCHING_GPU_TYPE:
        return code, (f"no up node of an allowed type ({', '.join(allowed) or 'none'}) can hold "
                      f"a {g}-GPU job of this shape")
    fr = details["free_by_type"]
    if placed.failed[j] or any(fr[tn[t]]["free_gpus"] >= g for t in types):
        t = types[0]
        shape = ("whole free nodes" if req.shape[j, t] != 0 else "one node")
        return ReasonCode.GANG_DOES_NOT_FIT, (
            f"needs {g} GPUs on {shape}; {tn[t]} has {fr[tn[t]]['free_gpus']} free GPUs but "
            f"the largest free node has {fr[tn[t]]['largest_free_node']} and "
            f"{fr[tn[t]]['free_whole_nodes']} nodes are entirely free"
        )
    if all(imp.tier[j, t] < 1.0 for t in types):
        why = "unallocated (min_runtime 0)" if not job.allocated else "its project has no share"
        return ReasonCode.UNALLOCATED_YIELDS, (
            f"{why}: runs only on GPUs no allocated job wants; {g} GPUs needed, "
            + ", ".join(f"{tn[t]}: {fr[tn[t]]['free_gpus']} free" for t in types)
        )
    p = int(snap.job_project[j])
    below = [t for t in types if imp.tier[j, t] >= 1.0 and em.floor[p, t] > got[p, t] + 1e-9]
    if below:
        # its project is below its floor on a type it may use, and still the job waits: say
        # what starting it there would displace
        t = below[0]
        short = float(em.floor[p, t] - got[p, t])
        shape = SHAPE_NAMES[int(req.shape[j, t])]
        details["below_floor"] = {"org": job.project, "gpu_type": tn[t],
                                  "floor": float(em.floor[p, t]), "got": float(got[p, t])}
        why = (f"only {short:g} of its {g} GPUs would count toward that floor; the solver "
               "found no plan (within its gap) that starts it and meets as many floor GPUs, as "
               "the GPUs it would displace are protected or count toward other floors"
               if g > short else
               "the solver found no plan (within its gap) that starts it and meets more floor "
               "GPUs: the GPUs it would displace are protected or count toward other floors")
        return ReasonCode.WAITING_FOR_CAPACITY, (
            f"project {job.project} is below its {tn[t]} floor ({got[p, t]:g} of "
            f"{em.floor[p, t]:g} GPUs), but this job needs {g} GPUs as a {shape} "
            f"({fr[tn[t]]['free_gpus']} free): {why}"
        )
    others_hold = any(q != p for t in types for q, _ in best_w[t][0])
    # at or over its share: the project or an ancestor already holds its entitled GPUs while
    # other projects hold the rest
    for nm in (snap.org.path(snap.org.names[p])[1:] if others_hold else []):
        o = snap.org.index[nm]
        if all(got[o, t] >= entitled[o, t] - 1e-9 for t in types):
            t = types[0]
            details["at_share"] = {"org": nm, "holds": {tn[u]: int(got[o, u]) for u in types},
                                   "entitled": {tn[u]: round(float(entitled[o, u]), 2)
                                                for u in types}}
            return ReasonCode.OVER_SHARE, (
                f"{nm} already holds {int(got[o, t])} {tn[t]} GPUs, its entitled share is "
                f"{entitled[o, t]:.1f}; the rest is within other projects' shares "
                f"(usage ratio {snap.usage_ratio[o]:.2f})"
            )
    w = float(imp.job_weight[j])
    best_other = None
    for t in types:
        top, _ = best_w[t]
        for q, wq in top:
            if q != p and wq > w + 1e-12 and (best_other is None or wq > best_other[1]):
                best_other = (q, wq, t)
                break
    if best_other is not None:
        q, wq, t = best_other
        a, ra, b, rb = _deciding(snap, p, q)
        details["outranked_by"] = {"org": b, "usage_ratio": round(rb, 4), "weight": round(wq, 6)}
        details["deciding_org"] = {"org": a, "usage_ratio": round(ra, 4)}
        return ReasonCode.OVER_SHARE, (
            f"{a} (usage ratio {ra:.2f}) ranks below {b} (usage ratio {rb:.2f}), which holds "
            f"{tn[t]} GPUs; needs {g} GPUs, {fr[tn[t]]['free_gpus']} free"
        )
    for t in types:
        _, pr = best_w[t]
        if pr.get(p, -np.inf) > job.priority:
            return ReasonCode.LOWER_PRIORITY_IN_PROJECT, (
                f"jobs of project {job.project} ahead of it (priority {job.priority}) hold the "
                f"{tn[t]} GPUs; needs {g}, {fr[tn[t]]['free_gpus']} free"
            )
    return ReasonCode.WAITING_FOR_CAPACITY, (
        f"needs {g} GPUs; "
        + ", ".join(f"{tn[t]}: {fr[tn[t]]['free_gpus']} free" for t in types)
        + " (the rest held by protected jobs, share floors or better-fitting jobs)"
    )


def preemptions(
    em: EpochModel, placed: Placed, grace_s: float, got: np.ndarray | None = None
) -> tuple[Preemption, ...]:
    snap, req, imp = em.snap, em.req, em.imp
    got = got_by_org(em, placed) if got is None else got
    owner: dict[tuple[str, int], str] = {}
    for p in placed.placements.values():
        for a in p.nodes:
            for gi in a.gpus:
                owner[(a.node, gi)] = p.job_id
    out = []

    def takers(pl: Placement | None) -> tuple[str, ...]:
        if pl is None:
            return ()
        ids = {owner[(a.node, gi)] for a in pl.nodes for gi in a.gpus if (a.node, gi) in owner}
        return tuple(sorted(ids))

    for j in np.flatnonzero(req.displaced):
        job = snap.jobs[j]
        gone = "its placement is missing" if job.placement is None else (
            "node " + ", ".join(
                a.node for a in job.placement.nodes
                if a.node not in snap.node_index or not snap.node_present[snap.node_index[a.node]]
            ) + " is down")
        if j in placed.placements:
            new = placed.placements[j]
            out.append(Preemption(job.id, ReasonCode.MOVED,
                                  f"{gone}; restarted on {', '.join(new.node_names)}", grace_s))
        else:
            out.append(Preemption(job.id, ReasonCode.PREEMPTED_NODE_DRAIN,
                                  f"{gone}; requeued", grace_s))
    for i in np.flatnonzero(~placed.kept):
        j = int(req.run_job[i])
        job = snap.jobs[j]
        need = takers(job.placement)
        if imp.tier[j, req.run_type[i]] < 1.0:
            code = ReasonCode.PREEMPTED_UNALLOCATED
            msg = "unallocated job yields to allocated demand"
        else:
            code = ReasonCode.PREEMPTED_FAIR_SHARE
            msg = _fair_share_message(em, got, j, int(req.run_type[i]), need)
        if need:
            msg += f" ({', '.join(need[:5])}{'...' if len(need) > 5 else ''})"
        out.append(Preemption(job.id, code, msg, grace_s, need))
    return tuple(out)


def _fair_share_message(em: EpochModel, got: np.ndarray, j: int, t: int, need) -> str:
    """Why a running allocated job loses its GPUs. Goals come in the order floors, impact,
    churn, so when the job's project ends below its floor the message says why that is still
    the best plan: the projects taking the GPUs are below their floors too (floor GPUs count
    the same, impact decides), or the job's shape blocks GPUs that meet more floor elsewhere."""
    snap, imp = em.snap, em.imp
    job = snap.jobs[j]
    p, tn = int(snap.job_project[j]), snap.type_names[t]
    F, g = em.floor[:, t], got[:, t]
    if not F[p] > g[p] + 1e-9:
        return (f"past its min_runtime; project {job.project} (weight {imp.job_weight[j]:.3f}) "
                "ranks below the jobs that need its GPUs")
    takers = [snap.job_index[k] for k in need if k in snap.job_index]
    others = sorted({int(snap.job_project[k]) for k in takers} - {p})
    status = ", ".join(f"{snap.org.names[q]} {g[q]:g}/{F[q]:g}" for q in others)
    head = (f"past its min_runtime; project {job.project} is below its {tn} floor after this "
            f"({g[p]:g} of {F[p]:g} GPUs)")
    if others and all(F[q] > g[q] + 1e-9 for q in others) and all(
        int(snap.job_project[k]) != p for k in takers
    ):
        w = max(float(imp.job_weight[k]) for k in takers)
        return (f"{head}, and so are the projects that need its GPUs ({status}): a floor GPU "
                f"counts the same for both, so impact decides (fair-share weight "
                f"{imp.job_weight[j]:.3f} vs {w:.3f})")
    shape = SHAPE_NAMES[int(em.req.shape[j, t])]
    return (f"{head}, yet the solver found no plan that keeps this {int(snap.job_gpus[j])}-GPU "
            f"{shape} and meets as many floor GPUs in total: its GPUs meet more floor as the "
            "jobs that take them" + (f" (their floors, got/floor: {status})" if status else ""))


def got_by_org(em: EpochModel, placed: Placed) -> np.ndarray:
    """(O, T) tier-1 GPUs per org node and type after the plan."""
    snap, req, imp = em.snap, em.req, em.imp
    O, T = snap.org.n, len(snap.gpu_types)
    leaf = np.zeros((O, T))
    kj, kt = req.run_job[placed.kept], req.run_type[placed.kept]
    c = np.flatnonzero(placed.started)
    jobs = np.concatenate([kj, req.cand_job[c]])
    types = np.concatenate([kt, req.cand_type[c]])
    if len(jobs):
        t1 = imp.tier[jobs, types] >= 1.0
        np.add.at(leaf, (snap.job_project[jobs[t1]], types[t1]), snap.job_gpus[jobs[t1]])
    return snap.org.membership().astype(float) @ leaf


def floor_violations(em: EpochModel, got: np.ndarray) -> tuple[FloorViolation, ...]:
    snap = em.snap
    o, t = np.nonzero(em.floor > got + 1e-9)
    return tuple(
        FloorViolation(snap.org.names[a], snap.type_names[b], float(em.floor[a, b]),
                       float(got[a, b]))
        for a, b in zip(o, t)
    )
