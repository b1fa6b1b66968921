"""Recording frames: a snapshot written as a keyframe and deltas reads back as it was."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from gpucon.hub import Hub
from gpucon.model.fleet import Gpu
from gpucon.model.snapshot import Snapshot
from gpucon.recording.blobs import decode_frame
from gpucon.recording.blobs import encode_json_frame as encode_frame
from gpucon.recording.codec import CodecRegistry, round_float, unscale_all
from gpucon.recording.frames import DELTA, KEYFRAME, FrameState, snapshot_samples
from gpucon.sim import DEMO_RATE_WINDOW, DEMO_SLO_P95_MS
from gpucon.sim.source import SimSource
from tests.helpers.recording_v4 import FrameWriter
from tests.ui.fleet_fixture import FrozenClock


def _plain(columns: list[Any]) -> list[Any]:
    """A delta's columns as ``[field, rows, values]``, a float field's integers (format 4)
    read back as the floats they stand for."""
    return [[c[0], c[1], unscale_all(c[2], c[3]) if len(c) > 3 else c[2]] for c in columns]


def _live(scenario: str | None, ticks: int, size: int | None = None) -> list[Snapshot]:
    clock = FrozenClock(1_790_000_000.0)
    source = SimSource.for_demo(7, scenario, size, clock=clock)
    hub = Hub(
        [source],
        clock=clock,
        slo_p95_ms_by_model=DEMO_SLO_P95_MS,
        rate_window=DEMO_RATE_WINDOW,
    )
    out = []
    for _ in range(ticks):
        hub.poll_once()
        out.append(hub.tick())
        clock.now += 1.0
    return out


def _rounded(value: object) -> object:
    """A model record with its floats as the recording keeps them."""
    if isinstance(value, float):
        return round_float(value)
    if isinstance(value, msgspec.Struct):
        return msgspec.structs.replace(
            value, **{name: _rounded(getattr(value, name)) for name in value.__struct_fields__}
        )
    if isinstance(value, tuple):
        return tuple(_rounded(v) for v in value)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def test_every_frame_reads_back_as_the_snapshot_it_was_written_from() -> None:
    live = _live("noisy-neighbour", 40)
    writer = FrameWriter()
    state = FrameState()
    for i, snap in enumerate(live):
        kind = KEYFRAME if i % 15 == 0 else DELTA
        frame = writer.keyframe(snap) if kind == KEYFRAME else writer.delta(snap)
        state.apply(snap.taken_at, kind, decode_frame(encode_frame(frame)))
        back = state.snapshot()
        assert back.taken_at == snap.taken_at
        assert back.seq == snap.seq
        for name in ("gpus", "slots", "backends", "queues", "latency", "nodes", "sources"):
            assert dict(getattr(back, name)) == _rounded(dict(getattr(snap, name))), name
        assert back.alerts == _rounded(snap.alerts)
        assert dict(back.liveness) == _rounded(dict(snap.liveness))
        assert dict(back.origins) == dict(snap.origins)
        assert back.staleness == _rounded(snap.staleness)
        assert back.rate_window == snap.rate_window
        assert state.samples() == {
            k: round_float(v) for k, v in snapshot_samples(snap).items() if v is not None
        }
    assert any(s.alerts for s in live)  # the scenario's incident is in there


def test_a_delta_holds_only_what_changed() -> None:
    snap = _live(None, 1)[0]
    writer = FrameWriter()
    writer.keyframe(snap)
    assert writer.delta(snap) == {}  # nothing changed: an empty frame
    gpu = next(iter(snap.gpus.values()))
    hotter = msgspec.structs.replace(gpu, temperature_c=91.0)
    delta = writer.delta(msgspec.structs.replace(snap, gpus={**snap.gpus, gpu.uuid: hotter}))
    index = Gpu.__struct_fields__.index("temperature_c")
    # a field at a time: the field, the rows' indexes, their values
    assert _plain(delta["c"]["gpus"]) == [[index, [list(snap.gpus).index(gpu.uuid)], [91.0]]]
    # and the history sample it gives (a plain value: index and value)
    (sample,) = [k for k in snapshot_samples(snap) if k == f"gpu:{gpu.uuid}:temp"]
    assert delta["v"]["samples"] == [list(snapshot_samples(snap)).index(sample), 91.0]
    assert set(delta) == {"c", "v"}


def test_entities_that_come_and_go_between_keyframes() -> None:
    snap = _live(None, 1)[0]
    writer = FrameWriter()
    state = FrameState()
    state.apply(1.0, KEYFRAME, writer.keyframe(snap))
    name = next(iter(snap.backends))
    fewer = msgspec.structs.replace(
        snap, backends={k: v for k, v in snap.backends.items() if k != name}
    )
    state.apply(2.0, DELTA, json.loads(json.dumps(writer.delta(fewer))))
    assert name not in state.snapshot().backends
    state.apply(3.0, DELTA, json.loads(json.dumps(writer.delta(snap))))
    assert state.snapshot().backends[name] == snap.backends[name]


def test_a_file_written_with_other_fields_still_reads() -> None:
    """A recording made before a field was added (or after one was removed) decodes by the
    field names its schema gives: a missing field takes its default."""
    registry = CodecRegistry()
    codec = registry.codec(Gpu)
    gpu = Gpu("GPU-1", "h", 0, name="H200", temperature_c=40.0, power_capped=True)
    row = codec.encode(gpu)
    older = tuple(n for n in codec.fields if n != "power_capped")
    old_row = [v for n, v in zip(codec.fields, row, strict=True) if n != "power_capped"]
    back = codec.decode([*old_row, "a field this gpucon does not know"], (*older, "gone"))
    assert back == msgspec.structs.replace(gpu, power_capped=None)


def test_floats_keep_what_can_be_told_apart() -> None:
    assert round_float(43.273129981) == 43.27313
    assert round_float(1_790_000_000.123456789) == 1_790_000_000.12346
    assert round_float(0.000123456789) == 0.00012
    assert round_float(float("nan")) is None
    assert round_float(float("inf")) is None


def test_a_changed_entity_gives_its_changed_fields_as_encoding_it_whole_would() -> None:
    """A delta takes a changed entity a field at a time; what it gives (the fields whose
    values moved, each encoded) is what encoding the whole object and comparing rows gives.
    A value equal to the old one in a new object, or a NaN, is no change of its own."""
    snap = _live(None, 1)[0]
    writer = FrameWriter()
    writer.keyframe(snap)
    uuid, gpu = next(iter(snap.gpus.items()))
    assert gpu.temperature_c is not None
    moved = msgspec.structs.replace(
        gpu,
        temperature_c=float(str(gpu.temperature_c)),  # equal, another object
        mem_used_mib=5.123456789,
        name="H200",
    )
    delta = writer.delta(msgspec.structs.replace(snap, gpus={**snap.gpus, uuid: moved}))
    codec = CodecRegistry().codec(Gpu)
    row = [list(snap.gpus).index(uuid)]
    expected = [
        [f, row, [a]]
        for f, (a, b) in enumerate(zip(codec.encode(moved), codec.encode(gpu), strict=True))
        if a != b
    ]
    assert _plain(delta["c"]["gpus"]) == expected
    named = {codec.fields[f]: values[0] for f, _, values in _plain(delta["c"]["gpus"])}
    assert named == {"mem_used_mib": 5.12346, "name": "H200"}
    # a NaN is stored as null
    nan = msgspec.structs.replace(moved, power_w=float("nan"))
    delta = writer.delta(msgspec.structs.replace(snap, gpus={**snap.gpus, uuid: nan}))
    assert _plain(delta["c"]["gpus"]) == [[codec.fields.index("power_w"), row, [None]]]


def test_changed_entities_give_each_field_with_only_the_rows_it_moved_in() -> None:
    """Several entities changed, each in other fields: a field's column names only the rows
    whose value of it moved, in the order the entities come, and reads back as written."""
    snap = _live(None, 1)[0]
    writer = FrameWriter()
    key = writer.keyframe(snap)
    uuids = list(snap.gpus)[:3]
    a, b, c = (snap.gpus[u] for u in uuids)
    moved = {
        uuids[0]: msgspec.structs.replace(a, power_w=111.0),
        uuids[1]: msgspec.structs.replace(b, power_w=222.0, util_pct=12.5),
        uuids[2]: msgspec.structs.replace(c),  # a new object, nothing moved
    }
    after = msgspec.structs.replace(snap, gpus={**snap.gpus, **moved})
    delta = writer.delta(after)
    fields = CodecRegistry().codec(Gpu).fields
    where = list(snap.gpus)
    # a field at a time, in the class's field order
    assert _plain(delta["c"]["gpus"]) == sorted(
        [
            [fields.index("util_pct"), [where.index(uuids[1])], [12.5]],
            [fields.index("power_w"), [where.index(u) for u in uuids[:2]], [111.0, 222.0]],
        ]
    )
    state = FrameState()
    state.apply(0.0, KEYFRAME, decode_frame(encode_frame(key, 1)))
    state.apply(1.0, DELTA, decode_frame(encode_frame(delta, 1)))
    got = state.snapshot().gpus
    assert got[uuids[0]].power_w == 111.0
    assert (got[uuids[1]].power_w, got[uuids[1]].util_pct) == (222.0, 12.5)
    assert got[uuids[2]] == _rounded(c)
