"""Snapshot.allowed_code: one integer per job for the gpu_types it may use, shared by the
ranked pass and the pending reasons: equal exactly when the allowed types are equal, also
past the 62 types an int64 bit mask holds."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from optalloc.snapshot import _allowed_code

from test_epoch_properties import instances


def _same_classes(allowed: np.ndarray, code: np.ndarray) -> None:
    assert code.shape == (allowed.shape[0],) and (code >= 0).all()
    for a in range(len(code)):
        for b in range(len(code)):
            assert (code[a] == code[b]) == bool(np.array_equal(allowed[a], allowed[b]))


@settings(max_examples=30, deadline=None)
@given(instances(max_jobs=20))
def test_jobs_get_one_code_exactly_when_they_may_use_the_same_types(snap):
    _same_classes(np.asarray(snap.job_allowed), snap.allowed_code())


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 12).flatmap(lambda rows: st.sampled_from([3, 62, 63, 80]).flatmap(
    lambda T: arrays(bool, (rows, T)))))
def test_the_code_tells_rows_apart_with_few_types_and_with_more_than_an_int64_holds(allowed):
    _same_classes(allowed, _allowed_code(SimpleNamespace(job_allowed=allowed)))
