"""The writer of format 4's frames (changed fields a column at a time, JSON), as gpucon wrote
them before format 5: kept so that the tests write frames of the older formats and check that
they still read (``gpucon.recording.frames.FrameState`` reads formats 1 to 5). Pure.

Each snapshot turned into a keyframe or a delta: a section's changed entities are found by
comparing the object lists of two ticks with ``map(operator.is_not)``, and a changed entity's
changed fields with ``map(operator.ne)`` over its field values (``recording_fielddiff``).
"""

from __future__ import annotations

import operator
from collections import deque
from collections.abc import Iterator, Mapping
from itertools import chain, compress, repeat
from typing import Any

from gpucon.model.history import Sample
from gpucon.model.history_samples import history_samples
from gpucon.model.merge import MergedFleet
from gpucon.model.section_moves import SectionMoves
from gpucon.model.snapshot import Snapshot
from gpucon.recording.codec import (
    ClassCodec,
    CodecRegistry,
    _enc_float,
    round_all,
)
from gpucon.recording.frames import SAMPLES, _layout, _Section, snapshot_samples
from gpucon.recording.writer import changed_singles
from tests.helpers.recording_fielddiff import changed_columns, row_reader

_MISSING = object()
# the sections whose changed entities give the history samples again
_SAMPLED = ("gpus", "slots", "queues", "latency", "backends")
_SLOT_OF = operator.attrgetter("slot_id")
# a section's changed entities: their positions, the section's objects now and as framed last
_Moved = tuple[list[int], list[Any], list[Any]]


def _consume(items: Iterator[Any]) -> None:
    """Run an iterator to its end in C (``map`` of a setter)."""
    deque(items, maxlen=0)


