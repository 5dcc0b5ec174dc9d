"""The `org` section: a tree of up to MAX_ORG_DEPTH levels below the root, with relative shares
(leaves are projects)."""

from __future__ import annotations

from typing import Any, Sequence

from optalloc.config.problems import MISSING, Loc, Problems, closest, show_list
from optalloc.types import OrgNode, frozen_map
from optalloc.units import MAX_ORG_DEPTH, MAX_SHARE

ORG_KEYS = ("name", "share", "share_by_type", "children")


def parse_org(value: Any, loc: Loc, gpu_types: Sequence[str], problems: Problems) -> OrgNode | Any:
    """Parse the org tree rooted at `value`; MISSING if it is unusable."""
    seen: dict[str, Loc] = {}
    root = _parse_node(value, loc, gpu_types, problems, seen)
    if root is MISSING:
        return MISSING
    _check_siblings(root, loc, gpu_types, problems, reachable=set(gpu_types))
    return root


def _parse_node(
    value: Any, loc: Loc, gpu_types: Sequence[str], problems: Problems, seen: dict[str, Loc],
    depth: int = 0,
) -> OrgNode | Any:
    d = problems.mapping(value, loc, "an org node mapping like {name: A, share: 50, children: [...]}")
    if d is MISSING:
        return MISSING
    problems.known_keys(d, loc, ORG_KEYS, required=("name",))
    name: Any = MISSING
    if "name" in d:
        name = problems.string(d["name"], loc.key("name"))
        if name is not MISSING:
            if name in seen:
                problems.add(
                    loc.key("name"),
                    f"duplicate org node name {name!r} (also at {seen[name].path})",
                    "names must be unique across the whole org tree; rename one",
                )
            else:
                seen[name] = loc
    share: Any = 1.0
    if "share" in d:
        share = parse_share(d["share"], loc.key("share"), problems)
    by_type: dict[str, float] = {}
    if "share_by_type" in d and d["share_by_type"] is not None:
        sbt_loc = loc.key("share_by_type")
        sbt = problems.mapping(d["share_by_type"], sbt_loc, "a mapping like {b200: 0}")
        if sbt is not MISSING:
            for t, v in sbt.items():
                tl = sbt_loc.key(str(t))
                if t not in gpu_types:
                    near = closest(str(t), gpu_types)
                    hint = f"did you mean {near!r}? " if near else ""
                    problems.add(
                        tl,
                        f"unknown gpu_type {t!r}",
                        f"{hint}use one of the gpu_types: {show_list(gpu_types)}",
                    )
                    continue
                s = parse_share(v, tl, problems)
                if s is not MISSING:
                    by_type[t] = s
    children: list[OrgNode] = []
    if "children" in d and d["children"] is not None:
        cl = loc.key("children")
        kids = problems.sequence(d["children"], cl, "a list of org nodes")
        if kids is not MISSING and kids and depth >= MAX_ORG_DEPTH:
            problems.add(cl, f"the org tree is deeper than {MAX_ORG_DEPTH} levels below the root",
                         "flatten it: make these children projects of a node higher up "
                         "(each level weighs twice the one below it in the solver)")
        elif kids is not MISSING:
            for i, kid in enumerate(kids):
                node = _parse_node(kid, cl.idx(i), gpu_types, problems, seen, depth + 1)
                if node is not MISSING:
                    children.append(node)
    # A node with problems still joins the tree (placeholders for bad values), so that jobs
    # naming its leaves are checked; the recorded problems keep the tree from escaping.
    if name is MISSING:
        name = f"<unnamed at {loc.path}>"
    if share is MISSING:
        share = 1.0
    return OrgNode(name=name, share=share, share_by_type=frozen_map(by_type), children=tuple(children))


def parse_share(value: Any, loc: Loc, problems: Problems) -> float | Any:
    """A share as the YAML gives it and `whatif --set org...share=` computes it: a finite
    number from 0 to MAX_SHARE (the one check for both paths)."""
    v = problems.number(value, loc, maximum=MAX_SHARE)
    if v is not MISSING and v < 0:
        problems.add(loc, f"negative share {v:g}", "shares are relative weights >= 0; use 0 for none")
        return MISSING
    return v


def _check_siblings(
    node: OrgNode, loc: Loc, gpu_types: Sequence[str], problems: Problems, reachable: set[str]
) -> None:
    """Reject sibling groups whose shares are all zero: the parent's entitlement would vanish
    instead of flowing to someone. Per gpu_type only where the parent is entitled at all."""
    if not node.children:
        return
    cl = loc.key("children")
    if all(c.share == 0 for c in node.children) and not any(c.share_by_type for c in node.children):
        problems.add(
            cl,
            f"all {len(node.children)} children of {node.name!r} have share 0, "
            f"so {node.name!r}'s entitlement would be lost",
            "give at least one child a positive share",
        )
        reachable = set()
    else:
        for t in gpu_types:
            if t in reachable and all(c.share_by_type.get(t, c.share) == 0 for c in node.children):
                problems.add(
                    cl,
                    f"on gpu_type {t!r} all {len(node.children)} children of {node.name!r} have "
                    f"share 0, so {node.name!r}'s {t} entitlement would be lost",
                    f"give one child a positive share for {t}, or set share_by_type: {{{t}: 0}} "
                    f"on {node.name!r} itself",
                )
    for i, c in enumerate(node.children):
        kid_reach = {t for t in reachable if c.share_by_type.get(t, c.share) > 0}
        _check_siblings(c, cl.idx(i), gpu_types, problems, kid_reach)
