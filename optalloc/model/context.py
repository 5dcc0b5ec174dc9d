"""The build context shared by the ordered `define_*` functions of the epoch model.

Each `define_*` adds one variable block and/or one constraint family to the ModelBuilder and
records the domain coordinates of what it added here (which job, type, node, org node a column
belongs to), so the solution can be read back without searching.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from optalloc.model.matrix import ModelBuilder
from optalloc.model.objective.impact import Impact
from optalloc.model.requirements import Requirements
from optalloc.snapshot import Snapshot

_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass
class BuildContext:
    snap: Snapshot
    req: Requirements
    imp: Impact
    b: ModelBuilder = field(default_factory=ModelBuilder)
    # x[c]: candidate c = (req.cand_job[c], req.cand_type[c]) starts this epoch
    x: np.ndarray = field(default_factory=lambda: _EMPTY)
    # k[i]: running job req.run_job[i] keeps its exact placement
    k: np.ndarray = field(default_factory=lambda: _EMPTY)
    # z[i]: up node z_node[i] is reserved whole for multi-node gangs
    z: np.ndarray = field(default_factory=lambda: _EMPTY)
    z_node: np.ndarray = field(default_factory=lambda: _EMPTY)
    # u[i]: number of single-node jobs (or gang pieces) of size u_size[i] packed on node u_node[i]
    u: np.ndarray = field(default_factory=lambda: _EMPTY)
    u_node: np.ndarray = field(default_factory=lambda: _EMPTY)
    u_size: np.ndarray = field(default_factory=lambda: _EMPTY)
    # m[i]: GPUs of floor (m_org[i], m_type[i]) met
    m: np.ndarray = field(default_factory=lambda: _EMPTY)
    m_org: np.ndarray = field(default_factory=lambda: _EMPTY)
    m_type: np.ndarray = field(default_factory=lambda: _EMPTY)
    floor: np.ndarray | None = None  # (O, T) floor GPUs
    demand: np.ndarray | None = None  # (O, T) allocated demand used for the floors
