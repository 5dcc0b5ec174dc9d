"""GPU utilization per job for the local runner (the metrics pyramid's utilization layer):
NVML samples of the GPUs each live run holds, kept in `runner_local_utilization`."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Sequence

from optalloc.state.local_tables import Run, write_transaction


@dataclass(frozen=True)
class JobGpuSample:
    """Utilization of one GPU of one running job at `time` (also stored in the state DB)."""

    job_id: str
    time: float
    gpu_index: int
    gpu_uuid: str | None
    gpu_util_pct: float | None
    memory_used_bytes: int | None


class UtilizationStore:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def sample(self, inventory, node: str, live: Sequence[Run], now: float) -> tuple[JobGpuSample, ...]:
        by_gpu = {g: r.job_id for r in live for a in r.placement.nodes if a.node == node
                  for g in a.gpus}
        out = tuple(
            JobGpuSample(by_gpu[s.index], now, s.index, s.uuid, s.gpu_util_pct,
                         s.memory_used_bytes)
            for s in inventory.sample() if s.index in by_gpu
        )
        if out:
            with write_transaction(self.conn):
                self.conn.executemany(
                    "INSERT INTO runner_local_utilization VALUES (?, ?, ?, ?, ?, ?)",
                    [(s.time, s.job_id, s.gpu_index, s.gpu_uuid, s.gpu_util_pct,
                      s.memory_used_bytes) for s in out])
        return out

    def mean(self, job_id: str) -> float | None:
        (v,) = self.conn.execute(
            "SELECT AVG(gpu_util_pct) FROM runner_local_utilization WHERE job_id = ?",
            (job_id,)).fetchone()
        return v
