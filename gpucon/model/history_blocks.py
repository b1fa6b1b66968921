"""Series families stored a tick at a time: one array of numbers per family per tick.

The hub samples the same few series of every slot, backend, GPU and queue each tick
(``slot:ID:activity`` for every slot ...). Stored one ring per series, each tick costs a dict
lookup and a store per series (88,000 of them at 2,048 GPUs). A ``Family`` (``slot`` +
``activity``) instead keeps, for each tick of its ring, one array of that tick's values in the
order of an ident -> position index; the index is shared by every tick whose entities were the
same, so a tick costs one ``array('d', values)`` per family, built in C from a list and copied
into the ring's block for that slot (allocated for the whole ring on the first write, so
memory does not grow as the ring fills). A family keeps the type of array it is given: the
hub's are single precision (``array('f')``, ``model.history_samples``), half the memory of
doubles (the history is most of the console's memory at 2,048 GPUs); 24 bits of mantissa
keep a percentage, a temperature, a few thousand ms or a whole number of MiB up to 16 TiB as
read, and any value to about seven significant digits, more than a plot or a trend needs.

Reading ``slot:ID:activity`` at a tick is: the family's block of that tick, ``ID``'s position
in that tick's index, the number there (NaN is a gap). A tick the family was not appended at,
or an entity absent at that tick, reads as a gap.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Sequence

Sample = float | None
NAN = math.nan


def split_key(key: str) -> tuple[str, str, str] | None:
    """``slot:ID:activity`` -> (``slot``, ``ID``, ``activity``); None for a key of no family
    (ids may hold colons: the kind is up to the first one, the series after the last)."""
    kind, sep, rest = key.partition(":")
    ident, sep2, series = rest.rpartition(":")
    if not (sep and sep2 and ident):
        return None
    return kind, ident, series


class Family:
    """One series of every entity of a kind, a block per tick, in a ring of ``size`` ticks."""

    __slots__ = (
        "_ids",
        "blocks",
        "id_lists",
        "index",
        "indexes",
        "kind",
        "series",
        "size",
        "ticks",
    )

    def __init__(self, kind: str, series: str, size: int) -> None:
        self.kind = kind
        self.series = series
        self.size = size
        self.blocks: list[array[float] | None] = [None] * size
        self.indexes: list[dict[str, int] | None] = [None] * size
        self.id_lists: list[Sequence[str]] = [()] * size  # each slot's ids, in block order
        self.ticks: list[int] = [-1] * size  # the tick each slot holds
        self.index: dict[str, int] = {}
        self._ids: Sequence[str] = ()

    def write(self, tick: int, ids: Sequence[str], values: array[float]) -> None:
        """Store the block of ``tick``: ``values[i]`` is the sample of ``ids[i]``."""
        if ids != self._ids:  # entities came or went (rare): a new index from here on
            self._ids = ids
            self.index = {ident: i for i, ident in enumerate(ids)}
        pos = tick % self.size
        self.ticks[pos] = -1  # a reader sees no half-written slot
        if self.blocks[0] is None:  # the whole ring at once: memory is flat from the start
            self.blocks = [array(values.typecode, [NAN]) * len(values) for _ in range(self.size)]
        block = self.blocks[pos]
        if block is not None and len(block) == len(values) and block.typecode == values.typecode:
            block[:] = values  # in place: no allocation a tick, no fragmentation
        else:
            self.blocks[pos] = values
        self.indexes[pos] = self.index
        self.id_lists[pos] = self._ids
        self.ticks[pos] = tick

    def copy(self, size: int, start: int, end: int) -> Family:
        """A family of ``size`` ticks holding this one's ticks ``start``..``end - 1`` (each
        block copied whole; indexes are never changed once built, so they are shared)."""
        fresh = Family(self.kind, self.series, size)
        fresh.index, fresh._ids = self.index, self._ids
        for t in range(start, end):
            pos, new = t % self.size, t % size
            block = self.blocks[pos]
            if self.ticks[pos] == t and block is not None:
                fresh.blocks[new] = block[:]
                fresh.indexes[new] = self.indexes[pos]
                fresh.id_lists[new] = self.id_lists[pos]
                fresh.ticks[new] = t
        return fresh

    def skip(self, tick: int) -> None:
        """The family was not sampled at ``tick``: its slot reads as gaps."""
        self.ticks[tick % self.size] = -1

    def at(self, ident: str, tick: int) -> Sample:
        pos = tick % self.size
        if self.ticks[pos] != tick:
            return None
        index = self.indexes[pos]
        block = self.blocks[pos]
        i = None if index is None else index.get(ident)
        if i is None or block is None:
            return None
        v = block[i]
        return None if v != v else v

    def at_least(self, tick: int, above: float) -> list[str]:
        """The entities whose sample at ``tick`` is known and at least ``above``: one pass
        over that tick's block (a rule that needs a value over a threshold looks no further
        at the rest)."""
        pos = tick % self.size
        block = self.blocks[pos]
        if self.ticks[pos] != tick or block is None:
            return []
        ids = self.id_lists[pos]
        return [ids[i] for i, v in enumerate(block) if v >= above]  # NaN >= x is False

    def newest_first(self, ident: str, newest: int, oldest: int) -> Iterator[Sample]:
        """``at(ident, t)`` for ``t`` from ``newest`` down to ``oldest``, lazily: a trend rule
        reads back only until the series stops rising."""
        size, ticks, indexes, blocks = self.size, self.ticks, self.indexes, self.blocks
        for t in range(newest, oldest - 1, -1):
            pos = t % size
            index = indexes[pos]
            block = blocks[pos]
            if ticks[pos] != t or index is None or block is None:
                yield None
                continue
            i = index.get(ident)
            if i is None:
                yield None
                continue
            v = block[i]
            yield None if v != v else v

    def between(self, ident: str, start: int, end: int) -> tuple[Sample, ...]:
        """The samples of ``ident`` at ticks ``start``..``end - 1`` (a sparkline reads a
        window of them per visible row per tick: its position is looked up once per index)."""
        size, ticks, indexes, blocks = self.size, self.ticks, self.indexes, self.blocks
        out: list[Sample] = []
        seen: dict[str, int] | None = None
        i: int | None = None
        for t in range(start, end):
            pos = t % size
            index = indexes[pos]
            block = blocks[pos]
            if ticks[pos] != t or index is None or block is None:
                out.append(None)
                continue
            if index is not seen:
                seen, i = index, index.get(ident)
            if i is None:
                out.append(None)
                continue
            v = block[i]
            out.append(None if v != v else v)
        return tuple(out)

    def idents(self, start: int, end: int) -> set[str]:
        """Every entity with a block slot in ticks ``start``..``end - 1``."""
        found: set[str] = set()
        for t in range(start, end):
            pos = t % self.size
            index = self.indexes[pos]
            if self.ticks[pos] == t and index is not None:
                found.update(index)
        return found

    def latest_count(self) -> int:
        return len(self.index)

    def holds(self, ident: str, start: int, end: int) -> bool:
        """Whether ``ident`` has a slot in any block of ticks ``start``..``end - 1``."""
        for t in range(start, end):
            pos = t % self.size
            index = self.indexes[pos]
            if self.ticks[pos] == t and index is not None and ident in index:
                return True
        return False
