"""Re-slicing a simulated GPU: the demo's MIG executor, with NVML's rules.

``SimMig(fleet)`` is a ``gpucon.controls.mig.MigExecutor`` over a ``SimFleet``: destroying a
GPU instance removes its slot (its backends lose their device: not ready, no work), creating
one adds a slot at its placement, and ``SimFleet.set_backend_slot`` (the registry's move)
puts a drained backend on a new slot, its speed and concurrency following the slot's SMs.
The rules are NVML's: a start the profile may not use, or slices already covered, is refused;
a GPU instance with a compute instance, or a compute instance whose servers still run, is in
use. A simulated server exits once every backend of its slot is drained (as an orchestrator
stops a drained server), so a drained GPU has no compute process left.

Every simulated instance has its placement (``sim.layout`` places a built fleet's as NVML
would), so a create that overlaps one is refused as NVML refuses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucon.controls.mig import GpuInstance, GpuRef, MigError
from gpucon.model.fleet import BackendState, ComputeProcess, SlotKind
from gpucon.sim.catalog import CONTEXT_MIB, concurrency, service_time_s
from gpucon.sim.parts import SimGpu, SimSlot, mig_slot

if TYPE_CHECKING:
    from gpucon.sim.engine import SimWorld
    from gpucon.sim.fleet import SimFleet

IN_USE = 19  # NVML_ERROR_IN_USE
INSUFFICIENT_RESOURCES = 23  # NVML_ERROR_INSUFFICIENT_RESOURCES
INVALID_ARGUMENT = 2
NOT_FOUND = 6


def _gpu(world: SimWorld, uuid: str) -> SimGpu:
    found = next((g for g in world.gpus if g.uuid == uuid), None)
    if found is None or not found.mig_enabled:
        raise MigError(f"GPU {uuid}", "no MIG-enabled GPU with this UUID", NOT_FOUND)
    return found


def _slot(gpu: SimGpu, gi_id: int) -> SimSlot:
    found = next((s for s in gpu.slots if s.gi_id == gi_id), None)
    if found is None:
        raise MigError(f"GPU instance {gi_id}", "not found", NOT_FOUND)
    return found


def _running(slot: SimSlot) -> bool:
    """A slot's servers run while one of its backends is not drained."""
    return any(b.state is not BackendState.DRAINED for b in slot.backends)


def set_slots(world: SimWorld, gpu: SimGpu, slots: list[SimSlot]) -> None:
    """The GPU's slots are now ``slots``: the world's lists follow."""
    others = [s for s in world.slots if s.gpu is not gpu]
    for gone in set(gpu.slots) - set(slots):
        world.mem_dirty.discard(gone)
        world.dirty_slots.discard(gone)
    gpu.slots = slots
    world.slots = (*others, *slots)
    for i, s in enumerate(world.slots):
        s.phase = i % world.scrape_every
    world.slots_by_phase = tuple(
        tuple(s for s in world.slots if s.phase == k) for k in range(world.scrape_every)
    )
    world.mem_dirty.update(slots)
    world.dirty_slots.update(slots)
    world.dirty_gpus.add(gpu)


def instances(world: SimWorld, uuid: str) -> tuple[GpuInstance, ...]:
    gpu = _gpu(world, uuid)
    table = gpu.gpu_type.profiles
    found = []
    for s in gpu.slots:
        if s.kind is not SlotKind.MIG or s.gi_id is None:
            continue
        profile = table.by_name(s.profile) if table is not None else None
        start, size = s.placement if s.placement is not None else (-1, 0)
        cis = () if s.ci_id is None else (s.ci_id,)
        found.append(GpuInstance(s.gi_id, profile.profile_id if profile else -1, start, size, cis))
    return tuple(sorted(found, key=lambda g: (g.start, g.gi_id)))


def processes(world: SimWorld, uuid: str) -> tuple[int, ...]:
    gpu = _gpu(world, uuid)
    return tuple(sorted(p.pid for s in gpu.slots if _running(s) for p in s.processes))


def destroy_ci(world: SimWorld, uuid: str, gi_id: int, ci_id: int) -> None:
    slot = _slot(_gpu(world, uuid), gi_id)
    if slot.ci_id != ci_id:
        raise MigError(f"compute instance {ci_id} of GPU instance {gi_id}", "not found", NOT_FOUND)
    if _running(slot):
        raise MigError(f"destroy compute instance {ci_id}", "NVMLError_InUse", IN_USE)
    slot.ci_id = None
    slot.processes = ()
    world.dirty_slots.add(slot)


