"""Snapshots as recording frames: keyframes (the whole state) and deltas (what changed).

A snapshot's state is a set of keyed sections (``gpus``, ``slots``, ``backends``, ...,
``origins``, and ``samples``: the history samples the hub took that tick) plus a few single
values (``seq``, ``alerts``, ``staleness``, ``rate_window``). A section holds, per key, the
encoded value (codec: a dataclass as the list of its fields).

A keyframe lists each section's keys once (or names an earlier section keyed alike) and their
rows in the same order; from then until
the next keyframe an entity is named by its index in that list (new keys are appended), so a
delta does not repeat a 512-GPU fleet's names each second. A delta gives, per section, the
changed fields of changed rows (``u``: ``[index, field, value, field, value, ...]``), changed
plain values (``v``: ``[index, value, index, value, ...]``: history samples, SLOs), new rows
(``n``: ``[key, row]``), removed indexes (``d``), the single values that changed (``s``), and
the changed items of a single list of unchanged length (``p``: the alerts, when only a figure
in a message moved).

``FrameWriter`` turns snapshots into frames (the recorder's thread); ``FrameState`` applies
frames and gives the snapshot back (replay, ``snapshot --from``, restoring history). Pure.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any

from gpucon.model.history import History, Sample
from gpucon.model.history_samples import history_samples
from gpucon.model.merge import MergedFleet
from gpucon.model.snapshot import Snapshot
from gpucon.recording.codec import CodecRegistry

KEYFRAME = 0
DELTA = 1

# Snapshot fields that are not recorded: the history is rebuilt from the samples section
_NOT_RECORDED = frozenset({"taken_at", "history"})
SAMPLES = "samples"


def _layout(registry: CodecRegistry) -> tuple[dict[str, Any], dict[str, Any]]:
    """Snapshot field -> value codec, split into keyed sections and single values."""
    hints = typing.get_type_hints(Snapshot)
    sections: dict[str, Any] = {}
    singles: dict[str, Any] = {}
    for f in dataclasses.fields(Snapshot):
        if f.name in _NOT_RECORDED:
            continue
        hint = hints[f.name]
        origin = typing.get_origin(hint)
        if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
            value_hint = typing.get_args(hint)[1]
            sections[f.name] = (registry.encoder(value_hint), registry.decoder(value_hint))
        else:
            singles[f.name] = (registry.encoder(hint), registry.decoder(hint))
    sections[SAMPLES] = (registry.encoder(float), _sample)
    return sections, singles


def _sample(value: Any) -> Any:
    return value


def snapshot_samples(snapshot: Snapshot) -> dict[str, Sample]:
    """The samples the hub appended to its history for this snapshot (model.history_samples
    over the snapshot's fleet; stale values are gaps)."""
    fleet = MergedFleet(
        dict(snapshot.gpus),
        dict(snapshot.slots),
        dict(snapshot.backends),
        dict(snapshot.queues),
        dict(snapshot.latency),
        dict(snapshot.nodes),
        dict(snapshot.origins),
    )
    return history_samples(fleet, snapshot.staleness)


class _Section:
    """One section's rows since the last keyframe, by index."""

    __slots__ = ("index", "keys", "rows")

    def __init__(self, keys: list[str], rows: list[Any]) -> None:
        self.keys = keys
        self.rows: list[Any] = rows  # None: removed since the keyframe
        self.index = {k: i for i, k in enumerate(keys)}


class FrameWriter:
    """Turns each snapshot into a keyframe or a delta against the previous one."""

    def __init__(self) -> None:
        self.registry = CodecRegistry()
        self._sections, self._singles = _layout(self.registry)
        self._state: dict[str, _Section] = {}
        self._single_values: dict[str, Any] = {}
        # the objects encoded last time, by section and key: an entity the hub passed on
        # unchanged (the same object) is not encoded again
        self._objects: dict[str, Mapping[str, Any]] = {}
        # the samples as of the last frame (the writer's own dict: updated in place)
        self._samples: dict[str, Any] = {}
        # the snapshot framed last: what changed since is sampled again
        self._previous: Snapshot | None = None
        # section -> its entities that are new objects since the last frame (when known)
        self._changed: dict[str, dict[str, Any]] = {}
        # the sections whose values are dataclasses (compared as encoded rows)
        self._entity_sections = frozenset(
            name
            for name, (enc, _) in self._sections.items()
            if getattr(enc, "__self__", None) is not None
        )

    def schema(self) -> dict[str, list[str]]:
        return self.registry.schema()

    def _encode(self, name: str, key: str, value: Any) -> Any:
        if value is None:
            return None
        enc = self._sections[name][0]
        return enc(value)

    def _rows(self, snapshot: Snapshot) -> dict[str, Mapping[str, Any]]:
        rows: dict[str, Mapping[str, Any]] = {
            name: getattr(snapshot, name) for name in self._sections if name != SAMPLES
        }
        rows[SAMPLES] = snapshot_samples(snapshot)
        self._previous = snapshot
        return rows

    def _entity_rows(self, snapshot: Snapshot) -> dict[str, Mapping[str, Any]]:
        self._previous = snapshot
        return {name: getattr(snapshot, name) for name in self._sections if name != SAMPLES}

    def _sample_changes(self, snapshot: Snapshot) -> tuple[dict[str, Sample], list[str]] | None:
        """The history samples of the entities that changed since the last frame, and the
        sample keys gone with them; None when every sample must be taken again (an entity
        came or went, a backend moved, staleness changed). At 512 GPUs a tick changes a few
        hundred of ~3,400 slots: sampling only those saves most of the recorder's work."""
        prev = self._previous
        if prev is None:
            return None
        if not (snapshot.staleness is prev.staleness or not (snapshot.staleness or prev.staleness)):
            return None
        changed: dict[str, dict[str, Any]] = {}
        for name in ("gpus", "slots", "queues", "latency", "backends"):
            now, before = getattr(snapshot, name), getattr(prev, name)
            if now.keys() != before.keys():
                return None
            changed[name] = {k: v for k, v in now.items() if v is not before[k]}
        # the delta reads these sections' changes from here rather than finding them again
        self._changed = changed
        for name, b in changed["backends"].items():
            if b.slot_id != prev.backends[name].slot_id:
                return None  # the slots' co-tenant samples count their backends
        fleet = MergedFleet(
            changed["gpus"],
            changed["slots"],
            dict(snapshot.backends),
            changed["queues"],
            changed["latency"],
            {},
            {},
        )
        samples = history_samples(fleet, snapshot.staleness)
        # a co-tenant sample is taken only while there are co-tenants: gone when not taken
        before_samples = self._samples
        gone = [
            key
            for sid in changed["slots"]
            if (key := f"slot:{sid}:cotenant_mem") in before_samples and key not in samples
        ]
        return samples, gone

    def keyframe(self, snapshot: Snapshot) -> dict[str, Any]:
        """The whole state. After the first, the rows are already encoded: the delta brings
        them up to date and they are written as they are (a 512-GPU keyframe then costs the
        JSON and the compression, not encoding ~17,000 entities again)."""
        if self._state:
            self.delta(snapshot)
        else:
            self._state = {}
            self._objects = {}
            for name, mapping in self._rows(snapshot).items():
                keys = list(mapping)
                self._state[name] = _Section(
                    keys, [self._encode(name, k, mapping[k]) for k in keys]
                )
                self._objects[name] = mapping
            self._samples = dict(self._objects[SAMPLES])
            self._objects[SAMPLES] = self._samples
            self._single_values = {n: self._single(n, snapshot) for n in self._singles}
        sections: dict[str, Any] = {}
        seen: dict[tuple[str, ...], str] = {}
        for name, section in self._state.items():
            if any(r is None for r in section.rows):  # rows removed since: dropped now
                pairs = [
                    (k, r) for k, r in zip(section.keys, section.rows, strict=True) if r is not None
                ]
                section = _Section([k for k, _ in pairs], [r for _, r in pairs])
                self._state[name] = section
            # backends, latency, liveness and SLOs are usually keyed alike: the names once
            same = seen.setdefault(tuple(section.keys), name) if section.keys else name
            sections[name] = [section.keys if same == name else same, section.rows]
        return {"k": sections, "s": dict(self._single_values), "schema": self.schema()}

    def _single(self, name: str, snapshot: Snapshot) -> Any:
        value = getattr(snapshot, name)
        return None if value is None else self._singles[name][0](value)

    def delta(self, snapshot: Snapshot) -> dict[str, Any]:
        """What changed since the last frame (call ``keyframe`` first)."""
        frame: dict[str, Any] = {}
        updates: dict[str, list[Any]] = {}
        scalars: dict[str, list[Any]] = {}
        added: dict[str, list[Any]] = {}
        removed: dict[str, list[int]] = {}
        self._changed = {}
        partial = self._sample_changes(snapshot)
        rows = self._rows(snapshot) if partial is None else self._entity_rows(snapshot)
        if partial is not None:
            rows[SAMPLES] = partial[0]
        for name, mapping in rows.items():
            section = self._state[name]
            before = self._objects[name]
            changed: list[Any] = []
            values: list[Any] = []
            new: list[Any] = []
            enc = self._sections[name][0]
            index = section.index
            if name != SAMPLES and (before is mapping or before == mapping):
                continue  # nothing in it changed (one comparison in C)
            get = before.get
            # unchanged values are not encoded: found in one comprehension, as most of a large
            # fleet's entities are the hub's same objects from tick to tick. An entity that is
            # a new object is encoded and compared as a row (cheaper than comparing objects)
            known = self._changed.get(name)
            if known is not None:
                moved = list(known.items())
            elif name in self._entity_sections:
                moved = [(k, v) for k, v in mapping.items() if get(k, _MISSING) is not v]
            else:
                moved = [
                    (k, v)
                    for k, v in mapping.items()
                    if (old_obj := get(k, _MISSING)) is not v and old_obj != v
                ]
            # a changed entity of the same class as before: only its changed fields encoded
            codec = getattr(enc, "__self__", None) if name in self._entity_sections else None
            rows_now = section.rows
            for key, obj in moved:
                i = index.get(key)
                if (
                    codec is not None
                    and i is not None
                    and obj is not None
                    and (old := rows_now[i]) is not None
                    and (old_obj := get(key)) is not None
                    and old_obj.__class__ is obj.__class__ is codec.cls
                ):
                    found = codec.changes(obj, old_obj, old)
                    if found is None:
                        continue
                    if found is not NotImplemented:
                        rows_now[i], fields = found
                        changed.append([i, *fields])
                        continue
                row = None if obj is None else enc(obj)
                if i is None or section.rows[i] is None:
                    if i is None:
                        section.index[key] = len(section.keys)
                        section.keys.append(key)
                        section.rows.append(row)
                    else:
                        section.rows[i] = row
                    new.append([key, row])
                    continue
                old = section.rows[i]
                if row == old:
                    continue
                section.rows[i] = row
                if (
                    isinstance(row, tuple)
                    and isinstance(old, tuple | list)
                    and len(row) == len(old)
                ):
                    entry: list[Any] = [i]
                    for pair in [
                        (f, a) for f, a, b in zip(_FIELDS, row, old, strict=False) if a != b
                    ]:
                        entry += pair
                    changed.append(entry)
                elif isinstance(row, tuple | list):
                    changed.append([i, -1, row])
                else:  # a plain value (a history sample, an SLO): index and value
                    values += (i, row)
            if name == SAMPLES and partial is not None:
                gone = [index[k] for k in partial[1]]
                self._samples.update(mapping)
                for k in partial[1]:
                    del self._samples[k]
            else:
                gone = (
                    [
                        index[k]
                        for k in before
                        if k not in mapping and section.rows[index[k]] is not None
                    ]
                    if len(before) > len(mapping) or before.keys() != mapping.keys()
                    else []
                )
                # a snapshot's mappings are never changed: kept, not copied
                self._objects[name] = mapping
                if name == SAMPLES:
                    self._samples = dict(mapping)
                    self._objects[name] = self._samples
            for i in gone:
                section.rows[i] = None
            if changed:
                updates[name] = changed
            if values:
                scalars[name] = values
            if new:
                added[name] = new
            if gone:
                removed[name] = gone
        singles: dict[str, Any] = {}
        parts: dict[str, list[Any]] = {}
        for n in self._singles:
            value = self._single(n, snapshot)
            before_value = self._single_values.get(n, _MISSING)
            if value == before_value:
                continue
            self._single_values[n] = value
            same_length = isinstance(before_value, list) and len(before_value) == len(value)
            if isinstance(value, list) and same_length:
                # a list of the same length (the alerts, when a message's figure moved): only
                # the items that changed
                pairs = enumerate(zip(value, before_value, strict=True))
                parts[n] = [[j, v] for j, (v, b) in pairs if v != b]
                continue
            singles[n] = value
        if updates:
            frame["u"] = updates
        if scalars:
            frame["v"] = scalars
        if parts:
            frame["p"] = parts
        if added:
            frame["n"] = added
        if removed:
            frame["d"] = removed
        if singles:
            frame["s"] = singles
        return frame


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


_MISSING = object()
# field indexes, zipped with a row's values
_FIELDS = range(1 << 16)


class FrameState:
    """The recorded state as of the last frame applied; gives snapshots and history samples."""

    def __init__(self) -> None:
        self.registry = CodecRegistry()
        self._sections, self._singles = _layout(self.registry)
        self._state: dict[str, _Section] = {}
        self._single_values: dict[str, Any] = {}
        self._schema: dict[str, tuple[str, ...]] = {}
        self.t: float | None = None

    @property
    def ready(self) -> bool:
        """True once a keyframe was applied."""
        return self.t is not None

    def apply(self, t: float, kind: int, frame: Mapping[str, Any]) -> None:
        if kind == KEYFRAME:
            sections = frame.get("k", {})
            self._state = {
                # keys given as another section's name: that section's keys
                name: _Section(list(sections[keys][0] if isinstance(keys, str) else keys), rows)
                for name, (keys, rows) in sections.items()
            }
            self._single_values = dict(frame.get("s", {}))
            self._schema = {k: tuple(v) for k, v in frame.get("schema", {}).items()}
            self.t = t
            return
        if self.t is None:
            return  # a delta before any keyframe (the file was cut): nothing to apply it to
        for name, entries in frame.get("n", {}).items():
            section = self._section(name)
            for key, row in entries:
                i = section.index.get(key)
                if i is None:
                    section.index[key] = len(section.keys)
                    section.keys.append(key)
                    section.rows.append(row)
                else:
                    section.rows[i] = row
        for name, entries in frame.get("u", {}).items():
            rows = self._section(name).rows
            for entry in entries:
                i = entry[0]
                if len(entry) == 3 and entry[1] == -1:
                    rows[i] = entry[2]
                    continue
                row = list(rows[i])
                for j in range(1, len(entry), 2):
                    row[entry[j]] = entry[j + 1]
                rows[i] = row
        for name, flat in frame.get("v", {}).items():
            rows = self._section(name).rows
            for j in range(0, len(flat), 2):
                rows[flat[j]] = flat[j + 1]
        for name, gone in frame.get("d", {}).items():
            rows = self._section(name).rows
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
        section = self._state.get(SAMPLES)
        if section is None:
            return {}
        return {k: v for k, v in zip(section.keys, section.rows, strict=True) if v is not None}

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
            kwargs[name] = {
                k: decode(row)
                for k, row in zip(section.keys, section.rows, strict=True)
                if row is not None
            }
        for name, (_, dec) in self._singles.items():
            if name in self._single_values:
                value = self._single_values[name]
                kwargs[name] = None if value is None else dec(value)
        if history is not None:
            kwargs["history"] = history
        return Snapshot(taken_at=self.t, **kwargs)

    def _row_decoder(self, name: str, dec: Any) -> Any:
        """The section's row decoder, told the file's field order when it differs."""
        codec = getattr(dec, "__self__", None)
        if codec is None or not self._schema:
            return dec
        names = self._schema.get(codec.name)
        if names is None or names == codec.fields:
            return dec
        return lambda row: codec.decode(row, names)
