"""``backends_on``: what a GPU's UUID, a slot id, a VM's name or ``host/gpuN`` covers (the
MPS restart drains these first; a re-slice of a GPU can use the same)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpucon.actions.drain_group import backends_on, drain_group
from gpucon.actions.plan import BlastRadius, OutcomeStatus, Plan, Tier
from gpucon.actions.steps import stopped
from gpucon.config import GpuconConfig
from gpucon.errors import KeepsNoneServing, StepFailed
from gpucon.model.fleet import BackendState
from gpucon.model.merge import merge_readings
from gpucon.model.snapshot import Snapshot
from gpucon.session import demo_controls
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


def test_a_group_drain_whose_model_lost_the_others_it_counted_on_writes_nothing(
    tmp_path: Path,
) -> None:
    """The MPS restart's and re-slice's drain checks, as drain's does, that a backend its plan
    counted on still serves the model (the simulated registry, under its lock)."""
    fleet = build_sim_fleet()
    controls = demo_controls(GpuconConfig(audit_path=tmp_path / "a.jsonl"), fleet)
    snapshot = demo_snapshot()
    name, other = sorted(snapshot.backends)[:2]
    controls.registry.mark_state(other, "draining", "bob@h2", "colleague")
    with pytest.raises(StepFailed) as failed:
        drain_group(controls, [name], "r", 5.0, 0.01, lambda _e: None, keep_serving={name: [other]})
    assert failed.value.step == f"draining:{name}"
    assert isinstance(failed.value.__cause__, KeepsNoneServing)
    assert f"{other} is draining with weight" in str(failed.value)
    record = controls.registry.backend(name)
    assert record is not None and record.state is BackendState.ACTIVE  # nothing written
    # the MPS restart or re-slice that stopped there is refused (exit 3), not failed (exit 5)
    plan = Plan("mps-restart", "vm-b-1", Tier.DISRUPTIVE, (), (), BlastRadius(), "")
    outcome = stopped(plan, failed.value)
    assert outcome.status is OutcomeStatus.REFUSED and outcome.exit_code == 3
