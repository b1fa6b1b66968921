"""Per-slice and per-GPU activity through GPM (GPU Performance Monitoring, Hopper and later).

GPM metrics are computed from two samples taken some time apart: each read takes one new
sample per target (``nvmlGpmSampleGet`` for a whole GPU, ``nvmlGpmMigSampleGet`` for a MIG
GPU instance) and asks ``nvmlGpmMetricsGet`` for SM activity and graphics activity between the
previous sample and this one. The first read of a target has no previous sample, so its
activity is unknown (None), never 0.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from gpucon.sources.nvml_calls import Garbage, NvmlCalls

GPM_SM_ACTIVITY = "GPM SM activity"
GPM_GRAPHICS_ACTIVITY = "GPM graphics activity"

# NVML_GPM_METRIC_SM_UTIL and NVML_GPM_METRIC_GRAPHICS_UTIL (nvml.h)
_SM_UTIL = 2
_GRAPHICS_UTIL = 1
_METRICS_GET_VERSION = 1


@dataclass(frozen=True, slots=True)
class GpmActivity:
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

    def __init__(self, calls: NvmlCalls) -> None:
        self._calls = calls
        # target key -> (previous sample, spare sample); the previous one is filled
        self._samples: dict[Hashable, tuple[Any, Any]] = {}
        self._filled: set[Hashable] = set()

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
        """Activity since the last call for this target; None when GPM cannot say."""
        pair = self._pair(key)
        if pair is None:
            return None
        previous, current = pair
        if gi_id is None:
            got = self._calls.get("nvmlGpmSampleGet", device, current)
        else:
            got = self._calls.get("nvmlGpmMigSampleGet", device, gi_id, current)
        if got is None:
            self._filled.discard(key)
            return None
        had_previous = key in self._filled
        self._samples[key] = (current, previous)
        self._filled.add(key)
        if not had_previous:
            return None
        request = self._calls.nvml.c_nvmlGpmMetricsGet_t()
        request.version = _METRICS_GET_VERSION
        request.numMetrics = 2
        request.sample1 = previous
        request.sample2 = current
        request.metrics[0].metricId = _SM_UTIL
        request.metrics[1].metricId = _GRAPHICS_UTIL
        answer = self._calls.get("nvmlGpmMetricsGet", request, remember=False)
        if answer is None:
            return None
        values: dict[int, float | None] = {}
        for i in range(2):
            metric = answer.metrics[i]
            ok = metric.nvmlReturn == 0
            values[metric.metricId] = (
                garbage.number(metric.value, f"GPM metric {metric.metricId}", 0.0, 100.0)
                if ok
                else None
            )
        return GpmActivity(values.get(_SM_UTIL), values.get(_GRAPHICS_UTIL))

    def forget(self, key: Hashable) -> None:
        """Drop a target's samples (it is gone, e.g. after a re-slice)."""
        pair = self._samples.pop(key, None)
        self._filled.discard(key)
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
