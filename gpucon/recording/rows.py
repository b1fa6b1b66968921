"""A section's entities as formats 5 and 6 write them: each whole, its field values in one C
call; a nested record shared across the fleet (a GPU's MIG profile table) by reference.

Format 5 records an entity that changed as its whole record again, never field by field: at
512 GPUs 2,000 to 3,500 entities change a tick, and picking out their changed fields in Python
(reading every field, comparing it with the last frame's) was most of what recording cost. A
model record (a msgspec Struct) is its field values in declaration order
(``msgspec.structs.astuple``, from its slots, in C), and msgspec writes that tuple as MessagePack
(a nested record as a map of its fields, an enum as its value, a set as an array, a float as
its exact double); any other value (an SLO's float, an origin's set of names) is written as it
is. The schema in each keyframe names a class's fields, so a file written before a field was
added (or after one was removed) still reads.

Format 6 writes a field that holds one nested record (``Gpu.mig_profiles``, ``Slot.vm``) as a
reference: the number of its value in the keyframe group's table (``RefTable``; a frame's
``t`` gives the values new to the group), so a GPU's ~1.2 kB profile table, the same object
tick after tick, is written once a keyframe group instead of with every change of the GPU (at
512 GPUs a quarter of a delta's bytes in the demo, most of them on a live fleet where every GPU
changes every tick).

Reading a row back: a row still in its bytes (``msgspec.Raw``: every row of a format 5 or 6
file) is decoded by msgspec straight into the tuple of the record's field types, enums and
nested records made in C, then the record built from it; a referenced value is decoded once
per keyframe group. A row of another gpucon's fields (the schema differs), or one the types
refuse, is read as before: plain values are themselves, an enum is looked up, anything holding
a record is ``msgspec.convert``ed to the field's type in C (remembered per distinct value for
a frozen one), by name when the fields differ. Pure.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Sequence
from itertools import starmap
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
# values a keyframe group's table takes at most: past it a value is written in its row (a
# source that makes a new nested record every read must not grow the table without end)
REF_LIMIT = 4096


class RefTable:
    """The writer's table of referenced values for one keyframe group: each object (kept, so
    its id stays its own) or an equal value gets one number."""

    __slots__ = ("by_id", "by_value", "new")

    def __init__(self) -> None:
        self.by_id: dict[int, tuple[Any, int]] = {}
        self.by_value: dict[Any, int] = {}
        self.new: list[list[Any]] = []  # [number, value]: new since ``take_new``

    def ref(self, value: Any) -> Any:
        """``value``'s number (None stays None; past ``REF_LIMIT``, the value itself)."""
        if value is None:
            return None
        hit = self.by_id.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        try:
            number = self.by_value.get(value)
        except TypeError:  # not hashable: written in its row
            return value
        if number is None:
            if len(self.by_value) >= REF_LIMIT:
                return value
            number = self.by_value[value] = len(self.by_value)
            self.new.append([number, value])
        if len(self.by_id) < 4 * REF_LIMIT:
            self.by_id[id(value)] = (value, number)
        return number

    def take_new(self) -> list[list[Any]]:
        new, self.new = self.new, []
        return new


@functools.cache
def ref_fields(cls: type) -> tuple[int, ...]:
    """The positions of ``cls``'s fields written by reference (format 6): those holding one
    frozen nested record that is itself a table of records (a GPU's MIG profiles). Not a
    tuple of records (a GPU's processes change with its memory), nor a small record of plain
    values (a slot's VM): zstd finds those in the keyframe as they are, and a delta with
    slots' VMs by reference came out ~10 % larger at 512 GPUs."""
    if not hasattr(cls, "__struct_fields__"):
        return ()
    hints = typing.get_type_hints(cls)
    out = []
    for i, name in enumerate(cls.__struct_fields__):
        hint = _optional_inner(hints[name]) or hints[name]
        if _is_record(hint) and _is_model_value(hint) and _holds_records(hint):
            out.append(i)
    return tuple(out)


def _holds_records(cls: Any) -> bool:
    """True when one of ``cls``'s fields is a tuple of records (a table)."""
    for hint in typing.get_type_hints(cls).values():
        hint = _optional_inner(hint) or hint
        if typing.get_origin(hint) is tuple and any(map(_is_record, typing.get_args(hint))):
            return True
    return False


def encode_rows(values: list[Any], refs: RefTable | None = None) -> list[Any]:
    """``values`` (one section's, all of one kind) as formats 5 and 6 write them: a record as
    the tuple of its field values, anything else as it is (msgspec writes both); with
    ``refs`` (format 6), a field holding a nested record as its number in the table."""
    if not values or not isinstance(values[0], msgspec.Struct):
        return values
    try:
        rows = list(map(astuple, values))
    except TypeError:  # something other than a record among them: each as it is
        return [astuple(v) if isinstance(v, msgspec.Struct) else v for v in values]
    if refs is None:
        return rows
    cls = values[0].__class__
    for p in ref_fields(cls):
        column = [r[p] for r in rows]
        if column.count(None) == len(column):
            continue  # none here (a slot with no VM): nothing to replace
        ref = refs.ref
        rows = [
            r if r[p] is None or v.__class__ is not cls else (*r[:p], ref(r[p]), *r[p + 1 :])
            for r, v in zip(rows, values, strict=True)
        ]
    return rows


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


