"""Entitlement math of optalloc.org.OrgTree on random trees of any depth, and its agreement with
config validation (a tree that validates always hands out all of every gpu_type)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optalloc.config import ConfigError, parse_config
from optalloc.org import OrgTree, walk
from optalloc.types import OrgNode
from optalloc.units import MAX_ORG_DEPTH

TYPES = ("h100", "b200", "b300")

share_values = st.one_of(st.just(0.0), st.floats(0.01, 100.0), st.integers(1, 60).map(float))


@st.composite
def trees(draw, zeros: bool = True, max_nodes: int = 30) -> OrgNode:
    """A random org tree: any depth (chains to bushes), optional zero shares and per-type
    overrides. Node i's parent is an earlier node, so every shape can appear."""
    n = draw(st.integers(1, max_nodes))
    shape = draw(st.sampled_from(["deep", "wide", "mixed"]))
    parents = []
    for i in range(1, n):
        lo = {"deep": max(0, i - 2), "wide": 0, "mixed": 0}[shape]
        hi = {"deep": i - 1, "wide": min(i - 1, 2), "mixed": i - 1}[shape]
        parents.append(draw(st.integers(lo, hi)))
    values = share_values if zeros else st.floats(0.01, 100.0)
    shares = draw(st.lists(values, min_size=n, max_size=n))
    overrides = draw(
        st.lists(st.dictionaries(st.sampled_from(TYPES), values, max_size=2), min_size=n, max_size=n)
    )
    kids: dict[int, list[int]] = {}
    for i, p in enumerate(parents, start=1):
        kids.setdefault(p, []).append(i)

    def build(i: int) -> OrgNode:
        return OrgNode(
            name=f"n{i}",
            share=shares[i],
            share_by_type=overrides[i],
            children=tuple(build(k) for k in kids.get(i, [])),
        )

    return build(0)


def reference(root: OrgNode, t: str) -> dict[str, float]:
    """The definition: product of normalized shares on the path (0 when all siblings are 0)."""
    out = {root.name: 1.0}

    def down(node: OrgNode) -> None:
        total = sum(c.share_by_type.get(t, c.share) for c in node.children)
        for c in node.children:
            s = c.share_by_type.get(t, c.share)
            out[c.name] = out[node.name] * (s / total if total > 0 else 0.0)
            down(c)

    down(root)
    return out


def no_dead_groups(root: OrgNode, t: str) -> bool:
    """Every sibling group has a positive share on type t."""
    return all(
        any(c.share_by_type.get(t, c.share) > 0 for c in node.children)
        for node, _, _ in walk(root)
        if node.children
    )


