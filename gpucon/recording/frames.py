"""Snapshots as recording frames: keyframes (the whole state) and deltas (what changed).

A snapshot's state is a set of keyed sections (``gpus``, ``slots``, ``backends``, ...,
``origins``, and ``samples``: the history samples the hub took that tick) plus a few single
values (``seq``, ``alerts``, ``staleness``, ``rate_window``). A section holds, per key, the
encoded value (codec: a dataclass as the list of its fields).

A keyframe lists each section's keys once (or names an earlier section keyed alike) and their
rows in the same order; from then until the next keyframe an entity is named by its index in
that list (new keys are appended), so a delta does not repeat a 512-GPU fleet's names each
second. Since format 5 (a keyframe's ``f`` is 5) a row is a record's field values as msgspec
writes them (``rows``) and a delta gives the changed entities whole (``r``: ``{section:
[[index, ...], [row, ...]]}``), new rows (``n``), removed indexes (``d``) and the single values
(``s``, ``p``) as below. Before, a delta gave, per section, the changed fields of changed
entities a field at a time (``c``: ``[[field, [index, ...], [value, ...]], ...]``; since
format 4 a float field's values are integers, the value times 10^5, with a fourth item, 5,
saying so; format 1 wrote them an
entity at a time, ``u``: ``[index, field, value, field, value, ...]``, still read), a changed
row whole (``u``: ``[index, -1, row]``), changed plain values (``v``: ``[index, value, index,
value, ...]``: history samples, SLOs), new rows (``n``: ``[key, row]``), removed indexes
(``d``), the single values that changed (``s``), and the changed items of a single list of
unchanged length (``p``: the alerts, when only a figure in a message moved). Applying a field's
column or the plain values runs in C (``map`` of a setter over the indexes).

Format 6 (``f`` 6) writes a field holding a shared nested table of records (a GPU's MIG profile
table) as its number in the keyframe group's table, ``t`` (``rows.RefTable``).

``writer.FrameWriter`` turns snapshots into frames of format 6 (the recorder's thread);
``FrameState`` applies frames of any format and gives the snapshot back (replay, ``snapshot
--from``, restoring history). Pure.
"""

from __future__ import annotations

import functools
import operator
import typing
from array import array
from collections import deque
from collections.abc import Iterator, Mapping
from itertools import repeat
from typing import Any

from gpucon.model.history import History, Sample
from gpucon.model.history_blocks import NAN, split_key
from gpucon.model.history_rings import Block
from gpucon.model.history_samples import history_samples
from gpucon.model.snapshot import Snapshot
from gpucon.recording.codec import CodecRegistry, unscale_all
from gpucon.recording.columns import COLUMNS, ColumnReader, snapshot_fleet
from gpucon.recording.rows import Refs, row_decoder

KEYFRAME = 0
DELTA = 1
# a keyframe's ``f``: its rows, and its deltas' ``r``, are whole records (format 5, rows.py)
WHOLE_ROWS = 5
# ... whose fields holding one shared nested record are numbers in the group's table, ``t``
# (format 6, rows.py)
REF_ROWS = 6

# Snapshot fields that are not recorded: the history is rebuilt from the samples section
_NOT_RECORDED = frozenset({"taken_at", "history"})
SAMPLES = "samples"


def _layout(registry: CodecRegistry) -> tuple[dict[str, Any], dict[str, Any]]:
    """Snapshot field -> value codec, split into keyed sections and single values."""
    hints = typing.get_type_hints(Snapshot)
    sections: dict[str, Any] = {}
    singles: dict[str, Any] = {}
    for name in Snapshot.__struct_fields__:
        if name in _NOT_RECORDED:
            continue
        hint = hints[name]
        origin = typing.get_origin(hint)
        if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
            value_hint = typing.get_args(hint)[1]
            sections[name] = (registry.encoder(value_hint), registry.decoder(value_hint))
        else:
            singles[name] = (registry.encoder(hint), registry.decoder(hint))
    sections[SAMPLES] = (registry.encoder(float), _sample)
    return sections, singles


@functools.cache
def _section_hints() -> dict[str, Any]:
    """Each keyed section's value type (what a format 5 row decodes to)."""
    hints = typing.get_type_hints(Snapshot)
    return {
        name: typing.get_args(hints[name])[1]
        for name in _layout(CodecRegistry())[0]
        if name != SAMPLES
    }


