"""NvmlSource against the recorded-NVML stand-in (tests/helpers/nvml_replay.py).

``h200.json`` holds the real answers of an H200 (driver 580.159.04, MIG off, GPM supported,
under a CUDA load); ``a100_mig.json`` is SYNTHESIZED (A100-80GB with MIG on, 3g.40gb + 2g.20gb
+ 1g.10gb). Faults are injected into the stand-in to check that nothing raises.
"""

from __future__ import annotations

import math
import socket
from typing import Any

import pynvml
import pytest

from gpucon.model.fleet import Health, SlotKind
from gpucon.sources.base import Source
from gpucon.sources.nvml import NVML_UTILIZATION, NvmlSource
from gpucon.sources.nvml_calls import (
    ERROR_GPU_IS_LOST,
    ERROR_LIBRARY_NOT_FOUND,
    ERROR_NOT_SUPPORTED,
    ERROR_UNINITIALIZED,
)
from gpucon.sources.nvml_gpm import GPM_GRAPHICS_ACTIVITY, GPM_SM_ACTIVITY
from tests.helpers.nvml_replay import ReplayNvml, UnrecordedCall

GIB_IN_MIB = 1024.0
H200 = {"handle": "gpu0"}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def h200() -> ReplayNvml:
    return ReplayNvml("h200.json")


@pytest.fixture
def a100() -> ReplayNvml:
    return ReplayNvml("a100_mig.json")


def test_fixtures_say_what_they_are(h200: ReplayNvml, a100: ReplayNvml) -> None:
    assert h200.meta["synthesized"] is False and h200.meta["driver"] == "580.159.04"
    assert a100.meta["synthesized"] is True and "SYNTHESIZED" in a100.meta["note"]


def test_h200_whole_gpu_values_mapped(h200: ReplayNvml) -> None:
    source = NvmlSource(host="node-a", nvml=h200, slow_cadence_s=1e9)
    assert isinstance(source, Source) and source.name == "nvml"
    reading = source.read()
    assert reading.health is Health.OK and reading.error is None
    (gpu,) = reading.gpus
    assert gpu.name == "NVIDIA H200" and gpu.uuid.startswith("GPU-")
    assert gpu.host == "node-a" and gpu.index == 0
    assert gpu.mem_total_mib == 143771.0
    assert gpu.mem_used_mib is not None and 0 < gpu.mem_used_mib < gpu.mem_total_mib
    assert gpu.power_limit_w == 700.0
    assert gpu.power_w is not None and 100 < gpu.power_w <= 700
    assert gpu.temperature_c is not None and 20 < gpu.temperature_c < 90
    assert gpu.util_pct is not None and gpu.util_pct > 50  # recorded under a CUDA load
    assert gpu.sm_clock_mhz and gpu.mem_clock_mhz == 3201.0
    assert gpu.mig_enabled is False
    assert gpu.sm_count == 132  # attributes NotSupported with MIG off: from the 7g profile
    (proc,) = gpu.processes
    assert proc.name == "python3" and proc.used_memory_mib == 1002.0
    (slot,) = reading.slots
    assert slot.id == "node-a/gpu0" and slot.kind is SlotKind.GPU
    assert slot.profile == "NVIDIA H200" and slot.gi_id is None
    assert slot.mem_total_mib == gpu.mem_total_mib and slot.processes == gpu.processes
    # the first read has one GPM sample only: activity comes from utilization.gpu, named so
    assert slot.activity_metric == NVML_UTILIZATION and slot.activity_pct == gpu.util_pct


def test_h200_gpm_activity_from_the_second_read(h200: ReplayNvml) -> None:
    clock = FakeClock()
    source = NvmlSource(host="n", nvml=h200, slow_cadence_s=1e9, clock=clock)
    source.read()
    clock.now += 1.0
    slot = source.read().slots[0]
    assert slot.activity_metric == GPM_SM_ACTIVITY
    assert slot.activity_pct is not None and 90 < slot.activity_pct <= 100
    assert h200.log.count("nvmlGpmMetricsGet") == 1  # one metric, one call


