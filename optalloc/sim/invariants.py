"""Invariants the simulator checks at every decision (with `simulate(..., check=True)`, which
the tests use): a violated one raises SimulationInvariantError naming the job and the rule.

Plan against its snapshot:
* every running job is kept (placed) or preempted, and only a move (code Moved) is both;
  every queued job is placed or has a pending reason; no unknown job ids;
* a protected job (allocated, inside its min_runtime) is never preempted nor moved;
* a placement is a whole gang: exactly `gpus` GPUs of one allowed gpu_type, a new one in the
  job's shape (optalloc/shape.py: 8 + 8 + 4 for 20 GPUs on 8-GPU nodes), valid distinct GPU
  indices, new starts only on nodes that are up, kept jobs only on nodes that are present;
* no GPU is given to two jobs, so no node or gpu_type is over capacity.

The simulated cluster (`check_cluster`): no GPU is held by two runs at overlapping times; and
a finished run (`check_conservation`): the ledger charged exactly the allocated GPU-hours run.
"""

from __future__ import annotations

import math

import numpy as np

from optalloc.errors import OptallocError
from optalloc.ledger import Ledger
from optalloc.org import OrgTree
from optalloc.shape import chunks, fit_orders, job_nodes
from optalloc.snapshot import Snapshot
from optalloc.sim.result import SimResult
from optalloc.types import NodeState, Plan, ReasonCode


class SimulationInvariantError(OptallocError):
    """A policy's plan (or the simulated cluster) broke a rule every schedule must keep."""


def check_plan(snap: Snapshot, plan: Plan) -> None:
    def fail(msg: str) -> None:
        raise SimulationInvariantError(f"t={snap.now:g}: {msg}")

    jobs = {j.id: j for j in snap.jobs}
    placed = {}
    for pl in plan.placements:
        if pl.job_id in placed:
            fail(f"job {pl.job_id} is placed twice")
        placed[pl.job_id] = pl
    preempted = {}
    for pre in plan.preemptions:
        if pre.job_id in preempted:
            fail(f"job {pre.job_id} is preempted twice")
        preempted[pre.job_id] = pre
    pending = {p.job_id for p in plan.pending}
    for jid in list(placed) + list(preempted) + list(pending):
        if jid not in jobs:
            fail(f"plan names job {jid}, which is not in the snapshot")

    for k, job in enumerate(snap.jobs):
        if job.running:
            if job.id in pending:
                fail(f"running job {job.id} has a pending reason; keep or preempt it")
            if job.id not in placed and job.id not in preempted:
                fail(f"running job {job.id} is neither kept nor preempted")
            if job.id in placed and job.id in preempted:
                if preempted[job.id].code is not ReasonCode.MOVED:
                    fail(f"running job {job.id} is both kept and preempted")
            # the GPUs it holds (its `allocated` flag follows its tier this epoch: a project
            # whose share went to 0 keeps its running job as unallocated work)
            if job.id in placed and job.id not in preempted and (
                    (placed[job.id].gpu_type, placed[job.id].nodes)
                    != (job.placement.gpu_type, job.placement.nodes)):
                fail(f"running job {job.id} changes placement without a Moved preemption")
            if snap.job_protected[k] and _present(snap, job.placement):
                if job.id in preempted:
                    fail(f"protected job {job.id} is preempted inside its min_runtime")
        else:
            if job.id in preempted:
                fail(f"queued job {job.id} is preempted")
            if (job.id in placed) == (job.id in pending):
                fail(f"queued job {job.id} must be either placed or pending, not "
                     f"{'both' if job.id in placed else 'neither'}")

    taken: dict[tuple[str, int], str] = {}
    types = snap.type_names
    for jid, pl in placed.items():
        k = snap.job_index[jid]
        job = jobs[jid]
        new = not job.running or job.placement != pl
        if pl.gpus != job.gpus:
            fail(f"job {jid} asks {job.gpus} GPUs but is placed on {pl.gpus}")
        if pl.gpu_type not in types or not snap.job_allowed[k, types.index(pl.gpu_type)]:
            fail(f"job {jid} is placed on gpu_type {pl.gpu_type}, which it does not allow")
        got = sorted((len(a.gpus) for a in pl.nodes), reverse=True)
        if new:  # the one gang-shape rule, on the type's largest up node
            t = types.index(pl.gpu_type)
            size = int(snap.node_gpus[snap.node_up & (snap.node_type == t)].max(initial=0))
            want = chunks(job.gpus, job.gpus_per_node, size)
            if got != want:
                fail(f"job {jid} takes the shape {want} on {pl.gpu_type} (optalloc/shape.py) "
                     f"but is placed as {got}")
        if len(set(pl.node_names)) != len(pl.nodes):
            fail(f"job {jid} lists a node twice")
        for a in pl.nodes:
            n = snap.node_index.get(a.node)
            if n is None:
                fail(f"job {jid} is placed on unknown node {a.node}")
            node = snap.nodes[n]
            if node.gpu_type != pl.gpu_type:
                fail(f"job {jid} placed as {pl.gpu_type} on node {a.node} of {node.gpu_type}")
            if new and not snap.node_up[n]:
                fail(f"job {jid} starts on node {a.node}, which is {node.state.value}")
            if not snap.node_present[n]:
                fail(f"job {jid} runs on node {a.node}, which is down")
            if len(set(a.gpus)) != len(a.gpus) or any(g < 0 or g >= node.gpus for g in a.gpus):
                fail(f"job {jid} has invalid GPU indices {a.gpus} on {a.node} ({node.gpus} GPUs)")
            for g in a.gpus:
                other = taken.get((a.node, g))
                if other is not None:
                    fail(f"GPU {a.node}:{g} is given to both {other} and {jid}")
                taken[(a.node, g)] = jid


