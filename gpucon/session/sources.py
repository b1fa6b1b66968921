"""Build a fleet's sources from its config (``gpucon.session`` gives them to a hub).

Sources come in merge-priority order — nvml, libvirt, prometheus, redis, kube — so NVML's
own numbers win over DCGM's where both know a field; the readiness checks come last (they
check the backends the others name). Each source module is imported here,
lazily, only when the fleet configures it (``kubernetes.client`` alone costs 0.6 s). A
source whose module or client library is missing, or whose constructor fails, becomes an
``UnavailableSource``: it reads as ``down`` with the reason, so the console shows the gap
instead of failing to start.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpucon.config import readiness_of
from gpucon.model.fleet import Health
from gpucon.model.liveness import LivenessPolicy
from gpucon.model.reading import Reading
from gpucon.sources.base import Source, describe_error

if TYPE_CHECKING:
    from gpucon.config import FleetConfig

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


def _build(name: str, make: Callable[[], Source]) -> Source:
    """``make()``, or an UnavailableSource saying why it could not be built here."""
    try:
        return make()
    except ImportError as exc:  # the client library (or its C library) is missing
        missing = exc.name or str(exc)
        return UnavailableSource(name, f"not available here: cannot import {missing}")
    except Exception as exc:  # a constructor must not stop the console from starting
        return UnavailableSource(name, f"cannot start: {describe_error(exc)}")


def build_sources(fleet: FleetConfig, *, fork_first_nvml_read: bool = False) -> list[Source]:
    """The fleet's configured sources in merge-priority order (nvml, libvirt, prometheus,
    redis, kube). ``fork_first_nvml_read``: NVML's first read is made in a child process
    (``gpucon.sources.forked_first_read``: a live console's, beside its UI's imports)."""
    sources: list[Source] = []
    if (nvml := fleet.nvml) is not None:

        def make_nvml() -> Source:
            from gpucon.sources.nvml import NvmlSource

            return NvmlSource(
                host=nvml.host or None,
                cadence_s=nvml.cadence_s,
                slow_cadence_s=nvml.slow_cadence_s,
                timeout_s=nvml.timeout_s,
            )

        if fork_first_nvml_read:
            from gpucon.sources.forked_first_read import ForkedFirstRead

            def build_nvml() -> Source:
                return _build("nvml", make_nvml)

            sources.append(ForkedFirstRead("nvml", build_nvml, nvml.cadence_s, nvml.timeout_s))
        else:
            sources.append(_build("nvml", make_nvml))
    if (lv := fleet.libvirt) is not None:

        def make_libvirt() -> Source:
            from gpucon.sources.libvirt_source import LibvirtSource

            return LibvirtSource(uri=lv.uri, cadence_s=lv.cadence_s, timeout_s=lv.timeout_s)

        sources.append(_build("libvirt", make_libvirt))
    if (prom := fleet.prometheus) is not None:

        def make_prometheus() -> Source:
            from gpucon.config.credentials import http_auth
            from gpucon.sources.prometheus import PrometheusSource

            return PrometheusSource(
                url=prom.url,
                queries=dict(prom.queries),
                cadence_s=prom.cadence_s,
                timeout_s=prom.timeout_s,
                rate_window=prom.rate_window,
                host_labels=prom.host_labels,
                auth=http_auth(prom, key=f"fleets.{fleet.name}.prometheus"),
            )

        sources.append(_build("prometheus", make_prometheus))
    if (rq := fleet.redis) is not None:

        def make_redis() -> Source:
            from gpucon.config.credentials import redis_auth
            from gpucon.sources.redisq import RedisQueueSource

            return RedisQueueSource(
                url=rq.url,
                streams=rq.streams,
                group=rq.group,
                cadence_s=rq.cadence_s,
                timeout_s=rq.timeout_s,
                client_name=rq.client_name,
                auth=redis_auth(rq, key=f"fleets.{fleet.name}.redis"),
            )

        sources.append(_build("redis", make_redis))
    if (kube := fleet.kube) is not None:

        def make_kube() -> Source:
            from gpucon.sources.kube import KubeSource

            return KubeSource(
                kubeconfig=kube.kubeconfig,
                context=kube.context,
                namespace=kube.namespace,
                timeout_s=kube.timeout_s,
            )

        sources.append(_build("kube", make_kube))
    if (ready := readiness_of(fleet)) is not None:

        def make_readiness() -> Source:
            from gpucon.sources.readiness import ReadinessSource

            return ReadinessSource(
                cadence_s=ready.cadence_s,
                timeout_s=ready.timeout_s,
                request_timeout_s=ready.request_timeout_s,
                concurrency=ready.concurrency,
                path=ready.path,
            )

        sources.append(_build("readiness", make_readiness))
    if any(d.transport != "kube" for d in fleet.mps):
        sources.append(_build("mps", lambda: mps_source(fleet)))
    return sources


def mps_source(fleet: FleetConfig) -> Source:
    """The daemons of ``[[fleets.NAME.mps]]`` gpucon can ask (here or over SSH), read with
    ``get_...`` commands only (``gpucon.sources.mps``); the operator's pods are not asked."""
    from gpucon.controls.mps import MpsControl, MpsError
    from gpucon.controls.mps_daemons import command_daemon
    from gpucon.sources.mps import DaemonDown, MpsReader, MpsSource, is_not_running

    def asker(control: MpsControl) -> Callable[[str], str]:
        def ask(command: str) -> str:
            try:
                if not control.is_running():
                    raise DaemonDown(f"no MPS daemon on {control.pipe_dir}")
                return control.command(command)
            except MpsError as error:
                if is_not_running(str(error)):
                    raise DaemonDown(str(error)) from error
                raise

        return ask

    readers = []
    for daemon in fleet.mps:
        if daemon.transport == "kube":
            continue
        control = command_daemon(daemon).control
        transport = control.transport
        readers.append(
            MpsReader(
                daemon.target,
                asker(control),
                daemon.device,
                transport.close if transport is not None else None,
            )
        )
    timeout = max(d.timeout_s for d in fleet.mps)
    return MpsSource(readers, cadence_s=5.0, timeout_s=timeout)


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
