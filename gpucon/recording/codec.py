"""Model values as compact JSON values and back, driven by the records' own type hints.

A record (a msgspec Struct or a dataclass) becomes a list of its field values in declaration
order (the recording's schema names the fields, so a file written before a field was added
or after one was removed still reads: a missing field takes its default, an unknown one is
ignored). Enums become their values, tuples and frozensets lists, mappings objects. Floats
keep five decimals (``DECIMALS``; 10 µs for epoch times): more than a person or an alert rule
can tell apart, and far shorter than ``repr`` of a computed value.
Nothing here reads or writes a file.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import itertools
import marshal
import math
import operator
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from msgspec.structs import astuple

Encoder = Callable[[Any], Any]
Decoder = Callable[[Any], Any]


# decimals a float keeps: 10 µs for epoch times, 0.00001 % or MiB for the rest
DECIMALS = 5
# rounding as ``round(x * SCALE) / SCALE``: the double nearest the five-decimal number, whose
# ``repr`` is that number, in a quarter of the time ``round(x, 5)`` takes (it goes through a
# decimal string); it can differ from it in the fifth decimal where ``x * SCALE`` rounds
SCALE = 10.0**DECIMALS
_SCALES = itertools.repeat(SCALE)
_NONES = itertools.repeat(None)


def round_float(x: float) -> float | None:
    """``x`` as it is stored: ``DECIMALS`` decimals; None for NaN and infinities (JSON
    has neither)."""
    if not math.isfinite(x):
        return None
    return round(x * SCALE) / SCALE


def round_all(values: list[Any]) -> list[Any]:
    """``values`` (floats, ints or None) as stored: the floats rounded as ``round_float``
    does. In C when every value is a finite number or None (three ``map``s over the numbers,
    put back among the Nones by a ``map`` of a setter: a latency with no traffic has no
    percentiles, and a live 512-GPU fleet has a few in every field's column), else one at a
    time."""
    try:
        return list(map(operator.truediv, map(round, map(operator.mul, values, _SCALES)), _SCALES))
    except TypeError:  # a None among them: the numbers rounded in C, then put back
        where = list(itertools.compress(range(len(values)), map(operator.is_not, values, _NONES)))
        out: list[Any] = [None] * len(values)
        try:
            rounded = map(
                operator.truediv,
                map(round, map(operator.mul, map(values.__getitem__, where), _SCALES)),
                _SCALES,
            )
            collections.deque(map(out.__setitem__, where, rounded), maxlen=0)
            return out
        except (TypeError, ValueError, OverflowError):
            pass
    except (ValueError, OverflowError):  # a NaN or an infinity among them
        pass
    return [v if v is None else _enc_float(float(v)) for v in values]


# a number as a delta's column of a float field gives it (format 4): ``round(x * SCALE)``, an
# integer, read back as ``k / SCALE`` (the very double ``round_float`` gives). An integer is
# written and compressed in less time than the float (no ``truediv`` pass, no shortest-repr
# search); beyond this magnitude (~9e13) it would not fit JSON's 64-bit integers: floats then
SCALED_LIMIT = float(2**62) / SCALE


def scale_all(values: list[Any]) -> list[Any] | None:
    """``values`` (floats, ints or None) as integers ``round(x * SCALE)`` (None stays None;
    NaN and infinities become None, as ``round_float`` makes them), by C loops; None when a
    value is too large for that (the caller writes ``round_all``'s floats)."""
    try:
        scaled = list(map(round, map(operator.mul, values, _SCALES)))
    except TypeError:  # a None among them: the numbers scaled in C, then put back
        where = list(itertools.compress(range(len(values)), map(operator.is_not, values, _NONES)))
        try:
            numbers = list(map(round, map(operator.mul, map(values.__getitem__, where), _SCALES)))
        except (TypeError, ValueError, OverflowError):
            return _scale_each(values)
        if numbers and (max(numbers) > _INT_LIMIT or min(numbers) < -_INT_LIMIT):
            return None
        scaled = [None] * len(values)
        collections.deque(map(scaled.__setitem__, where, numbers), maxlen=0)
        return scaled
    except (ValueError, OverflowError):  # a NaN or an infinity among them
        return _scale_each(values)
    if scaled and (max(scaled) > _INT_LIMIT or min(scaled) < -_INT_LIMIT):
        return None
    return scaled


_INT_LIMIT = 2**62


def _scale_each(values: list[Any]) -> list[Any] | None:
    out: list[Any] = []
    for v in values:
        if v is None or (v.__class__ is float and not math.isfinite(v)):
            out.append(None)
        elif abs(v) > SCALED_LIMIT:
            return None
        else:
            out.append(round(v * SCALE))
    return out


def unscale_all(values: list[Any], decimals: int) -> list[Any]:
    """``scale_all``'s integers back as the floats they stand for (None stays None)."""
    scale = itertools.repeat(10.0**decimals)
    try:
        return list(map(operator.truediv, values, scale))
    except TypeError:
        factor = 10.0**decimals
        return [None if v is None else v / factor for v in values]


# how a field's value is encoded (``ClassCodec.columns``)
PLAIN, FLOAT, OTHER = 0, 1, 2


def _identity(value: Any) -> Any:
    return value


def _enc_float(value: Any) -> Any:
    if value.__class__ is float:
        return round(value * SCALE) / SCALE if value == value and abs(value) != math.inf else None
    return value


class ClassCodec:
    """Encodes one record as a list of its fields' values, and decodes such a list."""

    def __init__(self, cls: type, registry: CodecRegistry) -> None:
        self.cls = cls
        self.name = f"{cls.__module__}.{cls.__qualname__}"
        hints = typing.get_type_hints(cls)
        fields = _init_fields(cls)
        self.fields: tuple[str, ...] = fields
        self._encoders = [registry.encoder(hints[name]) for name in fields]
        self._decoders = [registry.decoder(hints[name]) for name in fields]
        self._plain_enc = all(e is _identity for e in self._encoders)
        # one C call reads every field; then only floats are rounded and nested values
        # encoded (a 512-GPU tick encodes a thousand changed entities)
        self._get = operator.attrgetter(*self.fields) if len(self.fields) > 1 else None
        # all the field values as a tuple (None for a class of one field)
        self.row_getter = self._get
        # a record's field values, all at once, straight from its slots (a twelfth of the
        # ``attrgetter``'s time over twenty names): for a model record of several fields
        self.astuple_rows = (
            _is_struct(cls) and len(fields) > 1 and tuple(cls.__struct_fields__) == fields  # type: ignore[attr-defined]
        )
        self._floats = [i for i, e in enumerate(self._encoders) if e is _enc_float]
        # decoding: only the fields whose JSON value is not already the value (JSON gives
        # floats, ints, strings, booleans and None back as they were)
        self._dec_others = [(i, d) for i, d in enumerate(self._decoders) if d is not _identity]
        # a nested value (a slot's processes, a GPU's MIG profile table) is encoded once per
        # object: the hub passes an unchanged one on as the same object, tick after tick
        self._encoders = [
            e if e is _identity or e is _enc_float else _ByIdentity(e) for e in self._encoders
        ]
        self._others = [
            (i, e)
            for i, e in enumerate(self._encoders)
            if e is not _identity and e is not _enc_float
        ]
        # a nested model value (a GPU's MIG profile table, a slot's processes) is decoded
        # once per distinct value: the same table on 512 GPUs is one object, not 512
        self._dec_others = [
            (i, _memoised(d) if _is_model_value(hints[fields[i]]) else d)
            for i, d in self._dec_others
        ]
        self._build = _builder(cls, self.fields)
        # per field: its getter, how its value is encoded (PLAIN as it is, FLOAT rounded,
        # OTHER by its encoder) and the encoder: the recorder's deltas go a field at a time
        self.columns: list[tuple[Callable[[Any], Any], int, Encoder]] = [
            (
                operator.attrgetter(name),
                PLAIN if enc is _identity else FLOAT if enc is _enc_float else OTHER,
                enc,
            )
            for name, enc in zip(self.fields, self._encoders, strict=True)
        ]
        # decoding by an older file's field names: (index in the file, decoder) per field
        self._layouts: dict[tuple[str, ...], list[tuple[str, int, Decoder]]] = {}

    def encode(self, obj: Any) -> tuple[Any, ...]:
        """The field values as a tuple: a tuple of plain values is one the garbage collector
        stops tracking (the recorder keeps ~17,000 rows of a 512-GPU fleet alive)."""
        if self._get is None:
            values = [getattr(obj, name) for name in self.fields]
        else:
            got = self._get(obj)
            if self._plain_enc:
                return got  # type: ignore[no-any-return]
            values = list(got)
        if self._plain_enc:
            return tuple(values)
        for i in self._floats:
            v = values[i]
            if v.__class__ is float:
                values[i] = round(v * SCALE) / SCALE if v == v and abs(v) != math.inf else None
        for i, enc in self._others:
            v = values[i]
            if v is not None:
                values[i] = enc(v)
        return tuple(values)

    def encode_all(self, objs: list[Any]) -> list[Any]:
        """``encode`` of each of ``objs``, a field at a time: each object's values read as one
        tuple (``astuple``, from a record's slots), the tuples turned into a column per field,
        rounded and zipped back into rows by C loops (a 512-GPU keyframe encodes ~17,000)."""
        if not objs:
            return []
        if set(map(type, objs)) != {self.cls}:  # None among them, or another class
            return [None if o is None else self.encode(o) for o in objs]
        if self.astuple_rows:
            rows: list[Any] = list(map(astuple, objs))
            if self._plain_enc:
                return rows
            columns: list[Any] = list(zip(*rows, strict=True))
        else:
            columns = [list(map(get, objs)) for get, _, _ in self.columns]
        for f, (_, kind, enc) in enumerate(self.columns):
            if kind == FLOAT:
                columns[f] = round_all(list(columns[f]))
            elif kind == OTHER:
                columns[f] = encode_column(enc, list(columns[f]))
        return list(zip(*columns, strict=True))

    def decode(self, values: Sequence[Any], names: tuple[str, ...] | None = None) -> Any:
        """The instance ``values`` encode; ``names``: the file's field order, when it differs."""
        if names is None or names == self.fields:
            build = self._build if len(values) == len(self.fields) else self.cls
            if not self._dec_others:
                return build(*values)
            args = list(values)
            for i, dec in self._dec_others:
                if i < len(args) and (v := args[i]) is not None:
                    args[i] = dec(v)
            return build(*args)
        layout = self._layouts.get(names)
        if layout is None:
            where = {n: i for i, n in enumerate(names)}
            layout = [
                (name, where[name], dec)
                for name, dec in zip(self.fields, self._decoders, strict=True)
                if name in where
            ]
            self._layouts[names] = layout
        kwargs = {
            name: (None if values[i] is None else dec(values[i]))
            for name, i, dec in layout
            if i < len(values)
        }
        return self.cls(**kwargs)


# distinct nested values a field's memo keeps before it starts again
_MEMO_LIMIT = 4096


def _memoised(decode: Decoder) -> Decoder:
    """``decode`` remembering its results by the encoded value, marshalled (in C, a fifth of
    ``repr``'s time): a nested frozen value is shared safely, and a fleet repeats a few."""
    memo: dict[bytes, Any] = {}

    def cached(value: Any) -> Any:
        key = marshal.dumps(value)
        found = memo.get(key, _MISSING)
        if found is _MISSING:
            if len(memo) >= _MEMO_LIMIT:
                memo.clear()
            found = memo[key] = decode(value)
        return found

    return cached


class _ByIdentity:
    """``encode`` remembering its result per object (kept alive with it, so that its id is
    no other object's while remembered)."""

    def __init__(self, encode: Encoder) -> None:
        self.encode = encode
        # id -> the object (held: its id is not reused) and id -> its encoding
        self._held: dict[int, Any] = {}
        self._out: dict[int, Any] = {}

    def __call__(self, value: Any) -> Any:
        key = id(value)
        if key in self._out:
            return self._out[key]
        return self._miss(key, value)

    def _miss(self, key: int, value: Any) -> Any:
        if len(self._out) >= _ENCODED_LIMIT:
            self._held.clear()
            self._out.clear()
        out = None if value is None else self.encode(value)
        self._held[key] = value
        self._out[key] = out
        return out

    def column(self, values: list[Any]) -> list[Any]:
        """Each of ``values`` encoded (None stays None): those remembered found by C loops,
        Python calls only for the others (a keyframe's ~11,000 nested values at 512 GPUs,
        mostly the same objects as the last keyframe's)."""
        keys = list(map(id, values))
        out = list(map(self._out.get, keys, itertools.repeat(_MISSING, len(keys))))
        if _MISSING in out:
            miss = self._miss
            out = [
                miss(k, v) if o is _MISSING else o
                for k, v, o in zip(keys, values, out, strict=True)
            ]
        return out


def encode_column(enc: Encoder, values: list[Any]) -> list[Any]:
    """``enc`` of each of ``values`` (None stays None)."""
    if isinstance(enc, _ByIdentity):
        return enc.column(values)
    return [None if v is None else enc(v) for v in values]


def _by_value(encode: Encoder) -> Encoder:
    """``encode`` remembering its result per (hashable) value."""
    memo: dict[Any, Any] = {}

    def cached(value: Any) -> Any:
        found = memo.get(value, _MISSING)
        if found is _MISSING:
            if len(memo) >= _MEMO_LIMIT:
                memo.clear()
            found = memo[value] = encode(value)
        return found

    return cached


# objects whose encoding a nested field's memo keeps (it holds them alive: a few MB at most;
# what it saves is the same table on every GPU of a model, and each slot's processes from one
# keyframe to the next while they did not change: ~3,400 at 512 GPUs)
_ENCODED_LIMIT = 16384


def _is_model_value(hint: Any) -> bool:
    """A frozen record or dataclass, or a tuple of them (immutable: one decoded value can be
    shared)."""
    hint = _optional_inner(hint) or hint
    if typing.get_origin(hint) is tuple:
        return all(a is Ellipsis or _is_model_value(a) for a in typing.get_args(hint))
    if not isinstance(hint, type):
        return False
    config = getattr(hint, "__struct_config__", None)  # a model record (msgspec Struct)
    params = config if config is not None else getattr(hint, "__dataclass_params__", None)
    return params is not None and bool(params.frozen)


def _is_struct(cls: Any) -> bool:
    return isinstance(cls, type) and hasattr(cls, "__struct_fields__")


def _is_record(hint: Any) -> bool:
    """A class encoded field by field: a model record (msgspec Struct) or a dataclass."""
    return isinstance(hint, type) and (_is_struct(hint) or dataclasses.is_dataclass(hint))


def _init_fields(cls: type) -> tuple[str, ...]:
    """The names of the fields ``cls`` is built from, in declaration order."""
    if _is_struct(cls):
        return tuple(cls.__struct_fields__)  # type: ignore[attr-defined]
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)  # type: ignore[arg-type]


def _builder(cls: type, fields: tuple[str, ...]) -> Callable[..., Any]:
    """A constructor for ``cls`` from all its fields' values, in order, that skips the
    dataclass ``__init__``: a frozen class's ``__init__`` sets each field through
    ``object.__setattr__``, a slotted class's slots can be set directly (a third less per
    object; a seek builds ~17,000). ``cls`` itself for a class that validates or derives
    anything on construction (``__post_init__``, a field not in ``__init__``)."""
    if _is_struct(cls):  # a msgspec Struct's own constructor is already this, in C
        return cls
    slots = cls.__dict__.get("__slots__")
    own = [f.name for f in dataclasses.fields(cls)]
    if (
        not slots
        or hasattr(cls, "__post_init__")
        or tuple(own) != fields
        or any(not isinstance(cls.__dict__.get(n), types.MemberDescriptorType) for n in fields)
    ):
        return cls
    args = ", ".join(f"v{i}" for i in range(len(fields)))
    body = "".join(f"    s{i}(o, v{i})\n" for i in range(len(fields)))
    source = f"def build({args}):\n    o = new(cls)\n{body}    return o\n"
    scope: dict[str, Any] = {"new": object.__new__, "cls": cls}
    scope.update({f"s{i}": cls.__dict__[n].__set__ for i, n in enumerate(fields)})
    exec(source, scope)
    return scope["build"]  # type: ignore[no-any-return]


_MISSING = object()


class CodecRegistry:
    """Class codecs by dataclass, built on first use; every class it met, for the schema."""

    def __init__(self) -> None:
        self.classes: dict[type, ClassCodec] = {}
        # file schema: class name -> field names (the schema of the classes met so far)
        self.by_name: dict[str, ClassCodec] = {}

    def codec(self, cls: type) -> ClassCodec:
        found = self.classes.get(cls)
        if found is None:
            found = ClassCodec(cls, self)
            self.classes[cls] = found
            self.by_name[found.name] = found
        return found

    def schema(self) -> dict[str, list[str]]:
        return {c.name: list(c.fields) for c in self.classes.values()}

    # -- by type hint ------------------------------------------------------------------------

    def encoder(self, hint: Any) -> Encoder:
        inner = _optional_inner(hint)
        if inner is not None:
            return self.encoder(inner)
        if hint is float:
            return _enc_float
        if hint in (int, str, bool, type(None), Any):
            return _identity
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            # a str or int enum is its value to json already (and cheaper left as it is)
            return _identity if issubclass(hint, str | int) else _enc_enum
        if _is_record(hint):
            codec = self.codec(hint)
            return codec.encode
        origin = typing.get_origin(hint)
        args = typing.get_args(hint)
        if origin in (tuple, frozenset, set, list):
            if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
                encs = [self.encoder(a) for a in args]
                return lambda v: [None if x is None else e(x) for e, x in zip(encs, v, strict=True)]
            enc = self.encoder(args[0]) if args else _identity
            if origin in (frozenset, set):
                if enc is _identity:  # a set of names (origins): the same few sets, by value
                    return _by_value(lambda v: sorted(v))
                return lambda v: sorted(None if x is None else enc(x) for x in v)
            if enc is _identity:
                return list
            return lambda v: [None if x is None else enc(x) for x in v]
        if origin in (dict, Mapping) or (origin is not None and _is_mapping(origin)):
            enc = self.encoder(args[1]) if len(args) == 2 else _identity
            if enc is _identity:
                return dict
            return lambda v: {str(k): None if x is None else enc(x) for k, x in v.items()}
        raise TypeError(f"no recording codec for {hint!r}")

    def decoder(self, hint: Any) -> Decoder:
        inner = _optional_inner(hint)
        if inner is not None:
            return self.decoder(inner)
        if hint in (float, int, str, bool, type(None), Any):
            return _identity  # a float field holding an int held an int when written
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return _EnumMembers(hint).__getitem__
        if _is_record(hint):
            codec = self.codec(hint)
            return codec.decode
        origin = typing.get_origin(hint)
        args = typing.get_args(hint)
        if origin in (tuple, frozenset, set, list):
            if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
                decs = [self.decoder(a) for a in args]
                return lambda v: tuple(
                    None if x is None else d(x) for d, x in zip(decs, v, strict=True)
                )
            dec = self.decoder(args[0]) if args else _identity
            build: Callable[[Any], Any] = {tuple: tuple, frozenset: frozenset, set: set}.get(
                origin, list
            )
            if dec is _identity:
                return build
            return lambda v: build(None if x is None else dec(x) for x in v)
        if origin in (dict, Mapping) or (origin is not None and _is_mapping(origin)):
            dec = self.decoder(args[1]) if len(args) == 2 else _identity
            if dec is _identity:
                return dict
            return lambda v: {k: None if x is None else dec(x) for k, x in v.items()}
        raise TypeError(f"no recording codec for {hint!r}")


class _EnumMembers(dict[Any, Any]):
    """An enum's members by value: a lookup in C (calling the enum class takes ten times as
    long); a value not found is given to the enum, which raises as it always did."""

    def __init__(self, cls: type[enum.Enum]) -> None:
        super().__init__((m.value, m) for m in cls)
        self.cls = cls

    def __missing__(self, value: Any) -> Any:
        return self.cls(value)


def _enc_enum(value: Any) -> Any:
    return value.value


def _is_mapping(origin: Any) -> bool:
    return isinstance(origin, type) and issubclass(origin, Mapping)


def _optional_inner(hint: Any) -> Any:
    """``X`` for ``X | None`` (None otherwise)."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0]
    return None
