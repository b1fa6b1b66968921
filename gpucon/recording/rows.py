"""A section's entities as format 5 writes them: each whole, its field values in one C call.

Format 5 records an entity that changed as its whole record again, never field by field: at
512 GPUs 2,000 to 3,500 entities change a tick, and picking out their changed fields in Python
(reading every field, comparing it with the last frame's) was most of what recording cost. A
model record (a msgspec Struct) is its field values in declaration order
(``msgspec.structs.astuple``, from its slots, in C), and msgspec writes that tuple as MessagePack
(a nested record as a map of its fields, an enum as its value, a set as an array, a float as
its exact double); any other value (an SLO's float, an origin's set of names) is written as it
is. The schema in each keyframe names a class's fields, so a file written before a field was
added (or after one was removed) still reads. Reading a row back: plain values are themselves,
an enum is looked up, anything holding a record is ``msgspec.convert``ed to the field's type in
C (remembered per distinct value for a frozen one: one MIG profile table on 512 GPUs is one
object). Pure.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
from msgspec.structs import astuple

from gpucon.recording.codec import (
    CodecRegistry,
    _identity,
    _is_model_value,
    _is_record,
    _memoised,
    _optional_inner,
)

Decoder = Callable[[Any], Any]

_PLAIN = (int, float, str, bool, type(None), Any)
_parse = msgspec.msgpack.Decoder().decode
# the decoders of values that hold no record (the same as the older formats')
_REGISTRY = CodecRegistry()


def encode_rows(values: list[Any]) -> list[Any]:
    """``values`` (one section's, all of one kind) as format 5 writes them: a record as the
    tuple of its field values, anything else as it is (msgspec writes both)."""
    if not values or not isinstance(values[0], msgspec.Struct):
        return values
    try:
        return list(map(astuple, values))
    except TypeError:  # something other than a record among them: each as it is
        return [astuple(v) if isinstance(v, msgspec.Struct) else v for v in values]


def _has_record(hint: Any) -> bool:
    """True when a value of type ``hint`` holds a record (written as a map of its fields)."""
    if _is_record(hint):
        return True
    return any(_has_record(a) for a in typing.get_args(hint) if a is not Ellipsis)


def _field_decoder(hint: Any) -> Decoder:
    """How a field's value, as msgspec wrote it, becomes the field's value again: as the
    older formats read it (a plain value is itself, an enum looked up, a list made the
    field's tuple or set) where no record is in it, else ``msgspec.convert``."""
    inner = _optional_inner(hint)
    if inner is not None:
        hint = inner
    if hint in _PLAIN:
        return _identity
    if not _has_record(hint):
        return _REGISTRY.decoder(hint)

    def convert(value: Any) -> Any:
        return msgspec.convert(value, hint)

    return _memoised(convert) if _is_model_value(hint) else convert


class RowDecoder:
    """Builds one class's records from format 5 rows, written with the fields ``names``."""

    def __init__(self, cls: type, names: Sequence[str] | None = None) -> None:
        self.cls = cls
        hints = typing.get_type_hints(cls)
        fields = tuple(cls.__struct_fields__)  # type: ignore[attr-defined]
        self.fields = fields
        self.names = fields if names is None else tuple(names)
        # the file's fields this gpucon knows, by their place in a row
        self._known = [(i, n) for i, n in enumerate(self.names) if n in hints]
        self._same = self.names == fields
        self._others = [
            (i, dec) for i, n in self._known if (dec := _field_decoder(hints[n])) is not _identity
        ]

    def __call__(self, row: Sequence[Any]) -> Any:
        if self._same and not self._others:
            return self.cls(*row)
        args = list(row)
        for i, dec in self._others:
            if i < len(args) and (v := args[i]) is not None:
                args[i] = dec(v)
        if self._same and len(args) == len(self.fields):
            return self.cls(*args)
        # another gpucon's fields: by name, a missing one takes its default
        return self.cls(**{n: args[i] for i, n in self._known if i < len(args)})


def row_decoder(cls: Any, names: Sequence[str] | None = None) -> Decoder:
    """The decoder of a section's rows whose values are ``cls`` (a record: ``RowDecoder``;
    anything else: ``msgspec.convert`` to its type, or the value itself when plain); a row
    still in its bytes (a delta's, ``msgspec.Raw``) is parsed first."""
    if isinstance(cls, type) and hasattr(cls, "__struct_fields__"):
        decode: Decoder = RowDecoder(cls, names)
    else:
        decode = _field_decoder(cls)

    def decoded(row: Any) -> Any:
        if row.__class__ is msgspec.Raw:
            row = _parse(row)
        return decode(row)

    return decoded
