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
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import compress
from typing import Any

from gpucon.recording.codec import FLOAT, PLAIN, ClassCodec, round_all

# a hot field given for every changed entity unread is compared again this often (frames)
RECHECK = 16
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
        # the other fields' values of the section's entities as last framed, by position
        # in the section (None: not known; read from the old objects)
        self._cache: list[Any] | None = None
        # True: the other fields changed (a field became hot), the cache is to be refilled
        self.refill = False
        # hot fields that moved in most changed entities when last compared: given for all
        # of them without comparing, but every ``RECHECK``-th frame
        self._always: set[int] = set()
        self._frames = 0

    @property
    def hot(self) -> tuple[str, ...]:
        return tuple(self.codec.fields[f] for f in self._hot)

    def keyframe(self) -> bool:
        """A keyframe: the fields that moved since the last one are the hot ones (True:
        they are not those of before)."""
        changed = self._set_hot(self._moved)
        self._moved = set()
        self._always = set()  # compared again: a field written unread is not known to move
        return changed

    def update(self, where: list[int], objects: list[Any]) -> bool:
        """The entities at positions ``where`` are ``objects[where]`` now (a keyframe);
        False when nothing is kept to update."""
        cache = self._cache
        get = self._cold_get
        if cache is None or len(cache) != len(objects):
            return False
        if get is not None and where:
            now = list(map(get, map(objects.__getitem__, where)))
            _consume(map(cache.__setitem__, where, now))
        return True

    def fill(self, objects: list[Any]) -> None:
        """The section's entities are ``objects``, by position (a keyframe, or after the
        hot fields changed): their other fields are kept, so that the next deltas read
        them from the new objects only."""
        get = self._cold_get
        self._cache = [None] * len(objects) if get is None else list(map(get, objects))
        self.refill = False

    def forget(self) -> None:
        """The section's entities moved (came, went): positions are not what they were."""
        self._cache = None
        self.refill = False

    def _set_hot(self, fields: set[int]) -> bool:
        if set(self._hot) == fields:
            return False
        self._hot = sorted(fields)
        self._always &= fields
        self._cold = [f for f in range(len(self.codec.fields)) if f not in fields]
        self._cold_get = _tuple_getter([self.codec.fields[f] for f in self._cold])
        if self._cache is not None:
            self._cache = None
            self.refill = True
        return True

    def columns(
        self, at: list[int], new: list[Any], old: list[Any], where: list[int] | None = None
    ) -> list[Column]:
        """The fields that moved from ``old[j]`` to ``new[j]`` (objects of the codec's
        class), each as ``[field, [at[j], ...], [value, ...]]``, in field order. ``where``:
        the entities' positions in the section (as ``fill`` was given them)."""
        if not at:
            return []
        self._frames += 1
        out = self._compare(self._hot, at, new, old, whole=True)
        cold_get = self._cold_get
        if cold_get is not None:
            now = list(map(cold_get, new))
            cache = self._cache
            if cache is None or where is None:
                was = list(map(cold_get, old))
            else:
                was = list(map(cache.__getitem__, where))
                _consume(map(cache.__setitem__, where, now))
            if now != was:  # another field moved (rare once the hot ones are known)
                which = list(compress(range(len(at)), map(operator.ne, now, was)))
                more = self._compare(
                    self._cold,
                    list(map(at.__getitem__, which)),
                    list(map(new.__getitem__, which)),
                    list(map(old.__getitem__, which)),
                )
                if more:
                    self._set_hot(set(self._hot) | {c[0] for c in more})
                    out = sorted(out + more, key=operator.itemgetter(0))
        return out

    def _compare(
        self,
        fields: list[int],
        at: list[int],
        new: list[Any],
        old: list[Any],
        *,
        whole: bool = False,
    ) -> list[Column]:
        """``fields``' columns that moved: the values of a field read and compared in C;
        Python touches only the values that moved. ``whole``: a field that moved in most
        of the entities is given for all of them (the few unchanged values written again
        cost less than picking out the others)."""
        out: list[Column] = []
        positions = range(len(at))
        columns = self.codec.columns
        many = len(at) - len(at) // 4
        always = self._always if whole and self._frames % RECHECK else set()
        for f in fields:
            get, kind, enc = columns[f]
            now = list(map(get, new))
            if f in always:  # it moves in most changed entities: all of them, unread
                where, values = at, now
            elif (was := list(map(get, old))) == now:
                # compares by identity first: an untouched field is no change
                self._always.discard(f)
                continue
            elif whole and list(map(operator.is_not, now, was)).count(True) >= many:
                where, values = at, now
                self._always.add(f)
            else:
                self._always.discard(f)
                hits = list(compress(positions, map(operator.is_not, now, was)))
                values = list(map(now.__getitem__, hits))
                # an equal value in a new object is no change (a NaN always is one)
                differs = list(map(operator.ne, values, map(was.__getitem__, hits)))
                if not all(differs):
                    hits = list(compress(hits, differs))
                    if not hits:
                        continue
                    values = list(compress(values, differs))
                where = list(map(at.__getitem__, hits))
            self._moved.add(f)
            if kind == FLOAT:
                values = round_all(values)
            elif kind != PLAIN:
                values = [None if v is None else enc(v) for v in values]
            out.append([f, where, values])
        return out


def _consume(items: Iterator[Any]) -> None:
    """Run an iterator to its end in C (``map`` of a setter)."""
    deque(items, maxlen=0)
