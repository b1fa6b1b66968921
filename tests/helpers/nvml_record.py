"""Record every NVML call a program makes, with its arguments and answer, as JSON.

``RecordingNvml(pynvml)`` stands in for the pynvml module: it forwards each ``nvml*`` function
to the real bindings and logs the call (name, arguments, result or NVML error code, time taken).
Handles are logged by stable labels (``gpu0``, ``gpu0/mig1``) instead of addresses, ctypes
structures as field dicts, and GPM samples by what they hold (``gpm:gpu0``, ``gpm:gpu0/gi1``),
so that a recording made on one machine can be answered again anywhere (tests/helpers/
nvml_replay.py). The format is documented in ``FORMAT`` below.
"""

from __future__ import annotations

import ctypes
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpucon.sources.nvml_calls import handle_label, pointer_address

FORMAT = """\
{"format": "gpucon-nvml-recording/1", "meta": {...}, "calls": [
   {"fn": "nvmlDeviceGetMemoryInfo", "args": [{"handle": "gpu0"}],
    "result": {"struct": "c_nvmlMemory_t", "fields": {"total": ..., "used": ...}}, "us": 4.1},
   {"fn": "nvmlDeviceGetUtilizationRates", "args": [{"handle": "gpu0/mig0"}],
    "error": 3, "error_name": "NVMLError_NotSupported"}, ...]}
Values: JSON scalars; {"handle": label}; {"struct": name, "fields": {...}}; lists;
{"float": "nan"|"inf"|"-inf"} for non-finite floats; {"gpm_sample": label};
{"gpm_metrics": [[metricId, nvmlReturn, value], ...]} for nvmlGpmMetricsGet.
"""

FORMAT_ID = "gpucon-nvml-recording/1"
GPM_METRICS_GET = "nvmlGpmMetricsGet"


def encode_float(value: float) -> Any:
    return value if math.isfinite(value) else {"float": str(value)}


def decode_float(value: Any) -> Any:
    if isinstance(value, dict) and "float" in value:
        return float(value["float"])
    return value


class RecordingNvml:
    """A pynvml look-alike that forwards to the real bindings and logs every call."""

    def __init__(self, nvml: Any, clock: Callable[[], float] = time.perf_counter) -> None:
        self._nvml = nvml
        self._clock = clock
        self.calls: list[dict[str, Any]] = []
        self._labels: dict[int, str] = {}  # handle address -> label
        self._sample_content: dict[int, str] = {}  # GPM sample address -> what it holds

    # --- labels -------------------------------------------------------------------------
    def _label(self, handle: Any) -> str:
        address = pointer_address(handle)
        if address is None:  # not a ctypes handle (e.g. a stand-in's): keep its own label
            return str(handle_label(handle))
        return self._labels.setdefault(address, f"handle@{len(self._labels)}")

    def _name_handles(self, fn: str, args: tuple[Any, ...], result: Any) -> None:
        address = pointer_address(result)
        if address is None:
            return
        if fn == "nvmlDeviceGetHandleByIndex":
            self._labels[address] = f"gpu{args[0]}"
        elif fn == "nvmlDeviceGetMigDeviceHandleByIndex":
            self._labels[address] = f"{self._label(args[0])}/mig{args[1]}"
        elif fn == "nvmlEventSetCreate":
            self._labels[address] = (
                f"eventset{sum(v.startswith('eventset') for v in self._labels.values())}"
            )
        elif fn == "nvmlDeviceGetDeviceHandleFromMigDeviceHandle":
            self._labels.setdefault(address, f"parent({self._label(args[0])})")

    # --- encoding -------------------------------------------------------------------------
    def encode(self, value: Any) -> Any:
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return encode_float(value)
        if isinstance(value, bytes):
            return value.decode("utf-8", errors="replace")
        if isinstance(value, (list, tuple, ctypes.Array)):
            return [self.encode(v) for v in value]
        if isinstance(value, ctypes._SimpleCData):
            return self.encode(value.value)
        if isinstance(value, ctypes._Pointer) or hasattr(value, "nvml_label"):
            return {"handle": self._label(value)}
        if isinstance(value, ctypes.Structure):
            fields = {name: self.encode(getattr(value, name)) for name, *_ in value._fields_}
            return {"struct": type(value).__name__, "fields": fields}
        if hasattr(value, "__dict__"):  # pynvml's friendly objects (process info, ...)
            items = {k: self.encode(v) for k, v in vars(value).items() if not k.startswith("_")}
            return {"struct": type(value).__name__, "fields": items}
        return repr(value)

    def _encode_metrics_request(self, request: Any) -> Any:
        return {
            "metrics": [request.metrics[i].metricId for i in range(request.numMetrics)],
            "sample1": self._sample_content.get(pointer_address(request.sample1) or 0, "?"),
            "sample2": self._sample_content.get(pointer_address(request.sample2) or 0, "?"),
        }

    def _encode_metrics_answer(self, answer: Any) -> Any:
        return {
            "gpm_metrics": [
                [m.metricId, m.nvmlReturn, encode_float(m.value)]
                for m in (answer.metrics[i] for i in range(answer.numMetrics))
            ]
        }

    # --- forwarding -------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        target = getattr(self._nvml, name)
        if not (name.startswith("nvml") and callable(target)):
            return target

        def recorded(*args: Any) -> Any:
            entry: dict[str, Any] = {"fn": name}
            if name == GPM_METRICS_GET:
                entry["args"] = [self._encode_metrics_request(args[0])]
            elif name in ("nvmlGpmSampleGet", "nvmlGpmMigSampleGet", "nvmlGpmSampleFree"):
                entry["args"] = [self.encode(a) for a in args[:-1]] + [{"gpm_sample": "any"}]
            else:
                entry["args"] = [self.encode(a) for a in args]
            started = self._clock()
            try:
                result = target(*args)
            except Exception as exc:
                entry["us"] = round((self._clock() - started) * 1e6, 2)
                entry["error"] = getattr(exc, "value", None)
                entry["error_name"] = type(exc).__name__
                self.calls.append(entry)
                raise
            entry["us"] = round((self._clock() - started) * 1e6, 2)
            self._name_handles(name, args, result)
            if name in ("nvmlGpmSampleGet", "nvmlGpmMigSampleGet"):
                held = self._label(args[0]) + (f"/gi{args[1]}" if len(args) == 3 else "")
                self._sample_content[pointer_address(args[-1]) or 0] = f"gpm:{held}"
                entry["result"] = {"gpm_sample": "filled"}
            elif name == "nvmlGpmSampleAlloc":
                entry["result"] = {"gpm_sample": "new"}
            elif name == GPM_METRICS_GET:
                entry["result"] = self._encode_metrics_answer(result)
            else:
                entry["result"] = self.encode(result)
            self.calls.append(entry)
            return result

        return recorded

    def save(self, path: Path, meta: dict[str, Any]) -> None:
        document = {"format": FORMAT_ID, "meta": meta, "calls": self.calls}
        path.write_text(json.dumps(document, indent=1) + "\n")


