"""The Prometheus parsers on malformed query results: wrong types never raise.

A real server never sends most of these shapes; a proxy in front of it, a different API
version or a half-written response might. Pure functions, so no server is needed here.
"""

from __future__ import annotations

from typing import Any

from gpucon.sources.problems import Problems
from gpucon.sources.prom_parse import parse_dcgm
from gpucon.sources.prom_triton import parse_triton

GOOD = {"metric": {"__name__": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gpu": "0", "UUID": "GPU-1",
                   "hostname": "h"}, "value": [1.0, "0.5"]}  # fmt: skip
BAD: list[Any] = [
    {"metric": "not a dict", "value": [1.0, "0.5"]},
    {"metric": {"gpu": "0", "UUID": "GPU-2", "hostname": "h2"}, "value": "0.5"},
    {"metric": {"gpu": "0", "UUID": "GPU-3", "hostname": "h3"}, "value": [1.0]},
    {"metric": {"gpu": "0", "UUID": "GPU-4", "hostname": "h4"}, "value": [1.0, "abc"]},
    {"metric": {"gpu": "0", "UUID": "GPU-5", "hostname": "h5"}, "value": [1.0, None]},
    {"metric": {"gpu": "0", "UUID": "GPU-6", "hostname": "h6", "GPU_I_ID": "x"}, "value": [1, "1"]},
    {"metric": {"gpu": "-", "UUID": "GPU-7", "hostname": "h7"}, "value": [1.0, "0.5"]},
    {},
]


def test_dcgm_garbage_is_skipped_and_counted() -> None:
    problems = Problems()
    gpus, slots = parse_dcgm({"gr_engine_active": [GOOD, *BAD]}, problems)
    assert [s.id for s in slots] == ["h/gpu0"]
    assert slots[0].activity_pct == 50.0
    assert [g.uuid for g in gpus] == ["GPU-1"]
    assert problems.count == len(BAD)
    summary = problems.summary()
    assert summary is not None and f"(+{len(BAD) - 3} more)" in summary


def test_triton_garbage_is_skipped_and_counted() -> None:
    problems = Problems()
    good = {"metric": {"instance": "10.0.0.1:8002"}, "value": [1.0, "12.5"]}
    latency = parse_triton(
        {"requests": [good, *BAD], "latency_summary": [{"metric": {"instance": "x:1",
         "quantile": "0.95"}, "value": [1.0, "NaN"]}]},
        problems,
    )  # fmt: skip
    by_key = {s.key: s for s in latency}
    assert by_key["10.0.0.1:8002"].req_per_s == 12.5
    assert "x:1" not in by_key  # a NaN quantile (no traffic) is not a value, and not a problem
    assert problems.count == len(BAD)


def test_gpu_health_garbage_is_skipped_and_counted() -> None:
    labels = {"gpu": "0", "UUID": "GPU-1", "hostname": "h"}
    health = [
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", **labels}, "value": [1.0, "61"]},
        {"metric": {"__name__": "DCGM_FI_DEV_XID_ERRORS", **labels}, "value": [1.0, "13.5"]},
        {"metric": {"__name__": "DCGM_FI_DEV_POWER_USAGE", **labels}, "value": [1.0, "NaN"]},
    ]
    problems = Problems()
    gpus, slots = parse_dcgm({"gr_engine_active": [GOOD], "gpu_health": health}, problems)
    (gpu,) = gpus
    assert (gpu.temperature_c, gpu.xid_last, gpu.power_w) == (61.0, None, None)
    assert [s.id for s in slots] == ["h/gpu0"]
    assert problems.count == 2
