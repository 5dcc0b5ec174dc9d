"""Compact node lists as Slurm writes them, and their round trip through the config's expander."""

import pytest
from hypothesis import given, strategies as st

from optalloc.config.nodes import expand_node_names
from optalloc.hostlist import compress_indices, compress_names, compress_placement


@pytest.mark.parametrize(
    "case, names, expected",
    [
        ("a run of zero-padded nodes becomes one range",
         [f"h100-{i:03d}" for i in range(18, 34)], "h100-[018-033]"),
        ("gaps split the range inside one bracket", ["n01", "n02", "n04", "n05", "n09"],
         "n[01-02,04-05,09]"),
        ("a single node keeps its name", ["b200-07"], "b200-07"),
        ("groups keep their order of first appearance; numbers are sorted within",
         ["h100-003", "b200-01", "h100-001", "h100-002", "b200-02"], "h100-[001-003],b200-[01-02]"),
        ("only the last digit run varies", ["r1n1", "r1n2", "r2n1"], "r1n[1-2],r2n1"),
        ("padding survives: same-length numbers join, different lengths stay apart",
         ["n9", "n10", "n11", "x099", "x100"], "n9,n[10-11],x[099-100]"),
        ("a name without digits is kept", ["login", "gpu1", "gpu2"], "login,gpu[1-2]"),
        ("duplicates are listed once", ["a1", "a1", "a2"], "a[1-2]"),
        ("nothing gives an empty list", [], ""),
    ],
)
def test_node_names_compress_like_slurm(case, names, expected):
    assert compress_names(names) == expected


@pytest.mark.parametrize(
    "indices, expected",
    [([0, 1, 2, 3, 4, 5, 6, 7], "0-7"), ([5, 1, 2, 3], "1-3,5"), ([4], "4"), ([], "")],
)
def test_gpu_indices_compress_to_runs(indices, expected):
    assert compress_indices(indices) == expected


def test_a_placement_groups_nodes_that_hold_the_same_gpus():
    nodes = [(f"h100-{i:03d}", range(8)) for i in range(18, 34)] + [("h100-001", [1, 2, 3, 4])]
    assert compress_placement(nodes) == "h100-[018-033]:0-7 h100-001:1-4"
    assert compress_placement({"a1": [0], "a2": [0], "a3": [1]}) == "a[1-2]:0 a3:1"


names = st.lists(
    st.builds(lambda p, n, w: f"{p}{str(n).zfill(w)}",
              st.sampled_from(["h100-", "b200-", "n", "rack1-node"]),
              st.integers(0, 1200), st.integers(1, 4)),
    max_size=60,
)


@given(names)
def test_expanding_the_compact_list_gives_back_every_name_once(ns):
    text = compress_names(ns)
    expanded = [n for part in _split_top(text) for n in expand_node_names(part)]
    assert sorted(expanded) == sorted(set(ns))
    assert len(expanded) == len(set(ns))


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        cur += ch
    return out + [cur] if text else []