def _present(snap: Snapshot, pl) -> bool:
    if pl is None:
        return False
    return all(
        a.node in snap.node_index and snap.node_present[snap.node_index[a.node]] for a in pl.nodes
    )


def check_cluster(runs, now: float) -> None:
    """No GPU is held by two runs at overlapping times (stopping and starting included).
    `runs`: the simulated runner's runs (job id -> run with placement, start, stop_at)."""
    holders: dict[tuple[str, int], list] = {}
    for jid, run in runs.items():
        span = (run.start, run.stop_at if run.stop_at is not None else math.inf)
        for a in run.placement.nodes:
            for g in a.gpus:
                holders.setdefault((a.node, g), []).append((span, jid))
    for key, spans in holders.items():
        spans.sort()
        for (s1, j1), (s2, j2) in zip(spans, spans[1:]):
            if s2[0] < s1[1]:
                raise SimulationInvariantError(
                    f"t={now:g}: GPU {key[0]}:{key[1]} is held by {j1} and {j2} at once"
                )


def check_conservation(result: SimResult, ledger: Ledger | None = None) -> tuple[float, float]:
    """(charged GPU-hours in a ledger fed the result's intervals, allocated GPU-hours of the run
    intervals). Raises SimulationInvariantError when they differ."""
    cfg = result.config
    if ledger is None:
        ledger = Ledger(cfg.gpu_types, OrgTree.build(cfg.org, [g.name for g in cfg.gpu_types]), cfg.policy)
        ledger.record_intervals(result.intervals)
    cols = ledger.columns()
    w = {g.name: g.billing_weight for g in cfg.gpu_types}
    charged = float(np.sum(cols["charge"] * (cols["end"] - cols["start"]))) / 3600.0
    ran = sum(iv.gpus * w[iv.gpu_type] * (iv.end - iv.start) for iv in result.intervals if iv.allocated) / 3600.0
    if not math.isclose(charged, ran, rel_tol=1e-9, abs_tol=1e-6):
        raise SimulationInvariantError(
            f"ledger charged {charged:.6f} GPU-hours but the run intervals hold {ran:.6f}"
        )
    return charged, ran


def _ranked_below(snap: Snapshot, plan: Plan):
    """below(q, k): job q is of job k's project and ranked below it in the team's order, and
    is not a gang whose reservation starts it over k, which it ranks above by the scheme's
    order (its turn: k ran only because it could not start)."""
    from optalloc.model.order import project_order, scheme_above

    pos = project_order(snap)
    turn = {e.job_id for e in plan.reservations_ended if e.outcome == "started"}

    def below(q: int, k: int) -> bool:
        return (snap.job_project[q] == snap.job_project[k] and pos[q] > pos[k]
                and not (snap.jobs[q].id in turn and scheme_above(snap, q, k)))

    return below


