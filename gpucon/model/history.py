"""Short history rings for sparklines and time windows, as immutable tuples.

Each tick appends one sample per series and drops the oldest beyond ``capacity``; the result
is a new ``History`` (the old one stays valid, so a snapshot handed to the UI never changes).
Series keys: ``slot:ID:activity``, ``slot:ID:mem_used``, ``backend:NAME:p95``,
``backend:NAME:rps``, ``backend:NAME:queue_ms``, ``queue:STREAM:length``, ``queue:STREAM:oldest``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Sample = float | None

DEFAULT_CAPACITY = 120


@dataclass(frozen=True, slots=True)
class History:
    capacity: int = DEFAULT_CAPACITY
    times: tuple[float, ...] = ()
    series: Mapping[str, tuple[Sample, ...]] = field(default_factory=dict)

    def append(self, now: float, samples: Mapping[str, Sample]) -> History:
        """A new History with one more sample per series; series absent now get ``None``."""
        cap = self.capacity
        times = (*self.times[-(cap - 1) :], now) if cap > 1 else (now,)
        length = len(times)
        new: dict[str, tuple[Sample, ...]] = {}
        keep = cap - 1
        for key, old in self.series.items():
            value = samples.get(key)
            if value is None and all(v is None for v in old[-keep:]):
                continue  # a series gone for a whole window is dropped
            new[key] = (*old[-keep:], value) if keep > 0 else (value,)
        for key, value in samples.items():
            if key not in new:
                new[key] = (*((None,) * (length - 1)), value)
        return History(capacity=cap, times=times, series=new)

    def get(self, key: str) -> tuple[Sample, ...]:
        return self.series.get(key, ())

    def window(self, key: str, now: float, seconds: float) -> tuple[Sample, ...]:
        """Samples of ``key`` taken in the last ``seconds`` (aligned with ``times``)."""
        values = self.series.get(key, ())
        start = now - seconds
        n = sum(1 for t in self.times if t >= start)
        return values[len(values) - n :] if n else ()

    def covers(self, now: float, seconds: float) -> bool:
        """True when the history reaches back at least ``seconds`` from ``now``."""
        return bool(self.times) and now - self.times[0] >= seconds * 0.999


def sustained(history: History, key: str, now: float, seconds: float, above: float) -> bool:
    """True when every sample of the last ``seconds`` is known and at least ``above``."""
    values = history.series.get(key)
    if not values or values[-1] is None or values[-1] < above:
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
