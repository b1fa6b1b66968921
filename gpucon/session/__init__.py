"""Opening a session: the one place where a config and a mode become a running gpucon.

``open_session(config, demo=..., read_only=...)`` gives a ``Session``: the hub that reads the
fleet (the configured sources, or the simulated fleet), the alert thresholds and SLOs from the
config in both cases, where the audit trail goes, and — only when the session may write — the
controls. The console (live and demo), ``gpucon snapshot`` and every action verb open their
session here, so they cannot drift apart.

Read-only is decided here once: a read-only session has no controls factory at all, and
``Session.controls()`` raises ``ReadOnlyError`` before anything is built.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec
from msgspec.structs import replace

from gpucon.config import GpuconConfig
from gpucon.errors import Refused
from gpucon.hub import Hub
from gpucon.model.snapshot import Snapshot

if TYPE_CHECKING:  # the write side is imported when it is built, after the first frame
    from pathlib import Path

    from gpucon.controls.base import Controls, KubeControl
    from gpucon.controls.mig import MigExecutor
    from gpucon.sim.fleet import SimFleet
    from gpucon.sim.runner import DemoFleetRunner


# the fleet name the demo's audit records carry
SIMULATED_FLEET = "simulated"


class DemoOptions(msgspec.Struct, frozen=True, gc=False):
    """Which simulated fleet a demo session runs (``--seed``, ``--scenario``, ``--size``)."""

    seed: int = 7
    scenario: str | None = None
    size: int | None = None


class Session:
    """A fleet opened for reading and, unless read-only, for acting on."""

    def __init__(
        self,
        config: GpuconConfig,
        hub_factory: Callable[[], Hub],
        *,
        read_only: bool,
        controls_factory: Callable[[], Controls] | None,
        sim_fleet: SimFleet | None = None,
    ) -> None:
        self.config = config
        self._hub_factory = hub_factory
        self._hub: Hub | None = None
        self.read_only = read_only
        self.sim_fleet = sim_fleet
        # None in read-only: no code path holds a way to build a writer
        self.controls_factory = None if read_only else controls_factory
        self._controls: Controls | None = None
        self._controls_lock = threading.Lock()
        self._runner: DemoFleetRunner | None = None

    @property
    def hub(self) -> Hub:
        """The hub over the session's sources, built on first use (a verb that plans on the
        registry alone never builds one)."""
        if self._hub is None:
            self._hub = self._hub_factory()
        return self._hub

    @property
    def demo(self) -> bool:
        return self.sim_fleet is not None

    @property
    def audit_path(self) -> Path:
        """Where this session's actions are recorded: the demo records its actions in a file
        of its own, never the live fleet's."""
        from gpucon.controls.base import audit_path_for, demo_audit_path

        return demo_audit_path(self.config) if self.demo else audit_path_for(self.config)

    @property
    def fleet_name(self) -> str:
        return SIMULATED_FLEET if self.demo else self.config.fleet.name

    def controls(self) -> Controls:
        """The write side, built on first use; ReadOnlyError in a read-only session."""
        if self.controls_factory is None:
            from gpucon.controls.base import ReadOnlyError

            raise ReadOnlyError()
        with self._controls_lock:
            if self._controls is None:
                self._controls = self.controls_factory()
            return self._controls

    def planning_view(self, *, full: bool = False) -> tuple[Snapshot, int]:
        """What an action verb plans on: the fleet now and the registry version it was read at.

        Live: the registry alone, read over a read-only connection (``full``: every source once
        more, for plans that need latency, slots or Kubernetes). Demo: the simulated fleet,
        kept moving in the background so that work in flight drains.
        """
        if self.sim_fleet is not None:
            runner = self._demo_runner()
            return runner.snapshot(), self.sim_fleet.registry_version()
        return _live_planning_view(self, full=full)

    def _demo_runner(self) -> DemoFleetRunner:
        if self._runner is None:
            from gpucon.sim.runner import DemoFleetRunner

            assert self.sim_fleet is not None
            # the demo's SLOs as the session's hub has them (the config may override them)
            slos = self.hub.slo_p95_ms_by_model
            self._runner = DemoFleetRunner.over(self.sim_fleet, slo_p95_ms_by_model=slos)
        return self._runner

    def mps_daemon_params(self, target: str) -> dict[str, object] | None:
        """The MPS daemon that serves ``target`` as plan params (``gpucon.actions.mps_restart``):
        the config's ``[[fleets.NAME.mps]]``, or the simulated VM's in the demo; None: none."""
        from gpucon.model.records import as_dict

        if self.sim_fleet is not None:
            from gpucon.sim.mps import demo_daemons

            daemons = demo_daemons(self.sim_fleet)
        else:
            daemons = self.config.fleet.mps
        found = next((d for d in daemons if d.target == target), None)
        return None if found is None else as_dict(found)

    def mps_targets(self) -> tuple[str, ...]:
        """The targets with an MPS daemon gpucon can restart."""
        if self.sim_fleet is not None:
            from gpucon.sim.mps import demo_daemons

            return tuple(d.target for d in demo_daemons(self.sim_fleet))
        return tuple(d.target for d in self.config.fleet.mps)

    def close(self) -> None:
        if self._hub is not None:
            self._hub.stop()
        if self._runner is not None:
            self._runner.stop()
        if self._controls is not None:
            self._controls.close()