def test_gpm_samples_too_close_together_repeat_the_last_activity(h200: ReplayNvml) -> None:
    clock = FakeClock()
    source = NvmlSource(host="n", nvml=h200, slow_cadence_s=1e9, clock=clock)
    source.read()
    clock.now += 1.0
    activity = source.read().slots[0].activity_pct
    clock.now += 0.1  # a read right after the last one (e.g. a retry)
    again = source.read().slots[0]
    assert again.activity_metric == GPM_SM_ACTIVITY and again.activity_pct == activity
    assert h200.log.count("nvmlGpmSampleGet") == 2
    clock.now += 1.0
    source.read()
    assert h200.log.count("nvmlGpmSampleGet") == 3


def test_h200_profile_table_with_mig_off(h200: ReplayNvml) -> None:
    table = NvmlSource(host="n", nvml=h200).read().gpus[0].mig_profiles
    assert table is not None
    assert table.names() == (
        "1g.18gb",
        "2g.35gb",
        "3g.71gb",
        "4g.71gb",
        "7g.141gb",
        "1g.18gb+me",
        "1g.35gb",
    )
    small = table.by_name("1g.18gb")
    assert small is not None and (small.instance_count, small.sm_count) == (7, 16)
    full = table.by_name("MIG 7g.141gb")
    assert full is not None and full.sm_count == 132 and table.total_slices == 7
    assert table.validate_layout(["3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"]) == []


def test_a100_mig_slots_mapped(a100: ReplayNvml) -> None:
    reading = NvmlSource(host="node-b", nvml=a100).read()
    assert reading.health is Health.OK, reading.error
    (gpu,) = reading.gpus
    assert gpu.mig_enabled is True and gpu.name == "NVIDIA A100-SXM4-80GB"
    assert gpu.util_pct is None  # NotSupported with MIG on: n/a, never 0
    assert gpu.power_w == 187.25 and gpu.power_limit_w == 400.0
    assert [s.id for s in reading.slots] == [
        "node-b/gpu0/gi1",
        "node-b/gpu0/gi2",
        "node-b/gpu0/gi13",
    ]
    assert [s.profile for s in reading.slots] == ["3g.40gb", "2g.20gb", "1g.10gb"]
    assert [s.sm_count for s in reading.slots] == [42, 28, 14]
    assert [s.kind for s in reading.slots] == [SlotKind.MIG] * 3
    first, second, small = reading.slots
    assert (first.gi_id, first.ci_id) == (1, 0)
    assert first.mem_total_mib == 40192.0
    assert first.mem_used_mib == pytest.approx(30 * GIB_IN_MIB + 13)
    assert [(p.pid, p.name) for p in first.processes] == [
        (4101, "/opt/tritonserver/bin/tritonserver")
    ]
    assert [p.pid for p in second.processes] == [4102] and small.processes == ()
    for slot in reading.slots:
        # Ampere has no GPM: per-slice activity is unknown, with no metric named
        assert slot.activity_pct is None and slot.activity_metric is None
        assert slot.gpu_uuid == gpu.uuid and slot.gpu_name == gpu.name
    table = gpu.mig_profiles
    assert table is not None
    assert table.validate_layout(["3g.40gb", "2g.20gb", "1g.10gb"]) == []
    assert any("at most 2 fit" in p for p in table.validate_layout(["3g.40gb"] * 3))


def test_not_supported_is_asked_once(a100: ReplayNvml) -> None:
    source = NvmlSource(host="n", nvml=a100)
    for _ in range(3):
        source.read()
    assert a100.log.count("nvmlDeviceGetUtilizationRates") == 1
    assert a100.log.count("nvmlGpmQueryDeviceSupport") == 1


def test_slow_fields_cached_until_slow_cadence(h200: ReplayNvml) -> None:
    clock = FakeClock()
    source = NvmlSource(host="n", nvml=h200, slow_cadence_s=10.0, clock=clock)
    source.read()
    first_calls = source.calls_last_read
    for _ in range(3):
        clock.now += 1.0
        source.read()
        assert not source.slow_path_last_read
    assert h200.log.count("nvmlDeviceGetName") == 1
    assert h200.log.count("nvmlDeviceGetMigMode") == 1
    assert h200.log.count("nvmlDeviceGetClockInfo") == 2
    assert h200.log.count("nvmlDeviceGetMemoryInfo") == 4  # fast: every read
    assert h200.log.count("nvmlDeviceGetUtilizationRates") == 4
    clock.now += 10.0
    source.read()
    assert source.slow_path_last_read
    assert h200.log.count("nvmlDeviceGetName") == 2
    assert h200.log.count("nvmlDeviceGetEnforcedPowerLimit") == 2
    # the profile table and GPM support are read once per GPU for the session
    assert h200.log.count("nvmlDeviceGetGpuInstanceProfileInfo") == 18
    assert h200.log.count("nvmlGpmQueryDeviceSupport") == 1
    assert source.calls_last_read < first_calls


