"""The Controls bundle and the protocols the actions write through.

``Controls`` holds every object through which gpucon can write; ``gpucon.session`` is the one
place that builds one, and never in a read-only session (``ReadOnlyError``), so in read-only
mode no object exists through which a write could be sent. The protocols are what the
actions use: ``RegistryControl`` (the scheduler registry in Redis, or the simulator's),
``KubeControl`` (cordon and evict, and the fresh reads of a node and of a backend's pods that
the guard checks again under the lock, ``gpucon.controls.kube``) and ``Prober``.
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gpucon.config.mps import MpsDaemonConfig
from gpucon.errors import JsonValue, Refused
from gpucon.registry import states
from gpucon.registry.heartbeat import Heartbeat
from gpucon.registry.parse import BackendRecord

if TYPE_CHECKING:
    from gpucon.config import GpuconConfig, ProbeTarget
    from gpucon.controls.audit_log import AuditLog
    from gpucon.controls.mig import MigExecutor
    from gpucon.controls.mps_transport import Ran
    from gpucon.controls.probe import ProbeBounds, ProbeProgress, ProbeResult
    from gpucon.model.fleet import MpsState


class ReadOnlyError(Refused):
    """Raised when something tries to build controls in read-only mode."""

    def __init__(self) -> None:
        super().__init__("read-only mode: no controls exist, nothing can be changed")


@dataclass(frozen=True, slots=True)
class LockLease:
    """A lock this process holds: ``token`` proves ownership when renewing or releasing."""

    target: str
    token: str
    holder: str
    since: float
    action: str


# reads one backend in a move's own transaction (the Redis registry WATCHes it first)
ReadInMove = Callable[[str], BackendRecord | None]
# the check a move runs first, reading the backends it needs in the move's own transaction
# (it raises to write nothing)
Others = Callable[[ReadInMove], None] | None


class StateMoves:
    """The backend moves of ``gpucon.registry.states`` as registry methods: each registry says
    only how it applies a move atomically (``_move``: Redis in a WATCH/MULTI transaction, the
    simulator under its lock), so the moves themselves exist once."""

    clock: Callable[[], float]

    def _move(
        self, name: str, move: Callable[[BackendRecord], states.Change], others: Others = None
    ) -> states.Change:
        """Apply ``move`` to ``name`` atomically; with ``others``, that check runs first in the
        same transaction, reading the backends it needs (it raises to write nothing)."""
        raise NotImplementedError

    def begin_drain(
        self, name: str, owner: str, reason: str, keep_serving: Sequence[str] = ()
    ) -> float | None:
        now = self.clock()

        def check(read: ReadInMove) -> None:
            states.check_keeps_serving(name, tuple(keep_serving), read)

        others: Others = check if keep_serving else None
        move = self._move(name, lambda r: states.begin_drain(r, owner, reason, now), others)
        return move.result

    def why_unread(self, exc: Exception) -> str:
        """What an operator reads when a read of this registry failed with ``exc``."""
        return f"the registry could not be read: {exc}" if str(exc) else "the registry failed"

    def mark_state(self, name: str, state: str, owner: str, reason: str) -> None:
        now = self.clock()
        self._move(name, lambda r: states.mark_state(r, state, owner, reason, now))

    def undrain(self, name: str, owner: str, reason: str, default_weight: float) -> float:
        now = self.clock()
        change = self._move(name, lambda r: states.undrain(r, owner, reason, now, default_weight))
        return float(default_weight if change.result is None else change.result)

    def set_slot(self, name: str, slot: str, owner: str, reason: str) -> None:
        now = self.clock()
        self._move(name, lambda r: states.move_slot(r, slot, owner, reason, now))


class RegistryControl(Protocol):
    """Writes to the scheduler registry; every write bumps the registry version."""

    def version(self) -> int: ...

    def backend(self, name: str) -> BackendRecord | None:
        """The backend as the registry holds it now (``gpucon.registry.parse``), or None."""
        ...

    def backend_names(self) -> tuple[str, ...]: ...

    def why_unread(self, exc: Exception) -> str:
        """What an operator needs to know when a read failed with ``exc`` (where the registry
        is and what it did), in place of the exception's class name."""
        ...

    def pending_for(self, name: str) -> int:
        """Queue entries handed to this backend and not yet acknowledged."""
        ...

    def scheduler_heartbeat(self) -> Heartbeat | None:
        """The newest scheduler heartbeat (``gpucon.registry.heartbeat``), or None when no
        scheduler writes one: in-flight and pending counts are only kept while it beats."""
        ...

    def begin_drain(
        self, name: str, owner: str, reason: str, keep_serving: Sequence[str] = ()
    ) -> float | None:
        """``state=draining``, weight 0, the weight it had remembered; returns that weight.
        With ``keep_serving``, KeepsNoneServing (nothing written) unless one of those backends
        is still active with a weight above 0, read in the same transaction."""
        ...

    def mark_state(self, name: str, state: str, owner: str, reason: str) -> None: ...

    def undrain(self, name: str, owner: str, reason: str, default_weight: float) -> float:
        """``state=active`` and the weight it had before the drain; returns that weight."""
        ...

    def set_slot(self, name: str, slot: str, owner: str, reason: str) -> None:
        """Register a drained backend on another slot (a re-slice); it stays drained."""
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

    def node_unschedulable(self, node: str) -> bool | None:
        """Whether ``node`` is cordoned now; None when there is no such node (reads)."""
        ...

    def backend_pods(self, backend: str) -> dict[str, str | None]:
        """The running pods labelled for ``backend`` now: "namespace/name" -> node (reads)."""
        ...

    def set_node_label(self, node: str, key: str, value: str | None) -> None: ...

    def node_labels(self, node: str) -> dict[str, str] | None:
        """The node's labels now (a read); None when there is no such node."""
        ...

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
    queue entries; the demo's (``gpucon.sim.probe.SimProber``) draws latencies from
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


