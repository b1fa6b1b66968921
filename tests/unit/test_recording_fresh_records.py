"""A real source's fresh records of values that did not move are not written again, and a big
delta is compressed alone while a small one leans on its keyframe: both read back exactly."""

from __future__ import annotations

import copy

import msgspec
import zstandard

from gpucon.model.snapshot import Snapshot
from gpucon.recording import writer as writer_module
from gpucon.recording.blobs import ALONE_FROM, BlobReader, BlobWriter
from gpucon.recording.frames import DELTA, KEYFRAME, FrameState
from gpucon.recording.writer import FrameWriter
from tests.unit.test_recording_frames import _live
from tests.unit.test_recording_whole_rows import _same_fleet


def _fresh(snap: Snapshot) -> Snapshot:
    """``snap`` as a real source hands it on: every entity a new object of equal value."""
    return msgspec.structs.replace(
        snap,
        slots={k: copy.copy(v) for k, v in snap.slots.items()},
        backends={k: copy.copy(v) for k, v in snap.backends.items()},
        latency={k: copy.copy(v) for k, v in snap.latency.items()},
        gpus={k: copy.copy(v) for k, v in snap.gpus.items()},
    )


def test_fresh_records_of_unchanged_values_are_not_written_again() -> None:
    first, second = _live(None, 2)
    writer, blobs, reader, state = FrameWriter(), BlobWriter(), BlobReader(), FrameState()
    state.apply(
        first.taken_at, KEYFRAME, reader.keyframe(0, blobs.keyframe(writer.keyframe(first)))
    )
    # every entity a new object, one slot's activity changed
    slot_id, slot = next(iter(second.slots.items()))
    busier = msgspec.structs.replace(slot, activity_pct=(slot.activity_pct or 0.0) + 7.0)
    fresh = _fresh(msgspec.structs.replace(first, taken_at=second.taken_at))
    fresh = msgspec.structs.replace(fresh, slots={**fresh.slots, slot_id: busier})
    delta = writer.delta(fresh)
    # only the slot that changed is written, by its index in the keyframe
    assert delta["r"] == {
        "slots": [[list(first.slots).index(slot_id)], [msgspec.structs.astuple(busier)]]
    }
    state.apply(fresh.taken_at, DELTA, reader.delta(blobs.delta(delta)))
    _same_fleet(state.snapshot(), fresh)


def test_a_fleet_whose_new_objects_all_changed_is_compared_only_now_and_then() -> None:
    live = _live("noisy-neighbour", 3 + writer_module.PROBE_EVERY)
    writer, compared = FrameWriter(), []
    writer.keyframe(live[0])
    for snap in live[1:]:
        compared.append(writer._worth_comparing("slots"))
        writer.delta(snap)
    # the simulator's new objects all changed: compared at first, then once a probe period
    assert compared[0] is True
    assert 1 <= compared[1:].count(True) <= 2
    # fresh records of the same values are worth comparing again from the next probe on
    writer._deltas = 2 * writer_module.PROBE_EVERY
    writer.delta(_fresh(msgspec.structs.replace(live[-1], taken_at=live[-1].taken_at + 1.0)))
    assert writer._equal_share["slots"] == 1.0 and writer._worth_comparing("slots")


def test_a_big_delta_is_compressed_alone_and_a_small_one_with_its_keyframe() -> None:
    live = _live(None, 3)
    writer, blobs, reader, state = FrameWriter(), BlobWriter(), BlobReader(), FrameState()
    state.apply(
        live[0].taken_at, KEYFRAME, reader.keyframe(0, blobs.keyframe(writer.keyframe(live[0])))
    )
    small = blobs.delta(writer.delta(live[1]))
    assert blobs._delta is not None  # a small delta made the keyframe a dictionary
    state.apply(live[1].taken_at, DELTA, reader.delta(small))
    _same_fleet(state.snapshot(), live[1])
    # the same writer told that every delta is big: compressed alone, still read back
    blobs.alone_from = 0
    big = blobs.delta(writer.delta(live[2]))
    params = zstandard.get_frame_parameters(big)
    assert params.dict_id == 0 and params.window_size <= 1 << 17
    state.apply(live[2].taken_at, DELTA, reader.delta(big))
    _same_fleet(state.snapshot(), live[2])
    assert ALONE_FROM > 2_000  # the default demo's deltas keep their keyframe
