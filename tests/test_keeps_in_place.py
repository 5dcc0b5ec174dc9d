"""The keeps of a stopped running job and a kept teammate exchanged in place
(optalloc.plan.keeps_in_place): the stopped job keeps its GPUs, the teammate stops, and the
starts that had the stopped job's GPUs take the teammate's, GPU for GPU; the rest of the plan
stands. Made only where it is exact; otherwise None and the solution is placed again (as
before). Each case gives a placed plan by hand and asserts the whole exchanged plan."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from optalloc.model.build import build_model
from optalloc.plan.holdings import Placed
from optalloc.plan.keeps_in_place import exchanged_in_place
from optalloc.types import Job, Node, NodeState, Placement, NodeAlloc

from test_epoch_toy import H, flat_org, running, snapshot


def _placed(em, starts: dict, stopped: set) -> Placed:
    """Starts job id -> ((node, GPUs), ...) on h100 (by its plain candidate), every running
    job kept but `stopped`; free GPUs per node counted from it all."""
    snap, req = em.snap, em.req
    started = np.zeros(len(req.cand_job), bool)
    placements = {}
    used = {n.name: set() for n in snap.nodes}
    for jid, allocs in starts.items():
        j = snap.job_index[jid]
        c = np.flatnonzero((req.cand_job == j) & (req.cand_type == 0) & ~req.cand_move
                           & ~req.cand_restart)[0]
        started[c] = True
        placements[j] = Placement(jid, "h100", tuple(NodeAlloc(n, tuple(g)) for n, g in allocs))
        for n, g in allocs:
            used[n].update(g)
    kept = np.array([snap.jobs[j].id not in stopped for j in req.run_job])
    for i, j in enumerate(req.run_job):
        if kept[i]:
            for a in snap.jobs[j].placement.nodes:
                used[a.node].update(a.gpus)
    free = np.array([0 if n.state != NodeState.UP else n.gpus - len(used[n.name])
                     for n in snap.nodes])
    return Placed(started, kept, placements, np.zeros(len(snap.jobs), bool),
                  np.zeros(len(req.run_job), bool), free)


def _first_case():
    """(model, placed plan) of CASES[0]: hi stopped for b's start on its GPUs, lo kept."""
    c = CASES[0]
    jobs = [running(jid, "A" if jid in ("hi", "lo") else "C", "h100", allocs, start=2 * H,
                    min_runtime_s=H if jid in ("hi", "lo") else 4 * H,
                    priority=2 if jid == "hi" else 0) for jid, allocs in c.running]
    jobs += [Job("b", "B", 2, min_runtime_s=H)]
    em = build_model(snapshot(c.nodes, flat_org({"A": 1, "B": 1, "C": 1}), jobs, now=5 * H))
    return em, _placed(em, c.starts, {c.stopped})


def _where(em, placed) -> dict:
    return {em.snap.jobs[j].id: tuple((a.node, a.gpus) for a in p.nodes)
            for j, p in placed.placements.items()}


def _kept(em, placed) -> set:
    return {em.snap.jobs[j].id for j, k in zip(em.req.run_job, placed.kept) if k}


def _pos(em, jid) -> int:
    return int(np.flatnonzero(em.req.run_job == em.snap.job_index[jid])[0])


@dataclass
class Case:
    name: str
    nodes: tuple
    running: list  # (id, [(node, GPUs)])
    queued: list  # (id, GPUs, gpus_per_node)
    starts: dict  # the placed plan's starts: id -> ((node, GPUs), ...)
    stopped: str  # the running job the plan stopped (ranked above `kept`)
    kept: str  # its teammate the plan kept
    want: dict | None  # the exchanged plan's starts, or None: not exact


