"""Names read from a slot id when no source describes the slot, and the slots counted."""

from __future__ import annotations

from gpucon.model.ids import host_of, known_slot_count
from gpucon.widgets.slot_rows import id_slot_names


def test_host_of_a_parseable_id_and_none_otherwise() -> None:
    assert host_of("lab/gpu0/gi1") == "lab"
    assert host_of("node-a/gpu3") == "node-a"
    assert host_of("vm:vm-b-1") is None  # the hypervisor's host is not in the id
    assert host_of("not a slot id") is None


def test_id_slot_names_match_a_described_slots_columns() -> None:
    assert id_slot_names("lab/gpu0/gi1") == ("lab", "0", "gi1")
    assert id_slot_names("node-a/gpu2") == ("node-a", "2", "whole")
    assert id_slot_names("vm:vm-b-1/1") == ("", "", "vm:vm-b-1/1")
    assert id_slot_names("odd\x1b[31m") == ("", "", "odd")  # shown cleaned, never as codes


def test_known_slot_count_counts_slots_only_a_backend_names_once() -> None:
    slots = {"a/gpu0/gi1": object()}
    assert known_slot_count(slots, ["a/gpu0/gi1", "a/gpu0/gi2", "a/gpu0/gi2", None, ""]) == 2
    assert known_slot_count({}, []) == 0
