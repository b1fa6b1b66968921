"""NvmlSource against the real NVML of the machine's GPUs (run through the device tool).

These assert what any NVIDIA GPU must answer (names, UUIDs, memory, temperature) and, on
Hopper, GPM activity under a real CUDA load. They are skipped where NVML cannot initialise.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pynvml
import pytest

from gpucon.model.fleet import Health, SlotKind
from gpucon.model.ids import gpu_slot_id, mig_slot_id
from gpucon.sources.base import Source
from gpucon.sources.nvml import NVML_UTILIZATION, NvmlSource
from gpucon.sources.nvml_gpm import GPM_GRAPHICS_ACTIVITY, GPM_SM_ACTIVITY

pytestmark = pytest.mark.gpu
LOAD = Path(__file__).with_name("cuda_load.py")


@pytest.fixture
def source() -> Iterator[NvmlSource]:
    src = NvmlSource(host="devhost", slow_cadence_s=60.0)
    yield src
    src.close()


def test_is_a_source_and_reads_every_gpu(source: NvmlSource) -> None:
    assert isinstance(source, Source)
    reading = source.read()
    assert reading.health is Health.OK, reading.error
    pynvml.nvmlInit()
    try:
        count = pynvml.nvmlDeviceGetCount()
        uuids = [
            pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)
        ]
    finally:
        pynvml.nvmlShutdown()
    assert [g.uuid for g in reading.gpus] == uuids
    for gpu in reading.gpus:
        assert gpu.host == "devhost"
        assert gpu.name and "NVIDIA" in gpu.name
        assert gpu.mem_total_mib is not None and gpu.mem_total_mib > 1000
        assert gpu.mem_used_mib is not None and 0 <= gpu.mem_used_mib <= gpu.mem_total_mib
        assert gpu.temperature_c is not None and 0 < gpu.temperature_c < 120
        assert gpu.power_w is not None and gpu.power_w > 0
        assert gpu.power_limit_w is not None and gpu.power_limit_w >= gpu.power_w * 0.5
        assert gpu.sm_clock_mhz is not None and gpu.mem_clock_mhz is not None
        assert gpu.sm_count is not None and gpu.sm_count > 0
    for slot in reading.slots:
        gpu = next(g for g in reading.gpus if g.uuid == slot.gpu_uuid)
        if slot.kind is SlotKind.GPU:
            assert not gpu.mig_enabled
            assert slot.id == gpu_slot_id("devhost", gpu.index)
        else:
            assert gpu.mig_enabled and slot.gi_id is not None
            assert slot.id == mig_slot_id("devhost", gpu.index, slot.gi_id)
        # unknown activity is None with no metric named, never 0 with a wrong label
        assert (slot.activity_pct is None) == (slot.activity_metric is None)


def test_hopper_profile_table_answers_with_mig_off(source: NvmlSource) -> None:
    reading = source.read()
    hopper = [g for g in reading.gpus if g.name and ("H100" in g.name or "H200" in g.name)]
    if not hopper:
        pytest.skip("no Hopper GPU here")
    for gpu in hopper:
        table = gpu.mig_profiles
        assert table is not None
        assert table.total_slices == 7
        full = max(table.profiles, key=lambda p: p.slice_count)
        assert full.sm_count == gpu.sm_count or full.sm_count <= (gpu.sm_count or 0)
        smallest = min(table.profiles, key=lambda p: (p.slice_count, p.memory_mib))
        assert smallest.instance_count == 7
        assert table.validate_layout([smallest.name] * 7) == []
        assert table.validate_layout([smallest.name] * 8) != []


def test_slow_fields_are_cached(source: NvmlSource) -> None:
    source.read()
    slow_calls = source.calls_last_read
    assert source.slow_path_last_read
    source.read()
    assert not source.slow_path_last_read
    assert 0 < source.calls_last_read < slow_calls


def test_gpm_activity_under_a_real_load(source: NvmlSource) -> None:
    first = source.read()
    gpm = [s for s in first.slots if s.activity_metric in (GPM_SM_ACTIVITY, GPM_GRAPHICS_ACTIVITY)]
    assert not gpm, "GPM needs two samples: the first read cannot have GPM activity"
    load = subprocess.Popen([sys.executable, str(LOAD), "6"], stdout=subprocess.PIPE, text=True)
    try:
        assert load.stdout is not None
        ready = load.stdout.readline().strip()
        if ready != "ready":
            pytest.skip(f"no CUDA load could run here: {ready!r}")
        source.read()
        time.sleep(1.0)
        busy = source.read()
    finally:
        load.kill()
        load.wait()
    slot = busy.slots[0]
    if not any(g.uuid == slot.gpu_uuid for g in busy.gpus):
        pytest.fail("slot without its GPU")
    if slot.activity_metric == NVML_UTILIZATION:
        pytest.skip("GPM not supported on this GPU: activity comes from utilization.gpu")
    assert slot.activity_metric in (GPM_SM_ACTIVITY, GPM_GRAPHICS_ACTIVITY)
    assert slot.activity_pct is not None and slot.activity_pct > 5.0
    assert load.pid in {p.pid for p in slot.processes}


def test_close_then_read_initialises_again(source: NvmlSource) -> None:
    assert source.read().health is Health.OK
    source.close()
    again = source.read()
    assert again.health is Health.OK, again.error
    assert again.gpus
