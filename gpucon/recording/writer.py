"""The recorder's half of frames: each snapshot turned into a keyframe or a delta (frames.py
describes both). Pure; the recorder's thread owns one ``FrameWriter``.

What a frame costs follows what changed, and the per-entity work is done by C loops wherever
it can be: the hub passes an unchanged entity on as the same object, so a section's changed
entities are found by comparing the object lists of two ticks with ``map(operator.is_not)``
(17,000 entities of a 512-GPU fleet in well under a millisecond), and a changed entity's
changed fields with ``map(operator.ne)`` over its field values. Only those fields are encoded.
The history samples are taken again only for the entities that changed. A keyframe writes the
writer's own running rows (already encoded), never the snapshot's objects again.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from itertools import compress
from typing import Any

from gpucon.model.history import Sample
from gpucon.model.history_samples import history_samples
from gpucon.model.merge import MergedFleet
from gpucon.model.snapshot import Snapshot
from gpucon.recording.codec import ClassCodec, CodecRegistry, _enc_float
from gpucon.recording.frames import SAMPLES, _layout, _Section, snapshot_samples

_MISSING = object()
# field indexes, zipped with a row's values
_FIELDS = range(1 << 16)
# the sections whose changed entities give the history samples again
_SAMPLED = ("gpus", "slots", "queues", "latency", "backends")


class FrameWriter:
    """Turns each snapshot into a keyframe or a delta against the previous one."""

    def __init__(self) -> None:
        self.registry = CodecRegistry()
        self._sections, self._singles = _layout(self.registry)
        self._state: dict[str, _Section] = {}
        self._single_values: dict[str, Any] = {}
        # the single values' objects last encoded: the same object is not encoded again
        self._single_raw: dict[str, Any] = {}
        # the mappings framed last, by section, with their keys and values as lists (the
        # next tick's changed entities are found against these)
        self._objects: dict[str, Mapping[str, Any]] = {}
        self._keys: dict[str, list[str]] = {}
        self._values: dict[str, list[Any]] = {}
        # the samples as of the last frame (the writer's own dict: updated in place)
        self._samples: dict[str, Any] = {}
        # the snapshot framed last: what changed since is sampled again
        self._previous: Snapshot | None = None
        # section -> its entities that are new objects since the last frame (None: the
        # section's keys moved, every entity is looked at)
        self._changed: dict[str, dict[str, Any] | None] = {}
        # the sections whose values are dataclasses, with their codec
        self._codecs: dict[str, ClassCodec] = {
            name: codec
            for name, (enc, _) in self._sections.items()
            if isinstance(codec := getattr(enc, "__self__", None), ClassCodec)
        }

    def schema(self) -> dict[str, list[str]]:
        return self.registry.schema()

    # -- what changed ------------------------------------------------------------------------

    def _moved(self, name: str, mapping: Mapping[str, Any]) -> dict[str, Any] | None:
        """The entities of section ``name`` that are not the objects framed last time; None
        when the section's keys are not those of last time, in the same order."""
        before = self._objects.get(name)
        if before is None:
            return None
        if mapping is before:
            return {}
        keys = list(mapping)
        if keys != self._keys[name]:
            return None
        values = list(mapping.values())
        moved = compress(range(len(values)), map(operator.is_not, values, self._values[name]))
        self._keys[name] = keys
        self._values[name] = values
        return {keys[j]: values[j] for j in moved}

    def _keep(self, name: str, mapping: Mapping[str, Any]) -> None:
        """``mapping`` is what section ``name`` holds now (a snapshot's mappings are never
        changed: kept, not copied)."""
        if self._objects.get(name) is not mapping:
            self._objects[name] = mapping
            if name in self._codecs and self._changed.get(name) is None:
                self._keys[name] = list(mapping)
                self._values[name] = list(mapping.values())

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
        changed = self._changed
        if any(changed.get(name) is None for name in _SAMPLED):
            return None
        backends = changed["backends"]
        assert backends is not None
        before = prev.backends
        for name, b in backends.items():
            if b.slot_id != before[name].slot_id:
                return None  # the slots' co-tenant samples count their backends
        slots = changed["slots"]
        assert slots is not None
        fleet = MergedFleet(
            changed["gpus"] or {},
            slots,
            dict(snapshot.backends),
            changed["queues"] or {},
            changed["latency"] or {},
            {},
            {},
        )
        samples = history_samples(fleet, snapshot.staleness, partial=True)
        # a co-tenant sample is taken only while there are co-tenants: gone when not taken
        before_samples = self._samples
        gone = [
            key
            for sid in slots
            if (key := f"slot:{sid}:cotenant_mem") in before_samples and key not in samples
        ]
        return samples, gone

    # -- frames ------------------------------------------------------------------------------

    def keyframe(self, snapshot: Snapshot) -> dict[str, Any]:
        """The whole state. After the first, the rows are already encoded: the delta brings
        them up to date and they are written as they are (a 512-GPU keyframe then costs the
        JSON and the compression, not encoding ~17,000 entities again)."""
        if self._state:
            self.delta(snapshot)
        else:
            self._previous = snapshot
            self._state = {}
            for name in self._sections:
                mapping: Mapping[str, Any]
                if name == SAMPLES:
                    self._samples = mapping = snapshot_samples(snapshot)
                else:
                    mapping = getattr(snapshot, name)
                keys = list(mapping)
                enc = self._sections[name][0]
                rows = [None if (v := mapping[k]) is None else enc(v) for k in keys]
                self._state[name] = _Section(keys, rows)
                self._keep(name, mapping)
            for n in self._singles:
                raw = self._single_raw[n] = getattr(snapshot, n)
                self._single_values[n] = None if raw is None else self._singles[n][0](raw)
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

    def delta(self, snapshot: Snapshot) -> dict[str, Any]:
        """What changed since the last frame (call ``keyframe`` first)."""
        entity_rows = {name: getattr(snapshot, name) for name in self._sections if name != SAMPLES}
        self._changed = {name: self._moved(name, entity_rows[name]) for name in self._codecs}
        partial = self._sample_changes(snapshot)
        self._previous = snapshot
        frame: dict[str, Any] = {}
        updates: dict[str, list[Any]] = {}
        scalars: dict[str, list[Any]] = {}
        added: dict[str, list[Any]] = {}
        removed: dict[str, list[int]] = {}
        for name, mapping in entity_rows.items():
            before = self._objects[name]
            known = self._changed.get(name)
            if known is not None:
                if known:
                    self._entities(name, known, before, updates, added)
                self._keep(name, mapping)
                continue
            if before is mapping or before == mapping:
                self._keep(name, mapping)
                continue  # nothing in it changed (one comparison in C)
            get = before.get
            moved = {
                k: v
                for k, v in mapping.items()
                if (old_obj := get(k, _MISSING)) is not v and old_obj != v
            }
            self._entities(name, moved, before, updates, added, scalars)
            section = self._state[name]
            index = section.index
            gone = [
                index[k] for k in before if k not in mapping and section.rows[index[k]] is not None
            ]
            for i in gone:
                section.rows[i] = None
            if gone:
                removed[name] = gone
            self._keep(name, mapping)
        self._delta_samples(snapshot, partial, scalars, added, removed)
        singles, parts = self._delta_singles(snapshot)
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

    def _entities(
        self,
        name: str,
        moved: Mapping[str, Any],
        before: Mapping[str, Any],
        updates: dict[str, list[Any]],
        added: dict[str, list[Any]],
        scalars: dict[str, list[Any]] | None = None,
    ) -> None:
        """The changes of section ``name``'s ``moved`` entities, into the delta's parts: a
        changed entity of the same class as before gives only its changed fields."""
        section = self._state[name]
        index = section.index
        rows = section.rows
        enc = self._sections[name][0]
        codec = self._codecs.get(name)
        cls = codec.cls if codec is not None else None
        changed: list[Any] = []
        values: list[Any] = []
        new: list[Any] = []
        get = before.get
        for key, obj in moved.items():
            i = index.get(key)
            if (
                codec is not None
                and i is not None
                and obj.__class__ is cls
                and (old := rows[i]) is not None
                and (old_obj := get(key)).__class__ is cls
            ):
                found = codec.changes(obj, old_obj, old)
                if found is None:
                    continue
                if found is not NotImplemented:
                    rows[i], fields = found
                    changed.append([i, *fields])
                    continue
            row = None if obj is None else enc(obj)
            if i is None or rows[i] is None:
                if i is None:
                    index[key] = len(section.keys)
                    section.keys.append(key)
                    rows.append(row)
                else:
                    rows[i] = row
                new.append([key, row])
                continue
            old = rows[i]
            if row == old:
                continue
            rows[i] = row
            if isinstance(row, tuple) and isinstance(old, tuple | list) and len(row) == len(old):
                entry: list[Any] = [i]
                for f in compress(_FIELDS, map(operator.ne, row, old)):
                    entry += (f, row[f])
                changed.append(entry)
            elif isinstance(row, tuple | list):
                changed.append([i, -1, row])
            else:  # a plain value (an SLO): index and value
                values += (i, row)
        if changed:
            updates[name] = changed
        if new:
            added[name] = new
        if values and scalars is not None:
            scalars[name] = values

    def _delta_samples(
        self,
        snapshot: Snapshot,
        partial: tuple[dict[str, Sample], list[str]] | None,
        scalars: dict[str, list[Any]],
        added: dict[str, list[Any]],
        removed: dict[str, list[int]],
    ) -> None:
        """The history samples that changed: index and value (new series as new rows)."""
        section = self._state[SAMPLES]
        index = section.index
        rows = section.rows
        before = self._samples
        mapping = snapshot_samples(snapshot) if partial is None else partial[0]
        get = before.get
        values: list[Any] = []
        new: list[Any] = []
        for key, v in mapping.items():
            old = get(key, _MISSING)
            if v is old or v == old:
                continue
            row = None if v is None else _enc_float(v)
            i = index.get(key)
            if i is None or rows[i] is None:
                if i is None:
                    index[key] = len(section.keys)
                    section.keys.append(key)
                    rows.append(row)
                else:
                    rows[i] = row
                new.append([key, row])
            elif row != rows[i]:
                rows[i] = row
                values += (i, row)
        if partial is None:
            gone_keys = [k for k in before if k not in mapping]
            self._samples = dict(mapping)
        else:
            gone_keys = partial[1]
            before.update(mapping)
            for k in gone_keys:
                del before[k]
        gone = [index[k] for k in gone_keys if rows[index[k]] is not None]
        for i in gone:
            rows[i] = None
        if values:
            scalars[SAMPLES] = values
        if new:
            added[SAMPLES] = new
        if gone:
            removed[SAMPLES] = gone

    def _delta_singles(self, snapshot: Snapshot) -> tuple[dict[str, Any], dict[str, list[Any]]]:
        """The single values that changed (a list of unchanged length: its changed items)."""
        singles: dict[str, Any] = {}
        parts: dict[str, list[Any]] = {}
        for n, (enc, _) in self._singles.items():
            raw = getattr(snapshot, n)
            if raw is self._single_raw.get(n, _MISSING):
                continue  # the same object (the alerts, the staleness while nothing moved)
            self._single_raw[n] = raw
            value = None if raw is None else enc(raw)
            before_value = self._single_values.get(n, _MISSING)
            if value == before_value:
                continue
            self._single_values[n] = value
            if (
                isinstance(value, list)
                and isinstance(before_value, list)
                and len(before_value) == len(value)
            ):
                # a list of the same length (the alerts, when a message's figure moved): only
                # the items that changed
                pairs = enumerate(zip(value, before_value, strict=True))
                parts[n] = [[j, v] for j, (v, b) in pairs if v != b]
                continue
            singles[n] = value
        return singles, parts
