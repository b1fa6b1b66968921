"""A frame's bytes as stored: format 5 writes MessagePack compressed by zstd, formats 1 to 4
JSON compressed by zlib (still read); a samples blob of columns (``columns``) is told apart
by its own mark.

Why MessagePack and zstd (docs/recording.md): a delta of format 5 holds the changed entities
whole, ~310 kB of MessagePack a tick at 512 GPUs, written by msgspec in ~0.5 ms (its JSON
takes half as long again, and has no NaN); zstd (level 2) makes it ~31 kB in ~0.55 ms, where
zlib at level 1 took three times as long for almost twice the bytes. zstd lets go of the
interpreter's lock while it compresses, as zlib does (msgspec does not: ~4 ms for a keyframe).
A delta is compressed with its keyframe's bytes as a dictionary (zstd's raw-content prefix).
At 512 GPUs that makes it no smaller (what is left of a delta is the changed numbers, which no
dictionary holds), but at the default demo's few GPUs a delta is a few records, whose names
and unchanged fields only the keyframe holds: with it as a dictionary a delta is a quarter of
its size alone (~460 bytes, not ~1,900). Pure.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import msgspec
import zstandard

from gpucon.recording.columns import COLUMNS, is_columns, parse

# zstd's level for the fleet: at 512 GPUs, with the keyframe as a prepared dictionary, levels
# -5 to 2 all take ~0.55 ms a delta, and level 2 makes the smallest (31 kB, level 1 37 kB, -5
# 65 kB); level 3 takes half as long again
LEVEL = 2
# a delta of this many bytes of MessagePack or more is compressed alone, in a 128 kB window:
# what is left of a big delta is the changed numbers, which the keyframe does not hold (at
# 512 GPUs ~270 kB, 37.7 kB compressed either way), and matching against a keyframe of
# ~2 MB reads memory that the hub's next tick wants in the CPU's caches. A small delta (the
# default demo's few records, ~2 kB) is a quarter of its size with the keyframe
ALONE_FROM = 64 * 1024
ALONE_WINDOW_LOG = 17
# a zstd frame starts with these bytes (a zlib stream with 0x78, a samples blob with "G")
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

_encoder = msgspec.msgpack.Encoder()
_encode_msgpack = _encoder.encode
_encode_into = _encoder.encode_into
_decode_msgpack = msgspec.msgpack.Decoder().decode


class _Delta(msgspec.Struct):
    """A delta of format 5 as read: its records as their bytes (frames.py names the parts)."""

    r: dict[str, tuple[list[int], list[msgspec.Raw]]] = {}
    n: dict[str, list[tuple[str, msgspec.Raw]]] = {}
    d: dict[str, list[int]] = {}
    s: dict[str, Any] = {}
    p: dict[str, list[Any]] = {}
    t: list[tuple[int, msgspec.Raw]] = []


class _Keyframe(msgspec.Struct):
    """A keyframe of format 5 or 6 as read: its rows as their bytes, decoded by their
    record's types when a snapshot needs them (``rows.RowDecoder``)."""

    k: dict[str, tuple[Any, list[msgspec.Raw]]] = {}
    s: dict[str, Any] = {}
    schema: dict[str, list[str]] = {}
    f: int | None = None
    t: list[tuple[int, msgspec.Raw]] = []


_decode_keyframe = msgspec.msgpack.Decoder(_Keyframe).decode
_decode_delta = msgspec.msgpack.Decoder(_Delta).decode
# JSON in C (msgspec): what formats 1 to 4 wrote (the bytes ``json.dumps`` writes, compact)
_encode_json = msgspec.json.Encoder().encode
_decode_json = msgspec.json.Decoder().decode


