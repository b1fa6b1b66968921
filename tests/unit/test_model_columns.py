"""The backends' columns, read once per mapping: the same values as a walk of the records,
whichever reader asks first (the merge notes the slot ids it read)."""

from __future__ import annotations

from gpucon.model import columns
from gpucon.model.fleet import Backend, Health, NodeInfo
from gpucon.model.merge import merge_readings
from gpucon.model.reading import Reading

OK = Health.OK


def _backends(slot: str) -> dict[str, Backend]:
    return {
        "a": Backend("a", slot_id=slot, model="m1"),
        "b": Backend("b", slot_id=None, model=None),
        "c": Backend("c", slot_id=slot, model="m2"),
    }


def test_each_column_follows_its_mapping() -> None:
    first, second = _backends("s1"), _backends("s2")
    assert columns.slot_ids(first) == ["s1", None, "s1"]
    assert columns.models(first) == ["m1", None, "m2"]
    assert columns.backends_per_slot(first) == {"s1": 2, None: 1}
    # another mapping (the next tick's) is read again, never answered from the last one
    assert columns.slot_ids(second) == ["s2", None, "s2"]
    assert columns.backends_per_slot(second) == {"s2": 2, None: 1}
    assert columns.slot_ids(first) == ["s1", None, "s1"]


def test_the_merge_notes_the_slot_ids_of_the_backends_it_merged() -> None:
    names = [f"b{i}" for i in range(5)]
    backends = tuple(
        Backend(n, slot_id=f"slot-{i % 2}", url=f"http://10.0.0.{i}:8000")
        for i, n in enumerate(names)
    )
    node = NodeInfo("n1", gpu_pod_ips=(("10.0.0.3", "ns/pod-3"),))
    for nodes in ((), (node,)):  # a pod attached by IP: a new record, on the same slot
        fleet = merge_readings([Reading("redis", OK, 0.0, backends=backends, nodes=nodes)])
        walked = [b.slot_id for b in fleet.backends.values()]
        assert columns.slot_ids(fleet.backends) == walked
    # two readings naming the same backend: overlaid, and the column is read off the result
    other = Reading("k8s", OK, 0.0, backends=(Backend("b1", slot_id="slot-9"),))
    fleet = merge_readings([Reading("redis", OK, 0.0, backends=backends), other])
    assert columns.slot_ids(fleet.backends) == [b.slot_id for b in fleet.backends.values()]


def test_the_crowded_slots_are_those_of_each_mapping() -> None:
    from gpucon.model.fleet import ComputeProcess, Slot, SlotKind

    two = (ComputeProcess(1, "a"), ComputeProcess(2, "b"))
    first = {"s1": Slot("s1", SlotKind.GPU, processes=two), "s2": Slot("s2", SlotKind.GPU)}
    second = {"s1": Slot("s1", SlotKind.GPU), "s2": Slot("s2", SlotKind.GPU, processes=two)}
    assert [s.id for s in columns.crowded(first)] == ["s1"]
    assert [s.id for s in columns.crowded(second)] == ["s2"]
    assert columns.crowded(second) is columns.crowded(second)  # read once per mapping
