"""optalloc.uniq.unique_rows is np.unique(axis=0, return_inverse=True): same rows, same order,
same inverse, for every integer and bool key (mixed-radix codes where they fit, numpy's own
call where they do not)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from optalloc.uniq import unique_rows

KEYS = st.one_of(
    hnp.arrays(st.sampled_from([np.int8, np.int32, np.int64, np.uint16, np.bool_]),
               st.tuples(st.integers(0, 40), st.integers(1, 4))),
    hnp.arrays(np.int64, st.tuples(st.integers(1, 10), st.integers(1, 3)),
               elements=st.integers(-2**62, 2**62)),  # spans too wide for one code
)


@given(KEYS)
def test_unique_rows_equals_numpys_unique_over_rows(key):
    u, inv = unique_rows(key)
    nu, ninv = np.unique(key, axis=0, return_inverse=True)
    assert u.dtype == key.dtype and u.shape == nu.shape
    np.testing.assert_array_equal(u, nu)
    np.testing.assert_array_equal(inv, np.asarray(ninv).reshape(-1))
    np.testing.assert_array_equal(u[inv], key)


def test_an_empty_key_has_no_rows_and_an_empty_inverse():
    u, inv = unique_rows(np.zeros((0, 3), np.int64))
    assert u.shape == (0, 3) and inv.shape == (0,)
