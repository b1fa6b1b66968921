"""One slot per passed-through GPU: libvirt's real ``test:///`` driver loading
tests/fixtures/libvirt/multi_gpu_host.xml (guests with two and three GPUs, each GPU with its
audio function), and the slot ids that name a guest's GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucon.model.fleet import Health, SlotKind
from gpucon.model.ids import ParsedSlotId, parse_slot_id, vm_slot_id
from gpucon.sources.libvirt_source import LibvirtSource

pytest.importorskip("libvirt")

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "libvirt" / "multi_gpu_host.xml"


def test_each_gpu_of_a_guest_is_its_own_slot_in_pci_order() -> None:
    source = LibvirtSource(f"test://{FIXTURE}", host="kvm-m")
    reading = source.read()
    source.close()
    assert reading.health is Health.OK, reading.error
    slots = {s.id: s for s in reading.slots}
    assert set(slots) == {
        "vm:train-2x/0",
        "vm:train-2x/1",
        "vm:infer-3x/0",
        "vm:infer-3x/1",
        "vm:infer-3x/2",
        "vm:solo",  # one GPU (and its audio function): the id it always had
    }
    first, second = slots["vm:train-2x/0"], slots["vm:train-2x/1"]
    # listed c1 before 81 in the XML: ordered by PCI address, each with its audio function
    assert first.vm is not None and second.vm is not None
    assert first.vm.gpu_pci_addresses == ("0000:81:00.0", "0000:81:00.1")
    assert second.vm.gpu_pci_addresses == ("0000:c1:00.0", "0000:c1:00.1")
    assert first.gpu_uuid == first.vm.gpu_uuid == "GPU-l40s0000-0000-0000-0000-000000000081"
    assert second.gpu_uuid == "GPU-l40s0000-0000-0000-0000-0000000000c1"
    assert first.profile == second.profile == "NVIDIA L40S"
    assert (first.gpu_index, second.gpu_index) == (0, 1)
    for slot in (first, second):  # the guest's own facts on each of its GPUs' rows
        assert slot.kind is SlotKind.VM and slot.host == "kvm-m"
        assert slot.vm is not None and slot.vm.name == "train-2x"
        assert slot.vm.vcpus == 32 and slot.vm.memory_mib == 128 * 1024
    three = [slots[f"vm:infer-3x/{i}"] for i in range(3)]
    assert [s.gpu_name for s in three] == ["rtx4090-a", "rtx4090-b", None]
    assert [s.vm.gpu_pci_addresses for s in three if s.vm] == [
        ("0000:41:00.0",),
        ("0000:42:00.0",),
        ("0000:43:00.0",),
    ]
    solo = slots["vm:solo"]
    assert solo.vm is not None and solo.gpu_name == "rtx4090-solo"
    assert solo.vm.gpu_pci_addresses == ("0000:61:00.0", "0000:61:00.1")
    assert solo.gpu_index is None


def test_slot_ids_of_a_guests_gpus_round_trip() -> None:
    assert vm_slot_id("train-2x") == "vm:train-2x"
    assert vm_slot_id("train-2x", 1) == "vm:train-2x/1"
    assert parse_slot_id("vm:train-2x/1") == ParsedSlotId("vm", None, None, None, "train-2x", 1)
    assert parse_slot_id("vm:train-2x") == ParsedSlotId("vm", None, None, None, "train-2x")
    for bad in ("vm:", "vm:/1", "vm:a/b", "vm:a/1/2"):
        with pytest.raises(ValueError, match="vm:NAME"):
            parse_slot_id(bad)
