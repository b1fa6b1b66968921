"""The one NVML call wrapper: N/A typing, fallbacks across bindings/driver versions, errors."""

from __future__ import annotations

import math
from typing import Any

import pynvml
import pytest

from gpucon.sources.nvml_calls import (
    ERROR_FUNCTION_NOT_FOUND,
    ERROR_GPU_IS_LOST,
    ERROR_INVALID_ARGUMENT,
    ERROR_NO_PERMISSION,
    ERROR_NOT_SUPPORTED,
    Garbage,
    NvmlCallError,
    NvmlCalls,
)


class Bindings:
    """A stand-in for the pynvml bindings: functions answer from a table, errors are real
    NVMLErrors (the recorded H200 answers are in tests/helpers/nvml_replay.py)."""

    NVMLError = pynvml.NVMLError

    def __init__(self, **answers: Any) -> None:
        self.asked: list[str] = []
        for name, answer in answers.items():
            setattr(self, name, self._make(name, answer))

    def _make(self, name: str, answer: Any) -> Any:
        def call(*args: Any) -> Any:
            self.asked.append(name)
            if isinstance(answer, BaseException):
                raise answer
            return answer(*args) if callable(answer) else answer

        return call


def nvml_error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


def test_answer_passes_through_and_is_counted() -> None:
    calls = NvmlCalls(Bindings(nvmlDeviceGetPowerUsage=lambda h: 1234))
    assert calls.get("nvmlDeviceGetPowerUsage", "h") == 1234
    assert calls.calls == 1


@pytest.mark.parametrize("code", [ERROR_NOT_SUPPORTED, ERROR_NO_PERMISSION, 6, 21])
def test_not_available_is_none_and_remembered(code: int) -> None:
    bindings = Bindings(nvmlDeviceGetFanSpeed=nvml_error(code))
    calls = NvmlCalls(bindings)
    assert calls.get("nvmlDeviceGetFanSpeed", "gpu0") is None
    assert calls.get("nvmlDeviceGetFanSpeed", "gpu0") is None
    assert bindings.asked == ["nvmlDeviceGetFanSpeed"]  # asked once per session
    assert calls.calls == 1
    calls.reset()
    assert calls.get("nvmlDeviceGetFanSpeed", "gpu0") is None
    assert calls.calls == 2


def test_remembered_per_arguments() -> None:
    bindings = Bindings(nvmlDeviceGetClockInfo=lambda h, clock: 0 if clock == 1 else None)
    bindings.nvmlDeviceGetClockInfo = bindings._make(  # type: ignore[attr-defined]
        "nvmlDeviceGetClockInfo",
        lambda h, clock: 1500 if clock == 1 else (_ for _ in ()).throw(nvml_error(3)),
    )
    calls = NvmlCalls(bindings)
    assert calls.get("nvmlDeviceGetClockInfo", "gpu0", 2) is None
    assert calls.get("nvmlDeviceGetClockInfo", "gpu0", 1) == 1500


def test_falls_back_when_missing_from_bindings_or_driver() -> None:
    bindings = Bindings(
        nvmlDeviceGetComputeRunningProcesses_v3=nvml_error(ERROR_FUNCTION_NOT_FOUND),
        nvmlDeviceGetComputeRunningProcesses=lambda h: ["v2 answer"],
    )
    calls = NvmlCalls(bindings)
    answer = calls.get(
        [
            "nvmlDeviceGetComputeRunningProcesses_v4",  # not in these bindings at all
            "nvmlDeviceGetComputeRunningProcesses_v3",  # not in this driver
            "nvmlDeviceGetComputeRunningProcesses",
        ],
        "gpu0",
    )
    assert answer == ["v2 answer"]
    assert calls.calls == 2


def test_fallback_with_its_own_arguments() -> None:
    def profile_info(h: str, index: int, version: int = 2) -> Any:
        if version == 2:
            raise nvml_error(ERROR_FUNCTION_NOT_FOUND)
        return f"v1 {index}"

    calls = NvmlCalls(Bindings(nvmlDeviceGetGpuInstanceProfileInfo=profile_info))
    variants: list[Any] = [
        ("nvmlDeviceGetGpuInstanceProfileInfo", ("gpu0", 3)),
        ("nvmlDeviceGetGpuInstanceProfileInfo", ("gpu0", 3, 1)),
    ]
    assert calls.get(variants, "gpu0", 3) == "v1 3"


def test_every_variant_missing_is_none() -> None:
    calls = NvmlCalls(Bindings())
    assert calls.get(["nvmlNoSuchFunction", "nvmlNorThis"], "gpu0") is None
    assert calls.calls == 0


def test_extra_na_codes_per_call() -> None:
    calls = NvmlCalls(Bindings(nvmlX=nvml_error(ERROR_INVALID_ARGUMENT)))
    assert calls.get("nvmlX", "gpu0", extra_na=frozenset({ERROR_INVALID_ARGUMENT})) is None
    with pytest.raises(NvmlCallError, match="nvmlX: NVMLError_InvalidArgument"):
        NvmlCalls(Bindings(nvmlX=nvml_error(ERROR_INVALID_ARGUMENT))).get("nvmlX", "gpu0")


def test_real_failures_raise_naming_the_call() -> None:
    calls = NvmlCalls(Bindings(nvmlDeviceGetMemoryInfo=nvml_error(ERROR_GPU_IS_LOST)))
    with pytest.raises(
        NvmlCallError, match=r"nvmlDeviceGetMemoryInfo: NVMLError_GpuIsLost \(15\)"
    ) as info:
        calls.get("nvmlDeviceGetMemoryInfo", "gpu0")
    assert info.value.code == ERROR_GPU_IS_LOST and info.value.function == "nvmlDeviceGetMemoryInfo"


def test_non_nvml_exceptions_become_call_errors() -> None:
    calls = NvmlCalls(Bindings(nvmlDeviceGetName=OSError("ctypes trouble")))
    with pytest.raises(NvmlCallError, match="nvmlDeviceGetName: OSError: ctypes trouble"):
        calls.get("nvmlDeviceGetName", "gpu0")


def test_garbage_numbers_and_text() -> None:
    garbage = Garbage()
    assert garbage.number(42, "util", 0, 100) == 42.0
    assert garbage.number(None, "util") is None
    assert garbage.notes == []
    assert garbage.number(math.nan, "util", 0, 100) is None
    assert garbage.number(101, "util", 0, 100) is None
    assert garbage.number("12", "util") is None
    assert garbage.number(True, "util") is None
    assert garbage.integer(7.9, "count") == 7
    assert len(garbage.notes) == 4 and "util: out of range (nan)" in garbage.notes[0]
    assert garbage.text(b"NVIDIA H200\x1b[31m\x00", "name") == "NVIDIA H200[31m"
    assert garbage.text("  ", "name") is None
    assert garbage.text(12, "name") is None and "name: not text (int)" in garbage.notes[-1]
