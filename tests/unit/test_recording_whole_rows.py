"""Formats 5 and 6: a delta gives the changed entities whole (MessagePack), compressed by zstd
with its keyframe as a dictionary; format 6 writes a shared nested record (a GPU's MIG profile
table) once a keyframe group, by reference. Both read back exactly, a file of format 4 that a
console appends to reads on both sides of the change, and a delta read on its own finds its
keyframe."""

from __future__ import annotations

import sqlite3
import zlib
from pathlib import Path

import msgspec
import pytest
import zstandard
from msgspec.structs import astuple

from gpucon.model.fleet import Gpu
from gpucon.model.mig_profiles import ProfileTable
from gpucon.model.snapshot import Snapshot
from gpucon.recording import rows
from gpucon.recording.blobs import BlobReader, BlobWriter, decode_frame, encode_json_frame
from gpucon.recording.columns import (
    MAGIC,
    MAGIC_ZLIB,
    ColumnWriter,
    fleet_columns,
    is_columns,
    parse,
)
from gpucon.recording.cursor import ReplayCursor
from gpucon.recording.frames import DELTA, KEYFRAME, REF_ROWS, WHOLE_ROWS, FrameState
from gpucon.recording.recorder import Recorder, wait_written
from gpucon.recording.rows import RowDecoder, ref_fields
from gpucon.recording.store import FORMAT, RecordingStore
from gpucon.recording.writer import FrameWriter
from tests.helpers.recording_v4 import FrameWriter as FormatFourWriter
from tests.unit.test_recording_frames import _live, _rounded

SECTIONS = (
    "gpus",
    "slots",
    "backends",
    "queues",
    "latency",
    "nodes",
    "sources",
    "liveness",
    "origins",
    "slo_p95_ms",
    "mps",
    "mig_pending_since",
)


def _same_fleet(back: Snapshot, snap: Snapshot) -> None:
    """Every section exactly as it was (format 5 keeps each float's exact double)."""
    for name in SECTIONS:
        assert dict(getattr(back, name)) == dict(getattr(snap, name)), name
    assert back.taken_at == snap.taken_at and back.seq == snap.seq
    assert back.alerts == _rounded(snap.alerts)
    assert back.staleness == _rounded(snap.staleness)


@pytest.mark.parametrize("refs", [True, False], ids=["format6", "format5"])
def test_every_frame_reads_back_exactly_through_its_blobs(refs: bool) -> None:
    live = _live("noisy-neighbour", 40)
    writer = FrameWriter(refs=refs)
    blobs = BlobWriter()
    reader = BlobReader()
    state = FrameState()
    sizes: list[int] = []
    for i, snap in enumerate(live):
        if i % 15 == 0:
            blob = blobs.keyframe(writer.keyframe(snap))
            state.apply(snap.taken_at, KEYFRAME, reader.keyframe(i, blob))
        else:
            blob = blobs.delta(writer.delta(snap))
            sizes.append(len(blob))
            state.apply(snap.taken_at, DELTA, reader.delta(blob))
        _same_fleet(state.snapshot(), snap)
    assert any(s.alerts for s in live)
    # a delta is a few records, its names and unchanged fields found in its keyframe
    assert max(sizes) < 2_000


def test_a_shared_nested_record_is_written_once_a_group() -> None:
    first, second = _live(None, 2)
    assert ref_fields(Gpu) == (Gpu.__struct_fields__.index("mig_profiles"),)
    writer = FrameWriter()
    key = writer.keyframe(first)
    assert key["f"] == REF_ROWS
    at = ref_fields(Gpu)[0]
    tables = {id(g.mig_profiles) for g in first.gpus.values() if g.mig_profiles is not None}
    # the keyframe's table holds each profile table once; its rows name them by number
    profiles = [v for _, v in key["t"] if isinstance(v, ProfileTable)]
    assert len(profiles) == len(tables) > 0
    gpu_rows = key["k"]["gpus"][1]
    assert all(isinstance(r[at], int) for r in gpu_rows if r[at] is not None)
    gpu = next(g for g in first.gpus.values() if g.mig_profiles is not None)
    hotter = msgspec.structs.replace(gpu, temperature_c=91.5)
    delta = writer.delta(msgspec.structs.replace(first, gpus={**first.gpus, gpu.uuid: hotter}))
    assert "t" not in delta  # the table it names is the keyframe's
    (row,) = delta["r"]["gpus"][1]
    assert isinstance(row[at], int)
    # a profile table new to the group comes with the delta that first names it
    table = gpu.mig_profiles
    assert table is not None
    fresh = msgspec.structs.replace(table, profiles=table.profiles[:1])
    other = msgspec.structs.replace(gpu, mig_profiles=fresh)
    blobs, reader, state = BlobWriter(), BlobReader(), FrameState()
    key_blob = blobs.keyframe(writer.keyframe(first))
    state.apply(first.taken_at, KEYFRAME, reader.keyframe(0, key_blob))
    changed = msgspec.structs.replace(second, gpus={**second.gpus, gpu.uuid: other})
    delta = writer.delta(changed)
    assert [n for n, _ in delta["t"]] == [len(key["t"])]
    state.apply(changed.taken_at, DELTA, reader.delta(blobs.delta(delta)))
    back = state.snapshot()
    _same_fleet(back, changed)
    # one object per distinct table, as the live fleet shares them
    assert len({id(g.mig_profiles) for g in back.gpus.values()}) <= len(tables) + 2