class Refs:
    """The reader's table of referenced values for the keyframe group applied last: the
    values as written, and each decoded once (by the type of the field that names it)."""

    __slots__ = ("objects", "values")

    def __init__(self) -> None:
        self.values: dict[int, Any] = {}
        self.objects: dict[int, Any] = {}

    def clear(self) -> None:
        self.values.clear()
        self.objects.clear()

    def add(self, entries: Sequence[Sequence[Any]]) -> None:
        for number, value in entries:
            self.values[number] = value
            self.objects.pop(number, None)

    def get(self, number: int, decode: Decoder) -> Any:
        found = self.objects.get(number)
        if found is None:
            value = self.values[number]
            if value.__class__ is msgspec.Raw:
                value = _parse(value)
            found = self.objects[number] = decode(value)
        return found


def _ref_decoder(decode: Decoder, refs: Refs) -> Decoder:
    """A field written by reference (format 6) or in its row (format 5, or past the limit)."""

    def decoded(value: Any) -> Any:
        if value.__class__ is int:
            return refs.get(value, decode)
        return decode(value)

    return decoded


def _typed(hints: Sequence[Any]) -> msgspec.msgpack.Decoder[Any] | None:
    """A decoder of a row's bytes into the tuple of its fields' types (None: msgspec cannot
    decode one of them)."""
    try:
        return msgspec.msgpack.Decoder(tuple[tuple(hints)])  # type: ignore[misc]
    except TypeError:
        return None


class RowDecoder:
    """Builds one class's records from format 5 and 6 rows, written with the fields ``names``
    (``refs``: the table a format 6 row's references name)."""

    def __init__(self, cls: type, names: Sequence[str] | None = None, refs: Refs | None = None):
        self.cls = cls
        hints = typing.get_type_hints(cls)
        fields = tuple(cls.__struct_fields__)  # type: ignore[attr-defined]
        self.fields = fields
        self.names = fields if names is None else tuple(names)
        # the file's fields this gpucon knows, by their place in a row
        self._known = [(i, n) for i, n in enumerate(self.names) if n in hints]
        self._same = self.names == fields
        # fields holding one shared nested record: by reference in format 6 (``refs``), in
        # the row before; either way decoded once per value, not once per row
        shared = set(ref_fields(cls))
        others = []
        for i, n in self._known:
            dec = _field_decoder(hints[n])
            if refs is not None and n in fields and fields.index(n) in shared:
                dec = _ref_decoder(dec, refs)
            if dec is not _identity:
                others.append((i, dec))
        self._others = others
        # a row's bytes straight into its fields' types, in C (a shared field as it is, its
        # number or its value, put right after)
        self._shared = [(i, dec) for i, dec in others if i in shared]
        types = [Any if i in shared else hints[n] for i, n in enumerate(fields)]
        self._typed = _typed(types) if self._same else None

    def decode_many(self, rows: list[Any]) -> list[Any]:
        """``rows`` decoded: every one's bytes into its fields' types and the records built
        from them, in C (a snapshot's changed rows, a keyframe's); one at a time where that
        cannot be (a shared nested value, a row already parsed, one its types refuse)."""
        typed = self._typed
        if typed is None:
            return list(map(self, rows))
        try:
            values = list(map(typed.decode, rows))
        except (msgspec.ValidationError, TypeError):  # TypeError: a row not bytes
            return list(map(self, rows))
        for i, dec in self._shared:  # a shared nested value (most rows have none)
            column = [v[i] for v in values]
            if column.count(None) != len(column):
                values = [
                    v if (x := v[i]) is None else (*v[:i], dec(x), *v[i + 1 :]) for v in values
                ]
        return list(starmap(self.cls, values))

    def __call__(self, row: Any) -> Any:
        if row.__class__ is msgspec.Raw:
            if self._typed is not None:
                try:
                    values = self._typed.decode(row)
                except msgspec.ValidationError:  # a value its type refuses: as before
                    pass
                else:
                    if not self._shared:
                        return self.cls(*values)
                    args = list(values)
                    for i, dec in self._shared:
                        if (v := args[i]) is not None:
                            args[i] = dec(v)
                    return self.cls(*args)
            row = _parse(row)
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


def row_decoder(cls: Any, names: Sequence[str] | None = None, refs: Refs | None = None) -> Decoder:
    """The decoder of a section's rows whose values are ``cls`` (a record: ``RowDecoder``;
    anything else: ``msgspec.convert`` to its type, or the value itself when plain); a row
    still in its bytes (a delta's, ``msgspec.Raw``) is parsed first."""
    if isinstance(cls, type) and hasattr(cls, "__struct_fields__"):
        return RowDecoder(cls, names, refs)
    decode = _field_decoder(cls)

    def decoded(row: Any) -> Any:
        if row.__class__ is msgspec.Raw:
            row = _parse(row)
        return decode(row)

    return decoded
