"""Raw NVML answers about GPU health on the device machine, as JSON (to check the source).

For each GPU: the supported event types, whether XID events can be registered on an event
set, what a never-blocking wait (timeout 0) answers and how long it takes, and the clock
event reasons (new and old function names) idle and under the CUDA load passed with --load.
Reads only: no setting of the card is changed.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pynvml


def _call(fn: str, *args: Any) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        value = getattr(pynvml, fn)(*args)
        answer: dict[str, Any] = {"value": value if isinstance(value, int | str) else repr(value)}
    except pynvml.NVMLError as exc:
        answer = {"error": type(exc).__name__, "code": exc.value}
    except AttributeError as exc:
        answer = {"error": f"not in bindings: {exc}"}
    answer["us"] = round((time.perf_counter() - started) * 1e6, 1)
    return answer


def probe(label: str) -> dict[str, Any]:
    found: dict[str, Any] = {"when": label, "gpus": []}
    for index in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        gpu: dict[str, Any] = {"index": index, "name": pynvml.nvmlDeviceGetName(h)}
        for fn in (
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
            "nvmlDeviceGetSupportedClocksEventReasons",
            "nvmlDeviceGetPowerUsage",
            "nvmlDeviceGetEnforcedPowerLimit",
        ):
            gpu[fn] = _call(fn, h)
        gpu["temperature"] = _call("nvmlDeviceGetTemperature", h, pynvml.NVML_TEMPERATURE_GPU)
        gpu["supported_event_types"] = _call("nvmlDeviceGetSupportedEventTypes", h)
        found["gpus"].append(gpu)
    return found


def events() -> dict[str, Any]:
    result: dict[str, Any] = {}
    event_set = pynvml.nvmlEventSetCreate()
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(index)
            result[f"register_xid_gpu{index}"] = _call(
                "nvmlDeviceRegisterEvents", h, pynvml.nvmlEventTypeXidCriticalError, event_set
            )
        result["wait_0"] = [_call("nvmlEventSetWait", event_set, 0) for _ in range(5)]
        result["wait_v2_0"] = _call("nvmlEventSetWait_v2", event_set, 0)
    finally:
        pynvml.nvmlEventSetFree(event_set)
    return result


def main() -> int:
    pynvml.nvmlInit()
    try:
        out: dict[str, Any] = {"driver": pynvml.nvmlSystemGetDriverVersion()}
        out["events"] = events()
        out["idle"] = probe("idle")
        if "--load" in sys.argv:
            import subprocess
            from pathlib import Path

            load = Path(__file__).with_name("cuda_load.py")
            proc = subprocess.Popen(
                [sys.executable, str(load), "8"], stdout=subprocess.PIPE, text=True
            )
            assert proc.stdout is not None
            out["load"] = proc.stdout.readline().strip()
            time.sleep(3.0)
            out["busy"] = []
            for i in range(3):
                time.sleep(1.0)
                out["busy"].append(probe(f"busy+{i + 4}s"))
            proc.wait()
    finally:
        pynvml.nvmlShutdown()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