def test_host_defaults_to_hostname(a100: ReplayNvml) -> None:
    reading = NvmlSource(nvml=a100).read()
    assert reading.slots[0].id.startswith(f"{socket.gethostname()}/gpu0/")


def test_nvml_not_loadable_is_a_down_reading_then_recovers(h200: ReplayNvml) -> None:
    h200.inject("nvmlInit", error=ERROR_LIBRARY_NOT_FOUND)
    source = NvmlSource(host="n", nvml=h200)
    reading = source.read()
    assert reading.health is Health.DOWN
    assert reading.error is not None and "NVML not available" in reading.error
    assert "LibraryNotFound" in reading.error and reading.gpus == ()
    h200.clear_injections()
    assert source.read().health is Health.OK  # initialised lazily on the next read


def test_call_raising_mid_read_is_down_naming_the_call(h200: ReplayNvml) -> None:
    source = NvmlSource(host="n", nvml=h200)
    source.read()
    h200.inject("nvmlDeviceGetMemoryInfo", error=ERROR_GPU_IS_LOST)
    reading = source.read()
    assert reading.health is Health.DOWN
    assert reading.error is not None and "nvmlDeviceGetMemoryInfo" in reading.error
    assert "GpuIsLost" in reading.error


def test_one_mig_slice_failing_degrades_only_that_slice(a100: ReplayNvml) -> None:
    source = NvmlSource(host="n", nvml=a100)
    a100.inject("nvmlDeviceGetMemoryInfo", error=999, args=[{"handle": "gpu0/mig1"}])
    reading = source.read()
    assert reading.health is Health.DEGRADED
    assert reading.error is not None and "gpu0/gi2" in reading.error
    by_gi = {s.gi_id: s for s in reading.slots}
    assert by_gi[2].mem_used_mib is None and by_gi[2].mem_total_mib == 19968.0
    assert by_gi[1].mem_used_mib is not None and by_gi[13].mem_used_mib is not None
    assert source.slow_path_last_read
    source.read()
    assert source.slow_path_last_read  # the layout is read again after a failed slice


def test_uninitialized_makes_the_next_read_initialise_again(h200: ReplayNvml) -> None:
    source = NvmlSource(host="n", nvml=h200)
    source.read()
    h200.inject("nvmlDeviceGetUtilizationRates", error=ERROR_UNINITIALIZED)
    assert source.read().health is Health.DOWN
    h200.clear_injections()
    assert source.read().health is Health.OK
    assert h200.log.count("nvmlInit") == 2


@pytest.mark.parametrize(
    ("fn", "value", "field"),
    [
        ("nvmlDeviceGetTemperature", math.nan, "temperature"),
        ("nvmlDeviceGetPowerUsage", "garbage", "power"),
        ("nvmlDeviceGetPowerUsage", -5, "power"),
        ("nvmlDeviceGetTemperature", math.inf, "temperature"),
    ],
)
def test_garbage_values_are_unknown_and_degrade(
    h200: ReplayNvml, fn: str, value: object, field: str
) -> None:
    h200.inject(fn, value=value)
    reading = NvmlSource(host="n", nvml=h200).read()
    assert reading.health is Health.DEGRADED
    assert reading.error is not None and field in reading.error
    gpu = reading.gpus[0]
    assert (gpu.temperature_c if field == "temperature" else gpu.power_w) is None
    assert gpu.mem_total_mib == 143771.0  # the rest of the read stands


def test_memory_used_above_total_is_garbage(h200: ReplayNvml) -> None:
    from types import SimpleNamespace

    h200.inject("nvmlDeviceGetMemoryInfo", value=SimpleNamespace(total=100, used=200, free=0))
    reading = NvmlSource(host="n", nvml=h200).read()
    assert reading.health is Health.DEGRADED and reading.gpus[0].mem_used_mib is None


