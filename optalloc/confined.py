"""Projects confined to the same gpu_types share them: the joint cap on the fair measure's
placeable demand (optalloc.demand).

Each project's placeable GPUs are capped at the up GPUs of the types its jobs fit, alone. Two
projects whose jobs fit only one 8-GPU a100 node then wanted 8 each, 16 of a node of 8: the
fair measure (OrgTree.fair_shares) gave each 8 of its share of 32 and the h100 projects only
8 each, where they could use 12 (C and D can hold 4 each between them; an outside review,
stop 52: B, short 4 GPUs an hour of its fair 12, was never fair-owed and its gang neighbour
took every epoch). The rule (DESIGN.md rule 2, capacity a subtree cannot use goes to its
siblings): for every set S of types, the projects whose jobs fit only types in S together
want at most S's up GPUs. Where they want more, S's GPUs are split among them as the fair
measure splits capacity (hierarchical water-filling over their entitlement on S's GPUs), and
each project's cap is lowered to its part; repeated until no set is over (a lowered cap only
frees room, it never raises another). The sets checked are the unions of the projects' own
sets of types (a set between two such unions holds the same projects and more GPUs, so
binds less).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

__all__ = ["confined_caps", "sample_gpus"]

#: types beyond which only the projects' own sets are checked, not their unions (2**T sets)
MAX_UNION_TYPES = 10


def confined_caps(org, want: Mapping[str, float], fits: Mapping[str, int],
                  cap: Sequence[int]) -> dict[str, float]:
    """`want` (placeable GPUs per project, each at most the up GPUs of its types) lowered
    where projects confined to the same types want more than those types hold (see the
    module). `fits`: per project, the bit set of the types its placeable jobs fit (bit t:
    type t of `cap`); `cap`: up GPUs per type, in org.gpu_types' order."""
    out = {p: float(g) for p, g in want.items()}
    cap = np.asarray(cap, dtype=float)
    bits = {p: int(fits.get(p, 0)) for p in out}
    sets = _unions(set(bits.values()), len(cap))
    sets = sorted(sets, key=lambda s: (bin(s).count("1"), s))
    if not sets:
        return out
    member = org.membership().astype(float)
    for _ in range(len(sets) + 1):
        changed = False
        for s in sets:
            inside = [p for p in out if bits[p] and not bits[p] & ~s and p in org.index]
            room = _gpus(s, cap)
            if sum(out[p] for p in inside) <= room + 1e-9:
                continue
            part = _split(org, member, out, inside, s, cap, room)
            for p in inside:
                out[p] = min(out[p], part[p])
            changed = True
        if not changed:
            break
    return {p: sample_gpus(g) for p, g in out.items()}


def sample_gpus(g) -> int | float:
    """A placeable demand sample's GPUs: an integer where whole, else the part of a shared
    type kept to 1e-6 (the ledger's and the state DB's samples alike)."""
    f = float(g)
    return int(round(f)) if abs(f - round(f)) < 1e-9 else round(f, 6)


def _gpus(s: int, cap: np.ndarray) -> float:
    return float(sum(c for t, c in enumerate(cap) if s >> t & 1))


def _unions(classes: set[int], n_types: int) -> set[int]:
    """The unions of the projects' sets of types (the sets themselves past MAX_UNION_TYPES)."""
    classes.discard(0)
    if n_types > MAX_UNION_TYPES:
        return classes
    out: set[int] = set()
    for c in classes:
        out |= {c | u for u in out} | {c}
    return out


def _split(org, member: np.ndarray, want: Mapping[str, float], inside: list[str], s: int,
           cap: np.ndarray, room: float) -> dict[str, float]:
    """`room` GPUs of the types in `s` split among the projects `inside` (those confined to
    them) as the fair measure splits capacity: per family, in proportion to the entitlement
    on those GPUs, each at most what its subtree needs of them (OrgTree.fair_shares). A
    project needs what it wants; an org node above projects some of which are not confined
    to `s`, at most its fair share of the whole cluster less what those can take elsewhere: P {x}, Q {y, z},
    x and y confined to a100, z to h100, one node each: Q takes its share on h100 through
    z, so x may hold the whole a100 node (P 8, Q 8). Split by entitlement alone, P and Q got
    4 each of it and P's fair share read 4 (a review, stop 53)."""
    n = org.n
    leaf_all, leaf_in = np.zeros(n), np.zeros(n)
    for p, g in want.items():
        if p in org.index:
            leaf_all[org.index[p]] = g
    for p in inside:
        leaf_in[org.index[p]] = want[p]
    fair = org.fair_shares((member @ leaf_all)[:, None],
                           (np.asarray(org.entitlement, dtype=float) @ cap)[:, None])[:, 0]
    out = member @ (leaf_all - leaf_in)  # what each node's projects outside `s` want
    need = np.where(np.asarray(org.is_leaf) | (out <= 0), member @ leaf_in, np.minimum(
        member @ leaf_in, np.maximum(fair - out, 0.0)))
    on = np.array([(s >> t & 1) * c for t, c in enumerate(cap)], dtype=float)
    weight = np.asarray(org.entitlement, dtype=float) @ on
    top = weight[np.asarray(org.parent) == 0].sum()  # the root's children
    if top > 0:
        weight = weight * (room / top)  # the root shares `room`
    got = org.fair_shares(need[:, None], weight[:, None])[:, 0]
    return {p: float(got[org.index[p]]) for p in inside}
