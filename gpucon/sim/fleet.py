"""``SimFleet``: the simulated fleet's public face — build, step, read, and the write side.

The hub reads the fleet in a worker thread while the demo's actions write from another; one
lock guards every step, read-out and write. Writes follow the Redis registry contract: each
bumps ``registry_version``, weights must be finite and ≥ 0, and a bad write changes nothing.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable, Mapping
from typing import TypeVar

from msgspec.structs import replace

from gpucon.model.fleet import Backend, BackendState, MpsState
from gpucon.model.reading import Reading
from gpucon.sim.engine import SimWorld
from gpucon.sim.layout import default_fleet, sized_fleet
from gpucon.sim.parts import SimBackend, SimSlot
from gpucon.sim.readout import ReadOut, read_backend
from gpucon.sim.scenarios import start_scenario

SIZED_SCRAPE_TICKS = 10
T = TypeVar("T")


class SimFleet:
    """A deterministic (for a seed and a sequence of steps) in-process fleet."""

    def __init__(self, world: SimWorld, seed: int, scenario: str | None, size: int | None) -> None:
        self._world = world
        self._readout = ReadOut(world)
        self._lock = threading.Lock()
        self.seed = seed
        self.scenario = scenario
        self.size = size

    # -- reading ----------------------------------------------------------------------------

    @property
    def virtual_time(self) -> float:
        """Seconds of simulated time since the fleet was built."""
        with self._lock:
            return self._world.time

    def step(self, dt_s: float, give_way: Callable[[], object] | None = None) -> None:
        """Advance virtual time by ``dt_s`` seconds (in ticks of at most 1 s), calling
        ``give_way`` between its steps (``SimWorld.step``)."""
        if not math.isfinite(dt_s):
            raise ValueError(f"dt_s: expected a finite number of seconds, got {dt_s!r}")
        with self._lock:
            self._world.step(dt_s, give_way)

    def reading(self, now: float, give_way: Callable[[], object] | None = None) -> Reading:
        """The fleet as it is now, stamped ``now`` (``give_way``: ``ReadOut.read``)."""
        with self._lock:
            return self._readout.read(now, give_way)

    # -- the registry (write side) ----------------------------------------------------------

    def backend_names(self) -> tuple[str, ...]:
        return tuple(self._world.by_name)

    def backend(self, name: str) -> Backend:
        """The backend as the registry holds it now; KeyError naming it when unknown."""
        with self._lock:
            return read_backend(self._find(name))

    def registry_version(self) -> int:
        with self._lock:
            return self._world.registry_version

    def pending_for(self, name: str) -> int:
        """Queue entries delivered to this backend and not yet answered (its XPENDING share)."""
        with self._lock:
            return self._find(name).inflight

    def set_backend_state(
        self, name: str, state: BackendState, owner: str | None, reason: str | None
    ) -> int:
        """Set a backend's state (``draining`` stops new work at once); returns the version."""
        try:
            state = BackendState(state)
        except ValueError:
            choices = ", ".join(s.value for s in BackendState)
            raise ValueError(f"state: expected one of {choices}, got {state!r}") from None
        with self._lock:
            sim = self._find(name)
            sim.state = state
            sim.owner = owner
            sim.reason = reason
            if state is BackendState.ACTIVE:
                sim.down_for_s = 0.0
            return self._world.bump(sim)

    def set_weights(self, weights: Mapping[str, float]) -> int:
        """Set several weights at once; all are checked before any changes. Returns the version."""
        checked: dict[str, float] = {}
        with self._lock:
            for name, weight in weights.items():
                self._find(name)
                if isinstance(weight, bool) or not isinstance(weight, int | float):
                    raise ValueError(f"weights[{name!r}]: expected a number, got {weight!r}")
                if not math.isfinite(weight) or weight < 0:
                    raise ValueError(
                        f"weights[{name!r}]: expected a finite number >= 0, got {weight!r}"
                    )
                checked[name] = float(weight)
            changed = [self._world.by_name[name] for name in checked]
            for sim, weight in zip(changed, checked.values(), strict=True):
                sim.weight = weight
            return self._world.bump(*changed)

    def with_world(self, fn: Callable[[SimWorld], T]) -> T:
        """``fn(world)`` under the fleet's lock (the demo's MIG executor, ``gpucon.sim.mig``);
        the read-out starts afresh when the slots changed."""
        with self._lock:
            slots = self._world.slots
            try:
                return fn(self._world)
            finally:
                if self._world.slots is not slots:
                    self._readout = ReadOut(self._world)

    def set_backend_slot(self, name: str, slot_id: str) -> int:
        """Register a backend on another slot (a re-slice); returns the registry version."""
        from gpucon.sim.mig import move_backend

        with self._lock:
            move_backend(self._world, name, slot_id)
            return self._world.bump(self._find(name))

    # -- MPS inside the simulated VMs (the demo's MPS restart, gpucon.sim.mps) --------------

    def vm_mps(self, vm_name: str) -> MpsState | None:
        """The MPS state of VM ``vm_name``; KeyError when there is no such VM."""
        with self._lock:
            vm = self._vm_slot(vm_name).vm
            return vm.mps if vm is not None else None

    def set_vm_mps(self, vm_name: str, mps: MpsState) -> None:
        with self._lock:
            slot = self._vm_slot(vm_name)
            assert slot.vm is not None
            slot.vm = replace(slot.vm, mps=mps)
            slot.cached = None  # the slot's readout is cached on what it shows
            self._world.dirty_slots.add(slot)

    def set_backend_ready(self, name: str, ready: bool) -> None:
        """Whether the backend's server answers (a stopped server is not ready)."""
        with self._lock:
            sim = self._find(name)
            sim.ready = ready
            self._world.bump(sim)

    def _vm_slot(self, vm_name: str) -> SimSlot:
        for slot in self._world.slots:
            if slot.vm is not None and slot.vm.name == vm_name:
                return slot
        raise KeyError(f"no simulated VM {vm_name!r}")

    def _find(self, name: str) -> SimBackend:
        sim = self._world.by_name.get(name)
        if sim is None:
            raise KeyError(f"backend {name!r} is not registered")
        return sim


def build_sim_fleet(
    seed: int = 7, scenario: str | None = None, size: int | None = None
) -> SimFleet:
    """The default demo fleet, or ``size`` GPUs for benchmarks, with an optional incident."""
    rng = random.Random(seed)
    parts = default_fleet(rng) if size is None else sized_fleet(size, rng)
    # at benchmark sizes metrics refresh like a Prometheus scrape: each entity every 10 s
    world = SimWorld(parts, rng, scrape_every=1 if size is None else SIZED_SCRAPE_TICKS)
    if scenario is not None:
        start_scenario(world, scenario)
    return SimFleet(world, seed, scenario, size)
