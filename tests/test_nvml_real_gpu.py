"""The pynvml paths on a real NVIDIA GPU (marker `gpu`). Skipped, with the reason, where NVML
cannot start (this project's CI and development machines have no GPU); run on a GPU machine
with `pytest -m gpu tests/test_nvml_real_gpu.py`."""

from __future__ import annotations

import re
import sys
import time

import pytest

from optalloc.runners.local import LocalRunner
from optalloc.runners.nvml import GpuInventory, gpu_type_for_model
from optalloc.types import Job, Node, NodeAlloc, Placement, Plan, Policy

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def inventory():
    inv = GpuInventory.open()
    if not inv.available:
        pytest.skip(f"no NVIDIA GPU here: {inv.reason or 'NVML unavailable'}")
    yield inv
    inv.close()


def test_the_inventory_lists_every_gpu_with_a_uuid_model_type_and_memory(inventory):
    import pynvml

    gpus = inventory.gpus()
    assert len(gpus) == pynvml.nvmlDeviceGetCount() >= 1
    for i, g in enumerate(gpus):
        assert g.index == i
        assert g.uuid and re.fullmatch(r"(GPU|MIG)-[0-9a-fA-F-]+", g.uuid)
        assert g.model and g.gpu_type == gpu_type_for_model(g.model)
        assert g.memory_total_bytes and g.memory_total_bytes > 1 << 30
    assert len({g.uuid for g in gpus}) == len(gpus)


def test_a_hopper_gpu_maps_to_its_gpu_type(inventory):
    models = {g.model for g in inventory.gpus()}
    for m in models:
        if "H100" in m or "H200" in m:
            assert gpu_type_for_model(m) in ("h100", "h200")


def test_utilization_samples_are_percentages_and_memory_is_consistent(inventory):
    for s in inventory.sample():
        assert s.gpu_util_pct is None or 0 <= s.gpu_util_pct <= 100
        assert s.memory_util_pct is None or 0 <= s.memory_util_pct <= 100
        if s.memory_used_bytes is not None and s.memory_total_bytes is not None:
            assert 0 <= s.memory_used_bytes <= s.memory_total_bytes


def test_a_job_started_by_the_local_runner_sees_its_gpu_by_uuid(inventory, tmp_path):
    gpu = inventory.gpus()[0]
    node = Node("gpu-box", gpu.gpu_type, len(inventory.gpus()))
    runner = LocalRunner(
        tmp_path / "state.db", node, run_dir=tmp_path / "runs", inventory=inventory, policy=Policy()
    )
    out = tmp_path / "seen.txt"
    code = "import os,sys; open(sys.argv[1],'w').write(os.environ['CUDA_VISIBLE_DEVICES'])"
    job = Job("g1", "p", 1, min_runtime_s=60, command=(sys.executable, "-c", code, str(out)))
    placement = Placement("g1", gpu.gpu_type, (NodeAlloc("gpu-box", (0,)),))
    now = time.time()
    res = runner.apply(Plan(now, placements=(placement,)), {"g1": job}, now)
    assert res.started == ("g1",) and not res.errors
    deadline = time.time() + 30
    events = []
    while time.time() < deadline and not events:
        events = [e for e in runner.observe(time.time()).events if e.job_id == "g1"]
        time.sleep(0.1)
    assert events and events[0].kind.value == "finished"
    assert out.read_text() == gpu.uuid
    runner.close()
