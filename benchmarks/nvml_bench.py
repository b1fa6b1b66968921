"""NVML collection cost on a real GPU machine: µs per NVML call, µs per NvmlSource read.

Run on the GPU machine (through the device tool): ``python benchmarks/nvml_bench.py OUT.json``.
Measures, with the real pynvml:
- each NVML function the source uses: median and p90 µs per call over many calls;
- ``NvmlSource.read()``: fast path (slow fields cached) and slow path (slow fields refreshed),
  median/p90 µs per read and per GPU, and NVML calls per read;
- GPM support and which calls answered NotSupported (as the source's wrapper saw them).
Writes a JSON document and prints a Markdown table for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import functools
import json
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml

from gpucon.sources.nvml import NvmlSource

LOAD = Path(__file__).resolve().parents[1] / "tests" / "device" / "cuda_load.py"


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_us": round(statistics.median(ordered), 2),
        "p90_us": round(ordered[int(len(ordered) * 0.9) - 1], 2),
        "min_us": round(ordered[0], 2),
        "n": len(ordered),
    }


def time_call(fn: Callable[[], Any], n: int) -> dict[str, Any]:
    samples = []
    error = None
    for _ in range(n):
        started = time.perf_counter()
        try:
            fn()
        except pynvml.NVMLError as exc:
            error = type(exc).__name__
        samples.append((time.perf_counter() - started) * 1e6)
    result: dict[str, Any] = percentiles(samples)
    if error:
        result["error"] = error
    return result


def per_call(n: int) -> dict[str, Any]:
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    calls: dict[str, Callable[[], Any]] = {
        "nvmlDeviceGetHandleByIndex": lambda: pynvml.nvmlDeviceGetHandleByIndex(0),
        "nvmlDeviceGetUUID": lambda: pynvml.nvmlDeviceGetUUID(h),
        "nvmlDeviceGetName": lambda: pynvml.nvmlDeviceGetName(h),
        "nvmlDeviceGetUtilizationRates": lambda: pynvml.nvmlDeviceGetUtilizationRates(h),
        "nvmlDeviceGetMemoryInfo": lambda: pynvml.nvmlDeviceGetMemoryInfo(h),
        "nvmlDeviceGetTemperature": lambda: pynvml.nvmlDeviceGetTemperature(h, 0),
        "nvmlDeviceGetPowerUsage": lambda: pynvml.nvmlDeviceGetPowerUsage(h),
        "nvmlDeviceGetEnforcedPowerLimit": lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h),
        "nvmlDeviceGetClockInfo(SM)": lambda: pynvml.nvmlDeviceGetClockInfo(h, 1),
        "nvmlDeviceGetComputeRunningProcesses": (
            lambda: pynvml.nvmlDeviceGetComputeRunningProcesses(h)
        ),
        "nvmlDeviceGetMigMode": lambda: pynvml.nvmlDeviceGetMigMode(h),
        "nvmlDeviceGetAttributes": lambda: pynvml.nvmlDeviceGetAttributes(h),
        "nvmlDeviceGetGpuInstanceProfileInfo(1g)": (
            lambda: pynvml.nvmlDeviceGetGpuInstanceProfileInfo(h, 0)
        ),
        "nvmlGpmQueryDeviceSupport": lambda: pynvml.nvmlGpmQueryDeviceSupport(h),
        "nvmlDeviceGetProcessUtilization": lambda: pynvml.nvmlDeviceGetProcessUtilization(h, 0),
    }
    results = {name: time_call(fn, n) for name, fn in calls.items()}
    try:
        sample = pynvml.nvmlGpmSampleAlloc()
        results["nvmlGpmSampleGet"] = time_call(lambda: pynvml.nvmlGpmSampleGet(h, sample), n)
        other = pynvml.nvmlGpmSampleAlloc()
        pynvml.nvmlGpmSampleGet(h, other)
        for metrics in (1, 2):
            request = pynvml.c_nvmlGpmMetricsGet_t()
            request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = metrics
            request.sample1, request.sample2 = sample, other  # older, newer
            request.metrics[0].metricId = pynvml.NVML_GPM_METRIC_SM_UTIL
            request.metrics[1].metricId = pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL
            label = f"nvmlGpmMetricsGet({metrics} metric{'s' if metrics > 1 else ''})"
            results[label] = time_call(functools.partial(pynvml.nvmlGpmMetricsGet, request), n // 5)
        pynvml.nvmlGpmSampleFree(other)
        pynvml.nvmlGpmSampleFree(sample)
    except pynvml.NVMLError as exc:
        results["nvmlGpmSampleGet"] = {"error": type(exc).__name__}
    pynvml.nvmlShutdown()
    return results


def source_reads(reads: int, interval_s: float) -> dict[str, Any]:
    source = NvmlSource(host="bench", slow_cadence_s=3600.0)
    first = source.read()
    gpus = max(1, len(first.gpus))
    fast: list[float] = []
    fast_calls: set[int] = set()
    for _ in range(reads):
        time.sleep(interval_s)
        started = time.perf_counter()
        reading = source.read()
        fast.append((time.perf_counter() - started) * 1e6)
        fast_calls.add(source.calls_last_read)
    slow: list[float] = []
    slow_calls: set[int] = set()
    for _ in range(10):
        time.sleep(interval_s)
        source.invalidate()
        started = time.perf_counter()
        source.read()
        slow.append((time.perf_counter() - started) * 1e6)
        slow_calls.add(source.calls_last_read)
    not_available = sorted({f"{fn}: {why}" for (fn, _), why in source._calls.not_available.items()})
    slots = [
        {"id": s.id, "activity_pct": s.activity_pct, "metric": s.activity_metric}
        for s in reading.slots
    ]
    gpu = reading.gpus[0] if reading.gpus else None
    source.close()
    fast_p, slow_p = percentiles(fast), percentiles(slow)
    return {
        "gpus": gpus,
        "first_read_health": first.health.value,
        "last_read_health": reading.health.value,
        "last_read_error": reading.error,
        "fast_path": {**fast_p, "per_gpu_median_us": round(fast_p["median_us"] / gpus, 2)},
        "fast_calls_per_read": sorted(fast_calls),
        "slow_path": {**slow_p, "per_gpu_median_us": round(slow_p["median_us"] / gpus, 2)},
        "slow_calls_per_read": sorted(slow_calls),
        "not_available": not_available,
        "slots": slots,
        "gpu": None
        if gpu is None
        else {
            "name": gpu.name,
            "mig_enabled": gpu.mig_enabled,
            "sm_count": gpu.sm_count,
            "profiles": None
            if gpu.mig_profiles is None
            else [
                (p.name, p.instance_count, p.sm_count, p.memory_mib)
                for p in gpu.mig_profiles.profiles
            ],
        },
    }


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        f"Machine: {doc['machine']}; driver {doc['driver']}, NVML {doc['nvml_version']}, "
        f"nvidia-ml-py {doc['pynvml']}, Python {doc['python']}.",
        "",
    ]
    lines += _tables(doc["source_reads"], doc["per_call"], "idle GPU")
    if "source_reads_under_load" in doc:
        lines += _tables(
            doc["source_reads_under_load"], doc["per_call_under_load"], "GPU under a CUDA load"
        )
    return "\n".join(lines) + "\n"


def _tables(reads: dict[str, Any], calls: dict[str, Any], title: str) -> list[str]:
    lines = [
        f"{title}:",
        "",
        "| NvmlSource.read() | median µs | p90 µs | µs per GPU (median) | NVML calls per read |",
        "|---|---|---|---|---|",
        f"| fast path (slow fields cached) | {reads['fast_path']['median_us']} | "
        f"{reads['fast_path']['p90_us']} | {reads['fast_path']['per_gpu_median_us']} | "
        f"{reads['fast_calls_per_read']} |",
        f"| slow path (slow fields refreshed) | {reads['slow_path']['median_us']} | "
        f"{reads['slow_path']['p90_us']} | {reads['slow_path']['per_gpu_median_us']} | "
        f"{reads['slow_calls_per_read']} |",
        "",
        "| NVML call | median µs | p90 µs | answer |",
        "|---|---|---|---|",
    ]
    for name, r in calls.items():
        lines.append(
            f"| {name} | {r.get('median_us', '-')} | {r.get('p90_us', '-')} | "
            f"{r.get('error', 'ok')} |"
        )
    return [*lines, ""]


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("nvml_bench.json")
    pynvml.nvmlInit()
    driver = pynvml.nvmlSystemGetDriverVersion()
    nvml_version = pynvml.nvmlSystemGetNVMLVersion()
    name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
    count = pynvml.nvmlDeviceGetCount()
    pynvml.nvmlShutdown()
    doc = {
        "machine": f"{count}× {name}, {platform.platform()}, host {socket.gethostname()}",
        "driver": driver,
        "nvml_version": nvml_version,
        "pynvml": getattr(pynvml, "__version__", "?"),
        "python": platform.python_version(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "per_call": per_call(500),
        "source_reads": source_reads(reads=30, interval_s=0.55),
    }
    load = subprocess.Popen([sys.executable, str(LOAD), "60"], stdout=subprocess.PIPE, text=True)
    assert load.stdout is not None
    doc["gpu_load"] = load.stdout.readline().strip()
    doc["per_call_under_load"] = per_call(200)
    doc["source_reads_under_load"] = source_reads(reads=30, interval_s=0.55)
    load.kill()
    load.wait()
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