class FrameWriter:
    """Turns each snapshot into a keyframe or a delta against the previous one."""

    def __init__(self, *, samples: bool = True, moves: SectionMoves | None = None) -> None:
        self.registry = CodecRegistry()
        self._sections, self._singles = _layout(self.registry)
        # False: no samples section (the recorder takes them from the history as columns:
        # recording.columns)
        self.samples = samples
        # the hub's findings of which entities are new objects (its history compared the
        # same mappings): taken rather than compared again
        self._found = moves
        if not samples:
            del self._sections[SAMPLES]
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
        # section's keys moved, every entity is looked at); by key, for the samples
        self._moves: dict[str, _Moved | None] = {}
        self._changed: dict[str, dict[str, Any] | None] = {}
        # section -> the last keyframe's keys, objects and rows (reused where the same)
        self._key_rows: dict[str, tuple[list[str], list[Any], list[Any]]] = {}
        # section -> the row index of each position of its mapping (as ``_keys``), and
        # whether each position is its row index (as after a keyframe)
        self._at: dict[str, list[int]] = {}
        self._at_same: dict[str, bool] = {}
        # section -> its entities' field values (``row_reader``'s tuples) by position, as
        # last framed: a changed entity's old values are read from here, not from its old
        # object again
        self._rows: dict[str, list[Any]] = {}
        # slot -> the backends on it (their names), while no backend comes, goes or moves
        self._by_slot: dict[str, list[str]] | None = None
        # the sections whose values are dataclasses, with their codec
        self._codecs: dict[str, ClassCodec] = {
            name: codec
            for name, (enc, _) in self._sections.items()
            if isinstance(codec := getattr(enc, "__self__", None), ClassCodec)
        }
        # each class's reader of an object's field values as one tuple
        self._readers = {name: row_reader(codec) for name, codec in self._codecs.items()}

    def schema(self) -> dict[str, list[str]]:
        return self.registry.schema()

    # -- what changed ------------------------------------------------------------------------

    def _moved(self, name: str, mapping: Mapping[str, Any]) -> _Moved | None:
        """The entities of section ``name`` that are not the objects framed last time, as
        (their positions, the section's objects now, the objects framed last); None when
        the section's keys are not those of last time, in the same order."""
        before = self._objects.get(name)
        if before is None:
            return None
        values_before = self._values[name]
        if mapping is before:
            return [], values_before, values_before
        # the hub's history compared these two mappings already (the same keys in the
        # same order): its finding, not a second scan
        found = None if self._found is None else self._found.between(mapping, before)
        if found is not None:
            self._values[name] = found[1]
            return found[0], found[1], values_before
        keys = list(mapping)
        if keys != self._keys[name]:
            return None
        values = list(mapping.values())
        moved = list(compress(range(len(values)), map(operator.is_not, values, values_before)))
        self._values[name] = values
        return moved, values, values_before

    def _keep(self, name: str, mapping: Mapping[str, Any]) -> None:
        """``mapping`` is what section ``name`` holds now (a snapshot's mappings are never
        changed: kept, not copied)."""
        if self._objects.get(name) is not mapping:
            self._objects[name] = mapping
            if name in self._codecs and self._moves.get(name) is None:
                keys = self._keys[name] = list(mapping)
                self._values[name] = list(mapping.values())
                # the section's row index of each position
                at = self._at[name] = list(map(self._state[name].index.__getitem__, keys))
                self._at_same[name] = at == list(range(len(at)))
                self._rows[name] = list(map(self._readers[name], self._values[name]))

    def _changed_entities(self, name: str, moved: _Moved | None) -> dict[str, Any] | None:
        """``moved`` as the changed entities by key (what the history samples read)."""
        if moved is None:
            return None
        keys = self._keys[name]
        values = moved[1]
        return {keys[j]: values[j] for j in moved[0]}

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
            self._by_slot = None  # entities came or went: the backends are counted again
            return None
        backends = changed["backends"]
        assert backends is not None
        moved_to = list(map(_SLOT_OF, backends.values()))
        if moved_to != list(map(_SLOT_OF, map(prev.backends.__getitem__, backends))):
            self._by_slot = None
            return None  # the slots' co-tenant samples count their backends
        slots = changed["slots"]
        assert slots is not None
        by_slot = self._by_slot
        if by_slot is None:
            by_slot = self._by_slot = {}
            for name, b in snapshot.backends.items():
                if b.slot_id is not None:
                    by_slot.setdefault(b.slot_id, []).append(name)
        # the backends of the changed slots: all that their co-tenant samples count
        serving = snapshot.backends
        fleet = MergedFleet(
            changed["gpus"] or {},
            slots,
            {n: serving[n] for sid in slots for n in by_slot.get(sid, ())},
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
        """The whole state, encoded from the snapshot (a 512-GPU keyframe every minute costs
        less than keeping ~17,000 encoded rows up to date between them); the rows of the
        entities that are the same objects as at the last keyframe are that keyframe's."""
        if not self.samples:
            pass
        elif self._state:
            # the entities changed since the last frame, for their samples
            moves = {name: self._moved(name, getattr(snapshot, name)) for name in self._codecs}
            self._moves = moves
            self._changed = {n: self._changed_entities(n, m) for n, m in moves.items()}
            partial = self._sample_changes(snapshot)
            self._take_samples(snapshot, partial)
        else:
            self._samples = snapshot_samples(snapshot)
        self._previous = snapshot
        self._moves = {}
        self._changed = {}
        sections: dict[str, Any] = {}
        seen: dict[tuple[str, ...], str] = {}
        for name in self._sections:
            mapping: Mapping[str, Any] = (
                self._samples if name == SAMPLES else getattr(snapshot, name)
            )
            keys = list(mapping)
            values = list(mapping.values())
            rows = self._keyframe_rows(name, keys, values)
            # its own keys: a delta appends the keys that come (the keyframe's are kept)
            self._state[name] = _Section(keys.copy(), [True] * len(keys))
            if name != SAMPLES:
                self._keep(name, mapping)
            # backends, latency, liveness and SLOs are usually keyed alike: the names once
            same = seen.setdefault(tuple(keys), name) if keys else name
            sections[name] = [keys if same == name else same, rows]
        for n, (enc, _) in self._singles.items():
            raw = self._single_raw[n] = getattr(snapshot, n)
            self._single_values[n] = None if raw is None else enc(raw)
        return {"k": sections, "s": dict(self._single_values), "schema": self.schema()}

    def _keyframe_rows(self, name: str, keys: list[str], values: list[Any]) -> list[Any]:
        """Section ``name``'s rows: those of the last keyframe where the entity is the same
        object (a 512-GPU fleet's liveness and origins, ~14,000 entities, seldom change),
        the others encoded."""
        before = self._key_rows.get(name)
        if before is None or before[0] != keys:
            rows = self._encode_rows(name, values)
        else:
            where = list(compress(range(len(values)), map(operator.is_not, values, before[1])))
            if not where:
                rows = before[2]
            elif len(where) == len(values):
                rows = self._encode_rows(name, values)
            else:
                rows = list(before[2])
                fresh = self._encode_rows(name, list(map(values.__getitem__, where)))
                _consume(map(rows.__setitem__, where, fresh))
        # kept until the next keyframe: the objects too, whose identity tells what moved
        self._key_rows[name] = (keys, values, rows)
        return rows

    def _encode_rows(self, name: str, values: list[Any]) -> list[Any]:
        codec = self._codecs.get(name)
        if codec is not None:
            return codec.encode_all(values)
        enc = self._sections[name][0]
        if enc is _enc_float:
            return round_all(values)
        return [None if v is None else enc(v) for v in values]

    def delta(self, snapshot: Snapshot) -> dict[str, Any]:
        """What changed since the last frame (call ``keyframe`` first)."""
        entity_rows = {name: getattr(snapshot, name) for name in self._sections if name != SAMPLES}
        self._moves = {name: self._moved(name, entity_rows[name]) for name in self._codecs}
        partial = None
        if self.samples:
            self._changed = {n: self._changed_entities(n, m) for n, m in self._moves.items()}
            partial = self._sample_changes(snapshot)
        self._previous = snapshot
        frame: dict[str, Any] = {}
        columns: dict[str, list[Any]] = {}
        updates: dict[str, list[Any]] = {}
        scalars: dict[str, list[Any]] = {}
        added: dict[str, list[Any]] = {}
        removed: dict[str, list[int]] = {}
        for name, mapping in entity_rows.items():
            before = self._objects[name]
            known = self._moves.get(name)
            if known is not None:
                at, now, _ = known
                if at:
                    rows = self._rows[name]
                    now_rows = list(map(self._readers[name], map(now.__getitem__, at)))
                    out = changed_columns(
                        self._codecs[name],
                        at if self._at_same[name] else list(map(self._at[name].__getitem__, at)),
                        now_rows,
                        list(map(rows.__getitem__, at)),
                    )
                    _consume(map(rows.__setitem__, at, now_rows))
                    if out:
                        columns[name] = out
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
            section = self._state[name]
            index = section.index
            alive = section.rows
            enc = self._sections[name][0]
            codec = self._codecs.get(name)
            same: dict[str, Any] = {}
            new: list[Any] = []
            for key, obj in moved.items():
                i = index.get(key)
                old_obj = get(key, _MISSING)
                if i is None or alive[i] is None or old_obj is _MISSING:
                    if i is None:
                        index[key] = len(section.keys)
                        section.keys.append(key)
                        alive.append(True)
                    alive[i if i is not None else -1] = True
                    new.append([key, None if obj is None else enc(obj)])
                elif codec is not None and obj.__class__ is old_obj.__class__ is codec.cls:
                    same[key] = obj
                elif isinstance(row := None if obj is None else enc(obj), tuple | list):
                    updates.setdefault(name, []).append([i, -1, row])
                else:  # a plain value (an SLO): index and value
                    scalars.setdefault(name, []).extend((i, row))
            if codec is not None and same:
                at = list(map(index.__getitem__, same))
                read = self._readers[name]
                out = changed_columns(
                    codec, at, list(map(read, same.values())), list(map(read, map(get, same)))
                )
                if out:
                    columns[name] = out
            gone = [index[k] for k in before if k not in mapping and alive[index[k]] is not None]
            for i in gone:
                alive[i] = None
            if new:
                added[name] = new
            if gone:
                removed[name] = gone
            self._keep(name, mapping)
        if self.samples:
            self._delta_samples(partial, scalars, added, removed)
        singles, parts = self._delta_singles(snapshot)
        for key, part in (
            ("c", columns),
            ("u", updates),
            ("v", scalars),
            ("p", parts),
            ("n", added),
            ("d", removed),
            ("s", singles),
        ):
            if part:
                frame[key] = part
        return frame

    def _take_samples(
        self, snapshot: Snapshot, partial: tuple[dict[str, Sample], list[str]] | None
    ) -> tuple[dict[str, Sample], list[str]]:
        """The samples now (taken again where ``partial`` is None) into the writer's own
        dict: (the samples given, the keys gone)."""
        before = self._samples
        if partial is None:
            mapping = snapshot_samples(snapshot)
            gone = [k for k in before if k not in mapping]
            self._samples = dict(mapping)
            return mapping, gone
        mapping, gone = partial
        before.update(mapping)
        for k in gone:
            del before[k]
        return mapping, gone

    def _delta_samples(
        self,
        partial: tuple[dict[str, Sample], list[str]] | None,
        scalars: dict[str, list[Any]],
        added: dict[str, list[Any]],
        removed: dict[str, list[int]],
    ) -> None:
        """The history samples that changed: index and value (new series as new rows). A
        sample copies an entity's field, so an unchanged one is the same object as last
        time: the comparison runs in C and Python sees only the changed ones."""
        previous = self._previous
        assert previous is not None
        section = self._state[SAMPLES]
        index = section.index
        alive = section.rows
        keys_before = dict.fromkeys(self._samples) if partial is None else None
        old_get = self._samples.get
        mapping = snapshot_samples(previous) if partial is None else partial[0]
        keys = list(mapping)
        now = list(mapping.values())
        was = list(map(old_get, keys, repeat(_MISSING, len(keys))))
        hits = list(compress(range(len(keys)), map(operator.is_not, now, was)))
        changed = list(map(now.__getitem__, hits))
        olds = list(map(was.__getitem__, hits))
        # a derived sample (power_pct) is a new object each time: equal is no change
        differs = list(map(operator.ne, changed, olds))
        if not all(differs):
            hits = list(compress(hits, differs))
            changed = list(compress(changed, differs))
            olds = list(compress(olds, differs))
        at = list(map(index.get, map(keys.__getitem__, hits)))
        values: list[Any] = []
        new: list[Any] = []
        if None in at or _MISSING in olds or None in map(alive.__getitem__, filter(None, at)):
            # a series that is new, or back since the keyframe: one at a time
            for h, v, old, i in zip(hits, changed, olds, at, strict=True):
                v = None if v is None else _enc_float(v)
                key = keys[h]
                if i is None or alive[i] is None or old is _MISSING:
                    if i is None:
                        index[key] = len(section.keys)
                        section.keys.append(key)
                        alive.append(True)
                    else:
                        alive[i] = True
                    new.append([key, v])
                else:
                    values += (i, v)
        elif hits:
            values = list(chain.from_iterable(zip(at, round_all(changed), strict=True)))
        if partial is None:
            assert keys_before is not None
            gone_keys = [k for k in keys_before if k not in mapping]
            self._samples = dict(mapping)
        else:
            gone_keys = partial[1]
            self._samples.update(mapping)
            for k in gone_keys:
                del self._samples[k]
        gone = [index[k] for k in gone_keys if alive[index[k]] is not None]
        for i in gone:
            alive[i] = None
        if values:
            scalars[SAMPLES] = values
        if new:
            added[SAMPLES] = new
        if gone:
            removed[SAMPLES] = gone

    def _delta_singles(self, snapshot: Snapshot) -> tuple[dict[str, Any], dict[str, list[Any]]]:
        """The single values that changed: found as the format 5 writer finds them."""
        return changed_singles(self._singles, self._single_raw, self._single_values, snapshot)
