"""The scheme's two orders, computed once and used by the model, the reasons and the greedy
baseline (DESIGN.md section 8, rules 1 and 3).

* **Fair Tree order across teams**: at every level of the org tree siblings are ranked by usage
  ratio over the window (lower first, ties by name); a subtree's rank comes before the rank of
  anything inside it. `fair_tree_rank` gives every project its position in that order.
* **A team's own order**: declared priority (higher first), then, among equal priority, jobs
  already running (a started job keeps its place: an equal-priority job never displaces it),
  then submit time (earlier first), then id. `project_order` gives every job its position
  inside its project, `priority_class` the position of its priority among the project's
  distinct priorities.
"""

from __future__ import annotations

import numpy as np

from optalloc.snapshot import Snapshot


def fair_tree_rank(snap: Snapshot) -> np.ndarray:
    """(O,) 0-based rank of every leaf among all leaves in Fair-Tree order (inner nodes -1)."""
    org = snap.org
    ratio = np.nan_to_num(np.asarray(snap.usage_ratio, dtype=float), nan=np.inf)
    key = {}
    for v in np.flatnonzero(org.is_leaf):
        path = []
        u = int(v)
        while org.parent[u] >= 0:
            path.append((float(ratio[u]), org.names[u]))
            u = int(org.parent[u])
        key[int(v)] = tuple(reversed(path))
    rank = np.full(org.n, -1, dtype=np.int64)
    for r, v in enumerate(sorted(key, key=key.__getitem__)):
        rank[v] = r
    return rank


def order_score(snap: Snapshot) -> np.ndarray:
    """(O,) a leaf's Fair-Tree position as a score in [0, 1]: 1 for the best-ranked project,
    0 for the worst (a single project scores 1)."""
    rank = fair_tree_rank(snap)
    n = int((rank >= 0).sum())
    return np.where(rank >= 0, 1.0 - rank / max(n - 1, 1), 0.0)


def project_order(snap: Snapshot) -> np.ndarray:
    """(J,) 0-based position of every job in its project's own order."""
    J = len(snap.jobs)
    if J == 0:
        return np.zeros(0, dtype=np.int64)
    ids = np.array([j.id for j in snap.jobs], dtype=object)
    order = np.lexsort((ids, snap.job_submit, ~snap.job_running, -snap.job_priority,
                        snap.job_project))
    proj = snap.job_project[order]
    start = np.r_[0, np.flatnonzero(np.diff(proj)) + 1]
    first = np.repeat(start, np.diff(np.r_[start, J]))
    pos = np.empty(J, dtype=np.int64)
    pos[order] = np.arange(J) - first
    return pos


def priority_class(snap: Snapshot) -> tuple[np.ndarray, np.ndarray]:
    """((J,) 0-based rank of the job's priority among its project's distinct priorities,
    highest first; (J,) number of distinct priorities in the job's project)."""
    J = len(snap.jobs)
    if J == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    proj = snap.job_project
    pairs, inv = np.unique(np.stack([proj, -snap.job_priority], axis=1), axis=0,
                           return_inverse=True)
    inv = np.asarray(inv).reshape(-1)
    first = np.searchsorted(pairs[:, 0], proj, side="left")
    last = np.searchsorted(pairs[:, 0], proj, side="right")
    return inv - first, last - first