@settings(max_examples=150, deadline=None)
@given(root=trees())
def test_entitlement_is_the_product_of_normalized_shares_on_the_path(root):
    tree = OrgTree.build(root, TYPES)
    for k, t in enumerate(TYPES):
        ref = reference(root, t)
        assert tree.entitlement[:, k] == pytest.approx([ref[nm] for nm in tree.names], abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(root=trees(zeros=False))
def test_leaf_entitlements_with_positive_shares_sum_to_one_per_type(root):
    tree = OrgTree.build(root, TYPES)
    sums = tree.entitlement[tree.is_leaf].sum(axis=0)
    assert sums == pytest.approx(np.ones(len(TYPES)), rel=1e-9)


@settings(max_examples=150, deadline=None)
@given(root=trees())
def test_each_inner_node_equals_the_sum_of_its_children(root):
    tree = OrgTree.build(root, TYPES)
    for k, t in enumerate(TYPES):
        for node, _, _ in walk(root):
            if not node.children:
                continue
            if not any(c.share_by_type.get(t, c.share) > 0 for c in node.children):
                continue  # an all-zero group (rejected by validation) hands out nothing
            kids = [tree.index[c.name] for c in node.children]
            assert tree.entitlement[kids, k].sum() == pytest.approx(
                tree.entitlement[tree.index[node.name], k], rel=1e-9, abs=1e-15
            )


@settings(max_examples=150, deadline=None)
@given(root=trees(), data=st.data())
def test_a_zero_share_gives_zero_to_its_whole_subtree(root, data):
    nodes = [nd for nd, parent, _ in walk(root) if parent is not None]
    if not nodes:
        return
    target = data.draw(st.sampled_from(nodes))
    t = data.draw(st.sampled_from(TYPES))
    zeroed = _replace_node(root, target.name, lambda n: replace(n, share_by_type={**n.share_by_type, t: 0.0}))
    tree0 = OrgTree.build(zeroed, TYPES)
    k = TYPES.index(t)
    below = [nd.name for nd, _, _ in walk(target)]
    assert all(tree0.entitlement[tree0.index[nm], k] == 0.0 for nm in below)


@settings(max_examples=150, deadline=None)
@given(root=trees(), data=st.data())
def test_a_per_type_override_only_affects_that_type(root, data):
    nodes = [nd for nd, _, _ in walk(root)]
    target = data.draw(st.sampled_from(nodes))
    t = data.draw(st.sampled_from(TYPES))
    value = data.draw(share_values)
    changed = _replace_node(root, target.name, lambda n: replace(n, share_by_type={**n.share_by_type, t: value}))
    before, after = OrgTree.build(root, TYPES), OrgTree.build(changed, TYPES)
    others = [k for k, g in enumerate(TYPES) if g != t]
    assert np.array_equal(before.entitlement[:, others], after.entitlement[:, others])


@settings(max_examples=100, deadline=None)
@given(root=trees())
def test_a_tree_that_validates_hands_out_all_of_every_type(root):
    data = {
        "gpu_types": [{"name": t} for t in TYPES],
        "nodes": [{"name": f"{t}-1", "gpu_type": t, "gpus": 8} for t in TYPES],
        "org": _to_yaml(root),
    }
    dead_group = not all(no_dead_groups(root, t) for t in TYPES)
    too_deep = max(d for _, _, d in walk(root)) > MAX_ORG_DEPTH
    try:
        config, _ = parse_config(data, "tree.yaml")
    except ConfigError as err:
        # only an all-zero sibling group, or more levels than the solver can weigh, may fail it
        assert dead_group or too_deep
        assert all("share 0" in p or "deeper than" in p for p in err.problems), err.problems
        return
    tree = OrgTree.build(config.org, TYPES)
    assert tree.entitlement[tree.is_leaf].sum(axis=0) == pytest.approx(np.ones(len(TYPES)), rel=1e-9)


@pytest.mark.parametrize(
    "shares, expected",
    [
        pytest.param({"A": 50, "B": 50, "A1": 35, "A2": 15}, {"A1": 0.35, "A2": 0.15, "B": 0.5}, id="a program split into projects"),
        pytest.param({"A": 1, "B": 3, "A1": 1, "A2": 1}, {"A1": 0.125, "A2": 0.125, "B": 0.75}, id="relative shares normalize among siblings"),
        pytest.param({"A": 0, "B": 1, "A1": 1, "A2": 1}, {"A1": 0.0, "A2": 0.0, "B": 1.0}, id="a program with share 0 gives its projects nothing"),
    ],
)
def test_small_trees_have_the_entitlements_one_computes_by_hand(shares, expected):
    root = OrgNode("root", children=(
        OrgNode("A", shares["A"], children=(OrgNode("A1", shares["A1"]), OrgNode("A2", shares["A2"]))),
        OrgNode("B", shares["B"]),
    ))  # fmt: skip
    tree = OrgTree.build(root, ["h100"])
    assert {p: tree.leaf_entitlement(p, "h100") for p in expected} == pytest.approx(expected)


# --------------------------------------------------------------------------- helpers


def _replace_node(root: OrgNode, name: str, fn) -> OrgNode:
    if root.name == name:
        return fn(root)
    return replace(root, children=tuple(_replace_node(c, name, fn) for c in root.children))


def _to_yaml(node: OrgNode) -> dict:
    d: dict = {"name": node.name, "share": node.share}
    if node.share_by_type:
        d["share_by_type"] = dict(node.share_by_type)
    if node.children:
        d["children"] = [_to_yaml(c) for c in node.children]
    return d
