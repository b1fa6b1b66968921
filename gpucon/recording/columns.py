"""History samples recorded a family of series at a time, as the hub's history holds them.

The hub keeps each family of series (every slot's activity, every GPU's temperature, ...) as
one array of numbers per tick (``model.history_blocks``). Format 3 records a tick's samples
as those arrays' bytes, taken from the snapshot's history (its newest tick) rather than
sampled again from the fleet: per family, its ids when they changed and its column XOR'd with
the previous frame's column of the family (an unchanged value becomes zero bytes, which zlib
squeezes); XOR of two columns is one operation on two big integers, in C. The series of no
family (a few) are a small dictionary. At 512 GPUs this is ~0.5 ms a tick where taking the
samples entity by entity was ~7 ms.

A samples blob of format 5 is ``MAGIC`` + zstd(header length (4 bytes, little-endian) +
header (JSON) + the families' columns, one after the other). The header: ``f``, per family
``[kind, series, typecode, count, ids or null (unchanged since the last frame), xor (0/1)]``,
and ``s``, the single series' values. ``ColumnWriter`` makes blobs (the recorder's);
``ColumnReader`` applies them and gives history blocks back (``frames.FrameState``). Formats 3
and 4 wrote ``MAGIC_ZLIB`` + zlib(the same), still read: zstd takes a quarter of zlib's time
over a 512-GPU tick's ~90 kB of mostly zero bytes. Pure.
"""

from __future__ import annotations

import json
import math
import zlib
from array import array
from typing import Any

import msgspec
import zstandard

from gpucon.model.history import History, Sample
from gpucon.model.history_rings import Block
from gpucon.model.history_samples import history_blocks
from gpucon.model.merge import MergedFleet

# a zlib stream starts with 0x78, a zstd frame with 0x28: a samples blob of columns with "G"
MAGIC = b"G5"
MAGIC_ZLIB = b"G3"
# a decoded samples blob is ``{COLUMNS: parse(blob)}`` (``store.decode_frame``)
COLUMNS = "B"
NAN = math.nan
# the header as JSON, in C (the bytes json.dumps with compact separators writes)
_encode_json = msgspec.json.Encoder().encode
_decode_json = msgspec.json.Decoder().decode

# a family's column as recorded: (kind, series), its ids, its bytes, its array typecode
_Columns = dict[tuple[str, str], tuple[tuple[str, ...], bytes, str]]


def _xor(a: bytes, b: bytes) -> bytes:
    """``a`` XOR ``b`` (of one length), in C: unchanged bytes come out as zeros."""
    n = len(a)
    return (int.from_bytes(a, "little") ^ int.from_bytes(b, "little")).to_bytes(n, "little")


def newest_columns(history: History, t: float) -> tuple[_Columns, dict[str, float]] | None:
    """The families' columns and the single series of the history's newest tick, taken at
    ``t``; None when that tick is not there to read (no history, a newest tick of another
    time, or the rings moved past it)."""
    rings = history._columns
    tick = history._count - 1
    if rings is None or tick < 0 or rings.count - tick >= rings.size:
        return None
    pos = tick % rings.size
    if rings.times[pos] != t:
        return None
    columns: _Columns = {}
    for name, family in list(rings.families.items()):
        block = family.blocks[pos]
        if family.ticks[pos] != tick or block is None:
            continue  # the family was not sampled this tick
        ids = tuple(family.id_lists[pos])
        data = block.tobytes()
        if family.ticks[pos] != tick:  # overwritten while read (the hub ran ahead a ring)
            return None
        columns[name] = (ids, data, block.typecode)
    singles = {k: v for k, c in list(rings.columns.items()) if (v := c[pos]) == v}
    if rings.count - tick >= rings.size:
        return None
    return columns, singles


