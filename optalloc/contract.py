"""The time-slicing contract's one protection rule, used by the snapshot, the simulator and the
runners (never restated elsewhere).

A run of an *allocated* job (min_runtime > 0, on a gpu_type where its project has a share) is
protected from preemption for min(min_runtime, cap) seconds from the start of that run, where
cap is `policy.min_runtime_cap_s`. Unallocated work (min_runtime 0, or a type where the project
has no share) is never protected.
"""

from __future__ import annotations

import numpy as np


def protection_s(min_runtime_s, cap_s: float):
    """Seconds of protection a run gets: min(min_runtime, cap) (cap <= 0: no cap)."""
    mr = np.asarray(min_runtime_s, dtype=float)
    out = np.minimum(mr, cap_s) if cap_s > 0 else mr
    return float(out) if out.ndim == 0 else out


def protected_until(start_s: float | None, min_runtime_s: float, cap_s: float,
                    allocated: bool = True) -> float | None:
    """End of a run's protection, or None when the run has none (not started, unallocated)."""
    if start_s is None or not allocated or min_runtime_s <= 0:
        return None
    return float(start_s) + protection_s(min_runtime_s, cap_s)


def short_jobs(snap) -> np.ndarray:
    """(J,) bool: allocated jobs whose protection is short (debug jobs): a cheap grant."""
    pol = snap.policy
    prot = protection_s(snap.job_min_runtime, pol.min_runtime_cap_s)
    return snap.job_allocated & (prot <= pol.debug_protection_s)
