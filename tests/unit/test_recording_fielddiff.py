"""A delta's changed fields as the recorder finds them (recording.fielddiff): every field of
the changed entities compared a column at a time, and every frame reads back as the snapshot
it was written from."""

from __future__ import annotations

import dataclasses
from typing import Any

from gpucon.model.snapshot import Snapshot
from gpucon.recording.blobs import decode_frame
from gpucon.recording.blobs import encode_json_frame as encode_frame
from gpucon.recording.codec import CodecRegistry, round_all
from gpucon.recording.frames import DELTA, KEYFRAME, FrameState
from tests.helpers.recording_v4 import FrameWriter
from tests.unit.test_recording_frames import _live, _rounded


def _fields(cls: type) -> tuple[str, ...]:
    names = getattr(cls, "__struct_fields__", None)
    if names is not None:
        return tuple(names)
    return tuple(f.name for f in dataclasses.fields(cls))


def _with(obj: Any, **changes: Any) -> Any:
    """``obj`` with ``changes``: a new object of its class (a model record or the snapshot)."""
    cls = type(obj)
    return cls(**{name: changes.get(name, getattr(obj, name)) for name in _fields(cls)})


def _gpus(snap: Snapshot, moved: dict[str, dict[str, Any]]) -> Snapshot:
    """``snap`` with the GPUs named in ``moved`` given those field values (new objects)."""
    gpus = {u: _with(g, **moved[u]) if u in moved else g for u, g in snap.gpus.items()}
    out: Snapshot = _with(snap, gpus=gpus, taken_at=snap.taken_at + 1.0)
    return out


def _check(state: FrameState, kind: int, frame: dict[str, Any], snap: Snapshot) -> None:
    state.apply(snap.taken_at, kind, decode_frame(encode_frame(frame)))
    back = state.snapshot()
    for name in ("gpus", "slots", "backends", "queues", "latency", "liveness", "sources"):
        assert dict(getattr(back, name)) == _rounded(dict(getattr(snap, name))), name


def test_the_fields_that_moved_are_given_and_read_back() -> None:
    snap = _live(None, 1, size=16)[0]
    writer = FrameWriter(samples=False)
    state = FrameState()
    _check(state, KEYFRAME, writer.keyframe(snap), snap)
    uuids = list(snap.gpus)
    fields = CodecRegistry().codec(type(snap.gpus[uuids[0]])).fields
    power = {u: {"power_w": 100.0 + i} for i, u in enumerate(uuids[:8])}
    snap = _gpus(snap, power)
    delta = writer.delta(snap)
    assert [fields[c[0]] for c in delta["c"]["gpus"]] == ["power_w"]
    _check(state, DELTA, delta, snap)
    # power moves again and, in one GPU, the name too
    moved: dict[str, dict[str, Any]] = {u: {"power_w": 200.0 + i} for i, u in enumerate(uuids[:8])}
    moved[uuids[3]]["name"] = "H200 NVL"
    snap = _gpus(snap, moved)
    delta = writer.delta(snap)
    named = {fields[c[0]]: (c[1], c[2]) for c in delta["c"]["gpus"]}
    assert named["name"] == ([uuids.index(uuids[3])], ["H200 NVL"])
    # a float field's values as integers, the value times 10^5 (format 4)
    assert named["power_w"][1] == [(200 + i) * 100_000 for i in range(8)]
    assert list(named) == sorted(named, key=fields.index)  # in field order
    _check(state, DELTA, delta, snap)
    # new objects whose values are all equal: nothing to give
    snap = _gpus(snap, {u: {"power_w": 200.0 + i} for i, u in enumerate(uuids[:8])})
    delta = writer.delta(snap)
    assert "gpus" not in delta.get("c", {})
    _check(state, DELTA, delta, snap)
    snap = _gpus(snap, {uuids[0]: {"util_pct": 55.5}})
    _check(state, KEYFRAME, writer.keyframe(snap), snap)
    snap = _gpus(snap, {uuids[1]: {"util_pct": float("nan")}})
    _check(state, DELTA, writer.delta(snap), snap)


