"""The hub's history blocks kept from tick to tick are exactly those built afresh each tick:
through the simulator's own changes, stale values, entities gone, back and in another order."""

from __future__ import annotations

import msgspec
from msgspec.structs import replace

from gpucon.hub import Hub
from gpucon.model.history import Block, Sample
from gpucon.model.history_delta import HistoryBlocks
from gpucon.model.history_samples import history_blocks
from gpucon.model.merge import merge_readings
from gpucon.model.section_moves import SectionMoves
from gpucon.model.snapshot import Snapshot
from gpucon.model.staleness import Staleness
from gpucon.recording.writer import FrameWriter
from gpucon.sim import DEMO_RATE_WINDOW, DEMO_SLO_P95_MS
from gpucon.sim.fleet import build_sim_fleet
from gpucon.sim.source import SimSource
from tests.ui.fleet_fixture import FrozenClock


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


def test_the_new_objects_found_are_told_for_exactly_the_two_mappings_compared() -> None:
    """The recorder reuses the history's finding only for the very mappings it compared:
    the positions of the new objects (one changed entity: its position alone), nothing for
    another pair of mappings, nothing once too many findings came after."""
    fleet = build_sim_fleet(seed=3, size=16)
    moves = SectionMoves(limit=4)
    kept = HistoryBlocks(moves)
    first = merge_readings([fleet.reading(0.0)])
    kept(first)
    slots = list(first.slots.items())
    sid, slot = slots[2]
    changed = dict(first.slots)
    changed[sid] = replace(slot, activity_pct=(slot.activity_pct or 0.0) + 1.0)
    second = replace(first, slots=changed)
    kept(second)
    found = moves.between(second.slots, first.slots)
    assert found is not None
    assert found[0] == [2] and found[1] == list(changed.values())
    assert moves.between(second.slots, first.slots) is None  # given once, then let go of
    assert moves.between(second.slots, dict(first.slots)) is None  # an equal copy: not it
    assert moves.between(first.slots, second.slots) is None
    # unchanged sections are found too (no new object), then pushed out by newer findings
    assert moves.between(second.latency, first.latency) == ([], list(first.latency.values()))
    # every slot a new object (most of them moved): the finding names them all
    fresh = {k: replace(v) for k, v in changed.items()}
    kept(replace(second, slots=fresh))
    found = moves.between(fresh, changed)
    assert found is not None and found[0] == list(range(len(fresh)))
    for _ in range(4):
        kept(replace(second, slots=dict(changed)))
    assert moves.between(second.slots, first.slots) is None


def test_the_hub_hands_on_the_liveness_mapping_and_a_recording_matches_without_findings() -> None:
    """A recording framed with the history's findings is the one framed by comparing every
    entity: the same frames, byte for byte."""
    clock = FrozenClock(1_790_000_000.0)
    hub = Hub(
        [SimSource.for_demo(7, None, 64, clock=clock)],
        refresh_s=1.0,
        clock=clock,
        slo_p95_ms_by_model=DEMO_SLO_P95_MS,
        rate_window=DEMO_RATE_WINDOW,
    )
    snapshots: list[Snapshot] = []
    # nobody subscribed: the hub notes nothing (the findings hold old mappings alive)
    hub.poll_once()
    first = hub.tick()
    clock.now += 1.0
    hub.poll_once()
    assert hub.moves.between(hub.tick().slots, first.slots) is None
    clock.now += 1.0
    hub.subscribe(lambda _snapshot: None)  # as the recorder does
    # one writer given the hub's findings (as the recorder is), one comparing for itself
    with_findings = FrameWriter(moves=hub.moves)
    without = FrameWriter()
    frames: list[tuple[object, object]] = []
    used = kept_liveness = 0
    for tick in range(25):
        hub.poll_once()
        snapshot = hub.tick()
        snapshots.append(snapshot)
        clock.now += 1.0
        if tick:
            before = snapshots[-2]
            # equal verdicts are the same mapping (most ticks)
            assert snapshot.liveness is before.liveness or snapshot.liveness != before.liveness
            kept_liveness += snapshot.liveness is before.liveness
            used += hub.moves.between(snapshot.slots, before.slots) is not None
        key = tick % 10 == 0
        a = with_findings.keyframe(snapshot) if key else with_findings.delta(snapshot)
        b = without.keyframe(snapshot) if key else without.delta(snapshot)
        frames.append((a, b))
    hub.stop()
    assert used > 10 and kept_liveness > 10
    for framed, compared in frames:
        assert msgspec.msgpack.encode(framed) == msgspec.msgpack.encode(compared)
