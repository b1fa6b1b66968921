"""Build a fleet's sources from its config, and the hub that runs them.

Sources come in merge-priority order — nvml, libvirt, prometheus, redis, kube — so NVML's
own numbers win over DCGM's where both know a field; the readiness checks come last (they
check the backends the others name). Each source module is imported here,
lazily, only when the fleet configures it (``kubernetes.client`` alone costs 0.6 s). A
source whose module or client library is missing, or whose constructor fails, becomes an
``UnavailableSource``: it reads as ``down`` with the reason, so the console shows the gap
instead of failing to start.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpucon.config import readiness_of
from gpucon.model.fleet import Health
from gpucon.model.liveness import LivenessPolicy
from gpucon.model.reading import Reading
from gpucon.sources.base import Source, describe_error

if TYPE_CHECKING:
    from gpucon.config import FleetConfig, GpuconConfig
    from gpucon.hub import Hub

UNAVAILABLE_RETRY_S = 300.0


class UnavailableSource:
    """A configured source that cannot be built here; every read says why."""

    timeout_s = 1.0
    cadence_s = UNAVAILABLE_RETRY_S

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    def read(self) -> Reading:
        return Reading(self.name, Health.DOWN, time.time(), 0.0, self.reason)

    def close(self) -> None:
        pass


def _build(name: str, module: str, cls: str, kwargs: Callable[[], dict[str, Any]]) -> Source:
    try:
        factory = getattr(importlib.import_module(module), cls)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or module
        return UnavailableSource(name, f"not available here: cannot import {missing} ({module})")
    except AttributeError:
        return UnavailableSource(name, f"not available here: {module} has no {cls}")
    try:
        source: Source = factory(**kwargs())
    except Exception as exc:  # a constructor must not stop the console from starting
        return UnavailableSource(name, f"cannot start: {describe_error(exc)}")
    return source


def build_sources(fleet: FleetConfig) -> list[Source]:
    """The fleet's configured sources in merge-priority order (nvml, libvirt, prometheus,
    redis, kube)."""
    sources: list[Source] = []
    if (nvml := fleet.nvml) is not None:
        sources.append(
            _build(
                "nvml",
                "gpucon.sources.nvml",
                "NvmlSource",
                lambda: {
                    "host": nvml.host or None,
                    "cadence_s": nvml.cadence_s,
                    "slow_cadence_s": nvml.slow_cadence_s,
                    "timeout_s": nvml.timeout_s,
                },
            )
        )
    if (lv := fleet.libvirt) is not None:
        sources.append(
            _build(
                "libvirt",
                "gpucon.sources.libvirt_source",
                "LibvirtSource",
                lambda: {"uri": lv.uri, "cadence_s": lv.cadence_s, "timeout_s": lv.timeout_s},
            )
        )
    if (prom := fleet.prometheus) is not None:
        sources.append(
            _build(
                "prometheus",
                "gpucon.sources.prometheus",
                "PrometheusSource",
                lambda: {
                    "url": prom.url,
                    "queries": dict(prom.queries),
                    "cadence_s": prom.cadence_s,
                    "timeout_s": prom.timeout_s,
                    "rate_window": prom.rate_window,
                    "host_labels": prom.host_labels,
                },
            )
        )
    if (rq := fleet.redis) is not None:
        sources.append(
            _build(
                "redis",
                "gpucon.sources.redisq",
                "RedisQueueSource",
                lambda: {
                    "url": rq.url,
                    "streams": rq.streams,
                    "group": rq.group,
                    "cadence_s": rq.cadence_s,
                    "timeout_s": rq.timeout_s,
                    "client_name": rq.client_name,
                },
            )
        )
    if (kube := fleet.kube) is not None:
        sources.append(
            _build(
                "kube",
                "gpucon.sources.kube",
                "KubeSource",
                lambda: {
                    "kubeconfig": kube.kubeconfig,
                    "context": kube.context,
                    "namespace": kube.namespace,
                    "timeout_s": kube.timeout_s,
                },
            )
        )
    if (ready := readiness_of(fleet)) is not None:
        sources.append(
            _build(
                "readiness",
                "gpucon.sources.readiness",
                "ReadinessSource",
                lambda: {
                    "cadence_s": ready.cadence_s,
                    "timeout_s": ready.timeout_s,
                    "request_timeout_s": ready.request_timeout_s,
                    "concurrency": ready.concurrency,
                    "path": ready.path,
                },
            )
        )
    return sources


def liveness_policy(fleet: FleetConfig) -> LivenessPolicy:
    """How old each readiness signal may be and still count: three of its source's cadences
    (the scheduler's ``ready_at``: the config's ``registry_max_age_s``)."""
    ready = readiness_of(fleet)
    default = LivenessPolicy()
    return LivenessPolicy(
        http_max_age_s=3 * ready.cadence_s if ready else default.http_max_age_s,
        prom_max_age_s=3 * fleet.prometheus.cadence_s
        if fleet.prometheus
        else default.prom_max_age_s,
        registry_max_age_s=ready.registry_max_age_s if ready else default.registry_max_age_s,
    )


def build_hub(config: GpuconConfig, fleet_name: str | None = None) -> Hub:
    """A Hub over the named fleet's sources (default: the config's), with its thresholds
    and per-model SLOs."""
    from gpucon.hub import Hub

    name = fleet_name or config.default_fleet
    if name not in config.fleets:
        known = ", ".join(sorted(config.fleets))
        raise KeyError(f"fleet {name!r} is not configured (known: {known})")
    return Hub(
        build_sources(config.fleets[name]),
        refresh_s=config.ui.refresh_s,
        thresholds=config.alerts,
        slo_p95_ms_by_model=config.slo_p95_ms,
        liveness_policy=liveness_policy(config.fleets[name]),
    )
