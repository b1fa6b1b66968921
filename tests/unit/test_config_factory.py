"""Sources built from a fleet's config, in merge order; a missing module reads as down."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from gpucon.config import (
    FleetConfig,
    GpuconConfig,
    KubeConfig,
    LibvirtConfig,
    NvmlConfig,
    PrometheusConfig,
    ReadinessConfig,
    RedisConfig,
)
from gpucon.model.alerts import AlertThresholds
from gpucon.model.fleet import Health
from gpucon.session import open_session
from gpucon.session.sources import UnavailableSource, build_sources, liveness_policy

FULL = FleetConfig(
    name="prod",
    kube=KubeConfig(context="c"),
    redis=RedisConfig(url="redis://10.0.0.1:6379/0", streams=("q",), cadence_s=0.5),
    prometheus=PrometheusConfig(url="http://p:9090", queries={"pending": "up"}),
    libvirt=LibvirtConfig(uri="test:///default"),
    nvml=NvmlConfig(host="h1"),
)


def test_sources_in_merge_priority_order_with_their_settings() -> None:
    sources = build_sources(FULL)
    names = [s.name for s in sources]
    assert names == ["nvml", "libvirt", "prometheus", "redis", "kube", "readiness"]
    redis_source: Any = sources[3]
    assert (redis_source.url, redis_source.streams, redis_source.cadence_s) == (
        "redis://10.0.0.1:6379/0", ("q",), 0.5,
    )  # fmt: skip
    prom: Any = sources[2]
    assert prom.queries["pending"] == "up"
    for s in sources:
        s.close()


def test_only_configured_sources() -> None:
    with_registry = build_sources(FleetConfig(redis=RedisConfig()))
    assert [s.name for s in with_registry] == ["redis", "readiness"]  # readiness: on by default
    off = FleetConfig(redis=RedisConfig(), readiness=ReadinessConfig(enabled=False))
    assert [s.name for s in build_sources(off)] == ["redis"]
    assert [s.name for s in build_sources(FleetConfig(nvml=NvmlConfig()))] == ["nvml"]
    assert build_sources(FleetConfig()) == []


def test_readiness_settings_reach_the_source_and_the_liveness_policy() -> None:
    fleet = FleetConfig(
        redis=RedisConfig(),
        prometheus=PrometheusConfig(cadence_s=2.0),
        readiness=ReadinessConfig(
            cadence_s=2.0, timeout_s=1.5, request_timeout_s=0.3, concurrency=4,
            path="/health", registry_max_age_s=7.0,
        ),
    )  # fmt: skip
    readiness: Any = build_sources(fleet)[-1]
    assert (readiness.name, readiness.cadence_s, readiness.timeout_s) == ("readiness", 2.0, 1.5)
    assert (readiness.request_timeout_s, readiness.concurrency, readiness.path) == (
        0.3, 4, "/health",
    )  # fmt: skip
    policy = liveness_policy(fleet)
    assert (policy.http_max_age_s, policy.prom_max_age_s, policy.registry_max_age_s) == (
        6.0, 6.0, 7.0,
    )  # fmt: skip


def test_a_missing_module_becomes_a_down_source_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a None entry in sys.modules makes the import fail as if the module were absent
    monkeypatch.setitem(sys.modules, "gpucon.sources.kube", None)
    sources = build_sources(FleetConfig(kube=KubeConfig(), redis=RedisConfig()))
    assert [s.name for s in sources] == ["redis", "kube", "readiness"]
    kube = sources[1]
    assert isinstance(kube, UnavailableSource)
    reading = kube.read()
    assert reading.health is Health.DOWN
    assert reading.error is not None and "gpucon.sources.kube" in reading.error


def test_hub_gets_thresholds_slos_and_refresh() -> None:
    config = GpuconConfig(
        fleets={"a": FleetConfig(name="a", redis=RedisConfig())},
        default_fleet="a",
        alerts=AlertThresholds(queue_wait_ms=50.0),
        slo_p95_ms={"sdxl": 900.0},
    )
    session = open_session(config, read_only=True, refresh_s=0.5)
    hub = session.hub
    assert [s.name for s in hub.sources] == ["redis", "readiness"]
    assert hub.thresholds.queue_wait_ms == 50.0
    assert hub.slo_p95_ms_by_model == {"sdxl": 900.0}
    assert hub.refresh_s == 0.5
    session.close()


def test_demo_session_honours_the_config_s_thresholds_and_slos() -> None:
    """The demo and the live console open their hub in one place: the config's [alerts]
    thresholds and SLOs reach the simulated fleet's hub too (over the demo's own SLOs)."""
    from gpucon.session import DemoOptions

    config = GpuconConfig(alerts=AlertThresholds(queue_wait_ms=7.0), slo_p95_ms={"sdxl": 123.0})
    session = open_session(config, demo=DemoOptions(seed=3), read_only=True)
    assert session.hub.thresholds.queue_wait_ms == 7.0
    assert session.hub.slo_p95_ms_by_model["sdxl"] == 123.0
    assert session.demo and session.fleet_name == "simulated"
    session.close()


def test_hub_names_the_prometheus_rate_window_in_its_snapshots() -> None:
    config = GpuconConfig(
        fleets={"a": FleetConfig(name="a", prometheus=PrometheusConfig(rate_window="5m"))},
        default_fleet="a",
    )
    session = open_session(config, read_only=True)
    hub = session.hub
    assert hub.rate_window == "5m" and hub.tick().rate_window == "5m"
    session.close()
    config_b = GpuconConfig(
        fleets={"b": FleetConfig(name="b", redis=RedisConfig())}, default_fleet="b"
    )
    without = open_session(config_b, read_only=True)
    assert without.hub.tick().rate_window is None  # no rate source: REQ/S names no window
    without.close()
