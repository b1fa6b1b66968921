"""Named incidents the demo can start (``gpucon demo --scenario NAME``).

Each scenario is a hook the engine calls at the start of every tick; it starts its incident
``INCIDENT_START_S`` after the simulation begins, so the console first shows a calm fleet.
"""

from __future__ import annotations

from collections.abc import Callable

from gpucon.model.fleet import BackendState, ComputeProcess, SlotKind
from gpucon.sim.engine import SimWorld
from gpucon.sim.parts import SimBackend, SimSlot
from gpucon.sim.traffic import ramp

INCIDENT_START_S = 10.0

SCENARIOS: dict[str, str] = {
    "burst": "an image-generation spike: SDXL and SD1.5 requests jump sixfold within a second for "
    "four minutes; their backends fill and the stream backs up",
    "noisy-neighbour": "a training job inside VM vm-b-1 takes its RTX 4090; both MPS servers slow",
    "slice-memory-leak": "the SD1.5 server on a 1g.10gb slice leaks memory until it runs out",
    "backend-down": "the H200's SDXL backend fails its health check; its traffic moves elsewhere",
    "gpu-fault": "the H200 loses its cooling and slows down for heat; 30 s in it raises XID 94",
}

Hook = Callable[[SimWorld, float, float], None]


# an image-generation spike (a feature goes viral, a batch client starts): the requests for
# the image models multiply within a second or two, far beyond what their backends serve
BURST_FACTOR = 6.0
BURST_RAMP_S = 1.0
BURST_HOLD_S = 240.0


def _burst() -> Hook:
    def hook(world: SimWorld, t: float, dt: float) -> None:
        # the rate over this tick: the ramp at its middle (the spike begins within the first one)
        level = ramp(t + dt / 2, INCIDENT_START_S, BURST_HOLD_S, BURST_RAMP_S)
        factor = 1.0 + (BURST_FACTOR - 1.0) * level
        world.rate_factor["sdxl"] = factor
        world.rate_factor["sd15"] = factor

    return hook


def _first_vm_slot(world: SimWorld) -> SimSlot:
    return next(s for s in world.slots if s.kind is SlotKind.VM)


ROGUE_MIB = 3800.0


def _noisy_neighbour(world: SimWorld) -> Hook:
    slot = _first_vm_slot(world)
    base_processes = slot.processes
    rogue = ComputeProcess(31337, "python3 train_lora.py", ROGUE_MIB)

    def hook(world: SimWorld, t: float, dt: float) -> None:
        level = ramp(t, INCIDENT_START_S, 1e9, 30.0)
        slot.rogue_busy = 0.995 * level
        slot.rogue_mib = ROGUE_MIB * min(1.0, 4.0 * level)
        slot.processes = (*base_processes, rogue) if level > 0 else base_processes
        world.mem_dirty.add(slot)
        for b in slot.backends:
            b.interference = 1.0 + 1.8 * level

    return hook


LEAK_MIB_PER_S = 20.0
OOM_MARGIN_MIB = 900.0  # below this much free memory the server's allocations start failing


def _memory_leak(world: SimWorld) -> Hook:
    slot = next(
        s for s in world.slots if s.kind is SlotKind.MIG and s.backends[0].model.name == "sd15"
    )
    backend = slot.backends[0]

    def hook(world: SimWorld, t: float, dt: float) -> None:
        if t < INCIDENT_START_S:
            return
        free = slot.mem_total_mib - slot.mem_used_mib
        if free > 64.0:
            slot.leak_mib += LEAK_MIB_PER_S * dt
            world.mem_dirty.add(slot)
        backend.error_rate = max(0.0, min(0.9, (OOM_MARGIN_MIB - free) / OOM_MARGIN_MIB))

    return hook


DOWN_AFTER_S = 3.0  # failed health checks before the scheduler marks a backend down


def _largest(world: SimWorld, model: str) -> SimBackend:
    serving = [b for b in world.backends if b.model.name == model]
    return max(serving, key=lambda b: b.concurrency / b.full_load_s())


def _backend_down(world: SimWorld) -> Hook:
    backend = _largest(world, "sdxl")

    def hook(world: SimWorld, t: float, dt: float) -> None:
        if t < INCIDENT_START_S:
            return
        if backend.ready:
            backend.fails_health = True
            backend.ready = False
            backend.error_rate = 1.0
            world.dirty_backends.add(backend)
        if backend.state is BackendState.ACTIVE:
            backend.down_for_s += dt
            if backend.down_for_s >= DOWN_AFTER_S:
                backend.state = BackendState.DOWN
                backend.owner = "scheduler"
                backend.reason = "health check failed: connection refused"
                backend.down_for_s = 0.0
                world.bump(backend)

    return hook


FAULT_HEAT_C = 80.0  # what lost cooling adds to the GPU's temperature, reached in 10 s
FAULT_XID = 94  # a contained ECC error: CRIT by default
FAULT_XID_AFTER_S = 30.0


def _gpu_fault(world: SimWorld) -> Hook:
    gpu = next((g for g in world.gpus if "H200" in g.gpu_type.name), world.gpus[0])

    def hook(world: SimWorld, t: float, dt: float) -> None:
        gpu.heat_c = FAULT_HEAT_C * ramp(t, INCIDENT_START_S, 1e9, 10.0)
        if gpu.xid is None and t >= INCIDENT_START_S + FAULT_XID_AFTER_S:
            gpu.xid = (FAULT_XID, t)
            world.gpus_with_xid.append(gpu)

    return hook


_BUILDERS: dict[str, Callable[[SimWorld], Hook]] = {
    "burst": lambda world: _burst(),
    "noisy-neighbour": _noisy_neighbour,
    "slice-memory-leak": _memory_leak,
    "backend-down": _backend_down,
    "gpu-fault": _gpu_fault,
}


def start_scenario(world: SimWorld, name: str) -> None:
    """Hook the named incident into ``world``; ValueError naming the choices when unknown."""
    builder = _BUILDERS.get(name)
    if builder is None:
        raise ValueError(f"scenario: unknown {name!r}; choose one of {', '.join(SCENARIOS)}")
    world.hooks.append(builder(world))
