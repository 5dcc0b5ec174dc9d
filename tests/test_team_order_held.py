"""The record of starts given back for a running teammate (Placed.held): a job the team's
order then gives back behind a held one is held for the same running job
(optalloc.plan.team_order.pass_held)."""

from __future__ import annotations

import numpy as np
import pytest

from optalloc.plan.team_order import pass_held

CASES = [
    ("nothing given back leaves the record as it is",
     [[3, 10, 0]], [], [[3, 10, 0]]),
    ("a job given back behind a held one is held for the same running job",
     [[3, 10, 0]], [(10, 11)], [[3, 10, 0], [3, 11, 0]]),
    ("a chain passes on, the move flag with it",
     [[2, 5, 1]], [(5, 6), (6, 7)], [[2, 5, 1], [2, 6, 1], [2, 7, 1]]),
    ("a job given back behind one that is not held is not recorded",
     [[3, 10, 0]], [(4, 11)], [[3, 10, 0]]),
    ("a job held for two running jobs passes both on, once each",
     [[1, 10, 0], [2, 10, 0]], [(10, 11), (10, 11)],
     [[1, 10, 0], [2, 10, 0], [1, 11, 0], [2, 11, 0]]),
]


@pytest.mark.parametrize("held, given, expected", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_pass_held(held, given, expected):
    out = pass_held(np.array(held, np.int64).reshape(-1, 3), given)
    assert out.tolist() == expected