N8 = tuple(range(8))
CASES = [
    Case("a-start-on-the-stopped-jobs-gpus-moves-onto-its-teammates",
         (Node("n0", "h100", 8), Node("n1", "h100", 8)),
         [("hi", [("n0", (0, 1))]), ("lo", [("n1", (4, 5))]), ("x", [("n0", (2, 3, 4, 5, 6, 7))]),
          ("y", [("n1", (0, 1, 2, 3, 6, 7))])],
         [("b", 2, None)], {"b": (("n0", (0, 1)),)}, "hi", "lo",
         {"b": (("n1", (4, 5)),)}),
    Case("two-one-gpu-starts-on-the-stopped-jobs-node-split-over-its-teammates-two-nodes",
         (Node("n0", "h100", 8), Node("n1", "h100", 8), Node("n2", "h100", 8)),
         [("hi", [("n0", (0, 1))]), ("lo", [("n1", (7,)), ("n2", (0,))]),
          ("x", [("n0", (2, 3, 4, 5, 6, 7))]), ("y", [("n1", (0, 1, 2, 3, 4, 5, 6))]),
          ("z", [("n2", (1, 2, 3, 4, 5, 6, 7))])],
         [("b1", 1, None), ("b2", 1, None)],
         {"b1": (("n0", (0,)),), "b2": (("n0", (1,)),)}, "hi", "lo",
         {"b1": (("n1", (7,)),), "b2": (("n2", (0,)),)}),
    Case("a-per-node-gangs-piece-moves-and-its-other-pieces-stay",
         (Node("n0", "h100", 8), Node("n1", "h100", 8), Node("n2", "h100", 8)),
         [("hi", [("n0", (3,))]), ("lo", [("n2", (5,))]), ("x", [("n0", (0, 1, 2, 4, 5, 6, 7))]),
          ("y", [("n1", (0, 1, 2, 3, 4, 5, 6))]), ("z", [("n2", (0, 1, 2, 3, 4, 6, 7))])],
         [("g", 2, 1)], {"g": (("n0", (3,)), ("n1", (7,)))}, "hi", "lo",
         {"g": (("n2", (5,)), ("n1", (7,)))}),
    Case("a-per-node-gangs-piece-may-not-join-its-own-piece-on-the-teammates-node",
         (Node("n0", "h100", 8), Node("n1", "h100", 8)),
         [("hi", [("n0", (3,))]), ("lo", [("n1", (5,))]), ("x", [("n0", (0, 1, 2, 4, 5, 6, 7))]),
          ("y", [("n1", (0, 1, 2, 3, 4, 6))])],
         [("g", 2, 1)], {"g": (("n0", (3,)), ("n1", (7,)))}, "hi", "lo", None),
    Case("a-start-partly-on-the-stopped-jobs-gpus-is-not-exact",
         (Node("n0", "h100", 8), Node("n1", "h100", 8)),
         [("hi", [("n0", (0, 1))]), ("lo", [("n1", (4, 5))]), ("x", [("n0", (4, 5, 6, 7))]),
          ("y", [("n1", (0, 1, 2, 3, 6, 7))])],
         [("b", 4, None)], {"b": (("n0", (0, 1, 2, 3)),)}, "hi", "lo", None),
    Case("a-gpu-of-the-stopped-job-left-idle-is-not-exact-its-idle-room-would-move",
         (Node("n0", "h100", 8), Node("n1", "h100", 8)),
         [("hi", [("n0", (0, 1))]), ("lo", [("n1", (4, 5))]), ("x", [("n0", (2, 3, 4, 5, 6, 7))]),
          ("y", [("n1", (0, 1, 2, 3, 6, 7))])],
         [("b", 1, None)], {"b": (("n0", (0,)),)}, "hi", "lo", None),
    Case("a-whole-node-piece-goes-only-to-a-whole-node",
         (Node("n0", "h100", 8), Node("n1", "h100", 16)),
         [("hi", [("n0", N8)]), ("lo", [("n1", N8)]), ("y", [("n1", tuple(range(8, 16)))])],
         [("b", 8, None)], {"b": (("n0", N8),)}, "hi", "lo", None),
    Case("a-teammates-node-that-drains-takes-no-start",
         (Node("n0", "h100", 8), Node("n1", "h100", 8, NodeState.DRAIN)),
         [("hi", [("n0", (0, 1))]), ("lo", [("n1", (4, 5))]), ("x", [("n0", (2, 3, 4, 5, 6, 7))]),
          ("y", [("n1", (0, 1, 2, 3, 6, 7))])],
         [("b", 2, None)], {"b": (("n0", (0, 1)),)}, "hi", "lo", None),
]


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_the_exchange_in_place_gives_the_whole_expected_plan(c: Case):
    jobs = []
    for jid, allocs in c.running:
        proj = "A" if jid in ("hi", "lo") else "C"
        jobs.append(running(jid, proj, "h100", allocs, start=2 * H,
                            min_runtime_s=4 * H if proj == "C" else H,
                            priority=2 if jid == "hi" else 0))
    jobs += [Job(jid, "B", g, gpus_per_node=gpn, min_runtime_s=H, submit_time=float(k))
             for k, (jid, g, gpn) in enumerate(c.queued)]
    em = build_model(snapshot(c.nodes, flat_org({"A": 1, "B": 1, "C": 1}), jobs, now=5 * H))
    placed = _placed(em, c.starts, {c.stopped})
    out, left = exchanged_in_place(em, placed, [(_pos(em, c.stopped), _pos(em, c.kept))])
    if c.want is None:
        assert out is None and left == [(_pos(em, c.stopped), _pos(em, c.kept))]
        return
    assert left == []
    assert _where(em, out) == c.want
    assert _kept(em, out) == _kept(em, placed) - {c.kept} | {c.stopped}
    assert np.array_equal(out.started, placed.started)
    assert np.array_equal(out.free, placed.free)  # no idle GPU moved
    # no GPU held twice: the kept running jobs and the starts
    held = [(a.node, g) for j, k in zip(em.req.run_job, out.kept) if k
            for a in em.snap.jobs[j].placement.nodes for g in a.gpus]
    held += [(a.node, g) for p in out.placements.values() for a in p.nodes for g in a.gpus]
    assert len(held) == len(set(held))
    assert placed.placements[em.snap.job_index[next(iter(c.starts))]].nodes == \
        tuple(NodeAlloc(n, tuple(g)) for n, g in next(iter(c.starts.values())))  # input intact


