"""The registry control over the simulated fleet: the same actions move the demo's traffic.

``SimRegistry`` speaks the ``RegistryControl`` protocol to a ``gpucon.sim.fleet.SimFleet``
(its ``set_backend_state``, ``set_weights``, ``backend``, ``backend_names``,
``registry_version`` and ``pending_for``). What Redis keeps beside the backends — the weight
before a drain, the per-target locks — lives here, in one store per fleet object shared by every
SimRegistry of that fleet, so two consoles on one simulated fleet contend as they would on Redis.
State changes are ``gpucon.registry.states``' moves, the same ones the Redis registry makes.
``gpucon.session`` builds the demo's Controls from it and the demo's prober
(``gpucon.sim.probe.SimProber``), never in a read-only session.
"""

from __future__ import annotations

import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpucon.controls.base import (
    LockLease,
    Others,
    StateMoves,
    check_weights_unchanged,
)
from gpucon.errors import BadParams, JsonValue, LockHeld, StalePlan, shown
from gpucon.registry import states
from gpucon.registry.heartbeat import Heartbeat
from gpucon.registry.parse import BackendRecord


@dataclass
class _FleetStore:
    lock: threading.RLock = field(default_factory=threading.RLock)
    weight_before_drain: dict[str, float] = field(default_factory=dict)
    # target -> (lease, expires_at)
    locks: dict[str, tuple[LockLease, float]] = field(default_factory=dict)


_STORES: weakref.WeakKeyDictionary[Any, _FleetStore] = weakref.WeakKeyDictionary()
_STORES_LOCK = threading.Lock()


def _store_for(fleet: Any) -> _FleetStore:
    with _STORES_LOCK:
        store = _STORES.get(fleet)
        if store is None:
            store = _STORES[fleet] = _FleetStore()
        return store


class SimRegistry(StateMoves):
    """RegistryControl over a SimFleet."""

    def __init__(self, fleet: Any, clock: Callable[[], float] = time.time) -> None:
        self.fleet = fleet
        self.clock = clock
        self._store = _store_for(fleet)

    def version(self) -> int:
        return int(self.fleet.registry_version())

    def _lookup(self, name: str) -> Any:
        try:
            return self.fleet.backend(name)
        except KeyError:  # SimFleet names an unknown backend with a KeyError
            return None

    def _backend_or_fail(self, name: str) -> Any:
        backend = self._lookup(name)
        if backend is None:
            raise BadParams("backend", f"no backend named {shown(name)} in the simulated fleet")
        return backend

    def backend(self, name: str) -> BackendRecord | None:
        b = self._lookup(name)
        if b is None:
            return None
        return BackendRecord(b, self._store.weight_before_drain.get(name))

    def backend_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.fleet.backend_names()))

    def pending_for(self, name: str) -> int:
        return int(self.fleet.pending_for(name))

    def scheduler_heartbeat(self) -> Heartbeat | None:
        return None  # the simulated scheduler writes none: its counts are always kept

    def _move(
        self, name: str, move: Callable[[BackendRecord], states.Change], others: Others = None
    ) -> states.Change:
        """Compute the move on the backend as it is now and apply it, under the store's lock
        (``others`` read and checked under it first)."""
        with self._store.lock:
            if others is not None:
                others(self.backend)
            record = BackendRecord(
                self._backend_or_fail(name), self._store.weight_before_drain.get(name)
            )
            change = move(record)
            if change.weight is not None:
                self.fleet.set_weights({name: change.weight})
            if change.weight_before_drain is not None:
                self._store.weight_before_drain[name] = change.weight_before_drain
            if change.forget_weight_before_drain:
                self._store.weight_before_drain.pop(name, None)
            if change.slot is not None:
                self.fleet.set_backend_slot(name, change.slot)
            self.fleet.set_backend_state(name, change.state, change.owner, change.reason)
            return change

    def set_weights(
        self,
        weights: Mapping[str, float],
        expected_version: int | None,
        owner: str,
        reason: str,
        *,
        expected_weights: Mapping[str, float | None] | None = None,
    ) -> int:
        with self._store.lock:
            current = self.version()
            if expected_version is not None and current != expected_version:
                raise StalePlan(expected_version, current)
            seen: dict[str, float | None] = {}
            for name in weights:
                backend = self._lookup(name)
                if backend is None:
                    raise BadParams(f"weights.{name}", f"no backend named {shown(name)}")
                seen[name] = backend.weight
            check_weights_unchanged(seen, expected_weights)
            self.fleet.set_weights({n: float(w) for n, w in weights.items()})
            return self.version()

    def acquire_lock(self, target: str, holder: str, action: str, ttl_s: float) -> LockLease:
        with self._store.lock:
            now = self.clock()
            held = self._store.locks.get(target)
            if held is not None and held[1] > now:
                lease = held[0]
                raise LockHeld(target, lease.holder, lease.since, lease.action)
            lease = LockLease(target, uuid.uuid4().hex, holder, now, action)
            self._store.locks[target] = (lease, now + ttl_s)
            return lease

    def renew_lock(self, lease: LockLease, ttl_s: float) -> bool:
        with self._store.lock:
            held = self._store.locks.get(lease.target)
            if held is None or held[0].token != lease.token or held[1] <= self.clock():
                return False
            self._store.locks[lease.target] = (held[0], self.clock() + ttl_s)
            return True

    def release_lock(self, lease: LockLease) -> bool:
        with self._store.lock:
            held = self._store.locks.get(lease.target)
            if held is None or held[0].token != lease.token:
                return False
            del self._store.locks[lease.target]
            return True

    def append_audit(self, record: Mapping[str, JsonValue]) -> None:
        """The simulator has no audit stream; the JSONL file keeps the record."""

    def close(self) -> None:
        """Nothing to close."""
