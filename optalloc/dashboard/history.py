"""One summary row per recorded epoch: solver status, time and gap, occupancy, preemptions.

A recorded plan never changes, so its row never does either: `history_rows` takes the rows it
already has (`known`, by epoch id: from the static site's `history.json` or serve's memory) and
parses only the plans of newer epochs. That keeps the cost of a dashboard after each cron epoch
flat however long the history is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from optalloc.types import frozen_map


@dataclass(frozen=True)
class HistoryRow:
    epoch_id: int
    time: float
    backend: str | None
    status: str | None
    gap: float | None
    build_s: float | None
    solve_s: float | None
    place_s: float | None
    degraded: str | None
    gpus_available: int  # GPUs on up nodes, plus those still busy on drain/down nodes
    gpus_allocated: int  # placed GPUs charged to budgets
    gpus_unallocated: int
    pending: int
    preemptions: Mapping[str, int] = field(default_factory=frozen_map)  # by reason code

    @property
    def occupancy(self) -> float | None:
        if self.gpus_available <= 0:
            return None
        return (self.gpus_allocated + self.gpus_unallocated) / self.gpus_available

    @property
    def n_preemptions(self) -> int:
        return sum(self.preemptions.values())

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["preemptions"] = dict(self.preemptions)
        return d


def _num(v: Any) -> float | None:
    return None if v is None else float(v)


def summarize(epoch: Mapping[str, Any], config_up: int) -> HistoryRow:
    """A row from a store epoch record {id, time, plan, report, degraded}."""
    plan = epoch.get("plan") or {}
    rep = epoch.get("report") or plan.get("report") or {}
    nodes = (plan.get("inputs") or {}).get("nodes")
    up_nodes = None if not nodes else {d.get("name") for d in nodes if d.get("state", "up") == "up"}
    alloc = unalloc = off = 0
    for p in plan.get("placements", ()):
        for a in p.get("nodes", ()):
            n = len(a.get("gpus", ()))
            if p.get("allocated", True):
                alloc += n
            else:
                unalloc += n
            if up_nodes is not None and a.get("node") not in up_nodes:
                off += n  # still busy on a drain/down node
    up = config_up if not nodes else sum(int(d.get("gpus", 0)) for d in nodes
                                         if d.get("state", "up") == "up")
    pre: dict[str, int] = {}
    for x in plan.get("preemptions", ()):
        pre[str(x.get("code"))] = pre.get(str(x.get("code")), 0) + 1
    return HistoryRow(
        epoch_id=int(epoch["id"]),
        time=float(epoch["time"]),
        backend=rep.get("backend"),
        status=rep.get("status"),
        gap=_num(rep.get("gap")),
        build_s=_num(rep.get("build_s")),
        solve_s=_num(rep.get("solve_s")),
        place_s=_num(rep.get("place_s")),
        degraded=epoch.get("degraded") or plan.get("degraded"),
        gpus_available=up + off,
        gpus_allocated=alloc,
        gpus_unallocated=unalloc,
        pending=len(plan.get("pending", ())),
        preemptions=frozen_map(dict(sorted(pre.items()))),
    )


def history_rows(store, limit: int, config_up: int,
                 known: Mapping[int, HistoryRow] | None = None) -> list[HistoryRow]:
    """The latest `limit` epochs, oldest first; plans are read only for ids not in `known`."""
    known = known or {}
    latest = store.epoch_ids(limit)
    # a known row is reused only for the same epoch (id and time): a state DB started over
    # reuses ids
    reuse = {i: known[i] for i, t in latest if i in known and known[i].time == t}
    fresh = {int(e["id"]): summarize(e, config_up)
             for e in store.epochs_by_id([i for i, _ in latest if i not in reuse])}
    rows = [reuse.get(i) or fresh[i] for i, _ in latest if i in reuse or i in fresh]
    return sorted(rows, key=lambda r: r.epoch_id)


def load_cache(path: Path) -> dict[int, HistoryRow]:
    """Rows from a previous `history.json`; {} when it is missing or unreadable (then every
    plan is read again: the cache only saves time, it is never the truth)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        names = {f.name for f in fields(HistoryRow)}
        out = {}
        for d in doc["epochs"]:
            if set(d) != names:
                return {}
            d = dict(d, preemptions=frozen_map(d["preemptions"]))
            row = HistoryRow(**d)
            out[row.epoch_id] = row
        return out
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def cache_text(rows: list[HistoryRow]) -> str:
    return json.dumps({"epochs": [r.to_json() for r in rows]}, indent=1) + "\n"