def test_the_epoch_keeps_the_higher_priority_job_in_place_without_placing_the_plan_again(
        monkeypatch):
    """The solution stops A's priority-2 job hi (it runs at a third of its best speed on
    h100) for B's 2-GPU start and keeps A's priority-0 lo. The team's order ranks hi first
    (rule 3): the epoch's plan keeps hi, stops lo and starts b on lo's GPUs, exchanged in
    place: one placement, not two."""
    import optalloc.plan.outcome as outcome

    nodes = (Node("n0", "h100", 8), Node("n1", "h100", 8), Node("b0", "b200", 8))
    jobs = [running("hi", "A", "h100", [("n0", (0, 1))], start=2 * H, priority=2,
                    speedup={"b200": 3.0}),
            running("lo", "A", "h100", [("n1", (4, 5))], start=2 * H, gpu_types=("h100",)),
            running("x", "C", "h100", [("n0", (2, 3, 4, 5, 6, 7))], start=4 * H,
                    min_runtime_s=4 * H),
            running("y", "C", "h100", [("n1", (0, 1, 2, 3, 6, 7))], start=4 * H,
                    min_runtime_s=4 * H),
            running("z", "C", "b200", [("b0", N8)], start=4 * H, min_runtime_s=4 * H),
            Job("b", "B", 2, min_runtime_s=H, gpu_types=("h100",))]
    em = build_model(snapshot(nodes, flat_org({"A": 1, "B": 1, "C": 1}), jobs, now=5 * H,
                              types=("h100", "b200"), usage={"A": 2.0, "B": 0.1, "C": 0.5}))
    snap, req = em.snap, em.req
    x = np.zeros(em.lm.n_vars)
    c = np.flatnonzero((req.cand_job == snap.job_index["b"]) & ~req.cand_move
                       & ~req.cand_restart)[0]
    x[em.x[c]] = 1.0
    for i, j in enumerate(req.run_job):
        x[em.k[i]] = 0.0 if snap.jobs[j].id == "hi" else 1.0
    calls = []
    real = outcome.place
    monkeypatch.setattr(outcome, "place", lambda *a, **k: calls.append(k) or real(*a, **k))
    out = outcome.placed_outcome(em, x, "test", backend="highs", status="feasible", message="")
    assert _where(em, out.placed) == {"b": (("n1", (4, 5)),)}
    assert _kept(em, out.placed) == {"hi", "x", "y", "z"}
    assert "victims ranked below in their team's order" in out.message
    assert out.model_point
    assert len(calls) == 1


