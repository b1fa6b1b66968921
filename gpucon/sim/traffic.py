"""Offered load: a daily tide with random bursts, deterministic for a seed.

The tide is lowest at 04:00 and highest at 16:00 (virtual local time); bursts arrive at random
(about every 20 minutes per model), ramp up, hold for half a minute to two, and ramp down.
"""

from __future__ import annotations

import math
import random

DAY_S = 86400.0
TROUGH_H = 4.0
TIDE_LOW = 0.3  # share of the peak rate at the trough
BURST_MEAN_GAP_S = 1200.0
RAMP_S = 15.0


def tide(seconds_of_day: float) -> float:
    """Share of the daily peak rate at this time of day (TIDE_LOW at 04:00, 1.0 at 16:00)."""
    hours = (seconds_of_day % DAY_S) / 3600.0
    swing = 0.5 - 0.5 * math.cos(2.0 * math.pi * (hours - TROUGH_H) / 24.0)
    return TIDE_LOW + (1.0 - TIDE_LOW) * swing


def ramp(t: float, start: float, hold_s: float, ramp_s: float = RAMP_S) -> float:
    """0→1 over ``ramp_s`` from ``start``, 1 for ``hold_s``, then 1→0 over ``ramp_s``."""
    if t <= start:
        return 0.0
    x = t - start
    if x < ramp_s:
        return x / ramp_s
    x -= ramp_s
    if x < hold_s:
        return 1.0
    x -= hold_s
    return max(0.0, 1.0 - x / ramp_s)


class BurstSchedule:
    """Random bursts for one model: the rate multiplier at a virtual time."""

    __slots__ = ("_amplitude", "_hold_s", "_rng", "_start")

    def __init__(self, rng: random.Random, first_after_s: float = 120.0) -> None:
        self._rng = rng
        self._start = first_after_s + rng.expovariate(1.0 / BURST_MEAN_GAP_S)
        self._hold_s = 0.0
        self._amplitude = 0.0
        self._draw_shape()

    def _draw_shape(self) -> None:
        self._hold_s = self._rng.uniform(30.0, 120.0)
        self._amplitude = self._rng.uniform(0.3, 1.0)

    def factor(self, t: float) -> float:
        if t < self._start:
            return 1.0
        if t > self._start + self._hold_s + 2 * RAMP_S:
            self._start += self._hold_s + 2 * RAMP_S + self._rng.expovariate(1 / BURST_MEAN_GAP_S)
            self._draw_shape()
            return 1.0
        return 1.0 + self._amplitude * ramp(t, self._start, self._hold_s)
