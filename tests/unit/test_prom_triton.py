"""Triton's latency families parsed per (address, model), and windows in seconds."""

from __future__ import annotations

from typing import Any

from gpucon.sources.problems import Problems
from gpucon.sources.prom_triton import parse_triton
from gpucon.sources.promql import DEFAULT_QUERIES, window_seconds

ADDR = "10.0.0.5:8002"


def series(value: str, **labels: str) -> dict[str, Any]:
    return {"metric": {"instance": ADDR, **labels}, "value": [1.0, value]}


def test_models_behind_one_address_stay_apart() -> None:
    results = {
        "requests": [
            series("3", model="sdxl", version="1"),
            series("1", model="sdxl", version="2"),
            series("8", model="sd15", version="1"),
        ],
        "latency_summary": [
            series("1620000", model="sd15", quantile="0.95"),
            series("2610000", model="sdxl", quantile="0.95"),
        ],
    }
    stats = {s.model: s for s in parse_triton(results, Problems(), 60.0)}
    assert {m: (s.key, s.address) for m, s in stats.items()} == {
        "sd15": (ADDR, ADDR),
        "sdxl": (ADDR, ADDR),
    }
    assert (stats["sdxl"].req_per_s, stats["sdxl"].versions) == (4.0, ("1", "2"))
    assert (stats["sd15"].p95_ms, stats["sdxl"].p95_ms) == (1620.0, 2610.0)
    assert stats["sd15"].rate_window_s == 60.0


def test_an_idle_model_has_no_quantiles_whatever_its_summary_still_holds() -> None:
    results = {
        "requests": [series("0", model="resnet50", version="1")],
        "latency_summary": [series("55000", model="resnet50", quantile="0.95")],
        "latency_histogram": [series("NaN", model="resnet50", quantile="0.99")],
        "latency_average": [series("NaN", model="resnet50")],
        "pending": [series("0", model="resnet50")],
    }
    problems = Problems()
    (idle,) = parse_triton(results, problems)
    assert idle.req_per_s == 0.0
    assert (idle.p50_ms, idle.p95_ms, idle.p99_ms, idle.avg_ms) == (None, None, None, None)
    assert idle.pending == 0.0
    assert problems.count == 0


def test_a_series_without_model_keeps_the_address_alone() -> None:
    (stats,) = parse_triton({"requests": [series("2")]}, Problems())
    assert (stats.key, stats.model, stats.versions) == (ADDR, None, ())


def test_default_queries_keep_the_model_label() -> None:
    for family in ("requests", "failures", "latency_summary", "latency_average", "pending"):
        assert "model" in DEFAULT_QUERIES[family], family
    assert "version" in DEFAULT_QUERIES["requests"]


def test_window_seconds() -> None:
    assert window_seconds("1m") == 60.0
    assert window_seconds("1m30s") == 90.0
    assert window_seconds("500ms") == 0.5
    assert window_seconds("4s") == 4.0
    assert window_seconds("1x") is None
    assert window_seconds("") is None