def team_order_breaks(snap: Snapshot, plan: Plan) -> list[tuple[str, tuple[str, ...]]]:
    """The team's order over running jobs (DESIGN.md rule 3; the published system's, so not
    in check_plan, which every policy keeps): (job, the jobs on its GPUs) for each running
    allocated job the plan stops for fair share, or moves to another type, whose GPUs, after
    the plan, only new placements (queued jobs' starts, running jobs' moves) of jobs its own
    project ranks below it hold (a job is never stopped or moved for jobs its team ranks
    below it; a restart on its own type is packing; a job on a draining node leaves it
    anyway). A gang whose reservation starts it (the lookahead's turn) may take its GPUs from
    a teammate of its priority submitted after it: that one ran only because the gang could
    not. Empty when the order holds."""
    below = _ranked_below(snap, plan)
    owner = {(a.node, g): p.job_id for p in plan.placements for a in p.nodes for g in a.gpus}
    by_id = {p.job_id: p for p in plan.placements}
    new = {jid for jid, p in by_id.items()
           if p != getattr(snap.jobs[snap.job_index[jid]], "placement", None)}
    out = []
    for pre in plan.preemptions:
        if pre.code not in (ReasonCode.PREEMPTED_FAIR_SHARE, ReasonCode.MOVED):
            continue
        k = snap.job_index[pre.job_id]
        job = snap.jobs[k]
        if job.placement is None or any(
                snap.nodes[snap.node_index[a.node]].state is not NodeState.UP
                for a in job.placement.nodes if a.node in snap.node_index):
            continue  # a draining (or down) node's job leaves whoever takes its GPUs
        again = by_id.get(job.id)
        if again is not None and again.gpu_type == job.placement.gpu_type:
            continue  # a restart on its own type: packing, the job runs on
        on = {owner.get((a.node, g)) for a in job.placement.nodes for g in a.gpus}
        on -= {None, job.id}
        ks = [snap.job_index[o] for o in on]
        if on and all(snap.jobs[q].id in new and below(q, k) for q in ks):
            out.append((job.id, tuple(sorted(on))))
    return out


def proxy_order_breaks(snap: Snapshot, plan: Plan) -> list[tuple[str, tuple[str, ...]]]:
    """The team's order by proxy (optalloc.plan.proxy_order), checked on the plan alone:
    (job, the starts on its GPUs) for each running allocated job past its protection, on up
    nodes, that the plan stops for fair share while queued jobs its own project ranks below
    it start on its type, where its GPUs went only to other new placements (queued jobs'
    starts, or running jobs' moves and restarts, since stop 47), and those would all fit
    (best fit, largest first or else the most distinct nodes first: _all_fit_free) on the
    GPUs left free if it stayed and none of those
    teammates started, each only on nodes the placement lets it use: not a node reserved
    until a gang's start that it would hold its GPUs past (its protection, or its expected
    end if sooner: _reserved_until; before, a teammate's GPU on such a node counted as room
    for a long start that may not go there). A gang whose reservation starts it is no such
    teammate of the jobs it ranks above by the scheme's order (team_order_breaks). Empty when
    the order holds."""
    below = _ranked_below(snap, plan)
    by_id = {p.job_id: p for p in plan.placements}
    new = {jid for jid, p in by_id.items()
           if p != getattr(snap.jobs[snap.job_index[jid]], "placement", None)}
    owner = {(a.node, g): p.job_id for p in plan.placements for a in p.nodes for g in a.gpus}
    up = {n.name: n for n in snap.nodes if n.state is NodeState.UP}
    until = _reserved_until(snap, plan)
    out = []
    for pre in plan.preemptions:
        k = snap.job_index[pre.job_id]
        job = snap.jobs[k]
        if (pre.code is not ReasonCode.PREEMPTED_FAIR_SHARE or job.id in by_id
                or job.placement is None or snap.job_protected[k] or not job.allocated
                or any(a.node not in up for a in job.placement.nodes)):
            continue
        t = job.placement.gpu_type
        mates = {jid for jid, p in by_id.items() if p.gpu_type == t
                 and not snap.job_running[snap.job_index[jid]]
                 and below(snap.job_index[jid], k)}
        on = {owner.get((a.node, g)) for a in job.placement.nodes for g in a.gpus} - {None}
        others = on - mates
        if not mates or not others or not others <= new:
            continue
        gone = mates | others
        used = {(a.node, g) for p in plan.placements if p.job_id not in gone
                for a in p.nodes for g in a.gpus}
        used |= {(a.node, g) for a in job.placement.nodes for g in a.gpus}
        free = {name: n.gpus - sum((name, g) in used for g in range(n.gpus))
                for name, n in up.items()}
        if _all_fit_free(snap, sorted(others), by_id, up, free, until):
            out.append((job.id, tuple(sorted(on))))
    return out


