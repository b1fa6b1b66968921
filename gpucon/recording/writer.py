"""The recorder's half of frames (format 6): each snapshot as a keyframe or a delta of whole
records (frames.py describes both). Pure; a recorder owns one ``FrameWriter``, used by one
thread at a time (the hub's for a delta, the recorder's own for a keyframe).

The hub passes an unchanged entity on as the same object, so what changed in a section is
which of its objects are new: the hub's history already compared the slots, latency, GPUs and
queues with last tick's (``Hub.moves``: taken, not compared again), and any other section is
compared here by identity in C (``map(operator.is_not)``). A delta gives those entities whole
(``rows.encode_rows``: each record's field values in one C call), by their index in the
keyframe's list of keys; the frame is then written by msgspec and compressed by zstd, both in
C (``blobs``). No field is looked at in Python: at 512 GPUs, beside a live hub, building a
delta takes ~1.5 ms of the recorder's CPU where picking out changed fields took ~4.5. A
field holding one shared nested record (a GPU's MIG profile table) is written as its number
in the keyframe group's table, each value once a group (format 6, ``rows.RefTable``). An
entity that came or went (the keys moved) is found by key.

A real source hands on fresh objects every read (NVML, Prometheus and Redis answers parsed
afresh), equal to the last ones where nothing moved: while at least ``EQUAL_WORTH`` of a
section's new objects turn out equal to the last frame's (msgspec's equality, in C), only those
that differ are written; otherwise the comparison is tried once every ``PROBE_EVERY`` deltas
(the simulator's new objects all differ).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from itertools import compress
from typing import Any

from gpucon.model.section_moves import SectionMoves
from gpucon.model.snapshot import Snapshot
from gpucon.recording.codec import CodecRegistry
from gpucon.recording.frames import REF_ROWS, WHOLE_ROWS, _layout
from gpucon.recording.rows import RefTable, encode_rows

_MISSING = object()
# a section's new objects are compared with the last frame's (msgspec's equality, in C) while
# at least this share of them turned out equal last time; otherwise once every
# ``PROBE_EVERY`` deltas, to notice when that changes
EQUAL_WORTH = 0.3
PROBE_EVERY = 32


class _Rows:
    """One section as framed last: its keys by row index since the keyframe, and where each
    position of the mapping framed last sits in that list."""

    __slots__ = ("alive", "at", "index", "keys", "mapping", "order", "same", "values")

    def __init__(self, mapping: Mapping[str, Any]) -> None:
        self.keys = list(mapping)
        self.index = dict(zip(self.keys, range(len(self.keys)), strict=True))
        self.alive = [True] * len(self.keys)
        self.mapping = mapping
        self.values = list(mapping.values())
        # the keys of the mapping framed last, in its order (a section the hub gives no
        # finding for compares its keys with these: one list built a frame, not two)
        self.order = self.keys
        self.at: list[int] = []
        self.same = True  # each position is its row index (as after a keyframe)

    def keep(self, mapping: Mapping[str, Any], keys: list[str], values: list[Any]) -> None:
        self.mapping = mapping
        self.values = values
        self.order = keys
        at = self.at = list(map(self.index.__getitem__, keys))
        self.same = at == list(range(len(at)))


class FrameWriter:
    """Turns each snapshot into a keyframe or a delta of whole records against the last."""

    def __init__(self, *, moves: SectionMoves | None = None, refs: bool = True) -> None:
        self.registry = CodecRegistry()
        # format 6: a field holding one shared nested record by its number in the keyframe
        # group's table (``rows.RefTable``); False writes format 5 (tests read it back)
        self._refs: RefTable | None = RefTable() if refs else None
        sections, self._singles = _layout(self.registry)
        self._names = [n for n in sections if n != "samples"]
        # the hub's findings of which entities are new objects: taken rather than compared
        self._found = moves
        self._state: dict[str, _Rows] = {}
        self._single_values: dict[str, Any] = {}
        # the single values' objects last encoded: the same object is not encoded again
        self._single_raw: dict[str, Any] = {}
        # per section, the share of its new objects that were equal to the last frame's when
        # last compared (``_unchanged``), and the deltas made
        self._equal_share: dict[str, float] = {}
        self._deltas = 0

    def schema(self) -> dict[str, list[str]]:
        return self.registry.schema()

    def keyframe(self, snapshot: Snapshot) -> dict[str, Any]:
        """The whole state: every section's keys and rows (a section keyed as an earlier
        one names it instead of repeating its keys)."""
        sections: dict[str, Any] = {}
        seen: dict[tuple[str, ...], str] = {}
        refs = self._refs = None if self._refs is None else RefTable()
        for name in self._names:
            mapping: Mapping[str, Any] = getattr(snapshot, name)
            state = self._state[name] = _Rows(mapping)
            keys = state.keys
            same = seen.setdefault(tuple(keys), name) if keys else name
            sections[name] = [keys if same == name else same, encode_rows(state.values, refs)]
        for n, (enc, _) in self._singles.items():
            raw = self._single_raw[n] = getattr(snapshot, n)
            self._single_values[n] = None if raw is None else enc(raw)
        frame = {
            "f": WHOLE_ROWS if refs is None else REF_ROWS,
            "k": sections,
            "s": dict(self._single_values),
            "schema": self.schema(),
        }
        if refs is not None:
            frame["t"] = refs.take_new()
        return frame

    def delta(self, snapshot: Snapshot) -> dict[str, Any]:
        """What changed since the last frame (call ``keyframe`` first): ``r`` the entities
        that are new objects, whole, by row index; ``n`` new keys; ``d`` removed indexes;
        ``t`` the values new to the keyframe group's table (format 6)."""
        changed: dict[str, list[Any]] = {}
        added: dict[str, list[Any]] = {}
        removed: dict[str, list[int]] = {}
        refs = self._refs
        for name in self._names:
            state = self._state[name]
            mapping: Mapping[str, Any] = getattr(snapshot, name)
            before = state.mapping
            if mapping is before:
                continue
            # the hub's history compared exactly these two mappings: its finding
            found = None if self._found is None else self._found.between(mapping, before)
            if found is not None:
                moved, values = found
            else:
                values = list(mapping.values())
                if len(values) != len(state.values) or list(mapping) != state.order:
                    self._by_key(name, state, mapping, changed, added, removed)
                    continue
                moved = list(
                    compress(range(len(values)), map(operator.is_not, values, state.values))
                )
            if moved:
                rows = _pick(values, moved)
                if self._worth_comparing(name):
                    moved, rows = self._unchanged(name, moved, rows, state.values)
            if moved:
                at = moved if state.same else _pick(state.at, moved)
                changed[name] = [at, encode_rows(rows, refs)]
            state.mapping = mapping
            state.values = values
        self._deltas += 1
        frame: dict[str, Any] = {}
        singles, parts = self._delta_singles(snapshot)
        for key, part in (
            ("r", changed),
            ("n", added),
            ("d", removed),
            ("s", singles),
            ("p", parts),
            ("t", [] if refs is None else refs.take_new()),
        ):
            if part:
                frame[key] = part
        return frame

    def _worth_comparing(self, name: str) -> bool:
        """Whether section ``name``'s new objects are compared with the last frame's: while
        enough of them were equal when last compared, and every ``PROBE_EVERY`` deltas."""
        share = self._equal_share.get(name)
        return share is None or share >= EQUAL_WORTH or self._deltas % PROBE_EVERY == 0

    def _unchanged(
        self, name: str, moved: list[int], rows: list[Any], before: list[Any]
    ) -> tuple[list[int], list[Any]]:
        """``moved`` and their ``rows`` less those equal to the last frame's at the same
        position (``before``: its values, in this order): a real source's fresh records
        of values that did not move."""
        same = list(map(operator.eq, rows, _pick(before, moved)))
        equal = same.count(True)
        self._equal_share[name] = equal / len(moved)
        if not equal:
            return moved, rows
        differ = list(map(operator.not_, same))
        return list(compress(moved, differ)), list(compress(rows, differ))

    def _by_key(
        self,
        name: str,
        state: _Rows,
        mapping: Mapping[str, Any],
        changed: dict[str, list[Any]],
        added: dict[str, list[Any]],
        removed: dict[str, list[int]],
    ) -> None:
        """Section ``name``'s keys moved (an entity came or went): its changes by key."""
        before = state.mapping
        get = before.get
        index = state.index
        alive = state.alive
        at: list[int] = []
        rows: list[Any] = []
        new: list[Any] = []
        for key, obj in mapping.items():
            i = index.get(key)
            if i is None or not alive[i]:
                if i is None:
                    index[key] = len(state.keys)
                    state.keys.append(key)
                    alive.append(True)
                else:
                    alive[i] = True
                new.append([key, encode_rows([obj], self._refs)[0]])
            elif get(key, _MISSING) is not obj:
                at.append(i)
                rows.append(obj)
        gone = [i for k in before if k not in mapping and alive[i := index[k]]]
        for i in gone:
            alive[i] = False
        if rows:
            changed[name] = [at, encode_rows(rows, self._refs)]
        if new:
            added[name] = new
        if gone:
            removed[name] = gone
        keys = list(mapping)
        state.keep(mapping, keys, list(mapping.values()))

    def _delta_singles(self, snapshot: Snapshot) -> tuple[dict[str, Any], dict[str, list[Any]]]:
        """The single values that changed (a list of unchanged length: its changed items)."""
        return changed_singles(self._singles, self._single_raw, self._single_values, snapshot)


def _pick(items: list[Any], positions: list[int]) -> list[Any]:
    """``items`` at ``positions`` (not empty), in one C call (``itemgetter``: half the time of
    a ``map`` of ``__getitem__`` over ~2,000 changed entities a tick)."""
    if len(positions) == 1:
        return [items[positions[0]]]
    return list(operator.itemgetter(*positions)(items))


def changed_singles(
    codecs: Mapping[str, Any],
    seen_raw: dict[str, Any],
    seen_values: dict[str, Any],
    snapshot: Snapshot,
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """The snapshot's single values (``codecs``: field -> its codec pair) that changed since
    ``seen_raw``/``seen_values`` (updated): whole, or a list of unchanged length's changed
    items."""
    singles: dict[str, Any] = {}
    parts: dict[str, list[Any]] = {}
    for n, (enc, _) in codecs.items():
        raw = getattr(snapshot, n)
        if raw is seen_raw.get(n, _MISSING):
            continue  # the same object (the alerts, the staleness while nothing moved)
        seen_raw[n] = raw
        value = None if raw is None else enc(raw)
        before_value = seen_values.get(n, _MISSING)
        if value == before_value:
            continue
        seen_values[n] = value
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
