"""A placed plan with the keeps of running jobs exchanged in place: a job the plan stopped
is kept, a kept job of its project, type and size (ranked below it in its team's order, or a
twin that yields first: optalloc.plan.victims) is stopped instead, and the starts the plan put
on the first one's GPUs take the second one's, GPU for GPU. The rest of the plan stands.

Why: such an exchange was placed again from scratch (a whole placement and its backfill:
0.53-0.64 s on the 16,384-GPU bench epoch, up to two a solution), and the new placement
moved other work too. On that epoch's seeds 0 and 1 the three exchanges by the team's order
placed again lost a floor GPU or more elsewhere each time, so the plan kept the lower-ranked
job. In place, the floors, targets and GPUs per type of the plan do not change (the two jobs
hold as many GPUs of one type for one project), and the team's order gains.

Only where the exchange is exact: each piece of a start (its GPUs on one node) lies wholly on
the stopped job's GPUs or wholly off them; the pieces on them take all of them; each such piece
fits on one node of the kept job's GPUs that takes new work like its own (up, and neither node
reserved for a gang: a reservation's nodes are its gang's and short work's, left out here); a
start's pieces stay on distinct nodes (a per-node gang's other pieces stay where they are); a
whole node's piece goes to a whole node. Idle GPUs moved to another node could let a waiting
job fit there that the backfill never saw (DESIGN.md rule 6), so an exchange that would move
idle GPUs is not made here. The pairs that are not exact are handed back: the caller places
the solution again with them, as before (optalloc.plan.outcome).
"""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.plan.holdings import Placed
from optalloc.plan.place import _running_holds
from optalloc.types import NodeAlloc, Placement


def exchanged_in_place(em: EpochModel, placed: Placed, pairs: list[tuple[int, int]]
                       ) -> tuple[Placed | None, list[tuple[int, int]]]:
    """(`placed` with each exact (stopped i, kept q) pair, positions in req.run_job,
    exchanged: i kept on its GPUs, q stopped, the starts on i's GPUs moved onto q's, or None
    when no pair is exact; the pairs not exchanged). See the module's notes for exact."""
    if not pairs or placed.free is None:
        return None, list(pairs)
    snap, req = em.snap, em.req
    deadline = em.res.deadline if len(em.res.deadline) else None
    placements = dict(placed.placements)
    on_node: dict[int, set] = {}  # node -> the jobs the plan starts there
    for j, p in placements.items():
        for a in p.nodes:
            on_node.setdefault(snap.node_index[a.node], set()).add(j)
    kept = placed.kept.copy()
    restored = None if placed.restored is None else placed.restored.copy()
    left = []
    for i, q in pairs:
        ex = _exchange(em, deadline, placements, on_node, i, q)
        if ex is None:
            left.append((i, q))
            continue
        for j, (p, allocs) in ex.items():
            for n in p.nodes:
                on_node[snap.node_index[n.node]].discard(j)
            for b, _ in allocs:
                on_node.setdefault(b, set()).add(j)
            placements[j] = Placement(p.job_id, p.gpu_type,
                                      tuple(NodeAlloc(snap.nodes[b].name, g) for b, g in allocs),
                                      p.allocated)
        kept[i], kept[q] = True, False
        if restored is not None:
            restored[q] = False
    if len(left) == len(pairs):
        return None, left
    return Placed(placed.started, kept, placements, placed.backfilled, restored, placed.free,
                  placed.held, placed.ahead), left


def _exchange(em: EpochModel, deadline, placements, on_node, i, q) -> dict | None:
    """Per start on running position i's GPUs: (its placement, its new (node, GPUs) pieces on
    q's GPUs); None when the pair is not exact."""
    snap = em.snap
    hv = _holds(em, i)
    room = {b: list(gb) for b, gb in _holds(em, q)}  # q's GPUs
    if sum(map(len, room.values())) != sum(len(g) for _, g in hv):
        return None
    mine = {(a, g) for a, ga in hv for g in ga}
    movers = sorted({j for a, _ in hv for j in on_node.get(a, ())
                     if any((snap.node_index[n.node], g) in mine
                            for n in placements[j].nodes for g in n.gpus)},
                    key=lambda j: (-placements[j].gpus, j))
    moved, used = {}, 0
    for j in movers:
        p = placements[j]
        pieces = [(snap.node_index[n.node], n.gpus) for n in p.nodes]
        ours = [[(a, g) in mine for g in gs] for a, gs in pieces]
        if any(any(o) and not all(o) for o in ours):  # a piece partly on the stopped job's GPUs
            return None
        taken = {a for (a, _), o in zip(pieces, ours) if not o[0]}  # the pieces that stay
        allocs = [(a, tuple(gs)) for a, gs in pieces]  # in the placement's own order
        for k in sorted(range(len(pieces)), key=lambda k: -len(pieces[k][1])):
            a, gs = pieces[k]
            if not ours[k][0]:
                continue
            b = _fit(snap, deadline, room, a, len(gs), taken)
            if b is None:
                return None
            taken.add(b)
            allocs[k] = (b, tuple(sorted(room[b][:len(gs)])))
            del room[b][:len(gs)]
            used += len(gs)
        moved[j] = (p, allocs)
    if used != len(mine):  # a GPU of the stopped job the plan left idle
        return None
    return moved


def _fit(snap, deadline, room: dict, a: int, k: int, taken: set) -> int | None:
    """The node of `room` (the kept job's GPUs not yet given) where a start's k GPUs from node
    a go: up, neither node reserved for a gang, not a node the start has a piece on already
    (a gang's pieces stay on distinct nodes); a whole node from a whole node; the fewest GPUs left
    first, then the lowest index. None: no such node."""
    whole = k == snap.node_gpus[a]
    best = None
    for b, gb in room.items():
        if len(gb) < k or b in taken or not snap.node_up[b]:
            continue
        if whole and not (len(gb) == k == snap.node_gpus[b]):
            continue
        if deadline is not None and (np.isfinite(deadline[a]) or np.isfinite(deadline[b])):
            continue  # a reserved node: its gang's, and the backfill's by hold (left out)
        if best is None or (len(gb), b) < (len(room[best]), best):
            best = b
    return best


def _holds(em: EpochModel, i: int) -> list[tuple[int, tuple[int, ...]]]:
    """Running position i's (node index, GPUs) pairs (optalloc.plan.place._running_holds, made
    once per model), most GPUs first, then by node index."""
    return sorted(_running_holds(em)[i], key=lambda a: (-len(a[1]), a[0]))
