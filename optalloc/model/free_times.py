"""When the GPUs of the cluster come free, for the lookahead (optalloc.model.reservations):
each candidate start's hold (until when it would keep its GPUs if it started now), each
protected running job's hold on each of its nodes, every node's free time for s GPUs, and the
nodes a waiting gang would reserve (the ones that free together), and when the gang starts
once they are clear: a job stopped for it keeps its GPUs through its notice. The rules are in
models/formulation.md, "Reservations"."""

from __future__ import annotations

import numpy as np

from optalloc.contract import protection_s
from optalloc.model.order import scheme_above
from optalloc.model.requirements import WHOLE, Requirements
from optalloc.snapshot import Snapshot


def candidate_hold(snap: Snapshot, req: Requirements) -> np.ndarray:
    """(C,) when candidate c would stop holding its GPUs if it started now (module doc)."""
    return start_hold(snap, req.cand_job, req.cand_type)


def start_hold(snap: Snapshot, jobs, types) -> np.ndarray:
    """(len(jobs),) when job jobs[i] would stop holding its GPUs if it started now on type
    types[i]: its protection, or its expected end if sooner (allocated work); now for
    unallocated work, which may be preempted at once. A node reserved until a gang's start
    takes only starts that hold no later (optalloc.plan.nodepool.NodePool.allowed)."""
    cj, ct = np.asarray(jobs, np.int64), np.asarray(types, np.int64)
    if not len(cj):
        return np.zeros(0)
    prot = protection_s(snap.job_min_runtime[cj], snap.policy.min_runtime_cap_s)
    dur = _durations(snap)[cj] / np.maximum(snap.job_speed[cj, ct], 1e-9)
    run = np.where(np.isfinite(dur) & (dur > 0), np.minimum(prot, dur), prot)
    return np.where(snap.job_tier1[cj, ct], snap.now + run, snap.now)


