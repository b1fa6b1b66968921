"""Short history rings for sparklines and time windows, seen through immutable views.

The hub appends one sample per series per tick; each ``append`` returns a new ``History`` view
that sees exactly the samples appended up to it (the last ``capacity`` of them), so a snapshot
handed to the UI does not change under it. The views share one set of fixed-size rings
(``model.history_rings``): an append writes one number per series in place, never grows or
copies anything, so memory stays flat however long the console runs. The rings hold ``slack``
ticks more than a view shows: a view stays exact while it is at most ``slack`` appends behind
the newest; one kept longer (a paused table) takes ``frozen()``, a private copy, or its oldest
samples read as gaps. Only the hub's thread appends; any thread may read a view.

Series keys: ``slot:ID:activity``, ``slot:ID:mem_used``, ``backend:NAME:p95``,
``backend:NAME:rps``, ``backend:NAME:queue_ms``, ``backend:NAME:service_ms``,
``queue:STREAM:length``, ``queue:STREAM:oldest``, ``gpu:UUID:temp``, ``gpu:UUID:power_pct``,
``gpu:UUID:power_capped`` (1.0 / 0.0), ``slot:ID:cotenant_mem`` (MiB that processes no backend
accounts for hold on the slot; sampled only while there are some, so its absence on a slot
whose memory was read means none).
A sample is ``None`` where the value was unknown or stale (the hub appends a gap, not the last
value again), so plots stop where fresh data stops and windows never count a stale value.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from gpucon.model.history_rings import Block, Rings, Sample, default_slack

DEFAULT_CAPACITY = 120

__all__ = ["DEFAULT_CAPACITY", "Block", "History", "Sample", "last_known", "sustained"]


# a dataclass, not a msgspec Struct like the rest of the model: views share one mutable ring
# store and compare by the samples they show (its own ``__eq__``), and only a few are built
@dataclass(frozen=True, slots=True, eq=False)
class History:
    """A view of the history rings: the last ``capacity`` samples of every series."""

    capacity: int = DEFAULT_CAPACITY
    _columns: Rings | None = field(default=None, repr=False)
    _count: int = 0

    def __eq__(self, other: object) -> bool:
        """Views are equal when they show the same samples (not when they share storage)."""
        if not isinstance(other, History):
            return NotImplemented
        return (
            self.capacity == other.capacity
            and self.times == other.times
            and self._snapshot_series() == other._snapshot_series()
        )

    __hash__ = None  # type: ignore[assignment]

    def _snapshot_series(self) -> dict[str, tuple[Sample, ...]]:
        rings = self._columns
        keys = [] if rings is None else rings.keys(self._start(), self._count)
        series = {k: self.get(k) for k in keys}
        return {k: v for k, v in series.items() if any(x is not None for x in v)}

    def append(self, now: float, samples: Mapping[str, Sample]) -> History:
        """A new view with one more sample per series; series absent now read ``None``."""
        return self.append_blocks(now, (), samples)

    def append_blocks(
        self, now: float, blocks: Sequence[Block], samples: Mapping[str, Sample]
    ) -> History:
        """``append``, with whole families of series given as blocks (kind, series, ids,
        values): ``slot:ID:activity`` for every slot in one array (the hub's fast path,
        ``model.history_samples.history_blocks``)."""
        rings = self._columns
        if rings is None or rings.count != self._count:
            rings = self._copy(default_slack(self.capacity))  # an older view branches off
        rings.append_blocks(now, blocks, samples)
        return History(self.capacity, rings, rings.count)

    def frozen(self, families: Collection[tuple[str, str]] | None = None) -> History:
        """This view over a private copy of its window: exact however many appends follow
        (for a view kept a long time, such as a paused table's). ``families``: copy only
        those families of series, e.g. ``{("slot", "activity")}`` (what the table plots)."""
        if self._columns is None:
            return self
        return History(self.capacity, self._copy(0, families), self._count)

    def _copy(self, slack: int, families: Collection[tuple[str, str]] | None = None) -> Rings:
        fresh = Rings(self.capacity + slack + 1)  # + 1: the slot an append is writing
        old = self._columns
        if old is None:
            return fresh
        start = self._start()
        fresh.fill_from(old, start, self._count, families)
        return fresh

    def _start(self) -> int:
        """The oldest tick this view shows: its window, less what the rings overwrote since."""
        rings = self._columns
        start = max(0, self._count - self.capacity)
        return start if rings is None else max(start, rings.oldest())

    @property
    def times(self) -> tuple[float, ...]:
        rings = self._columns
        if rings is None:
            return ()
        return rings.times_between(self._start(), self._count)

    @property
    def appended(self) -> int:
        """How many ticks were appended up to this view (its newest is ``appended - 1``)."""
        return self._count

    @property
    def stored_series(self) -> int:
        """How many series the rings keep (benchmarks and tests)."""
        return 0 if self._columns is None else self._columns.series_count()

    def get(self, key: str) -> tuple[Sample, ...]:
        """The series aligned with ``times`` (``None`` where it had no sample); () if unknown."""
        rings = self._columns
        if rings is None:
            return ()
        return rings.between(key, self._start(), self._count)

    def last(self, key: str) -> Sample:
        """The newest sample of ``key`` in this view, without copying the series."""
        rings = self._columns
        tick = self._count - 1
        if rings is None or tick < 0 or tick <= rings.count - rings.size:
            return None  # empty, or so old that the rings overwrote it
        return rings.at(key, tick)

    def newest_at_least(self, kind: str, series: str, above: float) -> frozenset[str] | None:
        """The entities of a family (``slot``, ``activity``) whose newest sample is known and
        at least ``above``, read off the newest block in one pass; None when the family is not
        kept as one (series appended one by one: ask each key's ``last``)."""
        rings = self._columns
        if rings is None:
            return frozenset()
        family = rings.families.get((kind, series))
        if family is None:
            return None
        tick = self._count - 1
        if tick < 0 or tick <= rings.count - rings.size:
            return frozenset()
        return frozenset(family.at_least(tick, above))

    def back(self, key: str, ticks: int) -> Sample:
        """The sample of ``key`` taken ``ticks`` ticks before the newest (0: the newest); None
        beyond this view's window. O(1): trend rules test it before reading a window."""
        rings = self._columns
        if rings is None or not 0 <= ticks < min(self._count, self.capacity):
            return None
        tick = self._count - 1 - ticks
        return rings.at(key, tick) if tick >= rings.oldest() else None

    def family_back(self, kind: str, series: str, ticks: int) -> Callable[[str], Sample] | None:
        """``back`` for every entity of a family (``backend``, ``p95``) at once: a function
        from an entity's id to its sample ``ticks`` ticks before the newest (a dict lookup and
        an array read: a rule that asks it of thousands of entities builds no keys); None when
        the family is not kept as one (ask ``back`` with each key)."""
        rings = self._columns
        family = None if rings is None else rings.families.get((kind, series))
        if rings is None or family is None:
            return None
        tick = self._count - 1 - ticks
        pos = tick % family.size
        index, block = family.indexes[pos], family.blocks[pos]
        held = 0 <= ticks < min(self._count, self.capacity) and tick >= rings.oldest()
        if not held or family.ticks[pos] != tick or index is None or block is None:
            return lambda ident: None

        def sample(ident: str) -> Sample:
            i = index.get(ident)
            if i is None:
                return None
            v = block[i]
            return None if v != v else v

        return sample

    def newest_first(self, key: str, ticks: int) -> Iterator[Sample]:
        """``back(key, 0)``, ``back(key, 1)``, ... for the newest ``ticks`` ticks this view
        holds, lazily (a rule that stops at the first drop reads no further)."""
        rings = self._columns
        count = self._count
        if rings is None or ticks <= 0:
            return iter(())
        oldest = max(count - min(ticks, count, self.capacity), rings.oldest())
        return rings.newest_first(key, count - 1, oldest)

    def rose(self, keys: Iterable[str], ticks: int) -> list[str]:
        """The keys whose newest sample is known and above the one ``ticks`` ticks before it
        (known too): one pass, O(1) a key, for trend rules to pick the few worth a fit."""
        rings = self._columns
        count = self._count
        if rings is None or not 0 < ticks < min(count, self.capacity):
            return []
        old_tick = count - 1 - ticks
        if old_tick < rings.oldest():
            return []
        at = rings.at
        out: list[str] = []
        for key in keys:
            new = at(key, count - 1)
            if new is not None:
                old = at(key, old_tick)
                if old is not None and new > old:
                    out.append(key)
        return out

    def tail(self, key: str, ticks: int) -> tuple[Sample, ...]:
        """The newest ``ticks`` samples of ``key`` (aligned with ``times[-ticks:]``)."""
        rings = self._columns
        ticks = min(ticks, self._count, self.capacity)
        if rings is None or ticks <= 0:
            return ()
        return rings.between(key, max(self._count - ticks, self._start()), self._count)

    def window(self, key: str, now: float, seconds: float) -> tuple[Sample, ...]:
        """Samples of ``key`` taken in the last ``seconds`` (aligned with ``times``)."""
        start = now - seconds
        n = sum(1 for t in self.times if t >= start)
        values = self.get(key)
        return values[len(values) - n :] if n else ()

    def covers(self, now: float, seconds: float) -> bool:
        """True when the history reaches back at least ``seconds`` from ``now``."""
        times = self.times
        return bool(times) and now - times[0] >= seconds * 0.999


def sustained(history: History, key: str, now: float, seconds: float, above: float) -> bool:
    """True when every sample of the last ``seconds`` is known and at least ``above``."""
    newest = history.last(key)
    if newest is None or newest < above:
        return False  # the common case, decided without scanning the window
    if not history.covers(now, seconds):
        return False
    window = history.window(key, now, seconds)
    return bool(window) and all(v is not None and v >= above for v in window)


def last_known(values: Iterable[Sample]) -> Sample:
    result: Sample = None
    for v in values:
        if v is not None:
            result = v
    return result