class ColumnWriter:
    """Samples blobs, each against the last one made."""

    def __init__(self) -> None:
        self._last: _Columns = {}
        self._zstd = zstandard.ZstdCompressor(level=1)

    def encode(self, columns: _Columns, singles: dict[str, float], *, key: bool) -> bytes:
        """One frame's samples (``key``: a keyframe, standing alone)."""
        last = {} if key else self._last
        header: list[Any] = []
        body: list[bytes] = []
        for (kind, series), (ids, data, code) in columns.items():
            before = last.get((kind, series))
            # the hub keeps a family's ids as one tuple while they stay: compared by identity
            # first (~20 families of up to ~3,400 ids a tick)
            same = before is not None and (before[0] is ids or before[0] == ids)
            same = same and before is not None and before[2] == code
            header.append([kind, series, code, len(ids), None if same else list(ids), int(same)])
            if not same or before is None:
                body.append(data)
            elif data == before[1]:  # unchanged (memcmp): its zeros without the arithmetic
                body.append(bytes(len(data)))
            else:
                body.append(_xor(data, before[1]))
        self._last = columns
        head_value = {"f": header, "s": singles}
        if all(map(math.isfinite, singles.values())):
            head = _encode_json(head_value)  # a keyframe's ids of ~22,000 series, in C
        else:  # msgspec writes an infinity as null: json as before
            head = json.dumps(head_value, separators=(",", ":")).encode()
        return MAGIC + self._zstd.compress(len(head).to_bytes(4, "little") + head + b"".join(body))


def is_columns(blob: bytes) -> bool:
    return blob[:2] in (MAGIC, MAGIC_ZLIB)


def parse(blob: bytes) -> tuple[list[Any], dict[str, float], bytes]:
    """(the families' headers, the single series, the columns' bytes) of a blob."""
    if blob[:2] == MAGIC:
        raw = zstandard.ZstdDecompressor().decompress(blob[2:])
    else:
        raw = zlib.decompress(blob[2:])
    n = int.from_bytes(raw[:4], "little")
    try:
        head = _decode_json(raw[4 : 4 + n])
    except msgspec.DecodeError:  # an infinity, as json writes it
        head = json.loads(raw[4 : 4 + n])
    return head["f"], head["s"], raw[4 + n :]


class ColumnReader:
    """The samples as of the last blob applied (a keyframe's blob starts afresh)."""

    def __init__(self) -> None:
        self.columns: _Columns = {}
        self.singles: dict[str, float] = {}

    def apply(self, key: bool, parsed: tuple[list[Any], dict[str, float], bytes]) -> None:
        families, singles, body = parsed
        last = {} if key else self.columns
        columns: _Columns = {}
        at = 0
        for kind, series, code, count, ids, xor in families:
            size = count * array(code).itemsize
            data = body[at : at + size]
            at += size
            before = last.get((kind, series))
            if ids is None or xor:
                if before is None:
                    continue  # a delta whose base was cut off: nothing to apply it to
                if ids is None:
                    ids = before[0]
                if xor:
                    data = _xor(data, before[1])
            columns[(kind, series)] = (tuple(ids), data, code)
        self.columns = columns
        self.singles = dict(singles)

    def blocks(self) -> list[Block]:
        """The families as history blocks (an array per family, from its bytes in C)."""
        out: list[Block] = []
        for (kind, series), (ids, data, code) in self.columns.items():
            values: array[float] = array(code)
            values.frombytes(data)
            out.append((kind, series, ids, values))
        return out

    def append_to(self, history: History, t: float) -> History:
        return history.append_blocks(t, self.blocks(), self.singles)

    def samples(self) -> dict[str, Sample]:
        """Every known sample by its key (``kind:ID:series``), as the older formats gave."""
        out: dict[str, Sample] = {}
        for (kind, series), (ids, data, code) in self.columns.items():
            values: array[float] = array(code)
            values.frombytes(data)
            out.update(
                (f"{kind}:{i}:{series}", v) for i, v in zip(ids, values, strict=True) if v == v
            )
        out.update(self.singles)
        return out


def snapshot_fleet(snapshot: Any) -> MergedFleet:
    """The merged fleet a snapshot was made from, as the hub's history sampled it."""
    return MergedFleet(
        dict(snapshot.gpus),
        dict(snapshot.slots),
        dict(snapshot.backends),
        dict(snapshot.queues),
        dict(snapshot.latency),
        dict(snapshot.nodes),
        dict(snapshot.origins),
    )


def fleet_columns(snapshot: Any) -> tuple[_Columns, dict[str, float]]:
    """The columns sampled from the snapshot's fleet, as the hub samples it (a snapshot with
    no history to read them from: one made by hand, or read too late)."""
    fleet = snapshot_fleet(snapshot)
    blocks, single = history_blocks(fleet, snapshot.staleness)
    columns: _Columns = {
        (kind, series): (tuple(ids), values.tobytes(), values.typecode)
        for kind, series, ids, values in blocks
    }
    return columns, {k: v for k, v in single.items() if v is not None and v == v}
