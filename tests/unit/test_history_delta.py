"""The hub's history blocks kept from tick to tick are exactly those built afresh each tick:
through the simulator's own changes, stale values, entities gone, back and in another order."""

from __future__ import annotations

from msgspec.structs import replace

from gpucon.model.history import Block, Sample
from gpucon.model.history_delta import HistoryBlocks
from gpucon.model.history_samples import history_blocks
from gpucon.model.merge import merge_readings
from gpucon.model.staleness import Staleness
from gpucon.sim.fleet import build_sim_fleet


def _plain(blocks: list[Block], samples: dict[str, Sample]) -> object:
    # NaN != NaN: compare the numbers' bytes
    return [(k, s, tuple(ids), v.typecode, v.tobytes()) for k, s, ids, v in blocks], samples


def test_kept_blocks_are_the_fresh_ones_tick_after_tick() -> None:
    fleet = build_sim_fleet(seed=3, size=16)
    kept = HistoryBlocks()
    moved = 0
    for tick in range(40):
        fleet.step(1.0)
        merged = merge_readings([fleet.reading(float(tick))])
        if tick in (7, 8):  # a slot gone for two ticks
            sid = next(iter(merged.slots))
            merged = replace(merged, slots={k: v for k, v in merged.slots.items() if k != sid})
        if tick in (20, 21):  # the same entities in another order
            merged = replace(merged, latency=dict(reversed(merged.latency.items())))
        slot = next(iter(merged.slots))
        backend = next(iter(merged.latency))
        stale = Staleness(
            {"sim": 9.0},
            {f"slot:{slot}": {"mem_used_mib": "sim"}, f"latency:{backend}": {"p95_ms": "sim"}},
        )
        staleness = stale if tick % 3 == 0 else Staleness()
        before = kept._kept["slots"].entities if tick else []
        assert _plain(*kept(merged, staleness)) == _plain(*history_blocks(merged, staleness))
        same = [a is b for a, b in zip(merged.slots.values(), before, strict=False)]
        moved += any(same) and not all(same)
    assert moved > 20  # the simulator changed some entities and kept the others
