"""What the classification of every pending job (optalloc.plan.reasons) reads, computed once
per epoch: the holders after the plan, the first protection end per type, each project's
targets along its path, and the lines naming who holds what behind a level."""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.constraints.fairshare import debug_allowance, debug_jobs
from optalloc.model.constraints.fill import unallocated_held
from optalloc.model.keep_displaced import gave_way
from optalloc.model.order import project_order
from optalloc.plan.freemap import FitCounter, FreeMap
from optalloc.plan.holdings import Placed


class ReasonContext:
    """What the classification of every pending job reads, computed once per epoch."""

    def __init__(self, em: EpochModel, placed: Placed, got: np.ndarray,
                 reserved: np.ndarray | None = None):
        snap, req = em.snap, em.req
        self.em, self.got, self.placed = em, got, placed
        self.reserved = reserved  # the part of got that is waiting reserved gangs
        self.pos = project_order(snap)
        self.anc = snap.org.membership()
        # holders after the plan: (job, type) of kept and started jobs
        kj, kt = req.run_job[placed.kept], req.run_type[placed.kept]
        nj = np.fromiter(placed.placements.keys(), dtype=np.int64, count=len(placed.placements))
        tidx = {n: i for i, n in enumerate(snap.type_names)}
        nt = np.array([tidx[p.gpu_type] for p in placed.placements.values()], dtype=np.int64)
        self.hold_j = np.concatenate([kj, nj])
        self.hold_t = np.concatenate([kt, nt])
        # protected after the plan: kept jobs inside their protection (a restart elsewhere,
        # off a down or drain node or another type, is a new start like the others: its old
        # run's protection end is no time to wait for)
        prot = snap.job_protected[self.hold_j] & np.r_[np.ones(len(kj), bool),
                                                        np.zeros(len(nj), bool)]
        T = len(snap.gpu_types)
        self.prot = prot
        self.protected_gpus = np.bincount(self.hold_t[prot], weights=snap.job_gpus[
            self.hold_j[prot]], minlength=T)
        # the first end that frees GPUs new work may take: not that of a job all on drain
        # nodes (it leaves a node that takes nothing new; an outside judge, stop 52: "the
        # first protection ends at t=37800" named a drain node's job where the job waited
        # for the up node's, at t=48600)
        frees = prot.copy()
        for k in np.flatnonzero(prot & snap.job_on_drain[self.hold_j]).tolist():
            pl = snap.jobs[int(self.hold_j[k])].placement
            frees[k] = pl is not None and any(
                a.node in snap.node_index and snap.node_up[snap.node_index[a.node]]
                for a in pl.nodes)
        ends = np.where(frees, snap.job_protect_end[self.hold_j], np.nan)
        self.first_end = [float(np.nanmin(ends[self.hold_t == t])) if np.isfinite(
            ends[self.hold_t == t]).any() else None for t in range(T)]
        self._targets: dict = {}
        self._memo: dict = {}
        # per waiting job, per type: the running job of its project with a higher priority
        # that the plan preempts to the queue (not kept, moved or restarted), whose `keep_order`
        # rows hold the job back on that type this epoch (the first such, in link order); in
        # a plan that breaks such rows where their running job gave way (it starts a teammate
        # there: optalloc.model.keep_displaced), those rows hold nothing back, and the job
        # waits for what it waits for (a helper's case of stop 40: B_two was told the team's
        # order kept it off h100 while its priority-0 teammate B_small started there)
        self.behind: dict[int, dict[int, int]] = {}
        if len(em.keep_i):
            runs = placed.kept[em.keep_i] | np.isin(req.run_job[em.keep_i],
                                                   list(placed.placements))
            if (placed.started[em.keep_c] & ~runs).any():
                runs |= gave_way(em, em.keep_i, em.keep_c, placed.started, placed.kept,
                                 placed.placements)
            for i, c in zip(em.keep_i[~runs].tolist(), em.keep_c[~runs].tolist()):
                self.behind.setdefault(int(req.cand_job[c]), {}).setdefault(
                    int(req.cand_type[c]), int(req.run_job[i]))

    def holds_behind(self, p: int) -> bool:
        """Some waiting job of project p is held behind a teammate (`behind`): whether a job
        of p is depends on its priority."""
        projects = self.once("behind projects", lambda: {
            int(self.em.snap.job_project[j]) for j in self.behind})
        return p in projects

    def kept_unprotected(self, p: int, t: int) -> np.ndarray:
        """Project p's running jobs past their protection that the plan keeps where they run
        on t (in hold order), once per epoch: those team_above weighs."""
        def make():
            snap = self.em.snap
            mine, _ = self.own_holders(p, t)
            mine = mine[snap.job_running[mine] & ~snap.job_protected[mine]]
            return np.array([m for m in mine.tolist() if m not in self.placed.placements],
                            np.int64)

        return self.once(("kept unprotected", p, t), make)

    def runs_unprotected(self, p: int, types: list[int]) -> bool:
        """Project p has a running job past its protection kept where it runs on one of
        `types`: whether team_above finds it above a job depends on the job's priority."""
        return any(len(self.kept_unprotected(p, t)) for t in types)

    def held_behind(self, j: int, types: list[int], free: dict) -> tuple[str, str] | None:
        """(the teammate's id, the message) when on a type job j may use a job of its project
        ranked above it lost its GPUs this epoch and waits, and every other type it may use
        has fewer free GPUs than it needs: the team's order starts that one first (the
        model's keep_order rows forbid j's start there meanwhile), j after it; None
        otherwise. `free`: the pending details' free GPUs per type name."""
        behind = self.behind.get(j, {})
        snap = self.em.snap
        tn = snap.type_names
        size = int(snap.job_gpus[j])
        linked = [t for t in types if t in behind]
        # the other types it may use have too few free GPUs for it: the hold is the reason
        # (a helper's case: h100 held, a100 full; it was told a 2-GPU job does not fit beside
        # a free node of 4)
        if not linked or any(free[tn[t]]["free_gpus"] >= size for t in types if t not in behind):
            return None
        full = [tn[t] for t in types if t not in behind]
        t = max(linked, key=lambda u: free[tn[u]]["free_gpus"])
        a, job = snap.jobs[behind[t]], snap.jobs[j]
        head = f"{a.id} of project {job.project} (priority {a.priority} > {job.priority}) "
        gpus = f"{free[tn[t]]['free_gpus']} {tn[t]} GPUs are free" + "".join(
            f"; {u} has {free[u]['free_gpus']} free" for u in full)
        if not a.resumable:  # stopped, it ends: nobody to start first (a helper's case)
            return a.id, (
                f"{head}is stopped this epoch and, not resumable, ends; the team's order keeps "
                f"this {size}-GPU job off {tn[t]} this epoch, so that {a.id} is never stopped "
                f"for a job it ranks above, and starts it from the next ({gpus})")
        return a.id, (
            f"{head}lost its {tn[t]} GPUs this epoch and waits; the team's order starts it "
            f"first, and this {size}-GPU job after it ({gpus})")

    def starts_above(self, j: int, types: list[int], free: dict) -> tuple[list, str] | None:
        """(their ids, the message) when on a type job j may use, too few GPUs are free for
        it but enough would be without this epoch's starts of its teammates of a higher
        priority (a later-submitted job of its own priority waits for capacity, as in any
        line): the team's order starts them first (a helper's case at stop 42: a
        6-GPU job was told other projects' floors held h100 GPUs where there was no other
        project, while its team's priority-1 job took the b200 node). None otherwise."""
        snap = self.em.snap
        tn = snap.type_names
        g, p, prio = int(snap.job_gpus[j]), int(snap.job_project[j]), snap.job_priority[j]

        def make():  # project p's starts of queued jobs this epoch: (job, type), team order
            return sorted((int(snap.job_priority[e]), e, u) for e, u in self.new_starts(p))

        best = None
        for t in types:
            have = free[tn[t]]["free_gpus"]
            if have >= g:
                return None  # it is not the GPUs
            above = [e for q, e, u in self.once(("starts", p), make) if q > prio and u == t]
            held = int(snap.job_gpus[above].sum()) if above else 0
            if above and have + held >= g and (best is None or held > best[1]):
                best = (t, held, above)
        if best is None:
            return None
        t, held, above = best
        ids = [snap.jobs[e].id for e in above]
        return ids, (
            f"{', '.join(ids[:3])}{'...' if len(ids) > 3 else ''} of project "
            f"{snap.jobs[j].project} with a higher priority than {snap.jobs[j].priority}, "
            f"start{'s' if len(ids) == 1 else ''} on {tn[t]} this epoch with "
            f"{held} GPUs; the team's order starts {'it' if len(ids) == 1 else 'them'} first, and "
            f"this {g}-GPU job does not fit beside {'it' if len(ids) == 1 else 'them'} "
            f"({free[tn[t]]['free_gpus']} {tn[t]} GPUs are free)")

    def team_above(self, j: int, types: list[int], free: dict) -> tuple[list, str] | None:
        """(the teammates' ids, the message) when on no type job j may use as allocated work
        it fits the free GPUs after the plan, but on some it would with the GPUs of the
        running jobs of its project that the plan keeps where they run, past their
        protection and ranked above it in the team's order (a higher priority, or its own:
        running first): the team's order never stops a running job for a job it ranks below
        (optalloc.plan.team_order). None otherwise. `free`: free GPUs per type name."""
        snap = self.em.snap
        tn = snap.type_names
        g, p = int(snap.job_gpus[j]), int(snap.job_project[j])
        job = snap.jobs[j]
        best = None
        for t in types:
            if free[tn[t]]["free_gpus"] >= g:
                return None  # it is not the GPUs (the shape or the plan's order decides)
            k, above, held, room = self._above(p, t, int(self.pos[j]))
            if not len(above):
                continue

            def counter():  # reads the job's shape only
                on_t = np.zeros(len(tn), bool)
                on_t[t] = True
                fm = self.once("freemap", lambda: FreeMap.empty(snap))  # nodes, types, sizes
                return FitCounter(fm, job, on_t)

            # whether it fits reads only its shape, the type and the teammates above it
            # (the 16k-GPU bench epoch: 906 asked, 607 distinct, 57 shapes and types)
            shape = (g, job.gpus_per_node, t)
            if self.once(("fits", p, k) + shape,
                         lambda: self.once(("counter",) + shape, counter).fits_free(room)):
                if best is None or held > best[1]:
                    best = (t, held, above)
        if best is None:
            return None
        t, held, above = best
        ids = [snap.jobs[m].id for m in above.tolist()]
        return ids, (
            f"{held} {tn[t]} GPUs are held by running jobs of project {snap.jobs[j].project} "
            f"ranked above it in the team's order (priority, then running jobs, then submit "
            f"time): {', '.join(ids[:3])}{'...' if len(ids) > 3 else ''}; the team's order "
            f"never stops a running job for a job it ranks above, and this {g}-GPU job would "
            f"fit in their place ({free[tn[t]]['free_gpus']} {tn[t]} GPUs are free)")

    def _above(self, p: int, t: int, pos: int) -> tuple[int, np.ndarray, int, np.ndarray]:
        """(how many, which (in hold order), their GPUs, the free GPUs per node with theirs
        added to the plan's): project p's kept_unprotected jobs on t ranked above team
        position `pos`; once per epoch per such set (it is the first k by position)."""
        mine = self.kept_unprotected(p, t)
        ranks = self.once(("ranks", p, t), lambda: np.sort(self.pos[mine]))
        k = int(np.searchsorted(ranks, pos))  # how many rank above pos

        def make():
            snap = self.em.snap
            above = mine[self.pos[mine] < pos]
            room = self.placed.free.astype(np.int64)
            for m in above.tolist():
                for a in snap.jobs[m].placement.nodes:
                    room[snap.node_index[a.node]] += len(a.gpus)
            return k, above, int(snap.job_gpus[above].sum()), room

        return self.once(("above", p, t, k), make)

    def once(self, key, make):
        """make(), once per epoch per key: what reads only the plan and the model (a line
        naming who holds what, the holders of a level), the same for every pending job."""
        out = self._memo.get(key)
        if out is None:
            out = self._memo[key] = make()
        return out

    def reserved_outside(self, o: int, t: int) -> list[str]:
        """The projects outside o's subtree with waiting reserved gangs on t."""
        if self.reserved is None:
            return []
        snap = self.em.snap
        out = snap.org.is_leaf & ~snap.org.membership()[o] & (self.reserved[:, t] > 1e-9)
        return [snap.org.names[v] for v in np.flatnonzero(out)]

    def new_starts(self, p: int) -> list[tuple[int, int]]:
        """Project p's queued jobs that the plan starts this epoch: (job, type), in placement
        order; every project's made in one pass, once per epoch."""
        def make():
            snap = self.em.snap
            tidx = {n: i for i, n in enumerate(snap.type_names)}
            out: dict[int, list] = {}
            for e, pl in self.placed.placements.items():
                if not snap.job_running[e]:
                    out.setdefault(int(snap.job_project[e]), []).append((e, tidx[pl.gpu_type]))
            return out

        return self.once("new starts", make).get(p, [])

    def lower_starts(self, p: int, t: int, prio: int) -> np.ndarray:
        """Allocated jobs of project p with a priority below `prio` that the plan starts on
        t (not running ones it keeps or moves), in placement order."""
        snap = self.em.snap
        mine = self.once(("new", p, t), lambda: np.array(
            [e for e, u in self.new_starts(p) if u == t and snap.job_tier1[e, u]], np.int64))
        return mine[snap.job_priority[mine] < prio]

    def higher_starts(self, p: int, t: int, prio: int) -> np.ndarray:
        """Allocated jobs of project p with a priority above `prio` that the plan starts on t
        (not running ones it keeps or moves), in placement order."""
        mine = self.lower_starts(p, t, np.iinfo(np.int64).max)
        return mine[self.em.snap.job_priority[mine] > prio]

    def project_starts(self, p: int) -> bool:
        """Some queued job of project p starts this epoch: whether a waiting job of p is held
        by its teammates' starts (starts_above) then depends on its priority, so jobs alike of
        other priorities do not share its reason (fresh draws at stop 44)."""
        return bool(self.new_starts(p))

    def has_lower_starts(self, p: int, t: int) -> bool:
        """Some allocated job of p starts on t this epoch: a waiting job's reason then
        depends on its priority (lower_starts), so jobs alike of other priorities do not
        share it."""
        return bool(len(self.lower_starts(p, t, np.iinfo(np.int64).max)))

    def debug_room(self, j: int, t: int) -> tuple[float, float] | None:
        """(allowance, held) where queued job j is a debug job that earns its project's debug
        allowance on t (fairshare.debug_jobs) and the allowance has room for it after the
        plan: the GPUs its project's debug jobs may hold beyond its fair-share target, and
        those they hold. None where it is not such a job, or the allowance is full."""
        def make():
            snap = self.em.snap
            short = debug_jobs(snap)
            hj, ht = self.hold_j, self.hold_t
            sel = short[hj] & snap.job_tier1[hj, ht]
            held = np.zeros((snap.org.n, len(snap.gpu_types)))
            np.add.at(held, (snap.job_project[hj[sel]], ht[sel]), snap.job_gpus[hj[sel]])
            return short, debug_allowance(snap), held

        short, allow, held = self.once("debug room", make)
        snap = self.em.snap
        p = int(snap.job_project[j])
        if not short[j] or allow[p, t] - held[p, t] < snap.job_gpus[j] - 1e-9:
            return None
        return float(allow[p, t]), float(held[p, t])

    def rest_split(self, p: int, t: int) -> tuple[float, float, float]:
        """The GPUs of t that jobs outside their protection hold after the plan: (project
        p's own allocated jobs, other projects' allocated jobs, unallocated work)."""
        def make():
            snap = self.em.snap
            j, on = self.hold_j, (self.hold_t == t) & ~self.prot
            alloc = snap.job_tier1[j, self.hold_t]
            mine = snap.job_project[j] == p
            g = snap.job_gpus[j].astype(float)
            return (float(g[on & alloc & mine].sum()), float(g[on & alloc & ~mine].sum()),
                    float(g[on & ~alloc].sum()))

        return self.once(("rest", p, t), make)

    def lists(self) -> tuple[list, list]:
        """(got, the targets) as nested Python lists, once per epoch (the classification
        compares them level by level for every distinct pending job)."""
        return self.once("lists", lambda: (self.got.tolist(), self.em.target.tolist()))

    def own_holders(self, p: int, t: int) -> tuple[np.ndarray, np.ndarray]:
        """(allocated jobs of project p holding GPUs of t after the plan, their priorities), in
        hold order, once per epoch."""
        def make():
            snap = self.em.snap
            # allocated holders only: unallocated work holds none of the project's share
            mine = self.hold_j[(self.hold_t == t) & (snap.job_project[self.hold_j] == p)
                               & snap.job_tier1[self.hold_j, self.hold_t]]
            return mine, snap.job_priority[mine]

        return self.once(("own", p, t), make)

    def unallocated_gpus(self, t: int) -> float:
        """GPUs of t that unallocated work holds after the plan, once per epoch."""
        def make():
            snap = self.em.snap
            low = (self.hold_t == t) & ~snap.job_tier1[self.hold_j, self.hold_t]
            return float(snap.job_gpus[self.hold_j[low]].sum())

        return self.once(("unallocated", t), make)

    def fill(self) -> tuple[np.ndarray, np.ndarray]:
        """((O,) each project's fill target of idle GPUs for unallocated work, (O,) the GPUs of
        unallocated work it holds after the plan), once per epoch."""
        def make():
            snap = self.em.snap
            held = unallocated_held(snap, self.hold_j, self.hold_t)
            return (self.em.fill if len(self.em.fill) else np.zeros(snap.org.n)), held

        return self.once("fill", make)

    def fill_ahead(self, p: int) -> str:
        """Why project p's share of the idle GPUs is below one GPU, as far as it is true:
        projects ahead of it in the Fair-Tree order share them, running unallocated work of
        others holds them (new unallocated work never displaces it), or both. Once per epoch
        per project."""
        def make():
            fill, held = self.fill()
            snap, order = self.em.snap, self.em.imp.order
            leaf = np.asarray(snap.org.is_leaf) & (np.arange(len(fill)) != p)
            ahead = bool((leaf & (order > order[p]) & (fill > 0)).any())
            holds = bool((leaf & (held > 0)).any())
            if ahead and holds:
                return (" (projects ahead of it in that order share them, and running "
                        "unallocated work of others holds some: new unallocated work never "
                        "displaces it)")
            if ahead:
                return " (projects ahead of it in that order want them all)"
            if holds:
                return (" (running unallocated work of others holds them: new unallocated "
                        "work never displaces it)")
            return ""

        return self.once(("fill ahead", p), make)

    def targets(self, p: int, types: tuple) -> tuple[list[int], dict]:
        """(project p's path below the root, its details["targets"] on `types`), once per
        epoch: the same for every pending job of p on those types (shared, never mutated)."""
        out = self._targets.get((p, types))
        if out is None:
            em, got, snap = self.em, self.got, self.em.snap
            path = [snap.org.index[nm] for nm in snap.org.path(snap.org.names[p])[1:]]
            tn = snap.type_names
            res = self.reserved  # the part of got that is waiting reserved gangs, where any
            out = self._targets[(p, types)] = (path, {
                tn[t]: [{"org": snap.org.names[o], "got": float(got[o, t]),
                         "target": float(em.target[o, t]), "floor": float(em.floor[o, t]),
                         **({"reserved": float(res[o, t])}
                            if res is not None and res[o, t] > 1e-9 else {})}
                        for o in path] for t in types})
        return out
