"""``backends_on``: what a GPU's UUID, a slot id, a VM's name or ``host/gpuN`` covers (the
MPS restart drains these first; a re-slice of a GPU can use the same)."""

from __future__ import annotations

import time

from gpucon.actions.drain_group import backends_on
from gpucon.model.merge import merge_readings
from gpucon.model.snapshot import Snapshot
from gpucon.sim.fleet import build_sim_fleet


def demo_snapshot() -> Snapshot:
    merged = merge_readings([build_sim_fleet().reading(time.time())])
    return Snapshot(taken_at=0.0, gpus=merged.gpus, slots=merged.slots, backends=merged.backends)


def names(snapshot: Snapshot, target: str) -> list[str]:
    return [b.name for b in backends_on(snapshot, target)]


def test_targets_by_vm_slot_gpu_and_host_index() -> None:
    snapshot = demo_snapshot()
    vm = snapshot.slots["vm:vm-b-1"]
    assert names(snapshot, "vm-b-1") == ["sd15-vm-b-1", "sdxl-vm-b-1"]
    assert names(snapshot, "vm:vm-b-1") == names(snapshot, "vm-b-1")
    assert vm.gpu_uuid is not None
    assert names(snapshot, vm.gpu_uuid) == names(snapshot, "vm-b-1")
    mig = [s for s in snapshot.slots.values() if s.gi_id is not None]
    gpu = mig[0]
    on_gpu = names(snapshot, gpu.gpu_uuid or "")
    on_slots = sorted(
        b.name for s in mig if s.gpu_uuid == gpu.gpu_uuid for b in snapshot.backends_on(s.id)
    )
    assert on_gpu == on_slots and len(on_gpu) > 1, "every MIG slice's backend on that GPU"
    assert names(snapshot, f"{gpu.host}/gpu{gpu.gpu_index}") == on_gpu
    assert names(snapshot, "no-such-thing") == []
