"""Short history rings for sparklines and time windows, seen through immutable views.

The hub appends one sample per series per tick; each ``append`` returns a new ``History`` view
that sees exactly the samples appended up to it (the last ``capacity`` of them), so a snapshot
handed to the UI never changes under it. Views share append-only columns: an append costs
O(series) amortized, not O(series × capacity) as copying tuples would (at 512 GPUs that was
~35 ms a tick). Only the hub's thread appends; any thread may read a view.

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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Sample = float | None

DEFAULT_CAPACITY = 120


def _offset(column: list[Sample]) -> int:
    """The tick of a column's first sample (kept in slot 0)."""
    return int(column[0])  # type: ignore[arg-type]


class _Columns:
    """Append-only sample columns shared by successive views.

    ``columns[key] = [offset, v0, v1, ...]``: ``v_i`` is the sample taken at tick ``offset + i``
    (the offset rides in slot 0 so that the per-tick append needs one dict lookup). Lists only
    grow; every ``capacity`` ticks long ones are replaced by a copy of their tail (a view that
    already fetched the old list keeps reading it), so memory stays bounded.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.count = 0
        self.times: list[Sample] = [0]
        self.columns: dict[str, list[Sample]] = {}

    def append(self, now: float, samples: Mapping[str, Sample]) -> None:
        tick = self.count
        self.times.append(now)
        columns = self.columns
        for key, value in samples.items():
            column = columns.get(key)
            if column is None:
                columns[key] = [tick, value]
                continue
            if (
                _offset(column) + len(column) - 1 != tick
            ):  # absent for a while: those ticks read None
                column.extend([None] * (tick - _offset(column) - len(column) + 1))
            column.append(value)
        self.count = tick + 1
        if self.count % self.capacity == 0:
            self._compact()

    def _compact(self) -> None:
        """Forget series gone for two whole windows; cut long lists to their last 2 windows."""
        keep = 2 * self.capacity
        horizon = self.count - keep
        self.times = self._tail(self.times, keep)
        for key, column in list(self.columns.items()):
            if _offset(column) + len(column) - 1 < horizon:
                del self.columns[key]
            elif len(column) > 3 * self.capacity + 1:
                self.columns[key] = self._tail(column, keep)

    @staticmethod
    def _tail(column: list[Sample], keep: int) -> list[Sample]:
        if len(column) <= 3 * keep // 2 + 1:
            return column
        cut = len(column) - 1 - keep
        return [_offset(column) + cut, *column[1 + cut :]]


@dataclass(frozen=True, slots=True, eq=False)
class History:
    """A view of the history rings: the last ``capacity`` samples of every series."""

    capacity: int = DEFAULT_CAPACITY
    _columns: _Columns | None = field(default=None, repr=False)
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
        keys = [] if self._columns is None else list(self._columns.columns)
        series = {k: self.get(k) for k in keys}
        return {k: v for k, v in series.items() if any(x is not None for x in v)}

    def append(self, now: float, samples: Mapping[str, Sample]) -> History:
        """A new view with one more sample per series; series absent now read ``None``."""
        columns = self._columns
        if columns is None or columns.count != self._count:
            columns = self._copy_columns()  # appending to an older view branches off a copy
        columns.append(now, samples)
        return History(self.capacity, columns, columns.count)

    def _copy_columns(self) -> _Columns:
        fresh = _Columns(self.capacity)
        old = self._columns
        if old is None:
            return fresh
        start = max(0, self._count - self.capacity)
        fresh.count = self._count
        fresh.times = [start, *self._slice(old.times, start)]
        for key in list(old.columns):
            fresh.columns[key] = [start, *self._slice(old.columns[key], start)]
        return fresh

    def _slice(self, column: list[Sample], start: int) -> tuple[Sample, ...]:
        offset = _offset(column)
        end = self._count
        lo = max(start, offset)
        if lo >= end:
            return (None,) * (end - start)
        head = (None,) * (lo - start)
        body = tuple(column[1 + lo - offset : 1 + end - offset])
        tail = (None,) * (end - lo - len(body))
        return head + body + tail

    @property
    def times(self) -> tuple[float, ...]:
        if self._columns is None:
            return ()
        start = max(0, self._count - self.capacity)
        return tuple(v for v in self._slice(self._columns.times, start) if v is not None)

    def get(self, key: str) -> tuple[Sample, ...]:
        """The series aligned with ``times`` (``None`` where it had no sample); () if unknown."""
        columns = self._columns
        column = None if columns is None else columns.columns.get(key)
        if column is None:
            return ()
        return self._slice(column, max(0, self._count - self.capacity))

    def last(self, key: str) -> Sample:
        """The newest sample of ``key`` in this view, without copying the series."""
        columns = self._columns
        column = None if columns is None else columns.columns.get(key)
        if column is None or self._count == 0:
            return None
        i = self._count - _offset(column)
        return column[i] if 0 < i < len(column) else None

    def back(self, key: str, ticks: int) -> Sample:
        """The sample of ``key`` taken ``ticks`` ticks before the newest (0: the newest); None
        beyond this view's window. O(1): trend rules test it before reading a window."""
        columns = self._columns
        column = None if columns is None else columns.columns.get(key)
        if column is None or not 0 <= ticks < min(self._count, self.capacity):
            return None
        i = self._count - ticks - _offset(column)
        return column[i] if 0 < i < len(column) else None

    def rose(self, keys: Iterable[str], ticks: int) -> list[str]:
        """The keys whose newest sample is known and above the one ``ticks`` ticks before it
        (known too): one pass, O(1) a key, for trend rules to pick the few worth a fit."""
        columns = self._columns
        count = self._count
        if columns is None or not 0 < ticks < min(count, self.capacity):
            return []
        get = columns.columns.get
        out: list[str] = []
        for key in keys:
            column = get(key)
            if column is None:
                continue
            i = count - int(column[0])  # type: ignore[arg-type]
            j = i - ticks
            if j > 0 and i < len(column):
                new, old = column[i], column[j]
                if new is not None and old is not None and new > old:
                    out.append(key)
        return out

    def tail(self, key: str, ticks: int) -> tuple[Sample, ...]:
        """The newest ``ticks`` samples of ``key`` (aligned with ``times[-ticks:]``)."""
        columns = self._columns
        column = None if columns is None else columns.columns.get(key)
        ticks = min(ticks, self._count, self.capacity)
        if column is None or ticks <= 0:
            return ()
        return self._slice(column, self._count - ticks)

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