def test_past_the_table_limit_a_value_is_written_in_its_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(rows, "REF_LIMIT", 0)
    live = _live(None, 3)
    writer = FrameWriter()
    blobs, reader, state = BlobWriter(), BlobReader(), FrameState()
    key = writer.keyframe(live[0])
    assert key["t"] == []
    state.apply(live[0].taken_at, KEYFRAME, reader.keyframe(0, blobs.keyframe(key)))
    _same_fleet(state.snapshot(), live[0])
    for snap in live[1:]:
        state.apply(snap.taken_at, DELTA, reader.delta(blobs.delta(writer.delta(snap))))
        _same_fleet(state.snapshot(), snap)


def test_a_delta_gives_the_changed_entities_whole_by_index() -> None:
    snap = _live(None, 1)[0]
    writer = FrameWriter(refs=False)
    key = writer.keyframe(snap)
    assert key["f"] == WHOLE_ROWS
    assert writer.delta(snap) == {}  # nothing changed: an empty frame
    gpu = next(iter(snap.gpus.values()))
    hotter = msgspec.structs.replace(gpu, temperature_c=91.123456789)
    delta = writer.delta(msgspec.structs.replace(snap, gpus={**snap.gpus, gpu.uuid: hotter}))
    assert set(delta) == {"r"}
    assert delta["r"] == {"gpus": [[list(snap.gpus).index(gpu.uuid)], [astuple(hotter)]]}


def test_entities_that_come_and_go_are_found_by_key() -> None:
    first, second = _live(None, 2)
    writer = FrameWriter()
    state = FrameState()
    blobs, reader = BlobWriter(), BlobReader()
    key = blobs.keyframe(writer.keyframe(first))
    state.apply(first.taken_at, KEYFRAME, reader.keyframe(0, key))
    gone = next(iter(second.slots))
    slots = {k: v for k, v in second.slots.items() if k != gone}
    extra = msgspec.structs.replace(second.slots[gone], id="extra")
    slots = {"extra": extra, **slots}  # a new key, first: every position moves
    changed = msgspec.structs.replace(second, slots=slots)
    delta = writer.delta(changed)
    assert delta["n"]["slots"] == [["extra", astuple(extra)]]
    assert delta["d"]["slots"] == [list(first.slots).index(gone)]
    state.apply(changed.taken_at, DELTA, reader.delta(blobs.delta(delta)))
    _same_fleet(state.snapshot(), changed)
    # and back: the key returns, the new one goes
    after = msgspec.structs.replace(second, taken_at=second.taken_at + 1.0)
    state.apply(after.taken_at, DELTA, reader.delta(blobs.delta(writer.delta(after))))
    _same_fleet(state.snapshot(), after)


def test_a_section_whose_keys_change_order_and_back_reads_back() -> None:
    """Keys in another order (none came or went) are framed by key; the order back again, with
    an entity changed, is compared with the order framed last, not the keyframe's."""
    first, second, third = _live(None, 3)
    writer = FrameWriter()
    state = FrameState()
    blobs, reader = BlobWriter(), BlobReader()
    state.apply(
        first.taken_at, KEYFRAME, reader.keyframe(0, blobs.keyframe(writer.keyframe(first)))
    )
    turned = msgspec.structs.replace(second, slots=dict(reversed(list(second.slots.items()))))
    for snap in (turned, third):
        state.apply(snap.taken_at, DELTA, reader.delta(blobs.delta(writer.delta(snap))))
        _same_fleet(state.snapshot(), snap)
    slot = next(iter(third.slots.values()))
    busier = msgspec.structs.replace(slot, activity_pct=(slot.activity_pct or 0.0) + 1.0)
    fourth = msgspec.structs.replace(
        third, taken_at=third.taken_at + 1.0, slots={**third.slots, slot.id: busier}
    )
    delta = writer.delta(fourth)
    assert delta["r"]["slots"] == [[list(first.slots).index(slot.id)], [astuple(busier)]]
    state.apply(fourth.taken_at, DELTA, reader.delta(blobs.delta(delta)))
    _same_fleet(state.snapshot(), fourth)