def _each(decode: Any, rows: list[Any]) -> list[Any]:
    """``rows`` decoded one at a time (a decoder with no ``decode_many``)."""
    return list(map(decode, rows))


def _consume(items: Iterator[Any]) -> None:
    """Run an iterator to its end in C (``map`` of a setter)."""
    deque(items, maxlen=0)


# a sample's value as a history block holds it: None (a gap) is NaN, any other itself
_GAP: dict[float | None, float] = {None: NAN}


def _families(keys: list[str]) -> tuple[list[Any], list[tuple[str, int]]]:
    """The samples' keys as families of series ((kind, series, ids, row indexes), as
    ``model.history_samples.history_blocks`` makes them) and the keys of no family."""
    grouped: dict[tuple[str, str], tuple[list[str], list[int]]] = {}
    singles: list[tuple[str, int]] = []
    for i, key in enumerate(keys):
        parts = split_key(key)
        if parts is None:
            singles.append((key, i))
            continue
        ids, where = grouped.setdefault((parts[0], parts[2]), ([], []))
        ids.append(parts[1])
        where.append(i)
    families = [
        (kind, series, tuple(ids), where) for (kind, series), (ids, where) in grouped.items()
    ]
    return families, singles


@functools.cache
def _read_layout() -> tuple[CodecRegistry, dict[str, Any], dict[str, Any]]:
    """The decoders every reader shares: built once (reading the model's type hints takes
    ~15 ms, and a seek starts a new state)."""
    registry = CodecRegistry()
    sections, singles = _layout(registry)
    return registry, sections, singles


def _sample(value: Any) -> Any:
    return value


def snapshot_samples(snapshot: Snapshot) -> dict[str, Sample]:
    """The samples the hub appended to its history for this snapshot (model.history_samples
    over the snapshot's fleet; stale values are gaps)."""
    return history_samples(snapshot_fleet(snapshot), snapshot.staleness)


class _Section:
    """One section's rows since the last keyframe, by index."""

    __slots__ = ("index", "keys", "rows")

    def __init__(self, keys: list[str], rows: list[Any]) -> None:
        self.keys = keys
        self.rows: list[Any] = rows  # None: removed since the keyframe
        self.index = dict(zip(keys, range(len(keys)), strict=True))


