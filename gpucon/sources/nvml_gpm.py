"""Per-slice and per-GPU activity through GPM (GPU Performance Monitoring, Hopper and later).

GPM metrics are computed from two samples taken some time apart: each read takes one new
sample per target (``nvmlGpmSampleGet`` for a whole GPU, ``nvmlGpmMigSampleGet`` for a MIG
GPU instance) and asks ``nvmlGpmMetricsGet`` for SM activity between the previous sample and
this one (graphics activity only where SM activity cannot be had). The first read of a target
has no previous sample, so its activity is unknown (None), never 0.

Measured on the H200 under a CUDA load (benchmarks/nvml_gpm_probe.py, driver 580): SM
activity costs 2-12 µs per ``nvmlGpmMetricsGet``, graphics activity about 1.3 ms (alone or
with SM activity), so SM activity is asked for alone. Samples 10 ms apart answered 0 % for a
busy GPU (50 ms and more: 96 %), so a sample is only taken ``MIN_SPACING_S`` after the last
one, and the last activity is given again in between.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Hashable
from typing import Any

import msgspec

from gpucon.sources.nvml_calls import Garbage, NvmlCalls

GPM_SM_ACTIVITY = "GPM SM activity"
GPM_GRAPHICS_ACTIVITY = "GPM graphics activity"

# NVML_GPM_METRIC_SM_UTIL and NVML_GPM_METRIC_GRAPHICS_UTIL (nvml.h)
_SM_UTIL = 2
_GRAPHICS_UTIL = 1
_METRICS_GET_VERSION = 1
MIN_SPACING_S = 0.5


class GpmActivity(msgspec.Struct, frozen=True, gc=False):
    sm_pct: float | None
    graphics_pct: float | None

    def best(self) -> tuple[float | None, str | None]:
        """The activity to show and the metric's name; (None, None) when neither is known."""
        if self.sm_pct is not None:
            return self.sm_pct, GPM_SM_ACTIVITY
        if self.graphics_pct is not None:
            return self.graphics_pct, GPM_GRAPHICS_ACTIVITY
        return None, None


class GpmSampler:
    """Keeps the last GPM sample of each target and turns sample pairs into activity."""

    def __init__(self, calls: NvmlCalls, clock: Callable[[], float] = time.monotonic) -> None:
        self._calls = calls
        self._clock = clock
        # target key -> (previous sample, spare sample); the previous one is filled
        self._samples: dict[Hashable, tuple[Any, Any]] = {}
        # target key -> when its previous sample was taken, and the activity it gave
        self._taken_at: dict[Hashable, float] = {}
        self._last: dict[Hashable, GpmActivity | None] = {}

    def supported(self, device: Any) -> bool:
        support = self._calls.get("nvmlGpmQueryDeviceSupport", device)
        return bool(getattr(support, "isSupportedDevice", 0))

    def _pair(self, key: Hashable) -> tuple[Any, Any] | None:
        pair = self._samples.get(key)
        if pair is None:
            first = self._calls.get("nvmlGpmSampleAlloc", remember=False)
            second = self._calls.get("nvmlGpmSampleAlloc", remember=False)
            if first is None or second is None:
                return None
            pair = (first, second)
            self._samples[key] = pair
        return pair

    def activity(
        self, key: Hashable, device: Any, gi_id: int | None, garbage: Garbage
    ) -> GpmActivity | None:
        """Activity since the last sample of this target; None when GPM cannot say."""
        now = self._clock()
        taken_at = self._taken_at.get(key)
        if taken_at is not None and now - taken_at < MIN_SPACING_S:
            return self._last.get(key)
        pair = self._pair(key)
        if pair is None:
            return None
        previous, current = pair
        if gi_id is None:
            got = self._calls.get("nvmlGpmSampleGet", device, current)
        else:
            got = self._calls.get("nvmlGpmMigSampleGet", device, gi_id, current)
        if got is None:
            self._taken_at.pop(key, None)
            self._last.pop(key, None)
            return None
        self._samples[key] = (current, previous)
        self._taken_at[key] = now
        if taken_at is None:
            self._last[key] = None
            return None
        sm = self._metric(previous, current, _SM_UTIL, garbage)
        graphics = (
            None if sm is not None else self._metric(previous, current, _GRAPHICS_UTIL, garbage)
        )
        found = GpmActivity(sm, graphics)
        self._last[key] = found
        return found

    def _metric(self, first: Any, second: Any, metric_id: int, garbage: Garbage) -> float | None:
        """One metric between two samples (asking for graphics activity too costs ~1.3 ms)."""
        request = self._calls.nvml.c_nvmlGpmMetricsGet_t()
        request.version = _METRICS_GET_VERSION
        request.numMetrics = 1
        request.sample1 = first
        request.sample2 = second
        request.metrics[0].metricId = metric_id
        answer = self._calls.get("nvmlGpmMetricsGet", request, remember=False)
        if answer is None or answer.metrics[0].nvmlReturn != 0:
            return None
        return garbage.number(answer.metrics[0].value, f"GPM metric {metric_id}", 0.0, 100.0)

    def forget(self, key: Hashable) -> None:
        """Drop a target's samples (it is gone, e.g. after a re-slice)."""
        pair = self._samples.pop(key, None)
        self._taken_at.pop(key, None)
        self._last.pop(key, None)
        if pair is not None:
            for sample in pair:
                self._free(sample)

    def targets(self) -> tuple[Hashable, ...]:
        return tuple(self._samples)

    def close(self) -> None:
        for key in list(self._samples):
            self.forget(key)

    def _free(self, sample: Any) -> None:
        with contextlib.suppress(Exception):  # freeing must not fail the close
            self._calls.get("nvmlGpmSampleFree", sample, remember=False)
