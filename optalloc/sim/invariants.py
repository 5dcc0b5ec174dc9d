"""Invariants the simulator checks at every decision (with `simulate(..., check=True)`, which
the tests use): a violated one raises SimulationInvariantError naming the job and the rule.

Plan against its snapshot:
* every running job is kept (placed) or preempted, and only a move (code Moved) is both;
  every queued job is placed or has a pending reason; no unknown job ids;
* a protected job (allocated, inside its min_runtime) is never preempted nor moved;
* a placement is a whole gang: exactly `gpus` GPUs of one allowed gpu_type, `gpus_per_node` on
  each node when the job says so, valid distinct GPU indices, new starts only on nodes that are
  up, kept jobs only on nodes that are present;
* no GPU is given to two jobs, so no node or gpu_type is over capacity.
"""

from __future__ import annotations

from optalloc.errors import OptallocError
from optalloc.snapshot import Snapshot
from optalloc.types import Plan, ReasonCode


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
            if job.id in placed and job.id not in preempted and placed[job.id] != job.placement:
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
        if job.gpus_per_node and any(len(a.gpus) != job.gpus_per_node for a in pl.nodes):
            fail(f"job {jid} asks {job.gpus_per_node} GPUs per node, placed as "
                 f"{[len(a.gpus) for a in pl.nodes]}")
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
