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
from optalloc.model.reservations import Reservations
from optalloc.model.targets import Targets
from optalloc.snapshot import Snapshot


def _empty() -> np.ndarray:
    return np.zeros(0, dtype=np.int64)


@dataclass
class BuildContext:
    snap: Snapshot
    req: Requirements
    imp: Impact
    tg: Targets
    res: Reservations | None = None  # the lookahead's reserved nodes (None: none chosen)
    b: ModelBuilder = field(default_factory=ModelBuilder)
    # x[c]: candidate c = (req.cand_job[c], req.cand_type[c]) starts this epoch
    x: np.ndarray = field(default_factory=_empty)
    # k[i]: running job req.run_job[i] keeps its exact placement
    k: np.ndarray = field(default_factory=_empty)
    # z[i]: up node z_node[i] is reserved whole for multi-node gangs
    z: np.ndarray = field(default_factory=_empty)
    z_node: np.ndarray = field(default_factory=_empty)
    # u[i]: number of single-node jobs (or gang remainders) of size u_size[i] on node u_node[i]
    u: np.ndarray = field(default_factory=_empty)
    u_node: np.ndarray = field(default_factory=_empty)
    u_size: np.ndarray = field(default_factory=_empty)
    # per-node gangs by class (type, gpus_per_node, pieces): y_count[k] gangs of class k start,
    # y[i]: pieces of class y_class[i] on node y_node[i]; cand_class (C,) class of a candidate
    y: np.ndarray = field(default_factory=_empty)
    y_node: np.ndarray = field(default_factory=_empty)
    y_class: np.ndarray = field(default_factory=_empty)
    y_count: np.ndarray = field(default_factory=_empty)
    cand_class: np.ndarray = field(default_factory=_empty)
    classes: list = field(default_factory=list)
    # m[i]: GPUs of share (m_org[i], m_type[i]) met in tier m_seg[i] (0..K-1 floor segments,
    # K: the target above the floor)
    m: np.ndarray = field(default_factory=_empty)
    m_org: np.ndarray = field(default_factory=_empty)
    m_type: np.ndarray = field(default_factory=_empty)
    m_seg: np.ndarray = field(default_factory=_empty)
    # d[i]: debug GPUs of project d_org[i] on d_type[i] beyond its target
    d: np.ndarray = field(default_factory=_empty)
    d_org: np.ndarray = field(default_factory=_empty)
    d_type: np.ndarray = field(default_factory=_empty)
    # f[i]: GPUs of project f_org[i]'s unallocated work within its fill target; fill (O,) the
    # fill targets (optalloc.model.fill)
    f: np.ndarray = field(default_factory=_empty)
    f_org: np.ndarray = field(default_factory=_empty)
    fill: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # order rows: job prec_a[i] must start if job prec_b[i] does
    prec_a: np.ndarray = field(default_factory=_empty)
    prec_b: np.ndarray = field(default_factory=_empty)
    # keep_order rows: candidate keep_c[i] starts only if running job run_job[keep_i[i]] runs
    keep_i: np.ndarray = field(default_factory=_empty)
    keep_c: np.ndarray = field(default_factory=_empty)