def _health_summary(gpu: Any) -> str:
    return (
        f"gpu{gpu.index}: {gpu.temperature_c}C {gpu.power_w}/{gpu.power_limit_w}W "
        f"util={gpu.util_pct} xid_watched={gpu.xid_watched} xid={gpu.xid_last} "
        f"thermal_slowdown={gpu.thermal_slowdown} power_capped={gpu.power_capped}"
    )


def record_source_reads(out: Path, reads: int, interval_s: float) -> dict[str, Any]:
    """Run NvmlSource over recorded real NVML for ``reads`` reads; save and return the meta."""
    import platform
    import socket

    import pynvml

    from gpucon.sources.nvml import NvmlSource

    recorder = RecordingNvml(pynvml)
    source = NvmlSource(host="recorded", nvml=recorder, slow_cadence_s=interval_s * 2.5)
    summaries = []
    for _ in range(reads):
        reading = source.read()
        summaries.append(
            f"{reading.health.value} calls={reading.round_trips} "
            f"slots={[(s.id, s.activity_pct, s.activity_metric) for s in reading.slots]} "
            f"health={[_health_summary(g) for g in reading.gpus]} "
            f"error={reading.error}"
        )
        time.sleep(interval_s)
    driver = recorder.nvmlSystemGetDriverVersion()
    nvml_version = recorder.nvmlSystemGetNVMLVersion()
    unwatched = dict(source.xid_unwatched_why)
    source.close()
    meta = {
        "recorded_on": socket.gethostname(),
        "platform": platform.platform(),
        "driver": driver,
        "nvml_version": nvml_version,
        "pynvml": getattr(pynvml, "__version__", None),
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "reads": reads,
        "interval_s": interval_s,
        "synthesized": False,
        "reading_summaries": summaries,
        "xid_unwatched_why": unwatched,
    }
    recorder.save(out, meta)
    return meta


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Record NvmlSource's NVML calls as JSON.")
    parser.add_argument("out", type=Path)
    parser.add_argument("--reads", type=int, default=6)
    parser.add_argument("--interval", type=float, default=1.0)
    options = parser.parse_args()
    print(json.dumps(record_source_reads(options.out, options.reads, options.interval), indent=1))
