"""The Controls bundle: every write gpucon can make, built in one place and never in read-only mode.

``build_controls(config, read_only)`` is the only way the live console and the CLI get a
``Controls``; it raises ``ReadOnlyError`` when ``read_only`` is set, so in read-only mode no
object exists through which a write could be sent. The protocols below are what the actions
use: ``RegistryControl`` (the scheduler registry in Redis, or the simulator's) and
``KubeControl`` (cordon and evict, written in ``gpucon.controls.kube``).
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gpucon.actions.plan import JsonValue, Refused

if TYPE_CHECKING:
    from gpucon.actions.audit import AuditLog
    from gpucon.config import GpuconConfig, ProbeTarget
    from gpucon.controls.probe import ProbeBounds, ProbeProgress, ProbeResult


class ReadOnlyError(Refused):
    """Raised when something tries to build controls in read-only mode."""

    def __init__(self) -> None:
        super().__init__("read-only mode: no controls exist, nothing can be changed")


@dataclass(frozen=True, slots=True)
class BackendRecord:
    """A backend as the registry holds it now (read just before or during a write)."""

    name: str
    state: str
    weight: float | None
    inflight: int | None
    owner: str | None = None
    reason: str | None = None
    weight_before_drain: float | None = None


@dataclass(frozen=True, slots=True)
class LockLease:
    """A lock this process holds: ``token`` proves ownership when renewing or releasing."""

    target: str
    token: str
    holder: str
    since: float
    action: str


class RegistryControl(Protocol):
    """Writes to the scheduler registry; every write bumps the registry version."""

    def version(self) -> int: ...

    def backend(self, name: str) -> BackendRecord | None: ...

    def backend_names(self) -> tuple[str, ...]: ...

    def pending_for(self, name: str) -> int:
        """Queue entries handed to this backend and not yet acknowledged."""
        ...

    def begin_drain(self, name: str, owner: str, reason: str) -> float | None:
        """``state=draining``, weight 0, the weight it had remembered; returns that weight."""
        ...

    def mark_state(self, name: str, state: str, owner: str, reason: str) -> None: ...

    def undrain(self, name: str, owner: str, reason: str, default_weight: float) -> float:
        """``state=active`` and the weight it had before the drain; returns that weight."""
        ...

    def set_weights(
        self,
        weights: Mapping[str, float],
        expected_version: int | None,
        owner: str,
        reason: str,
        *,
        expected_weights: Mapping[str, float | None] | None = None,
    ) -> int:
        """All weights at once if the registry is still at ``expected_version`` (StalePlan)
        and each backend's weight is still what the plan saw (``expected_weights``)."""
        ...

    def acquire_lock(self, target: str, holder: str, action: str, ttl_s: float) -> LockLease:
        """The target's lock, or LockHeld naming who holds it and since when."""
        ...

    def renew_lock(self, lease: LockLease, ttl_s: float) -> bool: ...

    def release_lock(self, lease: LockLease) -> bool: ...

    def append_audit(self, record: Mapping[str, JsonValue]) -> None:
        """Add one audit record to the registry's audit stream (no-op where there is none)."""
        ...

    def close(self) -> None: ...


class KubeControl(Protocol):
    """The Kubernetes writes a node drain and undrain need (``gpucon.controls.kube``)."""

    def cordon(self, node: str) -> None: ...

    def uncordon(self, node: str) -> None: ...

    def evict(
        self,
        pod: str,
        namespace: str,
        timeout_s: float,
        on_progress: Callable[[str], None] | None = None,
    ) -> None: ...


class Prober(Protocol):
    """Sends a bounded probe: the only way an action reaches a backend with requests.

    A live fleet's (``gpucon.controls.probe.LiveProber``) sends real KServe v2 requests or
    queue entries; the demo's (``gpucon.controls.sim_probe.SimProber``) draws latencies from
    the simulator. Like every control it exists only when the console may write.
    """

    simulated: bool

    def probe(
        self,
        target: ProbeTarget,
        bounds: ProbeBounds,
        on_progress: Callable[[ProbeProgress], None] | None = None,
        *,
        via_queue: bool = False,
        redis_url: str | None = None,
        stream: str = "gen:queue",
    ) -> ProbeResult: ...


def default_operator() -> str:
    """``user@host`` of whoever runs this process."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name in some containers
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True, slots=True)
class Controls:
    """Everything an action may write through, plus who is acting (for owner and audit)."""

    registry: RegistryControl
    audit: AuditLog
    operator: str
    kube: KubeControl | None = None
    kube_namespace: str = "default"
    # sends probes: live (targets only from the config) or the simulated fleet's (any backend)
    prober: Prober | None = None

    def close(self) -> None:
        self.registry.close()


def check_weights_unchanged(
    current: Mapping[str, float | None], expected: Mapping[str, float | None] | None
) -> None:
    """Refused when a weight the plan saw has changed since (the plan's data was stale)."""
    for name, seen in (expected or {}).items():
        now = current.get(name)
        if seen is None or now is None:
            continue
        if abs(now - seen) > 1e-9:
            raise Refused(
                f"the plan saw {name} at weight {seen:g} but it is now {now:g}: someone "
                "changed it since; plan again"
            )


def refuse_if_read_only(read_only: bool) -> None:
    """The one gate every controls builder passes first."""
    if read_only:
        raise ReadOnlyError()


def audit_path_for(config: GpuconConfig) -> Path:
    from gpucon.config import default_state_dir

    return config.audit_path or default_state_dir() / "audit.jsonl"


def build_controls(
    config: GpuconConfig, read_only: bool, *, kube: KubeControl | None = None
) -> Controls:
    """The controls for the configured fleet; raises ReadOnlyError when ``read_only``.

    The registry is the fleet's Redis (``[fleet.redis]``); a fleet without Redis has nothing
    an action could steer, which is a Refused error naming the missing section.
    """
    refuse_if_read_only(read_only)
    from gpucon.actions.audit import AuditLog
    from gpucon.controls.registry import RedisRegistry

    fleet = config.fleet
    if fleet.redis is None:
        raise Refused(f"fleet {fleet.name!r} has no [redis] section: there is no registry to steer")
    registry = RedisRegistry.from_url(fleet.redis.url, timeout_s=fleet.redis.timeout_s)
    kube_control: Any = kube
    if kube_control is None and fleet.kube is not None:
        kube_control = _build_kube(fleet.kube)
    namespace = (fleet.kube.namespace if fleet.kube else None) or "default"
    from gpucon.controls.probe import LiveProber

    return Controls(
        registry=registry,
        audit=AuditLog(audit_path_for(config), stream=registry.append_audit),
        operator=config.operator or default_operator(),
        kube=kube_control,
        kube_namespace=namespace,
        prober=LiveProber(),
    )


def _build_kube(kube_config: Any) -> KubeControl | None:
    """The kube engineer's KubeControl when it is built; None while it is not."""
    import importlib

    try:
        kube_module = importlib.import_module("gpucon.controls.kube")
    except ModuleNotFoundError as exc:
        if exc.name != "gpucon.controls.kube":
            raise
        return None
    factory = getattr(kube_module, "build_kube_control", None) or getattr(
        kube_module, "KubeControl", None
    )
    if factory is None:
        return None
    control: KubeControl = factory(kube_config)
    return control
