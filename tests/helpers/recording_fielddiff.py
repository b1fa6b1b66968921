"""The changed fields of a section's changed entities, as a format 4 delta gave them
(``recording_v4``: kept for the tests of reading older formats).

At 512 GPUs 2,000 to 3,500 entities change a tick (new objects), and in each only one to five
of 13 to 21 fields moved: a latency's percentiles and rate, a backend's in-flight count, a
slot's activity. Every field of those entities is compared, with no Python statement per
entity: each entity's values are read as one tuple (``row_reader``: ``msgspec.structs.astuple``,
straight from the record's slots, a twelfth of ``operator.attrgetter``'s time over twenty
names), the tuples turned into a column per field (``zip``), and each column compared whole
with the values kept from the last frame (one comparison in C, by identity first); only a
column that differs is looked into, and Python touches only the values that moved. A field
that moved in most of the entities is given for all of them (the few unchanged values written
again cost less than picking out the others). A float field's values are given as integers
(``codec.scale_all``, format 4). Pure, and stateless.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from itertools import compress
from typing import Any

from msgspec.structs import astuple

from gpucon.recording.codec import (
    DECIMALS,
    FLOAT,
    PLAIN,
    ClassCodec,
    encode_column,
    round_all,
    scale_all,
)

# one changed field: [field index, [row index, ...], [value, ...]], and for a float field
# whose values are written as integers, the decimals they were scaled by (format 4)
Column = list[Any]


def row_reader(codec: ClassCodec) -> Callable[[Any], tuple[Any, ...]]:
    """A reader of one object's field values as a tuple in ``codec.fields`` order:
    ``astuple`` for a model record, whose fields are exactly those, else the codec's
    ``attrgetter`` (a tuple of one for a class of one field)."""
    if codec.astuple_rows:
        return astuple
    get = codec.row_getter
    if get is None:
        one = codec.columns[0][0]
        return lambda obj: (one(obj),)
    return get


def changed_columns(
    codec: ClassCodec, at: list[int], now_rows: list[Any], was_rows: list[Any]
) -> list[Column]:
    """The fields that moved from ``was_rows[j]`` to ``now_rows[j]`` (``row_reader``'s
    tuples of objects of the codec's class), each as ``[field, [at[j], ...], [value,
    ...]]``, in field order."""
    if not at:
        return []
    columns = codec.columns
    now_cols = list(zip(*now_rows, strict=True))
    was_cols = list(zip(*was_rows, strict=True))
    out: list[Column] = []
    positions = range(len(at))
    many = len(at) - len(at) // 4
    for f, (now, was) in enumerate(zip(now_cols, was_cols, strict=True)):
        if now == was:  # by identity first: an untouched field is no change
            continue
        # an equal value in a new object is no change (a NaN always is one)
        moved = list(map(operator.ne, now, was))
        count = moved.count(True)
        if not count:
            continue
        if count >= many:  # it moves in most of them: all of them, unpicked
            where, values = at, list(now)
        else:
            hits = list(compress(positions, moved))
            values = list(map(now.__getitem__, hits))
            where = list(map(at.__getitem__, hits))
        _, kind, enc = columns[f]
        if kind == FLOAT:
            scaled = scale_all(values)
            if scaled is not None:  # integers, read back divided (format 4)
                out.append([f, where, scaled, DECIMALS])
                continue
            values = round_all(values)
        elif kind != PLAIN:
            values = encode_column(enc, values)
        out.append([f, where, values])
    return out
