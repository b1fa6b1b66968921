"""The lab backend's Triton metrics: per-model counters and their Prometheus exposition.

Names and labels are Triton's (``model``, ``version``), one series per model the server serves,
each metric family's HELP and TYPE written once. The latency summary covers the requests of
the last ``SUMMARY_MAX_AGE_S`` (at most ``SUMMARY_WINDOW`` of them), as Triton's summary ages
its observations out: a model with no recent request has NaN quantiles, not its old ones.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

SUMMARY_WINDOW = 1024
SUMMARY_MAX_AGE_S = 60.0
SUMMARY_QUANTILES = (0.5, 0.9, 0.95, 0.99)


@dataclass(slots=True)
class TritonCounters:
    """Triton's per-model counters (names as in Triton's /metrics)."""

    success: int = 0
    failure: dict[str, int] = field(default_factory=dict)
    inference_count: int = 0
    exec_count: int = 0
    request_duration_us: int = 0
    queue_duration_us: int = 0
    compute_infer_duration_us: int = 0
    pending: int = 0
    # (monotonic time it finished, request duration in us) of the latest requests
    recent: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=SUMMARY_WINDOW))

    def fail(self, reason: str) -> None:
        self.failure[reason] = self.failure.get(reason, 0) + 1

    def succeed(self, total_us: int, queue_us: int, compute_us: int) -> None:
        self.success += 1
        self.inference_count += 1
        self.exec_count += 1
        self.request_duration_us += total_us
        self.queue_duration_us += queue_us
        self.compute_infer_duration_us += compute_us
        self.recent.append((time.monotonic(), total_us))

    def recent_us(self, now: float | None = None) -> list[int]:
        """The durations the summary covers now, sorted (old ones age out)."""
        horizon = (time.monotonic() if now is None else now) - SUMMARY_MAX_AGE_S
        while self.recent and self.recent[0][0] < horizon:
            self.recent.popleft()
        return sorted(us for _, us in self.recent)


def quantile(sorted_values: list[int], q: float) -> float:
    """The nearest-rank quantile the lab's summary reports; NaN without observations."""
    if not sorted_values:
        return math.nan
    idx = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return float(sorted_values[idx])


def _number(value: float) -> str:
    return "NaN" if math.isnan(value) else repr(value)


_FAMILIES = (
    ("nv_inference_count", "counter", "Number of inferences performed", "inference_count"),
    ("nv_inference_exec_count", "counter", "Number of model executions", "exec_count"),
    ("nv_inference_request_duration_us", "counter",
     "Cumulative inference request duration in microseconds", "request_duration_us"),
    ("nv_inference_queue_duration_us", "counter",
     "Cumulative inference queuing duration in microseconds", "queue_duration_us"),
    ("nv_inference_compute_infer_duration_us", "counter",
     "Cumulative compute inference duration in microseconds", "compute_infer_duration_us"),
    ("nv_inference_pending_request_count", "gauge",
     "Instantaneous number of pending requests awaiting execution", "pending"),
)  # fmt: skip


def render_metrics(counters: Mapping[str, TritonCounters]) -> str:
    """Every model's counters in Prometheus text format, with Triton's names and labels."""
    models = sorted(counters)
    lbl = {m: f'model="{m}",version="1"' for m in models}
    out = [
        "# HELP nv_inference_request_success Number of successful inference requests",
        "# TYPE nv_inference_request_success counter",
        *(f"nv_inference_request_success{{{lbl[m]}}} {counters[m].success}" for m in models),
        "# HELP nv_inference_request_failure Number of failed inference requests",
        "# TYPE nv_inference_request_failure counter",
    ]
    for m in models:
        failure = counters[m].failure
        for reason in sorted(failure or {"REJECTED": 0}):
            out.append(
                f'nv_inference_request_failure{{{lbl[m]},reason="{reason}"}} '
                f"{failure.get(reason, 0)}"
            )
    for name, kind, help_text, attr in _FAMILIES:
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        out += [f"{name}{{{lbl[m]}}} {getattr(counters[m], attr)}" for m in models]
    out += [
        "# HELP nv_inference_request_summary_us Summary of inference request duration in us",
        "# TYPE nv_inference_request_summary_us summary",
    ]
    for m in models:
        c = counters[m]
        recent = c.recent_us()
        for q in SUMMARY_QUANTILES:
            value = _number(quantile(recent, q))
            out.append(f'nv_inference_request_summary_us{{{lbl[m]},quantile="{q}"}} {value}')
        out.append(f"nv_inference_request_summary_us_count{{{lbl[m]}}} {c.success}")
        out.append(f"nv_inference_request_summary_us_sum{{{lbl[m]}}} {c.request_duration_us}")
    return "\n".join(out) + "\n"
