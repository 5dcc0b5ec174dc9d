"""The org tree flattened into arrays, and entitlement math.

A leaf's entitlement on a gpu_type is the product of the normalized shares along its path:

    ent[v, t] = prod over nodes u on the path root -> v (excluding the root) of
                share_t(u) / sum over siblings w of u of share_t(w)

where share_t(u) is u's `share_by_type[t]` if given, else its `share`. The root's entitlement
is 1. An inner node's entitlement equals the sum of its children's (when some sibling share is
positive). If every sibling share is zero the group's entitlement is 0 for all of them
(validation rejects all-zero siblings in configs; the math stays defined).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from optalloc.types import OrgNode


def walk(root: OrgNode) -> Iterator[tuple[OrgNode, OrgNode | None, int]]:
    """Pre-order walk yielding (node, parent, depth)."""
    stack: list[tuple[OrgNode, OrgNode | None, int]] = [(root, None, 0)]
    while stack:
        node, parent, depth = stack.pop()
        yield node, parent, depth
        for child in reversed(node.children):
            stack.append((child, node, depth + 1))


@dataclass(frozen=True, eq=False)
class OrgTree:
    """Array view of an org tree for a given list of gpu_types.

    Index 0 is the root. `parent[0] == -1`. `ancestors[i]` lists i's ancestors from its parent
    up to (and including) the root.
    """

    root: OrgNode
    gpu_types: tuple[str, ...]
    names: tuple[str, ...]
    parent: np.ndarray  # (n,) int
    depth: np.ndarray  # (n,) int
    is_leaf: np.ndarray  # (n,) bool
    share: np.ndarray  # (n, T) raw share per gpu_type
    entitlement: np.ndarray  # (n, T) fraction of each gpu_type's capacity
    index: dict

    @classmethod
    def build(cls, root: OrgNode, gpu_types: Sequence[str]) -> "OrgTree":
        gpu_types = tuple(gpu_types)
        nodes, parents, depths = [], [], []
        idx: dict[str, int] = {}
        for node, parent, depth in walk(root):
            idx[node.name] = len(nodes)
            nodes.append(node)
            parents.append(-1 if parent is None else idx[parent.name])
            depths.append(depth)
        n, T = len(nodes), len(gpu_types)
        share = np.ones((n, T))
        for i, node in enumerate(nodes):
            for t, g in enumerate(gpu_types):
                share[i, t] = node.share_by_type.get(g, node.share)
        parent = np.asarray(parents, dtype=np.int64)
        # normalize among siblings: sibling sum per parent, vectorized with add.at
        sib_sum = np.zeros((n, T))
        np.add.at(sib_sum, parent[1:], share[1:])
        ent = np.zeros((n, T))
        ent[0] = 1.0
        order = np.argsort(np.asarray(depths), kind="stable")  # parents before children
        for i in order[1:]:
            p = parent[i]
            denom = sib_sum[p]
            frac = np.divide(share[i], denom, out=np.zeros(T), where=denom > 0)
            ent[i] = ent[p] * frac
        is_leaf = np.array([nd.is_leaf for nd in nodes])
        return cls(
            root=root,
            gpu_types=gpu_types,
            names=tuple(nd.name for nd in nodes),
            parent=parent,
            depth=np.asarray(depths, dtype=np.int64),
            is_leaf=is_leaf,
            share=share,
            entitlement=ent,
            index=idx,
        )

    # ------------------------------------------------------------------ queries

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def leaves(self) -> tuple[str, ...]:
        return tuple(nm for nm, leaf in zip(self.names, self.is_leaf) if leaf)

    def ancestors(self, name: str) -> list[str]:
        """Ancestors of `name` from its parent up to the root."""
        out = []
        i = self.parent[self.index[name]]
        while i >= 0:
            out.append(self.names[i])
            i = self.parent[i]
        return out

    def path(self, name: str) -> list[str]:
        """Names from the root down to `name` inclusive."""
        return list(reversed(self.ancestors(name))) + [name]

    def membership(self) -> np.ndarray:
        """(n_nodes, n_nodes) bool matrix M[u, v] = u is v or an ancestor of v (read-only:
        computed once per tree; the epoch asks for it a few thousand times on large orgs)."""
        m = self.__dict__.get("_membership")
        if m is None:
            n = self.n
            m = np.eye(n, dtype=bool)
            for v in range(n):
                p = self.parent[v]
                while p >= 0:
                    m[p, v] = True
                    p = self.parent[p]
            m.setflags(write=False)
            object.__setattr__(self, "_membership", m)
        return m

    def families(self) -> tuple[tuple[int, np.ndarray], ...]:
        """((parent, its children), ...) for every inner node, parents top-down (a parent
        comes after its own parent), children in index order; computed once per tree."""
        f = self.__dict__.get("_families")
        if f is None:
            children: dict[int, list[int]] = {}
            order = np.argsort(self.depth, kind="stable")
            for v in order[1:]:
                children.setdefault(int(self.parent[v]), []).append(int(v))
            f = tuple((int(o), np.asarray(children[int(o)], dtype=np.int64))
                      for o in order if int(o) in children)
            object.__setattr__(self, "_families", f)
        return f

    def leaf_entitlement(self, name: str, gpu_type: str) -> float:
        return float(self.entitlement[self.index[name], self.gpu_types.index(gpu_type)])

    def fair_shares(self, demand: np.ndarray, entitled: np.ndarray) -> np.ndarray:
        """(n, H) each node's fair share of the entitled GPUs (DESIGN.md rule 2): the root's
        entitled total (its children's) shared among its children in proportion to their
        entitlement, each capped at its demand, what one does not want going to its
        siblings, and each node's share shared among its children the same way, down to the
        leaves. demand, entitled: (n, H) per node, e.g. GPU-hours per hour. Row 0 (the root)
        is what is shared."""
        out = np.zeros(demand.shape)
        kids = self.families()
        if not kids:
            return out
        out[0] = entitled[kids[0][1]].sum(axis=0)
        for o, ch in kids:
            out[ch] = share_capped(out[o], demand[ch], entitled[ch])
        return out



def share_capped(total, cap: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """min(cap, lam * weight) with the largest lam whose sum is at most `total`: water-filling,
    a member that wants less than its share leaves the rest to the others in proportion to
    their weights (only members of positive weight take any); the caps where `total` covers
    them all. cap, weight: (k,) with a scalar total, or (k, H) with total (H,), each column on
    its own."""
    one = np.ndim(cap) == 1
    cap = np.asarray(cap, dtype=float).reshape(len(cap), -1)
    w = np.maximum(np.asarray(weight, dtype=float).reshape(cap.shape), 0.0)
    left = np.array(total, dtype=float).reshape(-1).copy()
    full = left >= cap.sum(axis=0) - 1e-12
    out = np.where(full[None, :], cap, 0.0)
    live = (w > 0) & ~full[None, :]
    while live.any():  # members whose cap binds at the current level take it, then the rest
        wl = np.where(live, w, 0.0)
        lam = left / np.maximum(wl.sum(axis=0), 1e-300)
        hit = live & (cap <= lam[None, :] * w + 1e-12)
        rest = live.any(axis=0) & ~hit.any(axis=0)  # columns where nobody's cap binds
        out = np.where(live & rest[None, :], lam[None, :] * w, out)
        out = np.where(hit, cap, out)
        left = left - np.where(hit, cap, 0.0).sum(axis=0)
        live &= ~hit & ~rest[None, :]
    return out[:, 0] if one else out