class BlobWriter:
    """Format 5's fleet blobs: a small delta compressed with its keyframe as a dictionary, a
    big one alone (one writer per recorder, used by one thread at a time: zstd's contexts are
    not shared between threads at once)."""

    def __init__(self, level: int = LEVEL, *, alone_from: float = ALONE_FROM) -> None:
        self.level = level
        # a delta of this many bytes or more is compressed alone (``ALONE_FROM``; infinity:
        # every delta with its keyframe, as until the ninth round: benchmarks compare)
        self.alone_from = alone_from
        self._plain = zstandard.ZstdCompressor(level=level, write_checksum=True)
        self._alone = zstandard.ZstdCompressor(
            compression_params=zstandard.ZstdCompressionParameters.from_level(
                level, window_log=ALONE_WINDOW_LOG, write_checksum=1
            )
        )
        # the keyframe's bytes, and a compressor with them as its dictionary once a small
        # delta needs it (a fleet whose deltas are all big never prepares one)
        self._key_raw: bytes | None = None
        self._delta: zstandard.ZstdCompressor | None = None
        self._buffer = bytearray()

    def keyframe(self, frame: dict[str, Any]) -> bytes:
        raw = self._key_raw = _encode_msgpack(frame)
        self._delta = None
        return self._plain.compress(raw)

    def delta(self, frame: dict[str, Any]) -> bytes:
        # written into the same buffer each time (at 512 GPUs ~270 kB: a fresh one a tick
        # was memory the allocator mapped and the kernel zeroed, page by page)
        _encode_into(frame, self._buffer)
        if len(self._buffer) >= self.alone_from:
            return self._alone.compress(self._buffer)
        return self._with_keyframe().compress(self._buffer)

    def _with_keyframe(self) -> zstandard.ZstdCompressor:
        """A compressor with the keyframe's bytes as its dictionary (prepared once a group:
        at 512 GPUs ~1.3 ms; then each delta starts with it in ~µs)."""
        if self._delta is None:
            assert self._key_raw is not None, "no keyframe written"
            found = zstandard.ZstdCompressionDict(
                self._key_raw, dict_type=zstandard.DICT_TYPE_RAWCONTENT
            )
            found.precompute_compress(level=self.level)
            self._delta = zstandard.ZstdCompressor(
                level=self.level, dict_data=found, write_checksum=True
            )
        return self._delta


class BlobReader:
    """Format 5's fleet blobs back, a delta with the keyframe before it as its dictionary
    (``store`` finds that keyframe when the reader has not just read it)."""

    def __init__(self) -> None:
        # the id of the keyframe whose bytes are the dictionary, and a decompressor with it
        self.key_id: int | None = None
        self._delta: zstandard.ZstdDecompressor | None = None
        self._plain = zstandard.ZstdDecompressor()

    def keyframe(self, key_id: int, blob: bytes) -> dict[str, Any]:
        raw = self._plain.decompress(blob)
        self.key_id = key_id
        found = zstandard.ZstdCompressionDict(raw, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        self._delta = zstandard.ZstdDecompressor(dict_data=found)
        got = _decode_keyframe(raw)
        frame: dict[str, Any] = {"k": got.k, "s": got.s, "schema": got.schema, "t": got.t}
        if got.f is not None:
            frame["f"] = got.f
        return frame

    def delta(self, blob: bytes) -> dict[str, Any]:
        """A delta after the keyframe read last (``keyframe``), its records left as their
        bytes (``msgspec.Raw``: parsed when a snapshot needs them, ``rows.row_decoder``): a
        seek passes up to a minute of deltas, at 512 GPUs ~120,000 records, and needs only
        the last of each entity."""
        assert self._delta is not None, "no keyframe read"
        got = _decode_delta(self._delta.decompress(blob))
        frame = {
            "r": got.r,
            "n": got.n,
            "d": got.d,
            "s": got.s,
            "p": got.p,
            "t": got.t,
        }
        return {k: v for k, v in frame.items() if v}


def is_zstd(blob: bytes) -> bool:
    return blob[:4] == ZSTD_MAGIC


def encode_frame(frame: dict[str, Any]) -> bytes:
    """A frame standing alone as format 5 stores a keyframe: MessagePack, zstd-compressed."""
    return zstandard.ZstdCompressor(level=LEVEL, write_checksum=True).compress(
        _encode_msgpack(frame)
    )


def encode_json_frame(frame: dict[str, Any], level: int = 1) -> bytes:
    """A frame as formats 1 to 4 stored it: compact JSON, zlib-compressed."""
    return zlib.compress(_encode_json(frame), level)


def decode_frame(blob: bytes) -> dict[str, Any]:
    """A stored frame of any format, or a samples blob of columns (``{COLUMNS: ...}``)."""
    if blob[:4] == ZSTD_MAGIC:  # one standing alone (a keyframe of format 5)
        found: dict[str, Any] = _decode_msgpack(zstandard.ZstdDecompressor().decompress(blob))
        return found
    if is_columns(blob):  # format 3's samples: columns of numbers (recording.columns)
        return {COLUMNS: parse(blob)}
    text = zlib.decompress(blob)
    try:
        frame: dict[str, Any] = _decode_json(text)
    except msgspec.DecodeError:  # not strict JSON (a NaN written by json.dumps): as it read
        frame = json.loads(text)
    return frame


def merge_frames(frame: dict[str, Any], part: dict[str, Any]) -> None:
    """Add ``part``'s sections to ``frame`` (the samples beside the fleet)."""
    for key, value in part.items():
        if isinstance(value, dict):
            frame.setdefault(key, {}).update(value)
        else:
            frame.setdefault(key, value)
