"""Phase 2a of an epoch: reservations for large gangs (the lookahead; models/formulation.md,
"Reservations").

Protected minimum runtimes fragment capacity: a gang of 64 whole nodes waits for a moment when
64 nodes are free or preemptible at once, and an epoch solved alone never makes one (each node
whose protection ends gets new protected work at once). So each epoch this phase chooses, from
the snapshot alone (deterministic: a reservation is stable from epoch to epoch), a few waiting
gangs that rank high enough in the fair-share order, and for each a set of nodes and an
expected start. The model then keeps new long work off those nodes, and starts the gang once
nothing protected is left there.

* **Candidates**: queued allocated multi-node gangs (whole nodes or per-node pieces) that are
  large (>= LARGE_GPUS GPUs or >= LARGE_NODES nodes) or cannot start now (their soonest nodes
  still hold protected work), with no job of their own project ahead of them in line waiting
  (the `order` rows would forbid the start; that job goes first).
* **Rank**: at every level of the project's path, either (share) the fair share has room for
  the gang on the type when its nodes are clear, S (Start, below): max(target, floor) -
  held(S) - GPUs already reserved there >= its GPUs, where the target is the water-filling's
  once today's protections have ended (`Targets.unprotected`: protected GPUs are not lower
  bounds, a reservation is about the moment they end) and held(S) the GPUs the subtree's
  protected jobs, and the gang's teammates ranked above it (Nodes, below), still hold at S
  (its other running work has ended or lost protection by then, and the gang is ahead of its
  queued work in line; counting everything it runs now let a busy project's later small jobs
  keep its head-of-line gang out for good); or (budget) its unused share over the lookback
  window pays for it: usage ratio + (the gang's protected run, GPUs x
  protection x billing weight, + the idle GPU-hours its reservation has held so far + what
  reservations chosen before it commit there, + the idle GPU-hours the subtree's ended
  reservations held, within the window: optalloc.model.reservation_idle) / entitled
  GPU-hours over the window <= 1.
  The first lets a gang start within what the project may hold now; the second a gang larger
  than any instantaneous share (a 64-GPU job on a 104-GPU cluster) spend the share its
  project left unused, as the scheme's "unused share flows" does over time. Either way a
  project cannot reserve more than its share, however large the jobs it submits.
* **Keeping one**: a reservation already held keeps its place in its project's line (jobs of
  equal priority queued again ahead of it, requeued with their older submit time, no longer
  block it: the model drops those `order` rows; a higher priority still goes first, a
  larger gang of its project too where it qualifies itself: `_ahead`) and
  qualifies with KEEP_SLACK (25%) slack in the rank test (hysteresis: dropping it wastes the
  idle time it has held).
* **Order**: the previous plan's reservations first, while they still qualify (stability);
  then new ones, those that pass the share test before those that pass only the budget test
  (a claim within the project's share before a loan of unused share, as the objective serves
  floors and targets before the rest), each by the Fair-Tree rank of the project, then the
  project's own order; one per project and at most `policy.max_reservations` in all (0 turns
  the lookahead off).
* **Nodes**: for the chunks of the gang's shape (whole nodes of the type's largest size, or
  gpus_per_node pieces) the run of up, not yet reserved nodes of its type, in order of their
  free time, that frees together: least idle GPU-hours while the earlier ones wait for the
  last, plus the gang's GPUs times the delay against the soonest possible start (ties: the
  soonest; in free time: the previous reservation's nodes, then node order); the remainder node
  of 8+8+4 is the last to free by then. A reservation keeps its nodes unless others let it
  start an epoch sooner. Node n is free for s GPUs at the first moment the GPUs still held past it by
  protected jobs leave s free. A protected job holds its GPUs until its protection ends, or its
  expected end (start + duration / speed) when that comes first; unprotected and unallocated
  work is preemptible now. The gang's own team's running jobs ranked above it (a higher
  priority, or its own submitted earlier) are never stopped for it: they hold until their
  expected end, or for good (`free_times.team_holds`).
* **Start**: the chosen nodes are *clear* (nothing protected left) at their latest free time;
  then the reservation is *due*: its gang starts that epoch (the model's `x` gets lower bound
  1; the jobs on its nodes are past their protection: always feasible, no protection broken),
  the jobs still there get notice and keep their GPUs through `policy.grace_s` (or end sooner
  on their own): the expected start (`free_times.expected_start`; until stop 55 the clear
  time, early by the grace). The clear time is the nodes' deadline (below).

A new job's *hold*, if it started now: now + its protection (min(min_runtime, cap)), or its
expected run (duration / speed) when known and shorter; now for unallocated work. On a node
clear at S only holds <= S start (optalloc.model.constraints.lookahead, the placement): one
ends by then or leaves with the gang's notice; a later one would put the due epoch off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from optalloc.contract import protection_s
from optalloc.model.job_groups import precedence_pairs
from optalloc.model.order import fair_tree_rank, project_order
from optalloc.model.requirements import SMALL, Requirements
from optalloc.model.free_times import (TeamFree, blockers, candidate_hold, choose_nodes,
                                       expected_start, own_ends, running_holds)
from optalloc.model.reservation_idle import (
    charged_by_org,
    committed,
    ended_idle,
    idle_so_far,
)
from optalloc.model.targets import Targets, horizons
from optalloc.snapshot import Snapshot

LARGE_GPUS = 64  # the metrics' large class (optalloc.sim.metrics.LARGE_GPUS)
LARGE_NODES = 8
KEEP_SLACK = 0.25  # a reservation already held keeps qualifying with 25% slack (hysteresis)


@dataclass(frozen=True, eq=False)
class Held:
    """One reservation in model coordinates."""

    job: int
    type: int
    nodes: np.ndarray  # node indices, in the order of the shape's chunks
    start: float  # expected start: clear, plus the notice of the jobs still there then
    due: bool  # clear <= now: the gang starts this epoch (start: now)
    clear: float  # the latest free time of its nodes: its due time, the nodes' deadline
    since: float  # the epoch it was first made
    free: np.ndarray  # free time of each node (same order)
    blockers: tuple  # ((job index, hold end, protected), ...) running on its nodes now
    idle_gpu_h: float = 0.0  # GPU-hours its nodes were held idle in earlier plans
    test: str = "share"  # which rank test it passed: share (room now) or budget (window)
    sizes: np.ndarray | None = None  # GPUs it needs on each node (same order)


@dataclass(frozen=True)
class Ended:
    """A previous reservation not continued this epoch, and why (ReservationEnd outcomes)."""

    prev: object  # the previous plan's optalloc.types.Reservation
    outcome: str
    message: str


@dataclass(frozen=True, eq=False)
class Reservations:
    held: tuple = ()  # (Held, ...) in the order chosen
    ended: tuple = ()  # (Ended, ...) previous reservations that stop here
    deadline: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (N,) inf: not reserved
    hold: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (C,) candidates' hold end
    forced: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # (C,) must start
    prec: tuple | None = None  # the order pairs (a, b), computed here once for the model

    @cached_property
    def blocking(self) -> bool:
        """Some node is reserved for a gang that does not start this epoch (once: the
        placement asks for every job it places)."""
        return bool(np.isfinite(self.deadline).any())

    def holding(self, snap: Snapshot, started_jobs) -> np.ndarray:
        """(O, T) GPUs the reservations count as held by their projects' subtrees (leaf and
        ancestors, root excluded) when their gangs do not start (`started_jobs`: job
        indices that start or run after the plan)."""
        O, T = snap.org.n, len(snap.gpu_types)
        out = np.zeros((O, T))
        on = set(int(j) for j in started_jobs)
        M = snap.org.membership()
        for h in self.held:
            if h.job in on or h.due:  # a due gang starts (x forced): no holding, as in the rows
                continue
            p = int(snap.job_project[h.job])
            out[M[:, p], h.type] += float(snap.job_gpus[h.job])
        out[0] = 0.0
        return out


def compute_reservations(snap: Snapshot, req: Requirements, tg: Targets) -> Reservations:

    N, C = len(snap.nodes), len(req.cand_job)
    deadline = np.full(N, np.inf)
    forced = np.zeros(C, bool)
    prev = snap.previous_reservations
    cap = int(snap.policy.max_reservations)
    placeable = set(req.cand_job.tolist())
    if cap <= 0 or not C:
        ended = tuple(Ended(r, "off" if cap <= 0 else _gone(snap, r, placeable)[0],
                            "the policy turned the lookahead off (max_reservations 0)"
                            if cap <= 0 else _gone(snap, r, placeable)[1]) for r in prev)
        return Reservations((), ended, deadline, np.zeros(C), forced, None)
    prec = precedence_pairs(snap, req)
    cj, ct = req.cand_job, req.cand_type
    nodes_needed = np.where(req.shape[cj, ct] == SMALL, 1,
                            req.pieces[cj, ct] + (req.rem[cj, ct] > 0))
    gang = (nodes_needed >= 2) & snap.job_tier1[cj, ct] & ~snap.job_running[cj]
    waiting_pred = np.isin(cj, prec[1])
    # a reservation already held keeps its place in its project's line against jobs of equal
    # priority that queue again ahead of it (requeued, with their older submit time); only a
    # higher priority goes first
    prio = snap.job_priority
    higher_pred = np.isin(cj, prec[1][prio[prec[0]] > prio[prec[1]]])
    large = (snap.job_gpus[cj] >= LARGE_GPUS) | (nodes_needed >= LARGE_NODES)
    hold = candidate_hold(snap, req)

    # budget over the window: entitled GPU-hours E (billing-weighted) and usage ratio r
    window_s, _ = horizons(snap)
    bw = np.array([g.billing_weight for g in snap.gpu_types], dtype=float)
    cap_t = snap.capacity_by_type(up_only=True).astype(float)
    E = snap.org.entitlement @ (cap_t * bw) * window_s / 3600.0
    ratio = np.nan_to_num(np.asarray(snap.usage_ratio, float), nan=np.inf)
    prot_h = protection_s(snap.job_min_runtime, snap.policy.min_runtime_cap_s) / 3600.0
    past = charged_by_org(snap)  # idle GPU-hours of the subtree's ended reservations
    ended_ids: set[str] = set()
    # the fair share a gang must fit: max(target once protections end, target, floor), less
    # what the subtree's protected jobs still hold at the gang's expected start
    O = snap.org.n
    M = snap.org.membership()
    share = tg.unprotected if tg.unprotected.shape == tg.target.shape else tg.target
    entitled = np.maximum(np.maximum(share, tg.target), tg.floor)
    holds = running_holds(snap, req)

    def held_at(hs: tuple, lv: np.ndarray, t: int, when: float) -> np.ndarray:
        """(len(lv),) GPUs of type t that the holds `hs` (protected jobs, and the gang's team
        ranked above it) under each org node of `lv` still hold at `when` (the rest of what
        the subtree runs now has ended or lost protection)."""
        h_node, h_end, h_gpus, h_job = hs
        sel = (snap.node_type[h_node] == t) & (h_end > when)
        leaf_t = np.bincount(snap.job_project[h_job[sel]], weights=h_gpus[sel], minlength=O)
        return M[lv].astype(float) @ leaf_t

    rank = fair_tree_rank(snap)
    pos = project_order(snap)
    speed = snap.job_speed
    prev_by_job = {r.job_id: r for r in prev}
    taken = np.zeros(N, bool)
    held: list[Held] = []
    projects: set[int] = set()
    why: dict[str, tuple[str, str]] = {}

    free_for = TeamFree(snap, req, holds)
    own = own_ends(snap, req)

    def path(p: int) -> np.ndarray:
        return np.flatnonzero(M[1:, p]) + 1

    def attempt(c_list, prev_r, only: str = "") -> tuple[Held | None, tuple[str, str]]:
        """The first candidate (j, t) of `c_list` that qualifies (by the rank test `only`
        when given), else why not."""
        reason = ("outranked", "")
        for c in c_list:
            j, t = int(cj[c]), int(ct[c])
            g = float(snap.job_gpus[j])
            p = int(snap.job_project[j])
            if (higher_pred if prev_r is not None else waiting_pred)[c]:
                if prev_r is not None:  # say which (only for a reservation that ends here)
                    ahead = [snap.jobs[a].id for a in prec[0][(prec[1] == j)
                                                              & (prio[prec[0]] > prio[j])][:3]]
                    reason = ("order", f"a job of project {snap.jobs[j].project} ahead of it "
                              f"in line waits ({', '.join(ahead)}): it goes first")
                continue
            lv = path(p)
            idle = idle_so_far(prev_r, snap.now)
            # (one that ended this epoch and is tried again has it in `past`: ended_idle below)
            own_idle = 0.0 if prev_r is not None and prev_r.job_id in ended_ids else idle
            # the nodes first: the share test reads what the subtree still holds when they free
            pn = np.zeros(N, bool)
            if prev_r is not None and prev_r.gpu_type == snap.type_names[t]:
                pn[[snap.node_index[n] for n in prev_r.nodes if n in snap.node_index]] = True
            hj, fj = free_for(j)
            got = choose_nodes(snap, req, j, t, fj, taken, pn)
            if got is not None and pn.any():
                # a reservation keeps its nodes unless others let it start an epoch sooner
                kept = choose_nodes(snap, req, j, t, fj, taken | ~pn, pn)
                if kept is not None and got[1].max() >= kept[1].max() - snap.policy.epoch_s:
                    got = kept
            if got is None:
                reason = ("unplaceable", f"its shape fits no {snap.type_names[t]} nodes that are "
                          "up and not reserved for another gang")
                if fj is not free_for.base and choose_nodes(snap, req, j, t, free_for.base,
                                                            taken, pn) is not None:
                    reason = ("order", f"running jobs of project {snap.jobs[j].project} ranked "
                              f"above it hold the {snap.type_names[t]} nodes it needs with no "
                              "known end (they are never stopped for it)")
                continue
            nodes, times, sizes = got
            start = float(times.max())
            at = max(start, snap.now)  # held: still protected when its nodes are clear
            short = (entitled[lv, t] - held_at(hj, lv, t, at) - _reserved(held, snap, M, lv, t)
                     - g)
            cost = (g * prot_h[j] * bw[t] + own_idle * bw[t] + past[lv]
                    + committed(held, snap, M, lv, prot_h, bw))
            after = ratio[lv] + np.divide(cost, E[lv], out=np.full(len(lv), np.inf),
                                          where=E[lv] > 0)
            slack = KEEP_SLACK if prev_r is not None else 0.0
            test = "share" if (short + slack * g >= -1e-9).all() else \
                "budget" if (after <= 1.0 + slack).all() else ""
            if only and test and test != only:
                continue
            if not test:
                o = int(lv[int(np.argmin(short))])
                ob = int(lv[int(np.argmax(after))])
                reason = ("outranked", f"{snap.org.names[o]} has room for "
                          f"{max(g + float(short.min()), 0):g} more {snap.type_names[t]} GPUs in "
                          f"its fair-share target ({entitled[o, t]:g} once protections end) "
                          "beside what its protected jobs still hold at the gang's expected "
                          f"start, the gang needs {g:g}; and its protected run"
                          + (f", with {own_idle * bw[t] + past[ob]:.0f} GPU-hours its "
                             "reservations have held idle in the window,"
                             if own_idle * bw[t] + past[ob] > 0.05 else "")
                          + f" would take {snap.org.names[ob]}'s usage ratio over the window to "
                          f"{float(after.max()):.2f} (> {1.0 + slack:g}"
                          + (", the slack a reservation already held keeps" if slack else "")
                          + ")")
                continue
            if start <= snap.now and not large[c] and prev_r is None:
                reason = ("outranked", "it can start now without a reservation")
                continue
            since = snap.now if prev_r is None or prev_r.since is None else float(prev_r.since)
            due = start <= snap.now  # a due gang starts now; else once the notice is over
            return Held(j, t, nodes, snap.now if due else expected_start(
                snap, own, nodes, sizes, start), due, at, since, times,
                        blockers(snap, req, nodes, hj), idle, test, sizes), ("", "")
        return None, reason

    by_job: dict[int, list[int]] = {}
    for c in np.flatnonzero(gang).tolist():
        by_job.setdefault(int(cj[c]), []).append(c)

    def cands_of(j: int) -> list[int]:
        return sorted(by_job.get(j, []), key=lambda c: (-speed[j, ct[c]], ct[c]))

    def _ahead(j: int) -> int | None:
        """A waiting gang of j's project with a higher priority that would qualify itself (a
        kept reservation keeps its place against equal priorities only; a larger gang ahead
        has no `order` pair with it, as it does not fit its place: a helper's case at stop
        58 kept a priority-0 16-GPU gang's reservation while its priority-1 24-GPU teammate
        waited behind it)."""
        p = int(snap.job_project[j])
        for a in sorted((a for a in by_job if a != j and int(snap.job_project[a]) == p
                         and prio[a] > prio[j]), key=lambda a: (pos[a], a)):
            if attempt(cands_of(a), prev_by_job.get(snap.jobs[a].id))[0] is not None:
                return a
        return None

    # 1. the previous plan's reservations, while they still qualify
    for r in prev:
        j = snap.job_index.get(r.job_id)
        if j is None or snap.job_running[j]:
            continue
        if len(held) >= cap or int(snap.job_project[j]) in projects:
            why[r.job_id] = ("outranked", f"the cap of {cap} reservations is taken")
            continue
        h, reason = attempt(cands_of(j), r)
        if h is not None and (a := _ahead(j)) is not None:
            h, reason = None, ("order", f"a job of project {snap.jobs[j].project} ahead of it "
                               f"in line waits ({snap.jobs[a].id}): it goes first")
        if h is None:
            why[r.job_id] = reason
            continue
        held.append(h)
        projects.add(int(snap.job_project[j]))
        taken[h.nodes] = True
    # the idle time of the previous reservations that end here counts against their projects
    # in this epoch's tests already (from the next epoch on, the plan's ReservationIdle
    # records do): a gang cancelled and resubmitted between two epochs reserved again as if
    # its old reservation had held nothing (an outside judge, stop 59)
    continued = {snap.jobs[h.job].id for h in held}
    ended_ids.update(r.job_id for r in prev if r.job_id not in continued)
    past += ended_idle(snap, [r for r in prev if r.job_id in ended_ids])
    # 2. new ones: share-test gangs, then budget-test ones ("Order" above), each by the
    #    Fair-Tree rank of the project, then the project's own order; a gang whose project
    #    has a higher-priority gang that qualifies either way waits for it (rule 3: the
    #    share pass took the lower-priority gang's share test first, every epoch)
    jobs = sorted(by_job, key=lambda j: (rank[snap.job_project[j]], pos[j], j))
    for only in ("share", ""):
        for j in jobs:
            if len(held) >= cap:
                break
            p = int(snap.job_project[j])
            if p in projects or any(h.job == j for h in held):
                continue
            if only and _ahead(j) is not None:
                continue
            h, _ = attempt(cands_of(j), prev_by_job.get(snap.jobs[j].id), only)
            if h is not None:
                held.append(h)
                projects.add(p)
                taken[h.nodes] = True
                if snap.jobs[j].id in ended_ids:  # made again: `committed` counts its idle
                    past -= ended_idle(snap, [prev_by_job[snap.jobs[j].id]])
                    ended_ids.discard(snap.jobs[j].id)
    # the previous reservations not continued, and why
    chosen = {snap.jobs[h.job].id for h in held}
    ended = []
    for r in prev:
        if r.job_id in chosen:
            continue
        j = snap.job_index.get(r.job_id)
        if j is None or snap.job_running[j] or j not in placeable:
            outcome, msg = _gone(snap, r, placeable)
        else:
            outcome, msg = why.get(r.job_id, ("outranked", "higher-ranked gangs hold the "
                                              f"{cap} reservations"))
        ended.append(Ended(r, outcome, msg))
    for h in held:
        if h.due:
            forced[(cj == h.job) & (ct == h.type)] = True
        else:
            deadline[h.nodes] = h.clear
    # the held gangs' place in line (above): no order row behind equal-priority jobs
    mine = np.isin(prec[1], [h.job for h in held]) & (prio[prec[0]] <= prio[prec[1]])
    # a job ahead that may not use a reserved node its follower may (it holds its GPUs past
    # the gang's start, the follower does not) no longer fits wherever the follower does:
    # its pair goes, so short work backfills the reserved nodes while long work waits
    ds = np.unique(deadline[np.isfinite(deadline)])
    if len(ds) and len(prec[0]):
        job_hold = np.full(len(snap.jobs), -np.inf)
        np.maximum.at(job_hold, cj, hold)
        ha, hb = job_hold[prec[0]][:, None], job_hold[prec[1]][:, None]
        mine |= ((hb <= ds) & (ds < ha)).any(axis=1)
    prec = (prec[0][~mine], prec[1][~mine])
    return Reservations(tuple(held), tuple(ended), deadline, hold, forced, prec)


def _reserved(held: list, snap: Snapshot, M: np.ndarray, levels: np.ndarray, t: int):
    """(len(levels),) GPUs already reserved on type t under each org node of `levels`."""
    out = np.zeros(len(levels))
    for h in held:
        if h.type == t:
            out += M[levels, int(snap.job_project[h.job])] * float(snap.job_gpus[h.job])
    return out


def _gone(snap: Snapshot, r, placeable: set) -> tuple[str, str]:
    """Why a reservation whose job is no longer a candidate ended: cancelled, started, or its
    shape fits no up nodes of its types (down or drained under it)."""
    j = snap.job_index.get(r.job_id)
    if j is None:
        return "cancelled", f"job {r.job_id} left the queue before it started"
    if snap.job_running[j]:
        return "started", f"job {r.job_id} is running"
    if j not in placeable:
        return "unplaceable", (f"its shape fits no up nodes of its allowed types any more "
                               "(it waits for nodes to come back)")
    return "outranked", "no longer a candidate"


__all__ = ["LARGE_GPUS", "LARGE_NODES", "Held", "Reservations", "candidate_hold",
           "compute_reservations", "idle_so_far", "running_holds"]