def test_a_field_moving_in_most_changed_entities_is_given_for_all_of_them() -> None:
    """Given for every changed entity while it moves in most of them (an unchanged value
    written again reads back the same); picked out while it moves in few."""
    snap = _live(None, 1, size=16)[0]
    writer = FrameWriter(samples=False)
    state = FrameState()
    _check(state, KEYFRAME, writer.keyframe(snap), snap)
    uuids = list(snap.gpus)[:12]
    fields = CodecRegistry().codec(type(snap.gpus[uuids[0]])).fields
    power = fields.index("power_w")
    for tick in range(3):
        # every changed GPU's power moves, but for one GPU whose temperature alone moves
        moved = {u: {"power_w": 300.0 + tick + i / 7} for i, u in enumerate(uuids[1:])}
        moved[uuids[0]] = {"temperature_c": 40.0 + tick}
        snap = _gpus(snap, moved)
        delta = writer.delta(snap)
        _check(state, DELTA, delta, snap)
        rows = {c[0]: c[1] for c in delta["c"]["gpus"]}
        assert len(rows[power]) == len(uuids)
    # power stops moving but in one GPU: only that one is given
    snap = _gpus(snap, {u: {"temperature_c": 60.0} for u in uuids[1:]})
    snap = _gpus(snap, {uuids[0]: {"power_w": 50.0}})
    delta = writer.delta(snap)
    _check(state, DELTA, delta, snap)
    rows = {c[0]: c[1] for c in delta["c"]["gpus"]}
    assert rows[power] == [list(snap.gpus).index(uuids[0])]


def test_entities_that_come_and_go_and_a_keyframe_reusing_rows_read_back() -> None:
    """A section whose keys change is compared without the kept values until the next
    keyframe; a keyframe's rows of entities unchanged since the last keyframe are reused."""
    live = _live("noisy-neighbour", 24)
    writer = FrameWriter(samples=False)
    state = FrameState()
    gone = list(live[0].backends)[5]
    for i, snap in enumerate(live):
        if 6 <= i < 12:  # a backend gone for a while, then back
            snap = _with(snap, backends={k: v for k, v in snap.backends.items() if k != gone})
        if i % 8 == 0:
            _check(state, KEYFRAME, writer.keyframe(snap), snap)
        else:
            _check(state, DELTA, writer.delta(snap), snap)


def test_round_all_with_nones_among_the_numbers() -> None:
    values = [1.123456789, None, 2, None, -0.000004, 1_790_000_000.123456789]
    assert round_all(values) == [1.12346, None, 2.0, None, -0.0, 1_790_000_000.12346]
    assert round_all([None, float("nan"), float("inf"), 3.3]) == [None, None, None, 3.3]
    assert round_all([]) == [] and round_all([None]) == [None]


def test_float_columns_as_integers_and_as_floats_both_read() -> None:
    """Format 4 writes a float field's changed values as integers (times 10^5, a fourth item
    says so); a format-3 delta's floats read as they did; a value too large for a 64-bit
    integer is written as a float."""
    snap = _live(None, 1, size=16)[0]
    writer = FrameWriter(samples=False)
    state = FrameState()
    _check(state, KEYFRAME, writer.keyframe(snap), snap)
    uuids = list(snap.gpus)
    fields = CodecRegistry().codec(type(snap.gpus[uuids[0]])).fields
    power = fields.index("power_w")
    snap = _gpus(snap, {uuids[0]: {"power_w": 123.456789}, uuids[1]: {"power_w": None}})
    delta = writer.delta(snap)
    (column,) = [c for c in delta["c"]["gpus"] if c[0] == power]
    assert column[2:] == [[12345679, None], 5]
    _check(state, DELTA, delta, snap)
    assert state.snapshot().gpus[uuids[0]].power_w == 123.45679
    # as a format-3 file wrote it: floats, three items
    state.apply(snap.taken_at + 1.0, DELTA, {"c": {"gpus": [[power, [0], [7.5]]]}})
    assert state.snapshot().gpus[uuids[0]].power_w == 7.5
    snap = _gpus(snap, {uuids[0]: {"power_w": 1e16}})
    delta = writer.delta(snap)
    (column,) = [c for c in delta["c"]["gpus"] if c[0] == power]
    assert column[2:] == [[1e16]]
    _check(state, DELTA, delta, snap)
