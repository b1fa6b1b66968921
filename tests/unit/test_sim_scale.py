"""Sized fleets for benchmarks: 512 GPUs give about 3,500 slots with unique ids."""

from __future__ import annotations

from collections import Counter

import pytest

from gpucon.model.fleet import SlotKind
from gpucon.model.ids import parse_slot_id
from gpucon.model.merge import merge_readings
from gpucon.sim import build_sim_fleet


def test_512_gpus_give_about_3500_slots_with_unique_ids() -> None:
    fleet = build_sim_fleet(size=512)
    for _ in range(6):
        fleet.step(1.0)
    r = fleet.reading(100.0)
    assert len(r.gpus) == 512
    assert len({g.uuid for g in r.gpus}) == 512
    assert 3300 <= len(r.slots) <= 3600
    ids = [s.id for s in r.slots]
    assert len(set(ids)) == len(ids)
    for slot_id in ids:
        parse_slot_id(slot_id)
    kinds = Counter(s.kind for s in r.slots)
    assert kinds[SlotKind.MIG] > 3000 and kinds[SlotKind.VM] >= 16
    names = [b.name for b in r.backends]
    assert len(set(names)) == len(names) == len(r.latency)
    assert {b.slot_id for b in r.backends} == set(ids)
    assert len({b.url for b in r.backends}) == len(names)  # latency joins on url too
    merged = merge_readings([r])
    assert len(merged.slots) == len(ids) and len(merged.latency) == len(names)


def test_a_sized_fleet_is_busy_everywhere_and_refreshes_like_a_scrape() -> None:
    fleet = build_sim_fleet(size=64)
    first = fleet.reading(0.0)
    fleet.step(1.0)
    second = fleet.reading(1.0)
    # between two 1 s reads only the entities scraped this tick get new objects
    same = sum(a is b for a, b in zip(first.slots, second.slots, strict=True))
    assert 0.5 * len(first.slots) < same < len(first.slots)
    for _ in range(10):
        fleet.step(1.0)
    r = fleet.reading(11.0)
    assert all(lat.req_per_s and lat.req_per_s > 0 for lat in r.latency)
    assert sum(s.activity_pct or 0.0 for s in r.slots) / len(r.slots) > 10.0


@pytest.mark.parametrize("size", [0, -1, 2049])
def test_an_impossible_size_is_refused_naming_size(size: int) -> None:
    with pytest.raises(ValueError, match="size: expected 1 to 2048"):
        build_sim_fleet(size=size)


def test_small_sizes_build_exactly_that_many_gpus() -> None:
    for size in (1, 8, 13):
        assert len(build_sim_fleet(size=size).reading(0.0).gpus) == size