def test_an_exchange_made_in_place_keeps_the_plans_records_of_starts_given_back():
    """`held` (starts given back for a running teammate) and `ahead` (for a waiting teammate
    of a higher priority) stand in the exchanged plan, as in a priority swap made in place
    (optalloc.plan.victims.swapped_in_place dropped `ahead` until stop 57: the jobs given
    back lost their reason, taken_by, when the swap won)."""
    from optalloc.plan.victims import swapped_in_place

    em, placed = _first_case()
    placed.held = np.array([[_pos(em, "lo"), em.snap.job_index["b"], 0]])
    placed.ahead = np.array([[em.snap.job_index["b"], em.snap.job_index["hi"]]])
    out, _ = exchanged_in_place(em, placed, [(_pos(em, "hi"), _pos(em, "lo"))])
    swapped = swapped_in_place(em, placed, [])
    for p in (out, swapped):
        assert np.array_equal(p.held, placed.held) and np.array_equal(p.ahead, placed.ahead)


def test_no_exchange_in_place_onto_or_off_a_node_reserved_for_a_gang():
    """A reserved node holds its gang's start and short work by its hold: a start moved onto
    one (or off one) is left to a new placement, which reads the reservation."""
    import dataclasses

    em, placed = _first_case()
    pair = [(_pos(em, "hi"), _pos(em, "lo"))]
    assert exchanged_in_place(em, placed, pair)[0] is not None
    for n in (0, 1):
        deadline = np.full(len(em.snap.nodes), np.inf)
        deadline[n] = 8 * H
        object.__setattr__(em, "res", dataclasses.replace(em.res, deadline=deadline))
        assert exchanged_in_place(em, placed, pair) == (None, pair)


from hypothesis import given, settings, strategies as st  # noqa: E402