class MpsDaemon(Protocol):
    """One MPS control daemon as the restart drives it (``gpucon.controls.mps_daemons``: this
    machine, a VM over SSH, or the GPU operator's pod; the demo's in ``gpucon.sim``)."""

    @property
    def where(self) -> str: ...

    def running(self) -> bool: ...

    def stop(self, wait_s: float) -> None:
        """``quit`` and wait until it is gone (Kubernetes: delete its pod)."""
        ...

    def start(self, wait_s: float) -> None:
        """Start it and wait until it answers (Kubernetes: follow the new pod to ready)."""
        ...

    def speaks(self, query: str) -> bool:
        """Whether the daemon knows the control command ``query`` (a ``get_...``)."""
        ...

    def set_default_thread_pct(self, pct: float) -> None: ...

    def default_thread_pct(self) -> float | None: ...

    def set_default_pinned_mem_limit(self, device: str, limit: str) -> None: ...

    def default_pinned_mem_limit(self, device: str) -> str | None: ...

    def server_pids(self) -> tuple[int, ...]: ...

    def client_env(self) -> dict[str, str]:
        """The variables a client needs to reach this daemon."""
        ...

    def run(self, argv: tuple[str, ...], env: Mapping[str, str], timeout_s: float) -> Ran:
        """Run a server's stop/start/ready command where the daemon lives."""
        ...

    def state(self) -> MpsState: ...

    def close(self) -> None: ...


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
    # creates and destroys MIG instances (NVML, nvidia-smi, the simulated fleet's); None: the
    # fleet re-slices through Kubernetes or not at all
    mig: MigExecutor | None = None
    # the MPS daemon a target names (BadParams for a target with none); None: no daemon
    # is configured
    mps: Callable[[str], MpsDaemon] | None = None
    # the daemons ``mps`` knows, as configured (the console finds a selected slot's here)
    mps_daemons: tuple[MpsDaemonConfig, ...] = ()

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


def audit_path_for(config: GpuconConfig) -> Path:
    from gpucon.config import default_state_dir

    return config.audit_path or default_state_dir() / "audit.jsonl"


def demo_audit_path(config: GpuconConfig) -> Path:
    """The demo's own audit file, beside the live one (``audit-demo.jsonl``): the simulated
    fleet's actions never land in a live fleet's record."""
    live = audit_path_for(config)
    return live.with_name(f"{live.stem}-demo{live.suffix}")
