"""Placement step 5: restore + backfill (lazy greedy in marginal objective per GPU)."""

from __future__ import annotations

import heapq

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.keep_displaced import gave_way
from optalloc.model.constraints.fairshare import debug_jobs
from optalloc.model.objective.impact import candidate_values
from optalloc.model.requirements import cand_counted
from optalloc.plan.fit import alloc, chunks, hold_of, nodes_for
from optalloc.plan.group_tops import group_tops
from optalloc.plan.share_gain import ShareGain

__all__ = ["ShareGain", "candidates_by_job", "restore_and_backfill", "value_groups"]


REOPEN_PASSES = 3  # passes after one whose evictions freed more room than they took


def candidates_by_job(em: EpochModel) -> tuple[dict, dict, dict, dict, dict, dict]:
    """Per job with candidates: its candidates, best work value first (stable), their (value,
    ShareGain key) and their types; per job its `order` predecessors; per candidate the
    running jobs it starts only beside (`keep_order`, positions in req.run_job) and the jobs
    it starts only after (`order_types`). Once per model
    (every placement of its candidate plans reads them, none changes them), as plain Python
    lists (element access into numpy arrays cost more in the backfill), sliced per job from
    one numpy grouping (a Python loop over XL's 67,000 candidates took twice as long)."""
    out = em.__dict__.get("_candidates_by_job")
    if out is not None:
        return out
    snap, req = em.snap, em.req
    value = candidate_values(em.imp, req)
    # grouped by job, best value first within a job: the value order, stably sorted by job
    order = np.argsort(-value, kind="stable")
    order = order[np.argsort(req.cand_job[order], kind="stable")]
    cj, ct = req.cand_job[order], req.cand_type[order]
    first = np.flatnonzero(np.r_[True, cj[1:] != cj[:-1]]) if len(order) else order
    bounds = list(zip(cj[first].tolist(), first.tolist(), first[1:].tolist() + [len(order)]))
    # per type, a move: no share gain; a restart: none (requirements.cand_counted); and
    # neither in a debug row
    on = cand_counted(snap, req, em.tg.pooled)[order]
    short = debug_jobs(snap)[cj] & cand_counted(snap, req)[order]
    keys = [(p, t, g, s) if o else None  # ShareGain.key
            for p, t, g, s, o in zip(snap.job_project[cj].tolist(), ct.tolist(),
                                     snap.job_gpus[cj].astype(float).tolist(),
                                     short.tolist(), on.tolist())]
    cs, ts = order.tolist(), ct.tolist()
    pairs = list(zip(value[order].tolist(), keys))
    by_job = {j: cs[a:b] for j, a, b in bounds}
    vk = {j: pairs[a:b] for j, a, b in bounds}
    types_of = {j: ts[a:b] for j, a, b in bounds}
    preds = _lists_by(em.prec_b, em.prec_a)  # per job: its `order` predecessors
    # per candidate: the running jobs (req.run_job positions) it may start only beside
    keeps = _lists_by(em.keep_c, em.keep_i)
    # per candidate: the jobs ahead of it in its team's order on its type (`order_types`)
    typed = _lists_by(em.ordx_c, em.ordx_a)
    out = em.__dict__["_candidates_by_job"] = (by_job, vk, types_of, preds, keeps, typed)
    return out


def _lists_by(keys: np.ndarray, values: np.ndarray) -> dict[int, list[int]]:
    """Per distinct key, the values at its positions, in their order: one stable sort, not a
    setdefault per pair (XL's 65,000 + 59,000 + 97,000 pairs took 0.2 s that way)."""
    keys = np.asarray(keys)
    if not len(keys):
        return {}
    o = np.argsort(keys, kind="stable")
    k, v = keys[o], np.asarray(values)[o].tolist()
    first = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    ends = first[1:].tolist() + [len(k)]
    return {key: v[a:b] for key, a, b in zip(k[first].tolist(), first.tolist(), ends)}


