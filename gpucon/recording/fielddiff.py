"""The changed fields of a section's changed entities, as a delta gives them (writer.py).

At 512 GPUs about 2,000 entities change a tick, and in each only one to five of 13 to 21
fields moved: a latency's percentiles and rate, a backend's in-flight count, a slot's
activity. Which fields those are is learnt: a field that moved since the last keyframe is
*hot* and compared on its own (its values read from the new and the old objects, and
compared, by C loops); the other fields are compared together, one tuple per entity, which
is nearly always equal. An entity whose other fields differ is compared a field at a time
(and the fields that moved are hot from then on). Reading every field of every changed
entity and turning rows into columns cost twice this. At each keyframe the hot fields
become those that moved since the one before (a field that stopped moving is no longer
read on its own). Pure.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from itertools import compress
from typing import Any

from gpucon.recording.codec import FLOAT, PLAIN, ClassCodec, round_all

# one changed field: [field index, [row index, ...], [value, ...]]
Column = list[Any]


def _tuple_getter(names: Sequence[str]) -> Callable[[Any], Any] | None:
    """A getter of ``names``' values (a tuple of them; None for no name)."""
    if not names:
        return None
    return operator.attrgetter(*names)


class FieldDiff:
    """One section's comparison of changed entities with what they were (one class)."""

    def __init__(self, codec: ClassCodec) -> None:
        self.codec = codec
        # the fields compared one at a time, in field order, and the rest as one tuple
        self._hot: list[int] = []
        self._cold: list[int] = list(range(len(codec.fields)))
        self._cold_get = _tuple_getter(codec.fields)
        # the fields that moved since the last keyframe
        self._moved: set[int] = set()

    @property
    def hot(self) -> tuple[str, ...]:
        return tuple(self.codec.fields[f] for f in self._hot)

    def keyframe(self) -> None:
        """A keyframe: the fields that moved since the last one are the hot ones."""
        self._set_hot(self._moved)
        self._moved = set()

    def _set_hot(self, fields: set[int]) -> None:
        if set(self._hot) == fields:
            return
        self._hot = sorted(fields)
        self._cold = [f for f in range(len(self.codec.fields)) if f not in fields]
        self._cold_get = _tuple_getter([self.codec.fields[f] for f in self._cold])

    def columns(self, at: list[int], new: list[Any], old: list[Any]) -> list[Column]:
        """The fields that moved from ``old[j]`` to ``new[j]`` (objects of the codec's
        class), each as ``[field, [at[j], ...], [value, ...]]``, in field order."""
        if not at:
            return []
        out = self._compare(self._hot, at, new, old)
        cold_get = self._cold_get
        if cold_get is not None:
            now = list(map(cold_get, new))
            was = list(map(cold_get, old))
            if now != was:  # another field moved (rare once the hot ones are known)
                which = list(compress(range(len(at)), map(operator.ne, now, was)))
                more = self._compare(
                    self._cold,
                    list(map(at.__getitem__, which)),
                    list(map(new.__getitem__, which)),
                    list(map(old.__getitem__, which)),
                )
                if more:
                    self._set_hot(self._moved | set(self._hot) | {c[0] for c in more})
                    out = sorted(out + more, key=operator.itemgetter(0))
        return out

    def _compare(
        self, fields: list[int], at: list[int], new: list[Any], old: list[Any]
    ) -> list[Column]:
        """``fields``' columns that moved: the values of a field read and compared in C;
        Python touches only the values that moved."""
        out: list[Column] = []
        positions = range(len(at))
        columns = self.codec.columns
        for f in fields:
            get, kind, enc = columns[f]
            now = list(map(get, new))
            was = list(map(get, old))
            if now == was:  # compares by identity first: an untouched field is no change
                continue
            hits = list(compress(positions, map(operator.is_not, now, was)))
            values = list(map(now.__getitem__, hits))
            # an equal value in a new object is no change (a NaN always is one)
            differs = list(map(operator.ne, values, map(was.__getitem__, hits)))
            if not all(differs):
                hits = list(compress(hits, differs))
                if not hits:
                    continue
                values = list(compress(values, differs))
            self._moved.add(f)
            if kind == FLOAT:
                values = round_all(values)
            elif kind != PLAIN:
                values = [None if v is None else enc(v) for v in values]
            out.append([f, list(map(at.__getitem__, hits)), values])
        return out
