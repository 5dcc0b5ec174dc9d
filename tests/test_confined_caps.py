"""Projects confined to the same gpu_types share them in the fair measure (optalloc.confined):
hand-worked cases with the whole expected caps, a random check of the rule (no set of types
is claimed beyond its GPUs, nothing raised, nothing cut where no set is over), and the
fractional part a shared type gives surviving the state DB."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optalloc.confined import confined_caps
from optalloc.org import OrgTree
from optalloc.state import StateStore
from optalloc.types import OrgNode

TYPES = ("h100", "a100", "b200")


def _flat(**shares) -> OrgTree:
    return OrgTree.build(OrgNode("root", children=tuple(
        OrgNode(p, share=s) for p, s in shares.items())), TYPES)


H, A, B = 1, 2, 4  # bits of h100, a100, b200


def test_two_projects_confined_to_one_node_share_it_and_the_others_keep_what_they_fit():
    # 24 h100 + 8 a100: C and D (a100 only) 4 each of the one node; A and B (h100 only) 12
    # each of the 24; nothing left over anywhere
    org = _flat(A=1, B=1, C=1, D=1)
    got = confined_caps(org, {"A": 24, "B": 24, "C": 8, "D": 8},
                        {"A": H, "B": H, "C": A, "D": A}, (24, 8, 0))
    assert got == {"A": 12, "B": 12, "C": 4, "D": 4}


def test_the_shared_type_is_split_by_share_and_a_small_want_leaves_the_rest_to_the_other():
    # a100 8 GPUs: C share 3, D share 1 -> 6 / 2; E (share 1) wants 1 of it: C 3 : D 1 of the
    # 7 left, water-filled: E 1, then C and D at 7 x 3/4 = 5.25 and 1.75
    org = _flat(C=3, D=1, E=1)
    got = confined_caps(org, {"C": 8, "D": 8, "E": 1}, {"C": A, "D": A, "E": A}, (0, 8, 0))
    assert got == pytest.approx({"C": 5.25, "D": 1.75, "E": 1})


def test_a_project_that_may_use_two_types_is_capped_with_the_ones_confined_inside_them():
    # h100 8, a100 8: A confined to h100, B to a100, C to either. No single type is over
    # (A 8 <= 8, B 8 <= 8), but all three want 24 of 16: with equal shares 16 / 3 each by
    # the water-filling (each wants at least that)
    org = _flat(A=1, B=1, C=1)
    got = confined_caps(org, {"A": 8, "B": 8, "C": 16}, {"A": H, "B": A, "C": H | A},
                        (8, 8, 8))
    assert got == pytest.approx({"A": 16 / 3, "B": 16 / 3, "C": 16 / 3}, abs=1e-5)


def test_nothing_changes_where_no_set_of_types_is_over():
    org = _flat(A=1, B=1, C=1)
    want = {"A": 8, "B": 3, "C": 5}
    assert confined_caps(org, want, {"A": H, "B": A, "C": A}, (8, 8, 8)) == want


def test_a_program_splits_its_part_of_a_shared_type_among_its_projects():
    # a100 12 GPUs, all three confined to it. Top level: P (share 1) and Q (share 1): 6 each;
    # inside P, x (share 2) and y (share 1): 4 and 2; Q's one project z 6
    org = OrgTree.build(OrgNode("root", children=(
        OrgNode("P", share=1, children=(OrgNode("x", share=2), OrgNode("y", share=1))),
        OrgNode("Q", share=1, children=(OrgNode("z", share=1),)))), TYPES)
    got = confined_caps(org, {"x": 12, "y": 12, "z": 12}, {"x": A, "y": A, "z": A},
                        (0, 12, 0))
    assert got == pytest.approx({"x": 4, "y": 2, "z": 6})


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 7), st.integers(1, 4)),
                min_size=1, max_size=6),
       st.tuples(st.integers(0, 24), st.integers(0, 24), st.integers(0, 24)))
def test_no_set_of_types_is_claimed_beyond_its_gpus_and_nothing_is_raised(projects, cap):
    names = [f"p{i}" for i in range(len(projects))]
    org = _flat(**{n: s for n, (_, _, s) in zip(names, projects)})
    fits = {n: f & sum(1 << t for t in range(3) if cap[t] > 0) for n, (_, f, _) in
            zip(names, projects)}
    # as Demand gives it: each project at most the GPUs of the types it fits
    want = {n: min(w, sum(cap[t] for t in range(3) if fits[n] >> t & 1))
            for n, (w, _, _) in zip(names, projects) if fits[n]}
    got = confined_caps(org, want, fits, cap)
    assert set(got) == set(want)
    for n in want:
        assert -1e-9 <= got[n] <= want[n] + 1e-9
    for s in range(1, 8):
        inside = sum(got[n] for n in want if not fits[n] & ~s)
        assert inside <= sum(cap[t] for t in range(3) if s >> t & 1) + 1e-4
    over = any(sum(want[n] for n in want if not fits[n] & ~s)
               > sum(cap[t] for t in range(3) if s >> t & 1) for s in range(1, 8))
    if not over:
        assert got == want


def test_a_fractional_placeable_sample_survives_the_state_db(tmp_path):
    store = StateStore(tmp_path / "state.db")
    store.record_demand(0.0, {"C": 100, "D": 100, "E": 100},
                        {"C": 8 / 3, "D": 8 / 3, "E": 8 / 3})
    store.record_demand(60.0, {"C": 100}, {"C": 8})
    (_, first), (_, second) = store.placeable_demand_samples()
    assert first == {"C": pytest.approx(8 / 3, abs=1e-6), "D": pytest.approx(8 / 3, abs=1e-6),
                     "E": pytest.approx(8 / 3, abs=1e-6)}
    assert second == {"C": 8} and isinstance(second["C"], int)
