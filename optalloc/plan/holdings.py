"""What a placed plan holds, in the model's coordinates: the Placed record the placement step
returns, the (job, type) pairs it runs, the tier-1 GPUs per org node and type, and the plan as
a point of the model (for a MIP start and the row check)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.constraints.fairshare import tier_bounds
from optalloc.model.requirements import PIECES, WHOLE


@dataclass
class Placed:
    """The outcome of the placement step, in the model's coordinates."""

    started: np.ndarray  # (C,) bool: candidate placed
    kept: np.ndarray  # (K,) bool: running job kept
    placements: dict = field(default_factory=dict)  # job index -> Placement (new starts)
    backfilled: np.ndarray | None = None  # (J,) bool: started by backfill, not the solver
    restored: np.ndarray | None = None  # (K,) bool: preempted by the solver, kept by restore
    free: np.ndarray | None = None  # (N,) free GPUs per node after the plan (0 on drain/down)
    # (P, 3) (running job's position in req.run_job, job, moved): a start given back so that
    # that running job, ranked above it in its team's order, keeps its GPUs (the job waits,
    # or started elsewhere after; moved: the running job's own move was undone too:
    # optalloc.plan.team_order)
    held: np.ndarray | None = None
    # (P, 2) (job, job given back): a waiting job that took the places of lower-priority
    # starts of its team, several together (optalloc.plan.several_places)
    ahead: np.ndarray | None = None


def plan_pairs(em: EpochModel, placed: Placed, moves: bool = True, restarts: bool | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
    """(jobs, types) the plan runs: the running jobs it keeps, then the candidates it starts
    (without `moves`: not the running jobs it moves to another type, which no share row per
    type counts; without `restarts`, None: as `moves`, not those it restarts on their own
    type, which no share row counts)."""
    req = em.req
    restarts = moves if restarts is None else restarts
    on = placed.started
    if not moves:
        on = on & ~req.cand_move
    if not restarts:
        on = on & ~req.cand_restart
    c = on.nonzero()[0]  # 1-D: np.flatnonzero less its overhead (33,326 calls in 10 days)
    return (np.concatenate([req.run_job[placed.kept], req.cand_job[c]]),
            np.concatenate([req.run_type[placed.kept], req.cand_type[c]]))


def got_by_org(em: EpochModel, placed: Placed, reserved: bool = True,
               moves: bool | None = None) -> np.ndarray:
    """(O, T) tier-1 GPUs per org node and type after the plan, as the share rows count them:
    with `reserved`, a waiting reservation's GPUs count as held by its project's subtree
    (optalloc.model.constraints.lookahead); a running job the plan moves to another type
    counts nowhere per type, on its new type when pooled, and one it restarts on its own
    type nowhere (requirements.cand_counted; `moves` None). With `moves`: what each holds,
    for reports and messages."""
    snap = em.snap
    restarts = None
    if moves is None:
        moves, restarts = em.tg.pooled, False
    O, T = snap.org.n, len(snap.gpu_types)
    leaf = np.zeros((O, T))
    jobs, types = plan_pairs(em, placed, moves, restarts)
    if len(jobs):
        t1 = snap.job_tier1[jobs, types]
        np.add.at(leaf, (snap.job_project[jobs[t1]], types[t1]), snap.job_gpus[jobs[t1]])
    got = snap.org.membership().astype(float) @ leaf
    if reserved and em.res.held:
        got += em.res.holding(snap, jobs)
    return got


def as_solution(em: EpochModel, placed: Placed) -> np.ndarray:
    """The placed plan as a point of em.lm (x, k from the plan; z = nodes whole-node gangs
    took; u = single-node jobs and gang remainders per (node, size); y = nodes of per-node
    gang pieces; m = the share tiers filled in order), so a MIP solver can start from it and
    the plan can be checked against every row (`em.lm.violation`)."""
    snap, req = em.snap, em.req
    sol = np.zeros(em.lm.n_vars)
    sol[em.x] = placed.started
    sol[em.k] = placed.kept
    used_whole = np.zeros(len(snap.nodes), bool)
    count = np.zeros((len(snap.nodes), int(req.type_max_node.max(initial=0)) + 1), np.int64)
    y_on = np.zeros(len(em.classes), np.int64)  # gangs started per class
    y_at: dict = {}  # (class, node) -> pieces
    st = np.flatnonzero(placed.started)
    cj, ct = req.cand_job[st], req.cand_type[st]
    # per start, as plain Python values (XL: 3,100 starts)
    for c, j, shape, size in zip(st.tolist(), cj.tolist(), req.shape[cj, ct].tolist(),
                                 req.size[cj, ct].tolist()):
        pl = placed.placements[j]
        nodes = [snap.node_index[a.node] for a in pl.nodes]
        if shape == WHOLE:
            for n, a in zip(nodes, pl.nodes):
                if len(a.gpus) == size and snap.node_gpus[n] == size:
                    used_whole[n] = True
                else:
                    count[n, len(a.gpus)] += 1
        elif shape == PIECES:
            k = int(em.cand_class[c])
            y_on[k] += 1
            for n in nodes:
                y_at[(k, n)] = y_at.get((k, n), 0) + 1
        else:
            count[nodes[0], size] += 1
    if len(em.z):
        sol[em.z] = used_whole[em.z_node]
    if len(em.u):
        sol[em.u] = count[em.u_node, em.u_size]
    if len(em.y):
        sol[em.y] = [y_at.get(kn, 0) for kn in zip(em.y_class.tolist(), em.y_node.tolist())]
        sol[em.y_count] = y_on
    jobs, types = plan_pairs(em, placed, moves=False)  # as the debug and fill rows count them
    if len(em.d):
        from optalloc.model.constraints.fairshare import debug_jobs

        short = debug_jobs(snap)
        held = np.zeros((snap.org.n, len(snap.gpu_types)))
        s = short[jobs] & snap.job_tier1[jobs, types]
        np.add.at(held, (snap.job_project[jobs[s]], types[s]), snap.job_gpus[jobs[s]])
        sol[em.d] = np.minimum(held[em.d_org, em.d_type], em.lm.ub[em.d])
    if len(em.f):
        from optalloc.model.constraints.fill import fill_held

        sol[em.f] = fill_held(snap, em.fill, jobs, types)[em.f_org]
    if len(em.m):
        tg = em.tg
        got = tg.share_view(got_by_org(em, placed))
        b = tier_bounds(tg.share_floor, tg.share_target)  # (O, S, K+1)
        lo = np.concatenate([np.zeros(b.shape[:-1] + (1,)), np.cumsum(b, -1)[..., :-1]], -1)
        met = np.clip(got[:, :, None] - lo, 0, b)
        sol[em.m] = met[em.m_org, em.m_type, em.m_seg]
    return sol
