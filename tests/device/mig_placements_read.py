"""Read a GPU's MIG GPU-instance profiles and their possible placements through NVML, as JSON.

Run on the device machine (``python3 tests/device/mig_placements_read.py OUT.json``). It only
READS: profile info, possible placements, remaining capacity, the instances that exist; it
never enables MIG and never creates or destroys an instance. Every answer is kept as NVML gave
it, errors included (with MIG disabled some calls refuse: that refusal is the recording).
Needs only nvidia-ml-py (pynvml), not gpucon. ``tests/fixtures/mig/`` keeps what it wrote.
"""

from __future__ import annotations

import ctypes
import datetime
import json
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import pynvml

# how many placements a profile can have at most: one per memory slice (8 on every MIG GPU)
MAX_PLACEMENTS = 16


def _call(fn: Callable[[], Any]) -> dict[str, Any]:
    """The answer or the NVML error of one call, and how long it took (microseconds)."""
    started = time.perf_counter()
    try:
        value = fn()
    except pynvml.NVMLError as exc:
        took = (time.perf_counter() - started) * 1e6
        return {"error": int(exc.value), "error_name": type(exc).__name__, "us": round(took, 1)}
    took = (time.perf_counter() - started) * 1e6
    return {"result": _plain(value), "us": round(took, 1)}


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, ctypes.Structure):
        return {name: _plain(getattr(value, name)) for name, *_ in value._fields_}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _placements(handle: Any, profile_id: int) -> dict[str, Any]:
    """nvmlDeviceGetGpuInstancePossiblePlacements_v2: first the count, then the placements."""
    count = ctypes.c_uint(0)
    first = _call(
        lambda: pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(
            handle, profile_id, None, ctypes.byref(count)
        )
    )
    first["count"] = count.value
    if "error" in first:
        return {"count_call": first}
    array = (pynvml.c_nvmlGpuInstancePlacement_t * MAX_PLACEMENTS)()
    count = ctypes.c_uint(MAX_PLACEMENTS)
    second = _call(
        lambda: pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(
            handle, profile_id, array, ctypes.byref(count)
        )
    )
    if "error" not in second:
        second["result"] = [
            {"start": array[i].start, "size": array[i].size} for i in range(count.value)
        ]
    return {"count_call": first, "list_call": second}


def _instances(handle: Any, profile_id: int) -> dict[str, Any]:
    """nvmlDeviceGetGpuInstances: the GPU instances of this profile that exist (a read)."""
    array = (pynvml.c_nvmlGpuInstance_t * MAX_PLACEMENTS)()
    count = ctypes.c_uint(0)
    answer = _call(
        lambda: pynvml.nvmlDeviceGetGpuInstances(handle, profile_id, array, ctypes.byref(count))
    )
    if "error" not in answer:
        answer["result"] = {"count": count.value}
    return answer


def _smi(*args: str) -> dict[str, Any]:
    """A read-only nvidia-smi listing, as text (``mig -lgip``, ``mig -lgipp``)."""
    try:
        done = subprocess.run(
            ["nvidia-smi", *args], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"argv": ["nvidia-smi", *args], "error": f"{type(exc).__name__}: {exc}"}
    return {
        "argv": ["nvidia-smi", *args],
        "rc": done.returncode,
        "stdout": done.stdout,
        "stderr": done.stderr,
    }


def read_gpu(index: int) -> dict[str, Any]:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    gpu: dict[str, Any] = {
        "index": index,
        "name": _call(lambda: pynvml.nvmlDeviceGetName(handle)),
        "memory": _call(lambda: pynvml.nvmlDeviceGetMemoryInfo(handle)),
        "mig_mode": _call(lambda: pynvml.nvmlDeviceGetMigMode(handle)),
        "max_mig_devices": _call(lambda: pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)),
        "profiles": [],
    }
    count = getattr(pynvml, "NVML_GPU_INSTANCE_PROFILE_COUNT", 9)
    for profile_index in range(count + 1):  # one past the end: what NVML says to that
        info = _call(partial(pynvml.nvmlDeviceGetGpuInstanceProfileInfo, handle, profile_index))
        entry: dict[str, Any] = {"profile_index": profile_index, "info": info}
        if "result" in info:
            profile_id = int(info["result"]["id"])
            entry["remaining_capacity"] = _call(
                partial(pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity, handle, profile_id)
            )
            entry["placements"] = _placements(handle, profile_id)
            entry["instances"] = _instances(handle, profile_id)
        gpu["profiles"].append(entry)
    return gpu


def main(path: str) -> int:
    pynvml.nvmlInit()
    try:
        record = {
            "format": "gpucon-mig-placements/1",
            "meta": {
                "recorded_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "recorded_on": "the device machine's real GPU, read only (MIG left as it was)",
                "platform": platform.platform(),
                "driver": _plain(pynvml.nvmlSystemGetDriverVersion()),
                "nvml_version": _plain(pynvml.nvmlSystemGetNVMLVersion()),
                "nvidia_ml_py": getattr(pynvml, "__version__", None),
            },
            "gpus": [read_gpu(i) for i in range(pynvml.nvmlDeviceGetCount())],
            "nvidia_smi": [_smi("mig", "-lgip"), _smi("mig", "-lgipp"), _smi("mig", "-lgi")],
        }
    finally:
        pynvml.nvmlShutdown()
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    print(json.dumps(record, indent=1)[:6000])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "mig_placements.json"))