def value_groups(em: EpochModel) -> tuple[list, list, list, list]:
    """The candidates grouped by what their marginal objective depends on besides their own
    work value: the ShareGain key (project, type, GPUs, short), or the GPUs alone for
    unallocated work (no share gain). Within a group every candidate gains the same from the
    tiers, so their order by value never changes as the tiers fill, and the backfill prices
    one entry per group instead of every job (XL: 5,778 groups of 67,053 candidates). Per
    group: its ShareGain key (None: unallocated), its GPUs, its jobs and their work values,
    best value first, then lowest job index (the per-job heap's tie order). Once per model."""
    out = em.__dict__.get("_value_groups")
    if out is not None:
        return out
    snap, req = em.snap, em.req
    cj, ct = req.cand_job, req.cand_type
    value = candidate_values(em.imp, req)
    on = cand_counted(snap, req, em.tg.pooled)  # per type, a move: no share gain; a restart none
    T, G = len(snap.gpu_types), int(snap.job_gpus.max(initial=0)) + 1
    proj, typ = np.where(on, snap.job_project[cj], -1), np.where(on, ct, -1)
    short = on & debug_jobs(snap)[cj] & cand_counted(snap, req)  # no debug row: a move
    gpus = snap.job_gpus[cj]
    # one integer per key: project (-1: unallocated), type (-1 likewise), GPUs, short
    code = (((proj.astype(np.int64) + 1) * (T + 1) + typ + 1) * G + gpus) * 2 + short
    _, one, gid = np.unique(code, return_index=True, return_inverse=True)  # one: a member
    gid = gid.reshape(-1)
    order = np.lexsort((cj, -value, gid))
    first = np.flatnonzero(np.r_[True, gid[order][1:] != gid[order][:-1]]) if len(order) else order
    ends = first[1:].tolist() + [len(order)]
    jobs, vals = cj[order].tolist(), value[order].tolist()
    keys = [(p, t, float(g), d) if p >= 0 else None  # ShareGain.key
            for p, t, g, d in zip(proj[one].tolist(), typ[one].tolist(), gpus[one].tolist(),
                                  short[one].tolist())]
    spans = list(zip(first.tolist(), ends))
    out = (keys, gpus[one].astype(float).tolist(), [jobs[a:b] for a, b in spans],
           [vals[a:b] for a, b in spans])
    em.__dict__["_value_groups"] = out
    return out


def gave_way_rows(em: EpochModel, started: np.ndarray, kept: np.ndarray,
                  placements: dict | None = None, owner: np.ndarray | None = None) -> set:
    """The (running position, candidate) `keep_order` rows whose running job does not run and
    gave way on its own type (optalloc.model.keep_displaced.gave_way: it does not fit there
    beside the allocated work the plan runs but its team's jobs below it): the team's job
    below it may fill what is left, as greedy does (rule 6: an allocated job that fits idle
    GPUs, or GPUs unallocated work holds, does not wait). The backfill only adds allocated
    work and evicts unallocated work, so a row loose now stays loose (and one that holds a
    job back is judged again after the backfill's own starts: `loosened` in
    restore_and_backfill). Before, fresh draws at
    stop 43: p0's running priority-1 8-GPU job gave way to p2's floor, and p0's allocated
    priority-0 1-GPU job waited while p0's unallocated jobs filled the 4-GPU node (no
    `keep_order` row holds unallocated work). With the plan's `placements` the running job's
    room is judged node by node too: an 8-GPU single-node job does not fit in 11 GPUs
    spread over nodes of 5, 2 and 4 (stop 45, tests/test_epoch_gave_way_fill.py)."""
    if not len(em.keep_i):
        return set()
    down = np.flatnonzero(~kept[em.keep_i] & ~started[em.keep_c])
    if not len(down):
        return set()
    i, c = em.keep_i[down], em.keep_c[down]
    ok = gave_way(em, i, c, started, kept, placements, owner)
    return set(zip(i[ok].tolist(), c[ok].tolist()))