def test_gpm_metric_not_supported_falls_back_then_unknown(h200: ReplayNvml) -> None:
    clock = FakeClock()
    source = NvmlSource(host="n", nvml=h200, slow_cadence_s=1e9, clock=clock)
    source.read()
    clock.now += 1.0
    # SM activity NotSupported, graphics activity known: the graphics metric is named
    real_metrics_get = h200.replayed("nvmlGpmMetricsGet")

    def sm_not_supported(request: Any) -> Any:
        answer = real_metrics_get(request)
        if answer.metrics[0].metricId == pynvml.NVML_GPM_METRIC_SM_UTIL:
            answer.metrics[0].nvmlReturn = ERROR_NOT_SUPPORTED
        return answer

    h200.override("nvmlGpmMetricsGet", sm_not_supported)
    slot = source.read().slots[0]
    assert slot.activity_metric == GPM_GRAPHICS_ACTIVITY and slot.activity_pct is not None

    def neither(request: Any) -> Any:
        answer = real_metrics_get(request)
        answer.metrics[0].nvmlReturn = ERROR_NOT_SUPPORTED
        return answer

    h200.override("nvmlGpmMetricsGet", neither)
    clock.now += 1.0
    slot = source.read().slots[0]
    assert slot.activity_metric == NVML_UTILIZATION  # a whole GPU still has utilization.gpu


def test_gpm_garbage_value_is_unknown(h200: ReplayNvml) -> None:
    clock = FakeClock()
    source = NvmlSource(host="n", nvml=h200, slow_cadence_s=1e9, clock=clock)
    source.read()
    clock.now += 1.0
    real_metrics_get = h200.replayed("nvmlGpmMetricsGet")

    def nan_values(request: Any) -> Any:
        answer = real_metrics_get(request)
        answer.metrics[0].value = math.nan
        return answer

    h200.override("nvmlGpmMetricsGet", nan_values)
    reading = source.read()
    assert reading.health is Health.DEGRADED and "GPM metric" in (reading.error or "")
    assert reading.slots[0].activity_metric == NVML_UTILIZATION


def test_bindings_raising_a_non_nvml_error_never_raises(h200: ReplayNvml) -> None:
    h200.inject("nvmlDeviceGetCount", raises=TypeError("bad bindings"))
    reading = NvmlSource(host="n", nvml=h200).read()
    assert reading.health is Health.DOWN
    assert reading.error is not None and "nvmlDeviceGetCount" in reading.error


def test_unrecorded_call_fails_loudly() -> None:
    replay = ReplayNvml("h200.json")
    with pytest.raises(UnrecordedCall, match="nvmlDeviceGetFanSpeed"):
        replay.nvmlDeviceGetFanSpeed(replay.nvmlDeviceGetHandleByIndex(0))


def test_read_over_its_time_budget_is_reported(h200: ReplayNvml) -> None:
    reading = NvmlSource(host="n", nvml=h200, timeout_s=0.0).read()
    assert reading.health is Health.DOWN
    assert reading.error is not None and "exceeded" in reading.error


def test_close_shuts_down_and_a_later_read_initialises_again(h200: ReplayNvml) -> None:
    source = NvmlSource(host="n", nvml=h200)
    source.read()
    source.read()
    source.close()
    assert h200.log.count("nvmlShutdown") == 1
    assert h200.log.count("nvmlGpmSampleFree") == 2
    source.close()  # twice is harmless
    assert h200.log.count("nvmlShutdown") == 1
    assert source.read().health is Health.OK
    assert h200.log.count("nvmlInit") == 2


def test_close_does_not_hang_behind_a_read_stuck_in_the_driver(h200: ReplayNvml) -> None:
    import threading
    import time

    source = NvmlSource(host="n", nvml=h200)
    source.read()
    stuck = threading.Event()
    release = threading.Event()
    real = h200.replayed("nvmlDeviceGetMemoryInfo")

    def hang(*args: Any) -> Any:
        stuck.set()
        release.wait(10)
        return real(*args)

    h200.override("nvmlDeviceGetMemoryInfo", hang)
    reader = threading.Thread(target=source.read, daemon=True)
    reader.start()
    assert stuck.wait(5)
    started = time.monotonic()
    source.close()  # the lost GPU's read still holds NVML
    assert time.monotonic() - started < 2.0
    release.set()
    reader.join(5)
