"""FitCounter (optalloc.plan.freemap) answers "does this job fit" exactly as a best-fit search
does (`FreeMap.fit(...) is not None`): on a map's free GPUs after any sequence of releases and
takes (`fits_free`), and over the ranked pass's take-back of victims (`needed`, which follows
free counts instead of the map): the ranked pass's room-making relies on it instead of
searching after every victim. Random clusters of mixed node sizes and types, drained nodes,
random jobs (whole-node gangs with remainders, per-node pieces, single-node jobs) and random
victim sequences."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from optalloc.plan.freemap import FitCounter, FreeMap
from optalloc.snapshot import build_snapshot
from optalloc.types import (
    Config,
    GpuType,
    Job,
    JobState,
    Node,
    NodeAlloc,
    NodeState,
    OrgNode,
    Placement,
    Policy,
)


@st.composite
def maps(draw):
    types = ("h100", "b200")
    nodes = []
    for i in range(draw(st.integers(1, 8))):
        nodes.append(Node(f"n{i}", draw(st.sampled_from(types)), draw(st.sampled_from([4, 8, 8])),
                          state=draw(st.sampled_from([NodeState.UP] * 5 + [NodeState.DRAIN]))))
    # running jobs: random GPU subsets of random nodes, as placements to release and take
    running = []
    for i, node in enumerate(nodes):
        gpus = list(range(node.gpus))
        while gpus and draw(st.booleans()):
            k = draw(st.integers(1, len(gpus)))
            running.append(Placement(f"r{len(running)}", node.gpu_type,
                                     (NodeAlloc(node.name, tuple(gpus[:k])),), allocated=True))
            gpus = gpus[k:]
    job = Job("q", "A", draw(st.sampled_from([1, 2, 4, 6, 8, 12, 16, 20, 24])),
              gpus_per_node=draw(st.sampled_from([None, None, 2, 4])))
    allowed = np.array([draw(st.booleans()), draw(st.booleans())])
    jobs = [Job(p.job_id, "A", len(p.nodes[0].gpus), state=JobState.RUNNING, start_time=0.0,
                placement=p) for p in running] + [job]
    cfg = Config(tuple(GpuType(t) for t in types), tuple(nodes),
                 OrgNode("root", children=(OrgNode("A", share=1.0),)), Policy(), tuple(jobs))
    snap = build_snapshot(cfg, now=10.0)
    ops = draw(st.lists(st.tuples(st.booleans(), st.integers(0, max(0, len(running) - 1))),
                        max_size=20))
    return snap, running, job, allowed, ops


@settings(max_examples=300, deadline=None)
@given(maps())
def test_the_counter_agrees_with_best_fit_after_every_release_and_take(case):
    snap, running, job, allowed, ops = case
    fm = FreeMap.empty(snap)
    fm.take_many(running)
    fc = FitCounter(fm, job, allowed)
    speed = np.ones(len(snap.gpu_types))
    held = [True] * len(running)
    assert fc.fits_free(fm.free) == (fm.fit(job, allowed, speed) is not None)
    for release, k in ops:
        if not running or held[k] != release:
            continue  # release only what is held, take back only what was released
        (fm.release if release else fm.take)(running[k])
        held[k] = not release
        assert fc.fits_free(fm.free) == (fm.fit(job, allowed, speed) is not None)


@settings(max_examples=300, deadline=None)
@given(maps(), st.randoms(use_true_random=False))
def test_the_victims_still_needed_are_those_a_best_fit_take_back_keeps_released(case, rnd):
    """Release the victims in a random order, then take them back latest first (all but the
    last), each for good when the job still fits without it by a best-fit search on the map:
    `needed` answers the same on free counts alone, and leaves the map as it was."""
    snap, running, job, allowed, _ = case
    fm = FreeMap.empty(snap)
    fm.take_many(running)
    victims = rnd.sample(running, len(running))
    speed = np.ones(len(snap.gpu_types))
    fc = FitCounter(fm, job, allowed)
    before = fm.free.copy()
    for v in victims:
        fm.release(v)
    free = fm.free.copy()
    expect = [True] * len(victims)
    for i in range(len(victims) - 2, -1, -1):
        fm.take(victims[i])
        if fm.fit(job, allowed, speed) is not None:
            expect[i] = False
        else:
            fm.release(victims[i])
    for v, e in zip(victims, expect):
        if not e:
            fm.release(v)  # back to every victim released
    allocs = [[(fm.node_index[a.node], len(a.gpus)) for a in v.nodes] for v in victims]
    assert fc.needed(free, allocs) == expect
    assert (fm.free == free).all() and (free >= before).all()