def test_a_row_written_with_other_fields_reads_by_name() -> None:
    gpu = next(iter(_live(None, 1)[0].gpus.values()))
    names = list(Gpu.__struct_fields__)
    row = list(astuple(gpu))
    # a file whose Gpu had a field this one lacks, and lacked one this one has (xid_at)
    at = names.index("xid_at")
    del names[at], row[at]
    names.insert(0, "retired_field")
    row.insert(0, "old value")
    wire = msgspec.msgpack.decode(msgspec.msgpack.encode(row))
    back = RowDecoder(Gpu, names)(wire)
    assert back == msgspec.structs.replace(gpu, xid_at=None)


def test_a_delta_read_alone_finds_its_keyframe(tmp_path: Path) -> None:
    live = _live("noisy-neighbour", 12)
    path = tmp_path / "r.sqlite"
    recorder = Recorder(path, fleet="t", refresh_s=1.0, keyframe_s=5.0, block=True)
    for snap in live:
        recorder(snap)
    assert wait_written(recorder, len(live))
    recorder.close()
    store = RecordingStore(path, readonly=True)
    assert store.meta()["format"] == FORMAT == "gpucon-recording/6"
    # one delta at a time, each read without the frames before it in this call
    for snap in live:
        (part,) = list(store.frame_parts(snap.taken_at, snap.taken_at, samples=False))
        assert part[2] is not None
    # a fresh store's first read is a delta in the middle of a group (playing on from there)
    cursor = ReplayCursor(RecordingStore(path, readonly=True))
    assert cursor.seek(live[3].taken_at) is not None
    fresh = RecordingStore(path, readonly=True)
    cursor.store = fresh
    back = cursor.advance(live[8].taken_at)
    assert back is not None
    _same_fleet(back, live[8])
    store.close()
    fresh.close()


def test_a_format_4_file_appended_to_reads_on_both_sides(tmp_path: Path) -> None:
    live = _live("noisy-neighbour", 30)
    path = tmp_path / "r.sqlite"
    # the first 15 ticks as a gpucon of format 4 wrote them
    store = RecordingStore(path)
    store.set_meta(format="gpucon-recording/4", fleet="t", refresh_s="1.0")
    old = FormatFourWriter(samples=False)
    for i, snap in enumerate(live[:15]):
        kind = KEYFRAME if i % 10 == 0 else DELTA
        frame = old.keyframe(snap) if kind == KEYFRAME else old.delta(snap)
        store.append(snap.taken_at, kind, encode_json_frame(frame))
    store.close()
    recorder = Recorder(path, fleet="t", refresh_s=1.0, keyframe_s=10.0, block=True)
    for snap in live[15:]:
        recorder(snap)
    assert wait_written(recorder, 15)
    recorder.close()
    store = RecordingStore(path, readonly=True)
    assert store.meta()["format"] == FORMAT
    keyframes = _keyframes(path)
    assert "f" not in decode_frame(keyframes[0]) and decode_frame(keyframes[-1])["f"] == REF_ROWS
    cursor = ReplayCursor(store)
    for i, snap in enumerate(live):
        back = cursor.seek(snap.taken_at)
        assert back is not None and back.taken_at == snap.taken_at
        for name in ("gpus", "slots", "backends", "latency"):
            # format 4 kept five decimals; format 5 the values as they were
            want = dict(getattr(snap, name))
            assert dict(getattr(back, name)) == (_rounded(want) if i < 15 else want), name
    store.close()


def _keyframes(path: Path) -> list[bytes]:
    db = sqlite3.connect(path)
    rows = db.execute("SELECT blob FROM frames WHERE kind = 0 ORDER BY t").fetchall()
    db.close()
    return [bytes(b) for (b,) in rows]


def test_samples_columns_of_either_compression_read_the_same() -> None:
    snap = _live(None, 3)[-1]
    blob = ColumnWriter().encode(*fleet_columns(snap), key=True)
    assert blob[:2] == MAGIC  # zstd since format 5
    raw = zstandard.ZstdDecompressor().decompress(blob[2:])
    older = MAGIC_ZLIB + zlib.compress(raw, 1)  # formats 3 and 4
    assert is_columns(older) and parse(older) == parse(blob)
    assert decode_frame(older) == decode_frame(blob)