def _random_case(seed: int):
    """A random small cluster: A's running hi (stopped) and lo (kept) of one size, on random
    GPUs; B's starts, mostly covering hi's GPUs (single-node jobs in random chunks of them, or
    a per-node gang with a piece there and one elsewhere), now and then partly off them, plus
    starts on other free GPUs; now and then a draining node."""
    rng = np.random.default_rng(seed)
    N = int(rng.integers(2, 5))
    drain = int(rng.integers(N)) if rng.random() < 0.2 else -1
    nodes = tuple(Node(f"n{i}", "h100", 8, NodeState.DRAIN if i == drain else NodeState.UP)
                  for i in range(N))
    free = {(i, g) for i in range(N) for g in range(8)}

    def take(k, only=None):
        pool = sorted(free if only is None else free & only)
        if len(pool) < k:
            return None
        got = [pool[i] for i in rng.choice(len(pool), k, replace=False)]
        free.difference_update(got)
        by = {}
        for n, g in got:
            by.setdefault(n, []).append(g)
        return [(f"n{n}", tuple(sorted(gs))) for n, gs in sorted(by.items())]

    size = int(rng.choice([1, 2, 4, 8]))
    hi, lo = take(size), take(size)
    if hi is None or lo is None:
        return nodes, [], {}
    starts: dict = {}
    for name, gs in hi:
        n, gs = int(name[1:]), list(gs)
        rng.shuffle(gs)
        if rng.random() < 0.3:  # a per-node gang: this piece and one of its size elsewhere
            other = [m for m in range(N) if m != n and sum((m, g) in free for g in range(8))
                     >= len(gs)]
            if other:
                m = int(rng.choice(other))
                starts[f"b{len(starts)}"] = ((name, tuple(sorted(gs))),
                                             *take(len(gs), {(m, g) for g in range(8)}))
                continue
        while gs:
            k = int(rng.integers(1, len(gs) + 1))
            piece = tuple(sorted(gs[:k]))
            del gs[:k]
            if rng.random() < 0.1:  # partly off hi's GPUs: a free GPU of its node beside it
                extra = take(1, {(n, g) for g in range(8)})
                if extra:
                    piece = tuple(sorted(piece + extra[0][1]))
            starts[f"b{len(starts)}"] = ((name, piece),)
    for _ in range(int(rng.integers(0, 3))):
        a = take(int(rng.choice([1, 2, 4])))
        if a and len(a) == 1:
            starts[f"b{len(starts)}"] = tuple(a)
    queued = []
    for k, (jid, allocs) in enumerate(starts.items()):
        q = len(allocs[0][1])
        queued.append(Job(jid, "B", sum(len(g) for _, g in allocs),
                          gpus_per_node=q if len(allocs) > 1 else None, min_runtime_s=H,
                          gpu_types=("h100",), submit_time=float(k)))
    jobs = [running("hi", "A", "h100", hi, start=2 * H, priority=2, gpu_types=("h100",)),
            running("lo", "A", "h100", lo, start=2 * H, gpu_types=("h100",))] + queued
    return nodes, jobs, starts


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_an_exchange_in_place_keeps_every_gpu_once_and_every_starts_shape(seed):
    """Random cases (about 6 in 10 exact): where the exchange is made, no GPU is held twice,
    hi is kept and lo stopped, the starts are the same with the same piece sizes on distinct
    nodes, moved only onto up nodes, and as many GPUs in use on every node as before."""
    nodes, jobs, starts = _random_case(seed)
    snap = snapshot(nodes, flat_org({"A": 1, "B": 1}), jobs, now=5 * H)
    em = build_model(snap)
    if not starts or any(not ((em.req.cand_job == snap.job_index[j]).any()) for j in starts):
        return
    placed = _placed(em, starts, {"hi"})
    pair = [(_pos(em, "hi"), _pos(em, "lo"))]
    out, left = exchanged_in_place(em, placed, pair)
    if out is None:
        assert left == pair
        return
    assert left == [] and _kept(em, out) == {"hi"}
    assert np.array_equal(out.started, placed.started) and np.array_equal(out.free, placed.free)
    held = [(a.node, g) for j, k in zip(em.req.run_job, out.kept) if k
            for a in snap.jobs[j].placement.nodes for g in a.gpus]
    for j, p in out.placements.items():
        before = placed.placements[j]
        assert sorted(len(a.gpus) for a in p.nodes) == sorted(len(a.gpus) for a in before.nodes)
        assert len({a.node for a in p.nodes}) == len(p.nodes)  # pieces on distinct nodes
        assert all(snap.nodes[snap.node_index[a.node]].state == NodeState.UP for a in p.nodes
                   if a not in before.nodes)
        held += [(a.node, g) for a in p.nodes for g in a.gpus]
    assert len(held) == len(set(held))
    # the GPUs per node in use are as before: no idle GPU moved
    use = lambda pl: sorted(n for n, _ in pl)  # noqa: E731
    before = [(a.node, g) for j, k in zip(em.req.run_job, placed.kept) if k
              for a in snap.jobs[j].placement.nodes for g in a.gpus]
    before += [(a.node, g) for p in placed.placements.values() for a in p.nodes for g in a.gpus]
    assert use(held) == use(before)