def split_samples(frame: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the fleet's part, the samples' part) of a frame, stored apart."""
    fleet: dict[str, Any] = {}
    samples: dict[str, Any] = {}
    for key, value in frame.items():
        if isinstance(value, dict) and SAMPLES in value:
            rest = {k: v for k, v in value.items() if k != SAMPLES}
            samples[key] = {SAMPLES: value[SAMPLES]}
            if rest:
                fleet[key] = rest
        else:
            fleet[key] = value
    return fleet, samples


class FrameState:
    """The recorded state as of the last frame applied; gives snapshots and history samples."""

    def __init__(self) -> None:
        self.registry, self._sections, self._singles = _read_layout()
        self._state: dict[str, _Section] = {}
        self._single_values: dict[str, Any] = {}
        self._schema: dict[str, tuple[str, ...]] = {}
        self.t: float | None = None
        # the sections as the last ``snapshot()`` decoded them, and the rows changed since:
        # the next snapshot decodes only those (playing or re-running alerts frame by frame)
        self._decoded: dict[str, dict[str, Any]] = {}
        self._dirty: dict[str, set[int]] = {}
        # the samples' keys split into families, for the section (and key count) they were
        # split for: (section, keys, families, single series)
        self._families: tuple[_Section, list[str], list[Any], list[Any]] | None = None
        # format 3's samples (columns of numbers), once a keyframe gave them
        self._cols: ColumnReader | None = None
        # format 5: the keyframe's rows are whole records (rows.py), decoded by these
        self._whole = False
        self._whole_decoders: dict[str, Any] = {}
        # format 6: the keyframe group's referenced values (its rows' decoders read them)
        self._refs: Refs | None = None

    @property
    def ready(self) -> bool:
        """True once a keyframe was applied."""
        return self.t is not None

    def apply(self, t: float, kind: int, frame: Mapping[str, Any]) -> None:
        cols = frame.get(COLUMNS)
        if kind == KEYFRAME:
            self._cols = None
            if cols is not None:
                self._cols = ColumnReader()
                self._cols.apply(True, cols)
            sections = frame.get("k", {})
            self._state = {
                # keys given as another section's name: that section's keys
                name: _Section(list(sections[keys][0] if isinstance(keys, str) else keys), rows)
                for name, (keys, rows) in sections.items()
            }
            self._single_values = dict(frame.get("s", {}))
            schema = {k: tuple(v) for k, v in frame.get("schema", {}).items()}
            f = frame.get("f")
            whole = f in (WHOLE_ROWS, REF_ROWS)
            by_ref = f == REF_ROWS
            if whole != self._whole or schema != self._schema or by_ref != (self._refs is not None):
                self._whole_decoders = {}
                self._refs = Refs() if by_ref else None
            if self._refs is not None:  # the group's own table (decoded rows keep theirs)
                self._refs.clear()
                self._refs.add(frame.get("t", ()))
            self._schema = schema
            self._whole = whole
            self.t = t
            self._decoded = {}
            self._dirty = {}
            return
        if self.t is None:
            return  # a delta before any keyframe (the file was cut): nothing to apply it to
        if cols is not None and self._cols is not None:
            self._cols.apply(False, cols)
        if self._refs is not None and "t" in frame:
            self._refs.add(frame["t"])
        # rows changed since the last snapshot() (none decoded yet, as in a seek: no need)
        dirty: dict[str, set[int]] = self._dirty if self._decoded else {}
        for name, entries in frame.get("n", {}).items():
            section = self._section(name)
            marks = dirty.setdefault(name, set())
            for key, row in entries:
                i = section.index.get(key)
                if i is None:
                    i = section.index[key] = len(section.keys)
                    section.keys.append(key)
                    section.rows.append(row)
                else:
                    section.rows[i] = row
                marks.add(i)
        for name, (where, rows_now) in frame.get("r", {}).items():
            # whole rows (format 5): each set at its index, in C
            _consume(map(self._section(name).rows.__setitem__, where, rows_now))
            dirty.setdefault(name, set()).update(where)
        for name, columns in frame.get("c", {}).items():
            rows = self._section(name).rows
            marks = dirty.setdefault(name, set())
            for column in columns:
                f, where, values = column[0], column[1], column[2]
                if len(column) > 3:  # a float field's values as integers (format 4)
                    values = unscale_all(values, column[3])
                marks.update(where)
                try:  # every row's field set in C (rows parsed from JSON are lists)
                    _consume(map(operator.setitem, map(rows.__getitem__, where), repeat(f), values))
                except TypeError:  # a row given as a tuple (not read from a file)
                    for i, v in zip(where, values, strict=True):
                        row = rows[i]
                        if row.__class__ is not list:
                            row = rows[i] = list(row)
                        row[f] = v
        for name, entries in frame.get("u", {}).items():
            rows = self._section(name).rows
            marks = dirty.setdefault(name, set())
            for entry in entries:
                i = entry[0]
                marks.add(i)
                if len(entry) == 3 and entry[1] == -1:
                    rows[i] = entry[2]
                    continue
                row = list(rows[i])
                for j in range(1, len(entry), 2):
                    row[entry[j]] = entry[j + 1]
                rows[i] = row
        for name, flat in frame.get("v", {}).items():
            _consume(map(self._section(name).rows.__setitem__, flat[::2], flat[1::2]))
            if name != SAMPLES:
                dirty.setdefault(name, set()).update(flat[::2])
        for name, gone in frame.get("d", {}).items():
            rows = self._section(name).rows
            dirty.setdefault(name, set()).update(gone)
            for i in gone:
                rows[i] = None
        self._single_values.update(frame.get("s", {}))
        for name, items in frame.get("p", {}).items():
            value = list(self._single_values[name])
            for j, item in items:
                value[j] = item
            self._single_values[name] = value
        self.t = t

    def _section(self, name: str) -> _Section:
        section = self._state.get(name)
        if section is None:
            section = self._state[name] = _Section([], [])
        return section

    def samples(self) -> dict[str, Sample]:
        if self._cols is not None:
            return self._cols.samples()
        section = self._state.get(SAMPLES)
        if section is None:
            return {}
        return {k: v for k, v in zip(section.keys, section.rows, strict=True) if v is not None}

    def append_samples(self, history: History) -> History:
        """``history`` with this frame's samples appended, each family of series (every
        slot's activity, ...) as one block: its values gathered and made an array in C, as
        the hub appends them live (a dictionary of ~22,000 samples a tick made a seek's
        120 ticks of plots take a second)."""
        assert self.t is not None, "no keyframe applied"
        if self._cols is not None:
            return self._cols.append_to(history, self.t)
        section = self._state.get(SAMPLES)
        if section is None:
            return history.append(self.t, {})
        if (
            self._families is None
            or self._families[0] is not section
            or len(section.keys) != len(self._families[1])
        ):
            self._families = (section, list(section.keys), *_families(section.keys))
        _, _, families, singles = self._families
        rows = section.rows
        blocks: list[Block] = []
        for kind, series, ids, where in families:
            # a gap (None) is NaN, as the hub writes one: ``dict.get(v, v)``, in C
            got = list(map(rows.__getitem__, where))
            values: Iterator[float] = map(_GAP.get, got, got)  # type: ignore[arg-type]
            blocks.append((kind, series, ids, array("d", values)))
        single = {k: v for k, i in singles if (v := rows[i]) is not None}
        return history.append_blocks(self.t, blocks, single)

    def family(self, kind: str, series: str) -> tuple[tuple[str, ...], array[float]] | None:
        """One family's column of the frame applied last (its ids, its values as the history
        holds them): format 3 and later; None before, or when the frame has no such family."""
        found = None if self._cols is None else self._cols.columns.get((kind, series))
        if found is None:
            return None
        ids, data, code = found
        values: array[float] = array(code)
        values.frombytes(data)
        return ids, values

    def snapshot(self, history: History | None = None) -> Snapshot:
        """The snapshot recorded at ``t`` (its history: ``history``, or an empty one)."""
        assert self.t is not None, "no keyframe applied"
        kwargs: dict[str, Any] = {}
        for name, (_, dec) in self._sections.items():
            if name == SAMPLES:
                continue
            section = self._state.get(name)
            if section is None:
                continue
            decode = self._row_decoder(name, dec)
            many = getattr(decode, "decode_many", None) or functools.partial(_each, decode)
            before = self._decoded.get(name)
            if before is None:
                keys, rows = section.keys, section.rows
                if rows.count(None):  # some removed since the keyframe
                    kept = [(k, row) for k, row in zip(keys, rows, strict=True) if row is not None]
                    keys, rows = [k for k, _ in kept], [row for _, row in kept]
                decoded = dict(zip(keys, many(rows), strict=True))
            elif not (dirty := self._dirty.get(name)):
                decoded = before  # no row changed: the same mapping (nobody changes one)
            else:  # the last snapshot's, with the rows changed since decoded again
                decoded = dict(before)
                keys, rows = section.keys, section.rows
                where = list(dirty)
                got = list(map(rows.__getitem__, where))
                if got.count(None):
                    for i, row in zip(where, got, strict=True):
                        if row is None:
                            decoded.pop(keys[i], None)
                        else:
                            decoded[keys[i]] = decode(row)
                else:  # none removed: decoded and set in C
                    decoded.update(zip(map(keys.__getitem__, where), many(got), strict=True))
            self._decoded[name] = kwargs[name] = decoded
        self._dirty = {}
        for name, (_, dec) in self._singles.items():
            if name in self._single_values:
                value = self._single_values[name]
                kwargs[name] = None if value is None else dec(value)
        if history is not None:
            kwargs["history"] = history
        return Snapshot(taken_at=self.t, **kwargs)

    def _row_decoder(self, name: str, dec: Any) -> Any:
        """The section's row decoder, told the file's field order when it differs."""
        if self._whole:
            found = self._whole_decoders.get(name)
            if found is None:
                hint = _section_hints()[name]
                cls_name = f"{getattr(hint, '__module__', '')}.{getattr(hint, '__qualname__', '')}"
                names = self._schema.get(cls_name)
                found = self._whole_decoders[name] = row_decoder(hint, names, self._refs)
            return found
        codec = getattr(dec, "__self__", None)
        if codec is None or not self._schema:
            return dec
        names = self._schema.get(codec.name)
        if names is None or names == codec.fields:
            return dec
        return lambda row: codec.decode(row, names)