def open_session(
    config: GpuconConfig,
    *,
    demo: DemoOptions | None = None,
    read_only: bool = False,
    refresh_s: float | None = None,
    kube: KubeControl | None = None,
    fork_first_nvml_read: bool = False,
) -> Session:
    """The session for ``config``'s fleet, or for a simulated fleet when ``demo`` is given.
    ``fork_first_nvml_read``: a live fleet's NVML source makes its first read in a child
    process (``gpucon.sources.forked_first_read``; the console's, while its UI loads).

    Raises ValueError for a demo that cannot be built (unknown scenario, size out of range) and
    Refused for a live fleet that names no source.
    """
    read_only = read_only or config.read_only
    refresh = config.ui.refresh_s if refresh_s is None else refresh_s
    if demo is not None:
        return _demo_session(config, demo, read_only=read_only, refresh_s=refresh)
    if not config.fleet.sources_named():
        raise Refused(f"fleet {config.fleet.name!r} names no source; see gpucon config")

    prometheus = config.fleet.prometheus

    def live_hub() -> Hub:
        from gpucon.session.sources import build_sources, liveness_policy

        return Hub(
            build_sources(config.fleet, fork_first_nvml_read=fork_first_nvml_read),
            liveness_policy=liveness_policy(config.fleet),
            refresh_s=refresh,
            thresholds=config.alerts,
            slo_p95_ms_by_model=config.slo_p95_ms,
            rate_window=prometheus.rate_window if prometheus is not None else None,
        )

    return Session(
        config, live_hub, read_only=read_only, controls_factory=lambda: live_controls(config, kube)
    )


def _demo_session(
    config: GpuconConfig, demo: DemoOptions, *, read_only: bool, refresh_s: float
) -> Session:
    from gpucon.sim import DEMO_RATE_WINDOW, DEMO_SLO_P95_MS
    from gpucon.sim.source import SimSource

    source = SimSource.for_demo(demo.seed, demo.scenario, demo.size)
    hub = Hub(
        [source],
        refresh_s=refresh_s,
        thresholds=config.alerts,
        slo_p95_ms_by_model={**DEMO_SLO_P95_MS, **config.slo_p95_ms},
        rate_window=DEMO_RATE_WINDOW,
    )
    fleet = source.fleet
    return Session(
        config,
        lambda: hub,
        read_only=read_only,
        controls_factory=lambda: demo_controls(config, fleet),
        sim_fleet=fleet,
    )


