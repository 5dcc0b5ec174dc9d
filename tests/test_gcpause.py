"""optalloc.gcpause: the collector is paused inside, and left as it was found after, whether
the body returns or raises."""

import gc

import pytest

from optalloc.gcpause import gc_paused


def test_the_collector_is_paused_inside_and_enabled_again_after_a_normal_exit():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_is_enabled_again_when_the_body_raises():
    with pytest.raises(ValueError):
        with gc_paused():
            raise ValueError("epoch failed")
    assert gc.isenabled()


def test_a_collector_disabled_by_the_caller_stays_disabled():
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_epoch_leaves_the_collector_enabled():
    from optalloc.epoch import run_epoch
    from tests.test_epoch_toy import flat_org, nodes_of, snapshot
    from optalloc.types import Job

    snap = snapshot(nodes_of(1, 8), flat_org({"A": 1}), [Job("a", "A", 4, submit_time=0.0)])
    assert [p.job_id for p in run_epoch(snap).placements] == ["a"]
    assert gc.isenabled()