def destroy_gi(world: SimWorld, uuid: str, gi_id: int) -> None:
    gpu = _gpu(world, uuid)
    slot = _slot(gpu, gi_id)
    if slot.ci_id is not None:
        raise MigError(f"destroy GPU instance {gi_id}", "NVMLError_InUse", IN_USE)
    for b in slot.backends:  # their server lost its device: not ready until moved
        b.ready = False
        world.dirty_backends.add(b)
    set_slots(world, gpu, [s for s in gpu.slots if s is not slot])


def create_gi(world: SimWorld, uuid: str, profile_id: int, start: int | None) -> int:
    gpu = _gpu(world, uuid)
    table = gpu.gpu_type.profiles
    profile = next(
        (p for p in (table.profiles if table else ()) if p.profile_id == profile_id), None
    )
    what = f"create a GPU instance of profile {profile_id} at slice {start}"
    if profile is None:
        raise MigError(what, "NVMLError_InvalidArgument", INVALID_ARGUMENT)
    if start is None:
        start = next(iter(profile.starts), 0)
    size = profile.size_at(start)
    if size is None:
        raise MigError(what, "NVMLError_InvalidArgument", INVALID_ARGUMENT)
    cells = set(range(start, start + size))
    for s in gpu.slots:
        taken = set(range(s.placement[0], sum(s.placement))) if s.placement else set()
        if cells & taken:
            raise MigError(what, "NVMLError_InsufficientResources", INSUFFICIENT_RESOURCES)
    if sum(1 for s in gpu.slots if s.profile == profile.name) >= profile.instance_count:
        raise MigError(what, "NVMLError_InsufficientResources", INSUFFICIENT_RESOURCES)
    used = {s.gi_id for s in gpu.slots}
    gi_id = next(i for i in range(1, 64) if i not in used)
    slot = mig_slot(gpu, gi_id, profile)
    slot.ci_id = None
    slot.placement = (start, size)
    set_slots(world, gpu, [*gpu.slots, slot])
    return gi_id


def create_ci(world: SimWorld, uuid: str, gi_id: int) -> int:
    slot = _slot(_gpu(world, uuid), gi_id)
    if slot.ci_id is not None:
        raise MigError(f"GPU instance {gi_id}", "NVMLError_InsufficientResources", 23)
    slot.ci_id = 0
    world.dirty_slots.add(slot)
    return 0


def move_backend(world: SimWorld, name: str, slot_id: str) -> None:
    """A backend registered on another slot: its server starts there, sized to its SMs."""
    b = world.by_name.get(name)
    slot = next((s for s in world.slots if s.id == slot_id), None)
    if b is None or slot is None:
        raise KeyError(f"no backend {name!r} or no slot {slot_id!r} in the simulated fleet")
    if b in b.slot.backends:
        b.slot.backends.remove(b)
    slot.backends.append(b)
    b.slot = slot
    speed = slot.gpu.gpu_type.speed_per_sm
    b.service_s = service_time_s(b.model, slot.sm_count, speed)
    b.concurrency = concurrency(b.model, slot.sm_count)
    b.batch_factor = 1.0 + b.model.batch_slowdown * (b.concurrency - 1)
    b.compute_s = b.service_s
    b.peak_busy = 0
    b.ready = True
    pid = 60000 + len(world.slots) * 7 + len(slot.backends)
    slot.processes = (
        *slot.processes,
        ComputeProcess(pid, "tritonserver", CONTEXT_MIB + b.model.weights_mib),
    )
    world.mem_dirty.add(slot)
    world.dirty_slots.add(slot)
    world.dirty_backends.add(b)
    world.dirty_latency.add(b)


class SimMig:
    """MigExecutor over a SimFleet: each call runs on its world under the fleet's lock."""

    kind = "simulated"

    def __init__(self, fleet: SimFleet) -> None:
        self.fleet = fleet

    def instances(self, gpu: GpuRef) -> tuple[GpuInstance, ...]:
        return self.fleet.with_world(lambda w: instances(w, gpu.uuid))

    def processes(self, gpu: GpuRef) -> tuple[int, ...]:
        return self.fleet.with_world(lambda w: processes(w, gpu.uuid))

    def destroy_ci(self, gpu: GpuRef, gi_id: int, ci_id: int) -> None:
        self.fleet.with_world(lambda w: destroy_ci(w, gpu.uuid, gi_id, ci_id))

    def destroy_gi(self, gpu: GpuRef, gi_id: int) -> None:
        self.fleet.with_world(lambda w: destroy_gi(w, gpu.uuid, gi_id))

    def create_gi(self, gpu: GpuRef, profile_id: int, start: int | None, size: int | None) -> int:
        return self.fleet.with_world(lambda w: create_gi(w, gpu.uuid, profile_id, start))

    def create_ci(self, gpu: GpuRef, gi_id: int) -> int:
        return self.fleet.with_world(lambda w: create_ci(w, gpu.uuid, gi_id))
