"""JSON-ready dicts <-> frozen types (Job, Placement, Plan, ...). One place, so the plan file,
the state DB and the runners agree on one schema.

`to_dict(obj)` works for any dataclass of optalloc.types (enums become their values, tuples
lists, mappings dicts); `job_from_dict`, `placement_from_dict` and `plan_from_dict` invert it.
"""

from __future__ import annotations

import dataclasses
import math
from enum import Enum
from typing import Any, Mapping

from optalloc.types import (
    DrainStatus,
    FloorViolation,
    Job,
    JobState,
    Node,
    NodeAlloc,
    NodeState,
    PendingReason,
    Placement,
    Plan,
    Preemption,
    ReasonCode,
    Reservation,
    ReservationEnd,
    ReservationIdle,
    SolveReport,
    frozen_map,
)

PLAN_SCHEMA_VERSION = 1


def to_dict(obj: Any) -> Any:
    """Recursively convert dataclasses/enums/tuples/mappings to JSON-ready values.
    Non-finite floats become None (JSON has no inf/nan)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, Mapping):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        return to_dict(obj.item())
    return obj


def placement_from_dict(d: Mapping[str, Any]) -> Placement:
    return Placement(
        job_id=str(d["job_id"]),
        gpu_type=str(d["gpu_type"]),
        nodes=tuple(NodeAlloc(str(a["node"]), tuple(int(g) for g in a["gpus"])) for a in d["nodes"]),
        allocated=bool(d.get("allocated", True)),
    )


def nodes_from_dicts(docs, gpu_types) -> tuple[Node, ...]:
    """The nodes an epoch recorded (its plan's inputs, `to_dict` of each), with their states
    then; nodes of a type the config no longer has are left out."""
    types = {g.name for g in gpu_types}
    return tuple(Node(d["name"], d["gpu_type"], int(d["gpus"]), NodeState(d["state"]))
                 for d in docs if d.get("gpu_type") in types)


def job_from_dict(d: Mapping[str, Any]) -> Job:
    pl = d.get("placement")
    return Job(
        id=str(d["id"]),
        project=str(d["project"]),
        gpus=int(d["gpus"]),
        gpus_per_node=None if d.get("gpus_per_node") is None else int(d["gpus_per_node"]),
        gpu_types=tuple(d.get("gpu_types") or ()),
        speedup=frozen_map({k: float(v) for k, v in (d.get("speedup") or {}).items()}),
        min_runtime_s=float(d.get("min_runtime_s", 0.0)),
        resumable=bool(d.get("resumable", True)),
        priority=int(d.get("priority", 0)),
        submit_time=float(d.get("submit_time", 0.0)),
        duration_s=None if d.get("duration_s") is None else float(d["duration_s"]),
        checkpoint_interval_s=(
            None if d.get("checkpoint_interval_s") is None else float(d["checkpoint_interval_s"])
        ),
        state=JobState(d.get("state", "queued")),
        start_time=None if d.get("start_time") is None else float(d["start_time"]),
        placement=None if pl is None else placement_from_dict(pl),
        command=tuple(d.get("command") or ()),
    )


def _opt_float(v) -> float | None:
    return None if v is None else float(v)


def reservation_from_dict(d: Mapping[str, Any]) -> Reservation:
    return Reservation(
        job_id=str(d["job_id"]),
        gpu_type=str(d["gpu_type"]),
        nodes=tuple(str(n) for n in d.get("nodes") or ()),
        expected_start=float(d["expected_start"]),
        project=str(d.get("project", "")),
        gpus=int(d.get("gpus", 0)),
        since=_opt_float(d.get("since")),
        idle_gpus=int(d.get("idle_gpus", 0)),
        message=str(d.get("message", "")),
        details=frozen_map(d.get("details") or {}),
        at=_opt_float(d.get("at")),
        idle_gpu_h=float(d.get("idle_gpu_h") or 0.0),
    )


def reservation_end_from_dict(d: Mapping[str, Any]) -> ReservationEnd:
    return ReservationEnd(
        job_id=str(d["job_id"]),
        gpu_type=str(d["gpu_type"]),
        nodes=tuple(str(n) for n in d.get("nodes") or ()),
        expected_start=float(d["expected_start"]),
        outcome=str(d["outcome"]),
        message=str(d.get("message", "")),
        since=_opt_float(d.get("since")),
    )


def plan_reservations_from_dict(d: Mapping[str, Any] | None) -> tuple[Reservation, ...]:
    """The reservations of a stored plan (none in a plan written before they existed, or in
    an entry that cannot be read: the lookahead then starts afresh)."""
    out = []
    for r in (d or {}).get("reservations") or ():
        try:
            out.append(reservation_from_dict(r))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return tuple(out)


def reservation_idle_from_dict(d: Mapping[str, Any]) -> ReservationIdle:
    return ReservationIdle(job_id=str(d["job_id"]), project=str(d["project"]),
                           gpu_type=str(d["gpu_type"]), start=float(d["start"]),
                           end=float(d["end"]), gpu_h=float(d["gpu_h"]))


def plan_reservation_idle_from_dict(d: Mapping[str, Any] | None) -> tuple[ReservationIdle, ...]:
    """The idle GPU-hours of ended reservations a stored plan carries (none in a plan written
    before they existed; an entry that cannot be read is skipped)."""
    out = []
    for r in (d or {}).get("reservation_idle") or ():
        try:
            out.append(reservation_idle_from_dict(r))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return tuple(out)


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    out = to_dict(plan)
    out["schema_version"] = PLAN_SCHEMA_VERSION
    return out


def plan_from_dict(d: Mapping[str, Any]) -> Plan:
    rep = d.get("report")
    return Plan(
        now=float(d["now"]),
        placements=tuple(placement_from_dict(p) for p in d.get("placements", ())),
        preemptions=tuple(
            Preemption(
                job_id=str(p["job_id"]),
                code=ReasonCode(p["code"]),
                message=str(p["message"]),
                grace_s=float(p["grace_s"]),
                needed_by=tuple(p.get("needed_by") or ()),
            )
            for p in d.get("preemptions", ())
        ),
        pending=tuple(
            PendingReason(
                job_id=str(p["job_id"]),
                code=ReasonCode(p["code"]),
                message=str(p["message"]),
                details=frozen_map(p.get("details") or {}),
            )
            for p in d.get("pending", ())
        ),
        floor_violations=tuple(FloorViolation(**f) for f in d.get("floor_violations", ())),
        report=None if rep is None else SolveReport(**{
            k: v for k, v in rep.items() if k in SolveReport.__dataclass_fields__}),
        degraded=d.get("degraded"),
        drains=tuple(
            DrainStatus(
                node=str(s["node"]),
                staying=tuple(s.get("staying") or ()),
                leaving=tuple(s.get("leaving") or ()),
                empty_at=None if s.get("empty_at") is None else float(s["empty_at"]),
                ready=bool(s.get("ready", False)),
            )
            for s in d.get("drains", ())
        ),
        reservations=tuple(reservation_from_dict(r) for r in d.get("reservations", ())),
        reservations_ended=tuple(reservation_end_from_dict(r)
                                 for r in d.get("reservations_ended", ())),
        reservation_idle=tuple(reservation_idle_from_dict(r)
                               for r in d.get("reservation_idle", ())),
    )