def restore_and_backfill(em, pool, run_nodes, run_of_job, kept, restored, started, placements,
                          cand_of, backfilled, value, restorable) -> None:
    """Lazy greedy in descending marginal objective per GPU over (a) preempted running jobs
    whose GPUs are still free (and that may stay: not a drain leaver) and (b) waiting jobs that
    fit. A job's marginal objective is its work value plus what its GPUs add to the share tiers
    on its path, re-evaluated when popped (tiers fill as jobs start). A tier-1 (allocated) job
    may evict unallocated holders; evicted jobs go back into the queue. A job whose `order`
    predecessor (a job of its project ahead of it that fits its place) waits is not started."""
    snap, req, imp = em.snap, em.req, em.imp
    sg = ShareGain(em)
    # the plan's keeps and starts (a restart on its own type counts in no row), at once
    js = np.fromiter(cand_of.keys(), np.int64, len(cand_of))
    cs = np.fromiter(cand_of.values(), np.int64, len(cand_of))
    on = ~req.cand_restart[cs]
    sg.add_many(np.concatenate([req.run_job[kept], js[on]]),
                np.concatenate([req.run_type[kept], req.cand_type[cs[on]]]))
    by_job, vk, types_of, preds, keeps, typed = candidates_by_job(em)
    loose = gave_way_rows(em, started, kept, placements, pool.owner)
    gpus = sg.gpus
    gain_of = sg.gain_of

    def prio(kind: int, idx: int) -> float:  # marginal objective per GPU (knapsack density)
        if kind == 0:
            j, t = int(req.run_job[idx]), int(req.run_type[idx])
            return (float(imp.value[j, t] + imp.churn[j]) + sg.gain(j, t)) / snap.job_gpus[j]
        e = vk[idx]
        if len(e) == 1:
            return (e[0][0] + gain_of(e[0][1])) / gpus[idx]
        return max(v + gain_of(k) for v, k in e) / gpus[idx]

    # an upper bound on what any job could still get per type: free plus evictable GPUs on
    # nodes that take new work. It grows during the backfill only where an eviction frees
    # more than the job that evicts takes (then `reopen`), so a job larger than it on every
    # type it may use is dropped without pricing it (on the 1,024-GPU bench epoch 1,550 of
    # 1,689 pops)
    T = len(snap.gpu_types)
    room_t: list = []  # per type, then [T]: the most of any type

    def room() -> list:
        if not room_t:
            room_t.extend(np.bincount(snap.node_type, weights=np.where(
                pool.accept, pool.room(True), 0), minlength=T).tolist())
            room_t.append(max(room_t, default=0.0))
        return room_t

    def could_fit(j: int) -> bool:
        r, g = room(), gpus[j]
        for t in types_of[j]:
            if g <= r[t]:
                return True
        return False

    # (-priority, kind 0=restore 1=start, index, group or -1): a start enters through its
    # value group (value_groups) until it is priced alone (deferred or evicted: -1)
    heap: list[tuple[float, int, int, int]] = []
    groups = value_groups(em)
    g_key, g_gpus, g_jobs, g_vals = groups
    state = bytearray(len(snap.jobs))  # 0: its groups speak for it, 1: an entry of its own, 2: out
    for j in placements:
        state[j] = 2
    # a running job that stays (kept, or restored below) never also moves: its moves are out
    stays = bytearray(len(snap.jobs))
    for j in req.run_job[kept].tolist():
        state[j] = stays[j] = 2
    at = [0] * len(g_key)  # per group: its best entry whose job may still start

    def group_top(q: int):
        """Group q's best entry whose job may still start, priced now (None: none left); a job
        that cannot fit any more is out (room only shrinks here)."""
        js, i, r, key = g_jobs[q], at[q], room(), g_key[q]
        if g_gpus[q] > r[T]:  # no type has room for its jobs' size: none of them fits now
            at[q] = len(js)   # or later (XL: 46,000 fit checks of 74,000 were these)
            return None
        # an allocated group's jobs all fit on its own type while it has room for their size
        fits = key is not None and g_gpus[q] <= r[key[1]]
        while i < len(js) and (state[js[i]] or not (fits or could_fit(js[i]))):
            state[js[i]] = 2
            i += 1
        at[q] = i
        if i == len(js):
            return None
        return (-(g_vals[q][i] + gain_of(g_key[q])) / g_gpus[q], 1, js[i], q)

    def push_top(q: int) -> None:
        e = group_top(q)
        if e is not None:
            heapq.heappush(heap, e)

    def all_tops() -> list:
        """group_top of every group from its first job, in group order (group_tops: one
        vectorized walk)."""
        tops, at[:] = group_tops(em, groups, state, room())
        return [(-(g_vals[q][i] + gain_of(g_key[q])) / g_gpus[q], 1, g_jobs[q][i], q)
                for q, i in tops]

    def reopen() -> None:
        """An eviction freed more GPUs than the job that evicted takes (a 1-GPU job moved
        onto a node held by a 16-GPU unallocated gang): the room grew, so the jobs that did
        not fit before are offered again, after the pass (else a 1-GPU job waited beside 14
        idle GPUs: tests/test_backfill_reopen.py). Measured, not kept: offering them again
        at each such eviction, in value order, lowered the bench's 1,024-GPU gaps (seed 0
        0.34% -> 0.02%, up to 3 floor GPUs more on seeds 0-5) but took the 16,384-GPU epoch
        1.9 -> 3.4 s (every group offered again at each eviction)."""
        room_t.clear()
        st = np.frombuffer(state, np.uint8)  # views: state[e] = 0 for the jobs out that
        out = st == 2                         # neither started nor stay
        out[list(placements)] = False
        st[out & (np.frombuffer(stays, np.uint8) == 0)] = 0
        for e in all_tops():
            heapq.heappush(heap, e)

    for i in np.flatnonzero(~kept & restorable):
        if int(req.run_job[i]) not in placements:  # not moved to another type already
            heap.append((-prio(0, int(i)), 0, int(i), -1))
    heap += all_tops()
    heapq.heapify(heap)

    held_back: dict[int, set] = {}  # per running position: jobs its keep_order rows held back
    held_rows: dict[tuple[int, int], int] = {}  # those rows (running position, candidate): job
    behind: dict[int, set] = {}  # per waiting job: the jobs its `order` rows held back

    def offer(jobs) -> None:
        for e in jobs:
            if e not in placements:
                state[e] = 1
                heapq.heappush(heap, (-prio(1, e), 1, e, -1))

    def release(i: int) -> None:
        """Running job req.run_job[i] runs again (restored, or moved): the jobs below it in its
        team's order that it held back are offered again."""
        offer(held_back.pop(i, ()))

    def loosened() -> bool:
        """The backfill's own allocated starts may take a held-back row's running job's room
        (its node given to another project's gang): where it gave way since, the row is loose
        now (a row loose stays loose) and the job it held back is offered again; True where
        one was. Before, the rows were judged once, before the backfill: a random snapshot's
        p0 lost its running priority-2 8-GPU job to p1's 16-GPU gang started here, and p0's
        allocated priority-1 2-GPU job waited while p0's unallocated 4-GPU job filled the
        node beside p3's (tests/test_epoch_allocated_first_draw.py)."""
        rows = [r for r in held_rows if r[0] in held_back and r not in loose]
        if not rows:
            return False
        i, c = np.array(rows, np.int64).T
        ok = gave_way(em, i, c, started, kept | restored, placements, pool.owner)
        new = [r for r, o in zip(rows, ok.tolist()) if o]
        loose.update(new)
        jobs = {held_rows[r] for r in new} - placements.keys()
        offer(sorted(jobs))
        return bool(jobs)

    def evicted_back(jobs: list[int]) -> None:
        for e in jobs:
            if e in placements:  # a start of this epoch: undo it, it may start elsewhere
                del placements[e]
                c = cand_of.pop(e)
                started[c] = False
                backfilled[e] = False
                sg.add_start(e, c, -1.0)
                heapq.heappush(heap, (-prio(1, e), 1, e, -1))
            else:  # a running job: preempted after all (it does not move now either)
                i = run_of_job[e]
                kept[i] = False
                restored[i] = False
                sg.add(e, int(req.run_type[i]), -1.0)

    # passes: the first, then (at most REOPEN_PASSES) one more each time an eviction freed
    # more GPUs than the job that evicted takes, for the jobs that did not fit (`reopen`)
    for npass in range(REOPEN_PASSES + 1):
        grown = False
        while heap or (held_back and loosened()):
            neg, kind, idx, q = heapq.heappop(heap)
            if kind == 0 and int(req.run_job[idx]) in placements:
                continue  # it moved to another type meanwhile
            if kind == 1 and ((state[idx] if q >= 0 else idx in placements or stays[idx])
                              or not could_fit(idx)):
                if q >= 0:  # a group's best entry whose job started, left or no longer fits
                    push_top(q)
                continue
            cur = prio(kind, idx)
            if heap and cur < -neg - 1e-9 and -cur > heap[0][0]:  # stale: tiers filled since
                heapq.heappush(heap, group_top(q) if q >= 0 else (-cur, kind, idx, -1))
                continue
            if q >= 0:  # decided now: the group's next is in the heap meanwhile
                state[idx] = 2
                push_top(q)
            if kind == 0:
                holds = run_nodes[idx]
                if all(pool.is_free(n, g) for n, g in holds):
                    for n, g in holds:
                        pool.hold(n, g, int(req.run_job[idx]))
                    room_t.clear()
                    restored[idx] = True
                    state[int(req.run_job[idx])] = stays[int(req.run_job[idx])] = 2
                    sg.add(int(req.run_job[idx]), int(req.run_type[idx]))
                    if held_back:
                        release(int(idx))
                continue
            j = idx
            ahead = [a for a in preds.get(j, ()) if a not in placements]
            if ahead:  # its project's job ahead of it waits: the order rows forbid this start;
                for a in ahead:  # offered again once that one starts
                    behind.setdefault(a, set()).add(j)
                continue
            may_evict = not pool.evictable[j]
            cands = sorted(by_job[j], key=lambda c: -(value[c] + sg.start_gain(j, c)))
            for c in cands:
                t = int(req.cand_type[c])
                if c in typed:  # a job ahead of it that may use this type waits (order_types)
                    wait = [a for a in typed[c] if a not in placements]
                    if wait:
                        for a in wait:
                            behind.setdefault(a, set()).add(j)
                        continue
                if c in keeps:
                    down = [i for i in keeps[c] if not (kept[i] or restored[i]
                                                        or int(req.run_job[i]) in placements
                                                        or (i, c) in loose)]
                    if down:  # a running job its team ranks above it does not run (keep_order):
                        for i in down:  # offered again if that job is restored or moves,
                            held_back.setdefault(i, set()).add(j)  # or gives way (loosened)
                            held_rows[(i, c)] = j
                        continue
                if heap:  # a type with no room left: what the job is worth on the next one
                    cur = (value[c] + sg.start_gain(j, c)) / gpus[j]
                    if cur < -heap[0][0] - 1e-9:  # another job is worth more per GPU now
                        heapq.heappush(heap, (-cur, 1, j, -1))
                        state[j] = 1
                        break
                sel = pool.on_type(t)  # allowed(hold) & type t, as one mask
                if pool.reserved:
                    sel = sel & (pool.deadline >= hold_of(em, c))
                # unallocated work evicts none: a job allocated elsewhere is unallocated on a
                # type where its project has no share (before, B's 1-GPU job, unallocated on
                # h100, evicted C's running 8 there: rule 4)
                evict = may_evict and bool(snap.job_tier1[j, t])
                if int(pool.room(evict)[sel].sum()) < snap.job_gpus[j]:
                    continue
                nodes = nodes_for(pool, em, c, [], {}, evict=False)
                freed = 0
                if nodes is None and evict:
                    nodes = nodes_for(pool, em, c, [], {}, evict=True)
                    if nodes is not None:
                        out = []
                        for n, g in zip(nodes, chunks(req, j, t)):
                            out += pool.make_room(n, g)
                        freed = int(sum(snap.job_gpus[e] for e in set(out)))
                        evicted_back(out)
                if nodes is not None:
                    placements[j] = alloc(pool, em, j, t, nodes)
                    room_t.clear()
                    started[c] = True
                    cand_of[j] = c
                    backfilled[j] = True
                    sg.add_start(j, c)
                    grown |= freed > snap.job_gpus[j]
                    if held_back and j in run_of_job:  # a running job's move: it runs
                        release(run_of_job[j])
                    if behind:
                        offer(behind.pop(j, ()))
                    break
        if not grown or npass == REOPEN_PASSES:
            break
        reopen()