def backfills(snap: Snapshot, req: Requirements, hold: np.ndarray, deadline: np.ndarray,
              a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """(len(a),) bool: job a, ahead in its team's order of candidate c's job (c on type t),
    may not use a node of t reserved until a gang's start where c may start (a would hold
    its GPUs on t past that start, c would not: `hold` (C,) per candidate, `deadline` (N,)
    per node, inf where none). There a no longer fits wherever c's job does, so their link
    goes and short work backfills the reserved nodes while long work waits (as the `order`
    rows' pairs go in optalloc.model.reservations; here type by type: a reservation on
    b200 keeps an h100 start behind its team's job ahead)."""
    out = np.zeros(len(a), bool)
    on = np.isfinite(deadline)
    if not on.any() or not len(a):
        return out
    ha = np.full((len(snap.jobs), len(snap.gpu_types)), -np.inf)  # a's hold on each type
    np.maximum.at(ha, (req.cand_job, req.cand_type), hold)
    t = req.cand_type[c]
    ha, hb = ha[a, t], hold[c]
    for tt, d in set(zip(snap.node_type[on].tolist(), deadline[on].tolist())):
        out |= (t == tt) & (hb <= d) & (d < ha)
    return out


def _durations(snap: Snapshot) -> np.ndarray:
    return np.array([np.nan if j.duration_s is None else float(j.duration_s) for j in snap.jobs],
                    dtype=float)


def _expected_ends(snap: Snapshot, jobs: np.ndarray) -> np.ndarray:
    """(len(jobs),) each running job's expected end, start + duration / speed on its type (nan
    where it gives no duration; a job without a start time started now, one at t=0 at 0)."""
    start = np.array([snap.now if snap.jobs[j].start_time is None else snap.jobs[j].start_time
                      for j in np.asarray(jobs).tolist()], dtype=float)
    speed = snap.job_speed[jobs, np.maximum(snap.job_run_type[jobs], 0)]
    return start + _durations(snap)[jobs] / np.maximum(speed, 1e-9)


def running_holds(snap: Snapshot, req: Requirements) -> tuple[np.ndarray, ...]:
    """(node, end, gpus, job) per (protected job, node) hold: until when each protected running
    job keeps a start off its GPUs on each node (its protection end, or its expected end if
    sooner and still ahead). Past that end it may be stopped: given notice, it keeps its GPUs
    through the grace (`expected_start`)."""
    pk = req.run_pair_k
    if not len(pk):
        z = np.zeros(0, np.int64)
        return z, np.zeros(0), z, z
    rj = req.run_job[pk]
    prot = snap.job_protected[rj]
    end = snap.job_protect_end[rj].astype(float)
    exp = _expected_ends(snap, rj)
    ahead = np.isfinite(exp) & (exp > snap.now)
    end = np.where(ahead, np.minimum(end, exp), end)
    sel = prot & np.isfinite(end)
    return req.run_pair_node[sel], end[sel], req.run_pair_gpus[sel], rj[sel]


def team_holds(snap: Snapshot, req: Requirements, holds: tuple[np.ndarray, ...],
               above: np.ndarray) -> tuple[np.ndarray, ...]:
    """`holds` (running_holds) as a gang of a project sees them: its team's running allocated
    jobs ranked above it (`above`, (J,) bool) are never stopped for it (DESIGN.md rule 3), so
    each holds its GPUs until its expected end when that is known and still ahead, else for
    good, protected or not; but one on a draining node leaves at its protection end anyway
    (rule 5), as `holds` has it."""
    above = above & ~snap.job_on_drain  # a job on a draining node leaves at its protection end
    pk = req.run_pair_k
    rj = req.run_job[pk] if len(pk) else np.zeros(0, np.int64)
    sel = above[rj] & snap.job_tier1[rj, req.run_type[pk]] if len(pk) else np.zeros(0, bool)
    if not sel.any():
        return holds
    hn, he, hg, hj = holds
    keep = ~above[hj]
    j = rj[sel]
    exp = _expected_ends(snap, j)
    end = np.where(np.isfinite(exp) & (exp > snap.now), exp, np.inf)
    return (np.r_[hn[keep], req.run_pair_node[sel]], np.r_[he[keep], end],
            np.r_[hg[keep], req.run_pair_gpus[sel]], np.r_[hj[keep], j])


def own_ends(snap: Snapshot, req: Requirements, more: tuple | None = None) -> "FreeTimes":
    """Free time of every node for s GPUs were nobody stopped: each running job there holds
    its GPUs until its expected end when known and still ahead, else for good; but one on a
    draining node leaves at its protection end (now when past it or unprotected) plus the
    grace at the latest (rule 5 stops it then, as optalloc.plan.drain reports). `more`:
    (node, end, gpus, job) holds of the plan's own starts to count beside them."""
    rj = req.run_job[req.run_pair_k]
    exp = _expected_ends(snap, rj) if len(rj) else np.zeros(0)
    end = np.where(np.isfinite(exp) & (exp > snap.now), exp, np.inf)
    drained = np.fmax(snap.job_protect_end[rj], snap.now) + snap.policy.grace_s
    end = np.where(snap.job_on_drain[rj], np.minimum(end, drained), end)
    holds = (req.run_pair_node, end, req.run_pair_gpus, rj)
    if more is not None:
        holds = tuple(np.concatenate([a, np.asarray(b, a.dtype)]) for a, b in zip(holds, more))
    return FreeTimes(snap, holds)


def start_end(snap: Snapshot, jobs, types) -> np.ndarray:
    """(len(jobs),) when each job would end on its own if it started now on types[i]: now +
    its duration / speed when known, else never (inf)."""
    cj, ct = np.asarray(jobs, np.int64), np.asarray(types, np.int64)
    if not len(cj):
        return np.zeros(0)
    dur = _durations(snap)[cj] / np.maximum(snap.job_speed[cj, ct], 1e-9)
    return np.where(np.isfinite(dur) & (dur > 0), snap.now + dur, np.inf)


def expected_start(snap: Snapshot, own: "FreeTimes", nodes: np.ndarray, sizes: np.ndarray,
                   clear: float) -> float:
    """When a gang starts whose `nodes` (each for `sizes` GPUs) are clear of protected work
    (and of its teammates ranked above it) at `clear`, their latest free time, when it is due
    (optalloc.model.reservations): then, where the jobs still there by then (`own`:
    own_ends) leave it room; else those get notice at `clear` and keep their GPUs through
    `policy.grace_s`, or leave sooner where they end on their own. The notice cannot come
    sooner: a protected job is stopped at its protection end at the earliest, and one past it
    only when the gang is due (the epoch's plan that starts it gives the notice)."""
    out = float(clear)
    lim = out + float(snap.policy.grace_s)
    for s in np.unique(sizes).tolist():
        out = max(out, float(np.minimum(own(int(s))[nodes[sizes == s]], lim).max()))
    return out


class FreeTimes:
    """Free time of every node for s GPUs (module doc), cached per s."""

    def __init__(self, snap: Snapshot, holds: tuple[np.ndarray, ...]):
        self.snap = snap
        pn, pe, pg, _ = holds
        order = np.lexsort((pe, pn))
        self.pn, self.pe, self.pg = pn[order], pe[order], pg[order]
        N = len(snap.nodes)
        self.total = np.bincount(self.pn, weights=self.pg, minlength=N)
        cum = np.cumsum(self.pg)
        first = np.r_[0, np.flatnonzero(np.diff(self.pn)) + 1] if len(self.pn) else np.zeros(0, int)
        base = np.repeat(cum[first] - self.pg[first], np.diff(np.r_[first, len(self.pn)]))
        self.after = self.total[self.pn] - (cum - base)  # busy once holds up to k have ended
        self._cache: dict[int, np.ndarray] = {}

    def __call__(self, s: int) -> np.ndarray:
        ft = self._cache.get(s)
        if ft is None:
            snap = self.snap
            room = snap.node_gpus - s
            ft = np.full(len(snap.nodes), np.inf)
            ok = self.after <= room[self.pn]
            np.minimum.at(ft, self.pn[ok], self.pe[ok])
            ft = np.where(self.total <= room, snap.now, ft)
            ft = np.where(snap.node_up & (room >= 0), ft, np.inf)
            self._cache[s] = ft
        return ft


def _window(ft: np.ndarray, gpus: np.ndarray, count: int, g: float) -> int:
    """Start of the best run of `count` consecutive nodes in free-time order (`ft` sorted):
    the one that frees together, least idle GPU-hours while the earlier ones wait for the
    last, sum (f_last - f_i) G_i, plus the gang's GPUs times how much later than the soonest
    possible start it begins, g (f_last - f_count)."""
    if len(ft) == count:
        return 0
    fg = np.cumsum(np.r_[0.0, ft * gpus])
    gg = np.cumsum(np.r_[0.0, gpus])
    k = np.arange(count - 1, len(ft))  # window ends
    idle = ft[k] * (gg[k + 1] - gg[k + 1 - count]) - (fg[k + 1] - fg[k + 1 - count])
    cost = idle + g * (ft[k] - ft[count - 1])
    return int(np.argmin(np.round(cost, 6)))


def choose_nodes(snap, req, j, t, free: FreeTimes, taken, prev_nodes):
    """(nodes, their free times, the GPUs it takes on each) for job j on type t, or None when
    its shape fits no up nodes that are not reserved yet. Per chunk kind, the nodes of the
    best window in free-time order (`_window`: the ones that free together, the soonest on a
    tie; ties in free time: the previous reservation's nodes, then node order)."""
    shape, size = int(req.shape[j, t]), int(req.size[j, t])
    pieces, rem = int(req.pieces[j, t]), int(req.rem[j, t])
    up_t = snap.node_up & (snap.node_type == t) & ~taken
    mask = up_t & ((snap.node_gpus == size) if shape == WHOLE else (snap.node_gpus >= size))
    chunks = [(mask, size, pieces)]
    if shape == WHOLE and rem:
        chunks.append((up_t & (snap.node_gpus >= rem), rem, 1))
    nodes, times, sizes = [], [], []
    g = float(snap.job_gpus[j])
    for m, s, count in chunks:
        ft = free(s)
        m = m.copy()
        m[nodes] = False
        cand = np.flatnonzero(m & np.isfinite(ft))
        if len(cand) < count:
            return None
        order = cand[np.lexsort((cand, ~prev_nodes[cand], ft[cand]))]
        if nodes:  # the remainder node: the last to free by the whole pieces' start (least
            # idle), else the soonest
            late = ft[order] <= max(times)
            a = int(np.flatnonzero(late)[-1]) if late.any() else 0
        else:
            a = _window(ft[order], snap.node_gpus[order].astype(float), count, g)
        pick = order[a:a + count]
        nodes += pick.tolist()
        times += ft[pick].tolist()
        sizes += [s] * len(pick)
    return np.asarray(nodes, np.int64), np.asarray(times, float), np.asarray(sizes, np.int64)


class TeamFree:
    """(holds, node free times) as a queued gang j sees them, cached per set of teammates:
    its team's running jobs ranked above it by the scheme's order (a higher priority, or its
    own submitted earlier) stay (team_holds); those of its priority submitted after it
    started only because it could not, and its reservation is its turn."""

    def __init__(self, snap: Snapshot, req: Requirements, holds: tuple):
        self.snap, self.req, self.holds = snap, req, holds
        self.base = FreeTimes(snap, holds)  # as another project's gang sees them
        self._cache: dict = {None: (holds, self.base)}

    def __call__(self, j: int) -> tuple:
        snap = self.snap
        above = (snap.job_running & (snap.job_project == snap.job_project[j])
                 & scheme_above(snap, np.arange(len(snap.jobs)), j))
        key = np.flatnonzero(above).tobytes()
        if key not in self._cache:
            th = team_holds(snap, self.req, self.holds, above)
            self._cache[key] = self._cache[None] if th is self.holds else (th, FreeTimes(snap, th))
        return self._cache[key]


def blockers(snap: Snapshot, req: Requirements, nodes: np.ndarray, holds: tuple) -> tuple:
    """((job index, hold end, held), ...): the running jobs on `nodes`, those that hold their
    GPUs (`holds` as the gang sees them: protected jobs, its teammates ranked above it) with
    the end of their hold, the others preemptible now."""
    pk = req.run_pair_k
    on = np.isin(req.run_pair_node, nodes)
    out = []
    ends = dict()
    pn, pe, _, pj = holds
    sel = np.isin(pn, nodes)
    for j, e in zip(pj[sel].tolist(), pe[sel].tolist()):
        ends[j] = max(ends.get(j, -np.inf), e)
    for j in sorted(set(req.run_job[pk[on]].tolist())):
        out.append((j, ends.get(j, snap.now), j in ends))
    return tuple(out)
