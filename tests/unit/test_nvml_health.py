"""XID events and clock event reasons in the NVML source, against the recorded-NVML stand-in.

``h200.json`` holds the real H200's answers (XID events registered on an event set, the
never-blocking wait answering Timeout, clock event reasons 0x4 = software power cap under a
CUDA load at ~691 W of 700 W); ``a100_mig.json`` is SYNTHESIZED with XID 79 waiting on the
second read and thermal slowdown (0x60).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpucon.model.fleet import Health
from gpucon.sources.nvml import NvmlSource
from gpucon.sources.nvml_calls import ERROR_GPU_IS_LOST, ERROR_NOT_SUPPORTED
from gpucon.sources.nvml_health import MAX_EVENTS_PER_READ
from tests.helpers.nvml_replay import ReplayNvml

ERROR_FUNCTION_NOT_FOUND = 13


class FakeClock:
    def __init__(self) -> None:
        self.now = 5_000.0

    def __call__(self) -> float:
        return self.now


def test_h200_is_watched_with_no_xid_and_power_capped_under_load() -> None:
    nvml = ReplayNvml("h200.json")
    reading = NvmlSource(host="n", nvml=nvml).read()
    assert reading.health is Health.OK, reading.error
    (gpu,) = reading.gpus
    assert gpu.xid_watched is True and gpu.xid_last is None and gpu.xid_at is None
    assert gpu.thermal_slowdown is False and gpu.power_capped is True
    assert gpu.power_pct is not None and 40 < gpu.power_pct <= 100
    assert nvml.log.count("nvmlDeviceRegisterEvents") == 1
    assert nvml.log.count("nvmlEventSetWait_v2") == 1  # Timeout at once: nothing waiting


def test_a100_xid_seen_on_the_second_read_is_kept_with_its_time() -> None:
    nvml = ReplayNvml("a100_mig.json")
    clock = FakeClock()
    source = NvmlSource(host="n", nvml=nvml, clock=clock)
    first = source.read().gpus[0]
    assert first.xid_watched is True and first.xid_last is None
    assert first.thermal_slowdown is False and first.power_capped is False
    clock.now += 1.0
    second = source.read()
    assert second.health is Health.OK, second.error
    gpu = second.gpus[0]
    assert gpu.xid_last == 79 and gpu.xid_at == clock.now
    assert gpu.thermal_slowdown is True and gpu.power_capped is False
    seen_at = clock.now
    clock.now += 1.0
    third = source.read().gpus[0]
    assert third.xid_last == 79 and third.xid_at == seen_at  # kept, not seen again
    # registered once for the session; the event set drained without waiting on each read
    assert nvml.log.count("nvmlDeviceRegisterEvents") == 1
    assert nvml.log.count("nvmlEventSetWait_v2") == 4  # 1 + (event, timeout) + 1


def test_registration_refused_is_unwatched_na_and_never_polled() -> None:
    nvml = ReplayNvml("h200.json")
    nvml.inject("nvmlDeviceRegisterEvents", error=ERROR_NOT_SUPPORTED)
    source = NvmlSource(host="n", nvml=nvml)
    gpu = source.read().gpus[0]
    assert gpu.xid_watched is False and gpu.xid_last is None
    assert "NotSupported" in source.xid_unwatched_why[gpu.uuid]
    source.read()
    assert nvml.log.count("nvmlEventSetWait_v2") == 0


def test_event_types_without_xid_are_not_registered() -> None:
    nvml = ReplayNvml("h200.json")
    nvml.inject("nvmlDeviceGetSupportedEventTypes", value=0x1)
    source = NvmlSource(host="n", nvml=nvml)
    assert source.read().gpus[0].xid_watched is False
    assert "nvmlDeviceRegisterEvents" not in nvml.log


def test_a_lost_gpu_while_draining_degrades_the_read_without_raising() -> None:
    nvml = ReplayNvml("h200.json")
    source = NvmlSource(host="n", nvml=nvml)
    source.read()
    nvml.inject("nvmlEventSetWait_v2", error=ERROR_GPU_IS_LOST)
    reading = source.read()
    assert reading.health is Health.DEGRADED and "XID events" in (reading.error or "")
    assert reading.gpus  # the GPU's other values are still there


def test_an_event_storm_is_drained_in_bounded_calls() -> None:
    nvml = ReplayNvml("h200.json")
    source = NvmlSource(host="n", nvml=nvml)
    source.read()
    handle = nvml._handles["gpu0"]
    storm = SimpleNamespace(device=handle, eventType=8, eventData=94, gpuInstanceId=0)
    nvml.inject("nvmlEventSetWait_v2", value=storm)
    before = nvml.log.count("nvmlEventSetWait_v2")
    gpu = source.read().gpus[0]
    assert nvml.log.count("nvmlEventSetWait_v2") - before == MAX_EVENTS_PER_READ
    assert gpu.xid_last == 94


def test_an_event_of_an_unknown_device_is_noted_not_attributed() -> None:
    nvml = ReplayNvml("h200.json")
    source = NvmlSource(host="n", nvml=nvml)
    source.read()
    stranger = SimpleNamespace(device=object(), eventType=8, eventData=48, gpuInstanceId=0)
    answers = iter([stranger])

    def once(*args: object) -> object:
        try:
            return next(answers)
        except StopIteration:
            return nvml.replayed("nvmlEventSetWait_v2")(*args)

    nvml.override("nvmlEventSetWait_v2", once)
    reading = source.read()
    assert reading.gpus[0].xid_last is None
    assert "unknown GPU" in (reading.error or "")


def test_older_bindings_fall_back_to_throttle_reasons() -> None:
    nvml = ReplayNvml("h200.json")
    nvml.inject("nvmlDeviceGetCurrentClocksEventReasons", error=ERROR_FUNCTION_NOT_FOUND)
    nvml.inject("nvmlDeviceGetCurrentClocksThrottleReasons", value=0x40)
    gpu = NvmlSource(host="n", nvml=nvml).read().gpus[0]
    assert gpu.thermal_slowdown is True and gpu.power_capped is False


@pytest.mark.parametrize("error", [ERROR_NOT_SUPPORTED])
def test_clock_reasons_not_supported_are_na(error: int) -> None:
    nvml = ReplayNvml("h200.json")
    nvml.inject("nvmlDeviceGetCurrentClocksEventReasons", error=error)
    gpu = NvmlSource(host="n", nvml=nvml).read().gpus[0]
    assert gpu.thermal_slowdown is None and gpu.power_capped is None


def test_close_frees_the_event_set_and_a_new_session_registers_again() -> None:
    nvml = ReplayNvml("h200.json")
    source = NvmlSource(host="n", nvml=nvml)
    source.read()
    source.close()
    assert "nvmlEventSetFree" in nvml.log
    assert source.read().gpus[0].xid_watched is True
    assert nvml.log.count("nvmlDeviceRegisterEvents") == 2


def test_through_the_hub_the_xid_and_the_slowdown_become_alerts() -> None:
    from gpucon.hub import Hub
    from gpucon.model.alerts import Severity

    clock = FakeClock()
    hub = Hub(
        [NvmlSource(host="node-b", nvml=ReplayNvml("a100_mig.json"), clock=clock)], clock=clock
    )
    hub.poll_once()
    assert not [a for a in hub.tick().alerts if a.rule in ("xid", "thermal")]
    clock.now += 1.0
    hub.poll_once()
    alerts = {a.rule: a for a in hub.tick().alerts}
    assert alerts["xid"].severity is Severity.CRITICAL and alerts["xid"].target == "node-b/gpu0"
    assert "XID 79" in alerts["xid"].message and "GPU-5a1e7c2d" in alerts["xid"].message
    assert alerts["thermal"].severity is Severity.WARNING
    hub.stop()
