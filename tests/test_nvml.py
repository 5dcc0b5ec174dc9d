"""GPU inventory through NVML: the absent path (no driver, no package) and the present path with
a fake `pynvml` that behaves like nvidia-ml-py (tests/conftest.py)."""

from __future__ import annotations

import logging

import pynvml as real_pynvml
import pytest
from hypothesis import given
from hypothesis import strategies as st

from optalloc.runners import nvml
from optalloc.runners.nvml import (
    GPU_TYPE_BY_MODEL,
    GpuInfo,
    GpuInventory,
    GpuProcess,
    GpuSample,
    config_gpus,
    gpu_type_for_model,
)
from optalloc.types import Node
from tests.conftest import FakeGpu


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(nvml, "_warned", set())


def uuid(i: int) -> str:
    return f"GPU-{i:08d}-aaaa-bbbb-cccc-000000000000"


# ---------------------------------------------------------------------- model -> gpu_type


@pytest.mark.parametrize(
    "model, expected",
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H100 PCIe", "h100"),
        ("NVIDIA H100-SXM5-80GB", "h100"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA GH200 480GB", "gh200"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA GB200", "gb200"),
        ("NVIDIA B300 SXM6 AC", "b300"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA A10G", "a10g"),
        ("NVIDIA A10", "a10"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA L4", "l4"),
        ("Tesla V100-SXM2-32GB", "v100"),
        ("Tesla T4", "t4"),
        ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada-generation"),
        ("NVIDIA GeForce RTX 4090", "geforce-rtx-4090"),
    ],
)
def test_a_model_name_maps_to_its_gpu_type(model, expected):
    assert gpu_type_for_model(model) == expected


def test_a_site_mapping_overrides_the_built_in_table():
    assert gpu_type_for_model("NVIDIA H100 80GB HBM3", {"H100": "hopper"}) == "hopper"
    assert gpu_type_for_model("NVIDIA RTX A6000", {"A6000": "a6000"}) == "a6000"


@given(
    token=st.sampled_from(sorted(GPU_TYPE_BY_MODEL)),
    prefix=st.sampled_from(["NVIDIA ", "Tesla ", ""]),
    suffix=st.sampled_from(["", " 80GB HBM3", "-SXM5-80GB", " PCIe", " NVL"]),
)
def test_every_known_token_maps_to_its_type_whatever_the_vendor_decoration(token, prefix, suffix):
    assert gpu_type_for_model(f"{prefix}{token}{suffix}") == GPU_TYPE_BY_MODEL[token]


@given(st.text(max_size=40))
def test_any_model_name_gives_a_nonempty_lowercase_type(model):
    t = gpu_type_for_model(model)
    assert t and t == t.lower() and " " not in t


# ---------------------------------------------------------------------- absent NVML


def test_without_the_package_the_inventory_is_unavailable_and_says_so_once(no_pynvml, caplog):
    caplog.set_level(logging.WARNING, logger="optalloc.runners.nvml")
    first = GpuInventory.open()
    second = GpuInventory.open()
    assert (first.available, second.available) == (False, False)
    assert (first.gpus(), first.sample()) == ((), ())
    assert [r.getMessage() for r in caplog.records] == [
        "no NVIDIA GPU inventory: the nvidia-ml-py package (pynvml) is not installed; "
        "using the GPUs declared in the config"
    ]


def test_without_a_driver_nvml_init_fails_and_the_inventory_is_unavailable(fake_pynvml, caplog):
    caplog.set_level(logging.WARNING, logger="optalloc.runners.nvml")
    fake_pynvml([FakeGpu()], init_error=real_pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    inv = GpuInventory.open()
    GpuInventory.open()
    assert inv.available is False
    assert inv.reason == "NVML could not start (NVML Shared Library Not Found)"
    assert len(caplog.records) == 1
    inv.close()  # closing an unavailable inventory is harmless


def test_the_real_package_on_a_machine_without_driver_never_raises():
    inv = GpuInventory.open()  # the real nvidia-ml-py here: no libnvidia-ml on CI
    if inv.available:  # a GPU machine: the real inventory must be self-consistent
        assert [g.index for g in inv.gpus()] == list(range(len(inv.gpus())))
    else:
        assert inv.gpus() == ()
    inv.close()


def test_the_config_inventory_lists_the_nodes_gpus_without_uuids():
    assert config_gpus(Node("n1", "b200", 2)) == (
        GpuInfo(0, None, "(from config)", "b200"),
        GpuInfo(1, None, "(from config)", "b200"),
    )


# ---------------------------------------------------------------------- present NVML


def test_present_gpus_are_listed_with_type_memory_uuid_and_health(fake_pynvml):
    fake_pynvml([FakeGpu(uuid=uuid(0)), FakeGpu(name="NVIDIA B200", uuid=uuid(1),
                                                 memory_total=192 * 2**30)])
    with GpuInventory.open() as inv:
        assert inv.available
        assert inv.gpus() == (
            GpuInfo(0, uuid(0), "NVIDIA H100 80GB HBM3", "h100", 80 * 2**30, ()),
            GpuInfo(1, uuid(1), "NVIDIA B200", "b200", 192 * 2**30, ()),
        )


@pytest.mark.parametrize(
    "fault, problems",
    [
        (dict(ecc_uncorrected=3), ("3 uncorrected ECC errors since boot",)),
        (dict(retired_pages_pending=True), ("retired pages pending: the GPU needs a reset",)),
        (dict(remapped_rows=(0, 1, 1, 0)), ("row remapping pending: the GPU needs a reset",)),
        (dict(remapped_rows=(0, 1, 0, 1)), ("row remapping failed: the GPU needs service",)),
        (dict(ecc_uncorrected=None, remapped_rows=None), ()),  # not supported = no evidence
    ],
)
def test_a_gpu_fault_shows_as_a_health_problem(fake_pynvml, fault, problems):
    fake_pynvml([FakeGpu(uuid=uuid(0), **fault), FakeGpu(uuid=uuid(1))])
    with GpuInventory.open() as inv:
        gpus = inv.gpus()
    assert [g.problems for g in gpus] == [problems, ()]
    assert [g.healthy for g in gpus] == [not problems, True]


def test_a_lost_gpu_is_unhealthy_and_the_inventory_keeps_answering(fake_pynvml):
    mod = fake_pynvml([FakeGpu(uuid=uuid(0)), FakeGpu(uuid=uuid(1))])
    with GpuInventory.open() as inv:
        mod.gpus[0].lost = True
        gpus = inv.gpus()
        samples = inv.sample()
    assert gpus[0].uuid is None and gpus[0].model == "unknown" and not gpus[0].healthy
    assert "GPU is lost (fell off the bus); reset or reboot needed" in gpus[0].problems
    assert gpus[1].healthy
    assert samples[0] == GpuSample(0, None, None, None, None, None, ())


def test_critical_xids_make_a_gpu_unhealthy_but_application_xids_do_not(fake_pynvml):
    mod = fake_pynvml([FakeGpu(uuid=uuid(0)), FakeGpu(uuid=uuid(1))])
    with GpuInventory.open() as inv:
        mod.pending_events += [(0, 13), (0, 31), (1, 79), (1, 79), (1, 48)]
        first = inv.gpus()
        second = inv.gpus()  # problems stick: an XID is not forgotten once drained
    assert [g.problems for g in first] == [
        (),
        ("critical XID 79 since optalloc started", "critical XID 48 since optalloc started"),
    ]
    assert second == first


def test_a_sample_reports_utilization_memory_and_compute_processes(fake_pynvml):
    fake_pynvml([
        FakeGpu(uuid=uuid(0), util_gpu=97, util_memory=40, memory_used=30 * 2**30,
                processes=[(4242, 30 * 2**30)]),
        FakeGpu(uuid=uuid(1)),
    ])
    with GpuInventory.open() as inv:
        assert inv.sample() == (
            GpuSample(0, uuid(0), 97.0, 40.0, 30 * 2**30, 80 * 2**30,
                      (GpuProcess(4242, 30 * 2**30),)),
            GpuSample(1, uuid(1), 0.0, 0.0, 0, 80 * 2**30, ()),
        )


def test_process_memory_that_nvml_cannot_see_is_none():
    # NVML_VALUE_NOT_AVAILABLE (unsigned -1) when the process runs in another container
    assert nvml._mem_or_none(2**64 - 1) is None
    assert nvml._mem_or_none(1024) == 1024


def test_closing_shuts_nvml_down(fake_pynvml):
    mod = fake_pynvml([FakeGpu(uuid=uuid(0))])
    inv = GpuInventory.open()
    inv.close()
    assert (mod.initialized, inv.available, inv.gpus()) == (False, False, ())
