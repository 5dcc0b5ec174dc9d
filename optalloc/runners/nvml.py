"""GPU inventory, health and utilization of this machine through NVML (nvidia-ml-py).

`GpuInventory.open()` never raises: without the NVIDIA driver (CI, laptops, this repo's test
machine) it logs ONE warning per process and reports `available = False`; callers then use the
inventory from the config (`config_gpus(node)`). Every NVML call that fails later (a GPU fell
off the bus, a query is not supported on this model) becomes a health problem or a missing
value, never an exception out of this module.

Health rules (a GPU with any problem is unhealthy; the local runner then reports its node as
drain, so running jobs may finish but nothing new is placed there):
- uncorrected volatile ECC errors > 0,
- retired pages pending or row remapping pending/failed (the GPU needs a reset),
- a critical XID event seen since the inventory opened, except XIDs that user programs cause
  themselves (13, 31, 43, 45, 68: bad kernel, page fault, stopped by the driver, cleanup),
- NVML_ERROR_GPU_IS_LOST on any query.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Mapping

from optalloc.types import Node

log = logging.getLogger(__name__)

# Model name (as NVML reports it, e.g. "NVIDIA H100 80GB HBM3") -> optalloc gpu_type.
# Matched as whole tokens, so "GH200" is not "H200" and "A10G" is not "A10".
GPU_TYPE_BY_MODEL: Mapping[str, str] = {
    "GB300": "gb300",
    "B300": "b300",
    "GB200": "gb200",
    "B200": "b200",
    "B100": "b100",
    "GH200": "gh200",
    "H200": "h200",
    "H100": "h100",
    "H800": "h800",
    "H20": "h20",
    "A100": "a100",
    "A800": "a800",
    "A40": "a40",
    "A30": "a30",
    "A10G": "a10g",
    "A10": "a10",
    "L40S": "l40s",
    "L40": "l40",
    "L4": "l4",
    "V100": "v100",
    "T4": "t4",
}

# XIDs caused by the user's own program: the GPU itself is fine.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68})

_warned: set[str] = set()  # reasons already logged in this process (warn once)


def gpu_type_for_model(model: str, extra: Mapping[str, str] | None = None) -> str:
    """The optalloc gpu_type of an NVML model name. `extra` (model token -> type) is tried
    first, then GPU_TYPE_BY_MODEL; an unknown model becomes a lowercase slug of its name
    without the vendor ("NVIDIA RTX 6000 Ada Generation" -> "rtx-6000-ada-generation")."""
    for table in (extra or {}, GPU_TYPE_BY_MODEL):
        for token, gpu_type in table.items():
            if re.search(rf"(?<![A-Za-z0-9]){re.escape(token)}(?![A-Za-z0-9])", model, re.I):
                return gpu_type
    name = re.sub(r"^\s*nvidia\s+", "", model, flags=re.I)
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"


@dataclass(frozen=True)
class GpuInfo:
    index: int
    uuid: str | None  # None when the inventory comes from the config
    model: str
    gpu_type: str
    memory_total_bytes: int | None = None
    problems: tuple[str, ...] = ()  # empty = healthy

    @property
    def healthy(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_memory_bytes: int | None


@dataclass(frozen=True)
class GpuSample:
    """One utilization reading of one GPU (NVML's rates are averages over its last second)."""

    index: int
    uuid: str | None
    gpu_util_pct: float | None
    memory_util_pct: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    processes: tuple[GpuProcess, ...] = ()


def config_gpus(node: Node) -> tuple[GpuInfo, ...]:
    """The inventory the config declares for `node` (used when NVML is unavailable)."""
    return tuple(
        GpuInfo(index=i, uuid=None, model="(from config)", gpu_type=node.gpu_type)
        for i in range(node.gpus)
    )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _warn_once(reason: str) -> None:
    if reason not in _warned:
        _warned.add(reason)
        log.warning("%s", reason)


class GpuInventory:
    """NVML session for this machine. Use `GpuInventory.open()`; `available` says whether NVML
    answered. All methods are safe to call when it did not (they return empty results)."""

    def __init__(self, nvml: ModuleType | None, count: int, reason: str = "",
                 model_map: Mapping[str, str] | None = None):
        self._nvml = nvml
        self._count = count
        self.reason = reason  # why NVML is unavailable ("" when available)
        self._model_map = dict(model_map or {})
        self._handles: list[Any] = []
        self._events: Any = None
        self._xids: dict[int, list[int]] = {}
        if nvml is not None:
            self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            self._register_xid_events()

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(cls, nvml: ModuleType | None = None,
             model_map: Mapping[str, str] | None = None) -> "GpuInventory":
        """Initialize NVML (the `pynvml` module of nvidia-ml-py unless `nvml` is given).
        Never raises: on failure the inventory is unavailable and one warning is logged."""
        if nvml is None:
            try:
                import pynvml as nvml  # type: ignore[no-redef]
            except ImportError:
                return cls._unavailable("the nvidia-ml-py package (pynvml) is not installed")
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as err:
            return cls._unavailable(f"NVML could not start ({err})")
        except OSError as err:  # a broken libnvidia-ml.so
            return cls._unavailable(f"NVML could not start ({err})")
        try:
            count = int(nvml.nvmlDeviceGetCount())
            return cls(nvml, count, model_map=model_map)
        except nvml.NVMLError as err:
            _safe_shutdown(nvml)
            return cls._unavailable(f"NVML could not list GPUs ({err})")

    @classmethod
    def _unavailable(cls, why: str) -> "GpuInventory":
        _warn_once(f"no NVIDIA GPU inventory: {why}; using the GPUs declared in the config")
        return cls(None, 0, reason=why)

    @property
    def available(self) -> bool:
        return self._nvml is not None

    def close(self) -> None:
        if self._nvml is not None:
            if self._events is not None:
                try:
                    self._nvml.nvmlEventSetFree(self._events)
                except Exception:  # noqa: BLE001 - freeing is best effort
                    pass
            _safe_shutdown(self._nvml)
            self._nvml = None

    def __enter__(self) -> "GpuInventory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ queries
    def gpus(self) -> tuple[GpuInfo, ...]:
        """Every GPU with its model, gpu_type, memory, UUID and current health problems."""
        if self._nvml is None:
            return ()
        self._drain_xid_events()
        return tuple(self._info(i, h) for i, h in enumerate(self._handles))

    def sample(self) -> tuple[GpuSample, ...]:
        """Utilization, memory use and compute processes of every GPU now."""
        if self._nvml is None:
            return ()
        nv = self._nvml
        out = []
        for i, h in enumerate(self._handles):
            uuid = self._call(nv.nvmlDeviceGetUUID, h)
            rates = self._call(nv.nvmlDeviceGetUtilizationRates, h)
            mem = self._call(nv.nvmlDeviceGetMemoryInfo, h)
            procs = self._call(nv.nvmlDeviceGetComputeRunningProcesses, h) or ()
            out.append(GpuSample(
                index=i,
                uuid=None if uuid is None else _text(uuid),
                gpu_util_pct=None if rates is None else float(rates.gpu),
                memory_util_pct=None if rates is None else float(rates.memory),
                memory_used_bytes=None if mem is None else int(mem.used),
                memory_total_bytes=None if mem is None else int(mem.total),
                processes=tuple(
                    GpuProcess(int(p.pid), _mem_or_none(getattr(p, "usedGpuMemory", None)))
                    for p in procs
                ),
            ))
        return tuple(out)

    # ------------------------------------------------------------------ internals
    def _call(self, fn: Any, *args: Any) -> Any:
        """fn(*args), or None when NVML says the query failed (not supported, GPU lost...)."""
        try:
            return fn(*args)
        except self._nvml.NVMLError:  # type: ignore[union-attr]
            return None

    def _info(self, index: int, handle: Any) -> GpuInfo:
        nv = self._nvml
        assert nv is not None
        problems: list[str] = []
        try:
            model = _text(nv.nvmlDeviceGetName(handle))
        except nv.NVMLError as err:
            model = "unknown"
            problems.append(f"name query failed ({err})")
        uuid = self._call(nv.nvmlDeviceGetUUID, handle)
        mem = self._call(nv.nvmlDeviceGetMemoryInfo, handle)
        problems += self._health_problems(handle)
        problems += [f"critical XID {x} since optalloc started" for x in self._xids.get(index, ())]
        return GpuInfo(
            index=index,
            uuid=None if uuid is None else _text(uuid),
            model=model,
            gpu_type=gpu_type_for_model(model, self._model_map),
            memory_total_bytes=None if mem is None else int(mem.total),
            problems=tuple(dict.fromkeys(problems)),  # dedupe, keep order
        )

    def _health_problems(self, handle: Any) -> list[str]:
        nv = self._nvml
        assert nv is not None
        problems: list[str] = []
        try:
            ecc = int(nv.nvmlDeviceGetTotalEccErrors(
                handle, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC))
            if ecc > 0:
                problems.append(f"{ecc} uncorrected ECC errors since boot")
        except nv.NVMLError as err:
            if _is_lost(nv, err):
                problems.append("GPU is lost (fell off the bus); reset or reboot needed")
        try:
            if nv.nvmlDeviceGetRetiredPagesPendingStatus(handle):
                problems.append("retired pages pending: the GPU needs a reset")
        except nv.NVMLError:
            pass
        try:
            _corr, _unc, pending, failed = nv.nvmlDeviceGetRemappedRows(handle)
            if failed:
                problems.append("row remapping failed: the GPU needs service")
            elif pending:
                problems.append("row remapping pending: the GPU needs a reset")
        except nv.NVMLError:
            pass
        return problems

    def _register_xid_events(self) -> None:
        nv = self._nvml
        try:
            self._events = nv.nvmlEventSetCreate()
        except (nv.NVMLError, AttributeError):
            self._events = None
            return
        for h in self._handles:
            try:
                nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, self._events)
            except nv.NVMLError:
                pass  # not supported on this GPU: ECC/remap checks still apply

    def _drain_xid_events(self) -> None:
        nv = self._nvml
        if self._events is None or nv is None:
            return
        uuid_index = {}
        for i, h in enumerate(self._handles):
            u = self._call(nv.nvmlDeviceGetUUID, h)
            if u is not None:
                uuid_index[_text(u)] = i
        for _ in range(1024):  # bounded: a storm of events cannot hang an epoch
            try:
                ev = nv.nvmlEventSetWait_v2(self._events, 0)
            except nv.NVMLError:
                return  # NVML_ERROR_TIMEOUT: no more events
            xid = int(getattr(ev, "eventData", 0))
            if xid in APPLICATION_XIDS:
                continue
            idx = self._event_index(ev, uuid_index)
            if idx is not None:
                self._xids.setdefault(idx, [])
                if xid not in self._xids[idx]:
                    self._xids[idx].append(xid)

    def _event_index(self, ev: Any, uuid_index: Mapping[str, int]) -> int | None:
        dev = getattr(ev, "device", None)
        for i, h in enumerate(self._handles):
            if dev is h:
                return i
        u = self._call(self._nvml.nvmlDeviceGetUUID, dev) if dev is not None else None
        return None if u is None else uuid_index.get(_text(u))


def _mem_or_none(v: Any) -> int | None:
    # NVML reports "not available" as a huge sentinel (NVML_VALUE_NOT_AVAILABLE)
    if v is None or int(v) >= 2**63 - 1 or int(v) < 0:
        return None
    return int(v)


def _is_lost(nv: Any, err: Exception) -> bool:
    return getattr(err, "value", None) == getattr(nv, "NVML_ERROR_GPU_IS_LOST", object())


def _safe_shutdown(nv: Any) -> None:
    try:
        nv.nvmlShutdown()
    except Exception:  # noqa: BLE001 - shutdown is best effort
        pass
