"""The storage under ``model.history``: one fixed-size ring of doubles per series.

``Rings(size)`` keeps the last ``size`` ticks: the times in one ``array('d')`` and each series
in an ``array('d')`` of ``size`` numbers, the sample of tick ``t`` at ``t % size`` (NaN for a
gap). An append writes one number per series in place: nothing grows, nothing is copied on
trim, and arrays hold no Python objects, so the garbage collector never walks them. A series
absent from an append gets a gap at that tick; one absent for a whole ring is dropped. A new
series starts as all gaps, so the ticks before it read as gaps, never as another tick's value.
The hub's own series come a family at a time (``append_blocks``: ``model.history_blocks``);
a key of a family is read through it, any other key through its own ring.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Collection, Iterator, Mapping, Sequence

from gpucon.model.history_blocks import Family, split_key

Sample = float | None
# (kind, series, ids, values): one family's samples of one tick (values[i] is ids[i]'s)
Block = tuple[str, str, Sequence[str], "array[float]"]

NAN = math.nan


def default_slack(capacity: int) -> int:
    """Ticks the rings keep beyond a view's window: how far behind the newest append a view
    may be read and still be exact (a tick handed to a busy UI thread, a plan being made; a
    view kept longer takes ``History.frozen()``). Every tick of slack is a tick of memory
    for every series."""
    return max(4, capacity // 10)


def _known(values: array[float]) -> tuple[Sample, ...]:
    return tuple(None if v != v else v for v in values)  # NaN is the only value != itself


class Rings:
    """Fixed-size sample rings shared by successive ``History`` views (one writer)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.count = 0  # ticks appended so far
        self.floor = 0  # the oldest tick a copy holds (0 for the hub's own rings)
        self.times = array("d", bytes(8 * size))
        self.columns: dict[str, array[float]] = {}
        self.families: dict[tuple[str, str], Family] = {}
        # key -> (its family, its ident), or None for a key of no family: parsed once
        self._where: dict[str, tuple[Family, str] | None] = {}
        # series absent from the newest appends -> the first tick they were missing at
        self._absent: dict[str, int] = {}
        self._blank = array("d", [NAN]) * size

    def oldest(self) -> int:
        """The oldest tick every series still holds, even while an append is under way (the
        tick it is writing overwrites the slot of ``count - size``)."""
        return max(self.floor, self.count - self.size + 1)

    def append(self, now: float, samples: Mapping[str, Sample]) -> None:
        self.append_blocks(now, (), samples)

    def append_blocks(
        self, now: float, blocks: Sequence[Block], samples: Mapping[str, Sample]
    ) -> None:
        """One tick: whole families (``blocks``) and single series (``samples``)."""
        tick = self.count
        pos = tick % self.size
        self.times[pos] = now
        families = self.families
        if blocks or families:
            written: set[tuple[str, str]] = set()
            for kind, series, ids, values in blocks:
                family = families.get((kind, series))
                if family is None:
                    family = families[(kind, series)] = Family(kind, series, self.size)
                    self._where.clear()  # keys cached as "no family" may have one now
                family.write(tick, ids, values)
                written.add((kind, series))
            for name, family in families.items():
                if name not in written:
                    family.skip(tick)
        columns = self.columns
        get = columns.get
        blank = self._blank
        for key, value in samples.items():
            column = get(key)
            if column is None:
                column = columns[key] = blank[:]
            try:
                column[pos] = value  # type: ignore[assignment]
            except TypeError:  # None: a gap (the rare case, so not tested first)
                column[pos] = NAN
        if len(columns) != len(samples) or self._absent:
            self._gaps(samples, tick, pos)
        self.count = tick + 1

    def _gaps(self, samples: Mapping[str, Sample], tick: int, pos: int) -> None:
        """A gap for each series this append did not name; drop those gone a whole ring."""
        absent = self._absent
        for key in [k for k in absent if k in samples]:
            del absent[key]  # back again
        columns = self.columns
        horizon = tick - self.size
        for key in columns.keys() - samples.keys():
            since = absent.setdefault(key, tick)
            if since <= horizon:
                del columns[key], absent[key]
            else:
                columns[key][pos] = NAN

    def _locate(self, key: str) -> tuple[Family, str] | None:
        where = self._where
        found = where.get(key)
        if found is None and key not in where:
            parts = split_key(key)
            family = None if parts is None else self.families.get((parts[0], parts[2]))
            found = None if family is None or parts is None else (family, parts[1])
            if len(where) > 500_000:  # keys of entities long gone
                where.clear()
            where[key] = found
        return found

    def at(self, key: str, tick: int) -> Sample:
        """The sample of ``key`` at ``tick`` (a tick the caller knows is still held). Alert
        rules ask this of every slot and backend each tick: the family read is inlined."""
        try:
            found = self._where[key]
        except KeyError:
            found = self._locate(key)
        if found is not None:
            family, ident = found
            pos = tick % family.size
            if family.ticks[pos] != tick:
                return None
            i = family.indexes[pos].get(ident)  # type: ignore[union-attr]
            if i is None:
                return None
            v = family.blocks[pos][i]  # type: ignore[index]
        else:
            column = self.columns.get(key)
            if column is None:
                return None
            v = column[tick % self.size]
        return None if v != v else v

    def newest_first(self, key: str, newest: int, oldest: int) -> Iterator[Sample]:
        """``at(key, t)`` for ``t`` from ``newest`` down to ``oldest`` (held ticks), lazily,
        with the key looked up once."""
        try:
            found = self._where[key]
        except KeyError:
            found = self._locate(key)
        if found is not None:
            yield from found[0].newest_first(found[1], newest, oldest)
            return
        column = self.columns.get(key)
        size = self.size
        for t in range(newest, oldest - 1, -1):
            v = NAN if column is None else column[t % size]
            yield None if v != v else v

    def _span(self, ring: array[float], lo: int, hi: int) -> array[float]:
        """The ring slots of ticks ``lo``..``hi - 1`` (hi - lo <= size), in tick order."""
        size = self.size
        a = lo % size
        b = a + (hi - lo)
        if b <= size:
            return ring[a:b]
        return ring[a:] + ring[: b - size]

    def between(self, key: str, start: int, end: int) -> tuple[Sample, ...]:
        """The samples of ticks ``start``..``end - 1`` (held ticks; a gap where unknown);
        () for a series these rings do not hold."""
        if end <= start:
            return ()
        column = self.columns.get(key)
        if column is not None:
            return _known(self._span(column, start, end))
        found = self._locate(key) if self.families else None
        if found is None:
            return ()
        values = found[0].between(found[1], start, end)
        if all(v is None for v in values) and not found[0].holds(found[1], start, end):
            return ()
        return values

    def keys(self, start: int, end: int) -> list[str]:
        """Every series held for ticks ``start``..``end - 1``."""
        out = list(self.columns)
        for family in list(self.families.values()):
            out.extend(
                f"{family.kind}:{ident}:{family.series}" for ident in family.idents(start, end)
            )
        return out

    def series_count(self) -> int:
        return len(self.columns) + sum(f.latest_count() for f in self.families.values())

    def times_between(self, start: int, end: int) -> tuple[float, ...]:
        if end <= start:
            return ()
        return tuple(self._span(self.times, start, end))

    def fill_from(
        self,
        other: Rings,
        start: int,
        end: int,
        families: Collection[tuple[str, str]] | None = None,
    ) -> None:
        """Make these rings (empty, at least ``end - start`` long) hold ``other``'s ticks
        ``start``..``end - 1``, and nothing older; ``families``: only those families (kind,
        series), and no single series. Blocks are copied whole (C speed)."""
        self.count = end
        self.floor = start
        for t, v in zip(range(start, end), other.times_between(start, end), strict=True):
            self.times[t % self.size] = v
        for name, family in list(other.families.items()):
            if families is None or name in families:
                self.families[name] = family.copy(self.size, start, end)
        if families is not None:
            return
        for key in list(other.columns):
            column = self.columns[key] = self._blank[:]
            values = other.between(key, start, end)
            for t, sample in zip(range(start, end), values, strict=True):
                column[t % self.size] = NAN if sample is None else sample