def demo_controls(config: GpuconConfig, fleet: SimFleet) -> Controls:
    """The demo's write side: the simulated registry and prober, audited like a live one but
    in its own file (``audit-demo.jsonl``), with fleet ``simulated`` and no shared stream."""
    from gpucon.controls.audit_log import AuditLog
    from gpucon.controls.base import Controls, default_operator, demo_audit_path
    from gpucon.sim.mig import SimMig
    from gpucon.sim.mps import demo_daemons, sim_daemons
    from gpucon.sim.probe import SimProber
    from gpucon.sim.registry import SimRegistry

    return Controls(
        registry=SimRegistry(fleet),
        audit=AuditLog(demo_audit_path(config), fleet=SIMULATED_FLEET),
        operator=config.operator or default_operator(),
        prober=SimProber(fleet),
        mig=SimMig(fleet),
        mps=sim_daemons(fleet),
        mps_daemons=demo_daemons(fleet),
    )


def live_controls(config: GpuconConfig, kube: KubeControl | None = None) -> Controls:
    """The configured fleet's write side: its Redis registry, Kubernetes, the live prober.

    A fleet without Redis has nothing an action could steer: Refused, naming the section.
    """
    from gpucon.controls.audit_log import AuditLog
    from gpucon.controls.base import Controls, audit_path_for, default_operator
    from gpucon.controls.mps_daemons import daemons_from_config
    from gpucon.controls.probe_live import LiveProber
    from gpucon.controls.registry import RedisRegistry

    fleet = config.fleet
    if fleet.redis is None:
        raise Refused(f"fleet {fleet.name!r} has no [redis] section: there is no registry to steer")
    from gpucon.config.credentials import redis_auth

    auth = redis_auth(fleet.redis, key=f"fleets.{fleet.name}.redis")
    registry = RedisRegistry.from_url(fleet.redis.url, timeout_s=fleet.redis.timeout_s, auth=auth)
    if kube is None and fleet.kube is not None:
        from gpucon.controls.kube import build_kube_control

        kube = build_kube_control(fleet.kube)
    return Controls(
        registry=registry,
        audit=AuditLog(audit_path_for(config), stream=registry.append_audit, fleet=fleet.name),
        operator=config.operator or default_operator(),
        kube=kube,
        kube_namespace=(fleet.kube.namespace if fleet.kube else None) or "default",
        prober=LiveProber(redis_auth=auth),
        mig=mig_executor(config),
        mps=daemons_from_config(fleet.mps, fleet.kube),
        mps_daemons=fleet.mps,
    )


def mig_executor(config: GpuconConfig) -> MigExecutor | None:
    """How this fleet creates and destroys MIG instances (``[fleets.NAME.nvml]
    mig_executor``): NVML on this host, ``nvidia-smi mig``, or None for Kubernetes
    (mig-manager does it) and fleets without NVML."""
    nvml = config.fleet.nvml
    if nvml is None or nvml.mig_executor == "kubernetes":
        return None
    if nvml.mig_executor == "nvidia-smi":
        from gpucon.controls.mig_smi import SmiMig

        return SmiMig()
    from gpucon.controls.mig import NvmlMig

    return NvmlMig()


def _live_planning_view(session: Session, *, full: bool) -> tuple[Snapshot, int]:
    """The registry as a Snapshot and its version; ``full`` adds every source's reading.

    The version is read first, so a write in between makes the plan look stale (refused,
    safe) rather than fresh.
    """
    from gpucon.actions.registry_snapshot import read_registry
    from gpucon.config.credentials import redis_client_for

    fleet = session.config.fleet
    if fleet.redis is None:
        raise Refused(f"fleet {fleet.name!r} has no [redis] section: no registry to act on")
    client = redis_client_for(fleet.redis, client_name="gpucon-cli-read")
    try:
        registry, version = read_registry(client)
    finally:
        client.close()
    if not full:
        return registry, version
    session.hub.poll_once()
    snapshot = session.hub.tick()
    if not snapshot.backends:  # the Redis source could not be read: plan on the registry
        snapshot = replace(snapshot, backends=registry.backends)
    return snapshot, version
