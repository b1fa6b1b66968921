"""Trend arithmetic over history windows: least-squares slope, Pearson r, known pairs.

Pure and small: the early-warning and noisy-neighbour rules call these only on the few series
that pass a cheap check on their newest samples, so a tick stays O(series) at fleet size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpucon.model.history import Sample


def known_points(
    times: Sequence[float], values: Sequence[Sample]
) -> tuple[list[float], list[float]]:
    """The (time, value) pairs where the value is known (gaps dropped), aligned at the end."""
    n = min(len(times), len(values))
    ts: list[float] = []
    vs: list[float] = []
    for t, v in zip(times[len(times) - n :], values[len(values) - n :], strict=True):
        if v is not None:
            ts.append(t)
            vs.append(v)
    return ts, vs


def slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The least-squares slope of ys over xs (per unit of x); None under 2 distinct xs."""
    n = len(xs)
    if n < 2 or n != len(ys):
        return None
    mx = sum(xs) / n
    my = sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0.0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r of two aligned series; None when fewer than 3 pairs or one is constant."""
    n = len(xs)
    if n < 3 or n != len(ys):
        return None
    mx = sum(xs) / n
    my = sum(ys) / n
    sxy = sxx = syy = 0.0
    for x, y in zip(xs, ys, strict=True):
        dx = x - mx
        dy = y - my
        sxy += dx * dy
        sxx += dx * dx
        syy += dy * dy
    if sxx <= 0.0 or syy <= 0.0:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def ticks_within(times: Sequence[float], now: float, seconds: float) -> int:
    """How many of the newest ``times`` fall in the last ``seconds`` (``times`` ascending)."""
    start = now - seconds
    n = 0
    for t in reversed(times):
        if t < start:
            break
        n += 1
    return n
