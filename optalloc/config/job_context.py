"""What a job is checked against: the config's gpu_types, nodes (and their sizes per type),
the org tree's leaves and the policy."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from optalloc.types import Config, Node, OrgNode, Policy


@dataclass(frozen=True)
class JobContext:
    """What a job is checked against."""

    gpu_types: tuple[str, ...]
    nodes: Mapping[str, Node]
    leaves_under: Mapping[str, tuple[str, ...]]  # org node name -> leaf names below (itself if leaf)
    policy: Policy
    leaves: tuple[str, ...]
    nodes_complete: bool = True  # False: the nodes section had problems (skip node lookups)
    # gpu_type -> {GPUs per node: how many nodes}, for the can-it-ever-fit check
    node_sizes: Mapping[str, Mapping[int, int]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        gpu_types: Iterable[str],
        nodes: Iterable[Node],
        org: OrgNode | None,
        policy: Policy,
        nodes_complete: bool = True,
    ) -> "JobContext":
        under: dict[str, tuple[str, ...]] = {}
        if org is not None:
            _collect_leaves(org, under)
        leaves = tuple(n for n, ls in under.items() if ls == (n,))
        node_map = {n.name: n for n in nodes}
        sizes: dict[str, Counter] = {}
        for n in node_map.values():
            sizes.setdefault(n.gpu_type, Counter())[n.gpus] += 1
        return cls(tuple(gpu_types), node_map, under, policy, leaves, nodes_complete, sizes)

    @classmethod
    def of_config(cls, config: Config) -> "JobContext":
        return cls.of((g.name for g in config.gpu_types), config.nodes, config.org, config.policy)


def _collect_leaves(node: OrgNode, under: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    if node.is_leaf:
        got = (node.name,)
    else:
        got = tuple(leaf for c in node.children for leaf in _collect_leaves(c, under))
    under[node.name] = got
    return got
