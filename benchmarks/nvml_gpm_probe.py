"""What GPM answers on this GPU, by sample spacing and by metric set (run on the GPU machine).

``python benchmarks/nvml_gpm_probe.py OUT.json`` while a CUDA load runs: for sample pairs
taken 10 ms to 1 s apart, asks ``nvmlGpmMetricsGet`` for SM activity alone, graphics activity
alone, and both, and records each metric's return code, value and the call's µs. This is how
the NVML source's choices (one metric per call, a minimum spacing between samples) were made.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pynvml

SETS = {
    "sm": [pynvml.NVML_GPM_METRIC_SM_UTIL],
    "graphics": [pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL],
    "both": [pynvml.NVML_GPM_METRIC_SM_UTIL, pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL],
}


def ask(first: Any, second: Any, metric_ids: list[int]) -> dict[str, Any]:
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = len(metric_ids)
    request.sample1, request.sample2 = first, second
    for i, metric_id in enumerate(metric_ids):
        request.metrics[i].metricId = metric_id
    started = time.perf_counter()
    try:
        pynvml.nvmlGpmMetricsGet(request)
    except pynvml.NVMLError as exc:
        return {"error": type(exc).__name__}
    us = round((time.perf_counter() - started) * 1e6, 1)
    metrics = [
        [request.metrics[i].metricId, request.metrics[i].nvmlReturn, request.metrics[i].value]
        for i in range(len(metric_ids))
    ]
    return {"us": us, "metrics": metrics}


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("gpm_probe.json")
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    first, second = pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()
    rows = []
    for spacing in (0.01, 0.05, 0.1, 0.2, 0.5, 1.0):
        pynvml.nvmlGpmSampleGet(handle, first)
        time.sleep(spacing)
        pynvml.nvmlGpmSampleGet(handle, second)
        for name, ids in SETS.items():
            rows.append({"spacing_s": spacing, "set": name, **ask(first, second, ids)})
            rows.append({"spacing_s": spacing, "set": f"{name} (again)", **ask(first, second, ids)})
    pynvml.nvmlGpmSampleFree(first)
    pynvml.nvmlGpmSampleFree(second)
    pynvml.nvmlShutdown()
    out.write_text(json.dumps(rows, indent=1) + "\n")
    for row in rows:
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
