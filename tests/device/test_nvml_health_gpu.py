"""XID watching and clock event reasons against the real NVML (run through the device tool).

What any recent NVIDIA GPU must answer: the clock event reasons mask (thermal slowdown and
power capping as booleans, not n/a), and an XID watch that never blocks a read: either the
GPU is watched, or the source says why not (e.g. registration refused in a VM).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pynvml
import pytest

from gpucon.model.fleet import Health
from gpucon.sources.nvml import NvmlSource
from gpucon.sources.nvml_health import EVENT_XID_CRITICAL

pytestmark = pytest.mark.gpu


@pytest.fixture
def source() -> Iterator[NvmlSource]:
    src = NvmlSource(host="devhost", slow_cadence_s=60.0)
    yield src
    src.close()


def test_clock_reasons_are_known_booleans(source: NvmlSource) -> None:
    reading = source.read()
    assert reading.health is Health.OK, reading.error
    for gpu in reading.gpus:
        print(f"gpu{gpu.index}: thermal={gpu.thermal_slowdown} power_capped={gpu.power_capped}")
        assert isinstance(gpu.thermal_slowdown, bool)
        assert isinstance(gpu.power_capped, bool)


def test_xid_watch_is_registered_or_says_why_and_never_blocks(source: NvmlSource) -> None:
    first = source.read()
    assert first.health is Health.OK, first.error
    started = time.perf_counter()
    for _ in range(20):
        again = source.read()
    per_read = (time.perf_counter() - started) / 20
    print(f"fast read with the XID poll: {per_read * 1e3:.2f} ms; why: {source.xid_unwatched_why}")
    assert per_read < 0.1, "draining the event set must not wait"
    for gpu in again.gpus:
        print(f"gpu{gpu.index}: watched={gpu.xid_watched} xid={gpu.xid_last} at={gpu.xid_at}")
        assert gpu.xid_watched is not None
        if not gpu.xid_watched:
            assert gpu.uuid in source.xid_unwatched_why
        # an XID seen has its time; none seen has neither
        assert (gpu.xid_last is None) == (gpu.xid_at is None)


def test_raw_wait_with_timeout_zero_returns_at_once() -> None:
    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        supported = pynvml.nvmlDeviceGetSupportedEventTypes(handle)
        print(f"supported event types: {supported:#x}")
        if not supported & EVENT_XID_CRITICAL:
            pytest.skip(f"XID events not supported here ({supported:#x})")
        event_set = pynvml.nvmlEventSetCreate()
        try:
            try:
                pynvml.nvmlDeviceRegisterEvents(handle, EVENT_XID_CRITICAL, event_set)
            except pynvml.NVMLError as exc:
                pytest.skip(f"XID registration refused here: {type(exc).__name__}")
            started = time.perf_counter()
            with pytest.raises(pynvml.NVMLError) as caught:
                pynvml.nvmlEventSetWait(event_set, 0)
            waited = time.perf_counter() - started
            print(f"wait(0) answered {type(caught.value).__name__} in {waited * 1e6:.0f} us")
            assert caught.value.value == pynvml.NVML_ERROR_TIMEOUT
            assert waited < 0.05
        finally:
            pynvml.nvmlEventSetFree(event_set)
    finally:
        pynvml.nvmlShutdown()