def _all_fit_free(snap: Snapshot, ids: list, by_id: dict, up: dict, free: dict,
                  until: dict) -> bool:
    """Whether the jobs `ids` (sorted) all fit on `free`, one by one, best fit
    (_fits_free), in some order of optalloc.shape.fit_orders: largest first, then the most
    distinct nodes first (the orders the repair tries). Before, largest first alone, its ties
    in the order of a set of ids, so the verdict could change from run to run."""
    jobs = [snap.jobs[snap.job_index[o]] for o in ids]
    need = []
    for job, o in zip(jobs, ids):
        size = max((n.gpus for n in up.values() if n.gpu_type == by_id[o].gpu_type), default=0)
        need.append(job_nodes(job.gpus, job.gpus_per_node, size))
    for order in fit_orders([job.gpus for job in jobs], need):
        f = dict(free)
        if all(_fits_free(snap, jobs[i], by_id[ids[i]].gpu_type, up, f,
                          _may_use(snap, ids[i], by_id[ids[i]].gpu_type, until))
               for i in order):
            return True
    return False


def _reserved_until(snap: Snapshot, plan: Plan) -> dict[str, float]:
    """Node -> the deadline (`_clear`) of the gang it was reserved for while the plan was placed
    (optalloc.model.reservations: the nodes of every reservation whose gang was not due, i.e.
    whose expected start is ahead: those the plan holds, and those whose gang it starts
    early); a start that would hold its GPUs past it may not use the node
    (optalloc.plan.nodepool.NodePool.allowed)."""
    new = {p.job_id for p in plan.placements if not snap.job_running[snap.job_index[p.job_id]]}
    held = list(plan.reservations) + [e for e in plan.reservations_ended
                                      if e.outcome == "started" and e.job_id in new]
    return {n: float(_clear(r)) for r in held if r.expected_start > snap.now
            for n in r.nodes}


def _clear(r) -> float:
    """A reservation's nodes' deadline: when they are clear of protected work (its details'
    clear_at; the expected start adds the notice of the jobs still there), else (an ended
    one, or a plan from before stop 55) its expected start."""
    return float((getattr(r, "details", None) or {}).get("clear_at", r.expected_start))


def _may_use(snap: Snapshot, jid: str, gpu_type: str, until: dict):
    """Whether job `jid`'s start on `gpu_type` may use a node (by name), under `until`
    (_reserved_until): the reservation's start is no earlier than the start's hold
    (optalloc.model.free_times.start_hold, the placement's)."""
    if not until:
        return None
    from optalloc.model.free_times import start_hold

    hold = float(start_hold(snap, [snap.job_index[jid]], [snap.type_names.index(gpu_type)])[0])
    return lambda name: until.get(name, math.inf) >= hold


def _fits_free(snap: Snapshot, job, gpu_type: str, up: dict, free: dict, ok=None) -> bool:
    """Place `job` on `free` (GPUs free per up node; updated when it fits), best fit, only
    on nodes `ok` (by name; None: all) allows (the shape is still that of the type's nodes)."""
    nodes = [n for n in up.values() if n.gpu_type == gpu_type]
    size = max((n.gpus for n in nodes), default=0)
    ch = chunks(job.gpus, job.gpus_per_node, size) if size else None
    if ch is None:
        return False
    if ok is not None:
        nodes = [n for n in nodes if ok(n.name)]
    taken: dict = {}
    for c in ch:
        room = sorted((free[n.name], n.name) for n in nodes
                      if n.name not in taken and free[n.name] >= c)
        if not room:
            return False
        taken[room[0][1]] = c
    for name, c in taken.items():
        free[name] -= c
    return True
