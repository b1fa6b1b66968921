"""Turn the Triton families' instant-query results into LatencyStats, one per served model.

A Triton server serves several models from one address, so a series is identified by its
``backend`` label (set by a relabelling rule) or its scrape ``instance`` (host:port), *and* its
``model`` label: two models behind one address are two LatencyStats, which the merge joins to
the two backends registered for them. A series without a ``model`` label (a custom query that
sums models away) keeps the address alone.

A model that served nothing in the window has no quantiles: a summary keeps its last
observations until they age out, and a p95 from those is not the backend's latency now.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpucon.model.fleet import LatencyStats
from gpucon.sources.problems import Problems
from gpucon.sources.prom_parse import labels_of, sample_value

QUANTILE_FIELDS = {"0.5": "p50_ms", "0.95": "p95_ms", "0.99": "p99_ms"}

# (backend label or instance, model label or None)
LatencyKey = tuple[str, str | None]


@dataclass
class _Latency:
    address: str | None
    values: dict[str, float] = field(default_factory=dict)
    reasons: dict[str, float] = field(default_factory=dict)
    # model version -> its request rate (summed over versions for the model's req/s)
    versions: dict[str, float] = field(default_factory=dict)


def latency_key(labels: Mapping[str, str]) -> LatencyKey | None:
    """Which served model a series belongs to; None if it names no backend nor instance."""
    key = labels.get("backend") or labels.get("instance") or None
    if key is None:
        return None
    return key, labels.get("model") or None


def parse_triton(
    results: Mapping[str, Sequence[Mapping[str, Any]]],
    problems: Problems,
    rate_window_s: float | None = None,
) -> list[LatencyStats]:
    """LatencyStats per (backend label or scrape instance, model)."""
    by_key: dict[LatencyKey, _Latency] = {}
    for family, series_list in results.items():
        for series in series_list:
            labels = labels_of(series)
            key = latency_key(labels)
            if key is None:
                problems.add(f"{family}: a series has neither a backend nor an instance label")
                continue
            value = sample_value(series, family, problems)
            if value is None:
                continue
            entry = by_key.setdefault(key, _Latency(labels.get("instance") or None))
            _add(entry, family, labels, value)
    ordered = sorted(by_key.items(), key=_order)
    return [_latency(key, entry, rate_window_s) for key, entry in ordered]


def _order(item: tuple[LatencyKey, _Latency]) -> tuple[str, str]:
    (key, model), _ = item
    return key, model or ""


def _add(entry: _Latency, family: str, labels: Mapping[str, str], value: float) -> None:
    if family == "failures":
        reason = labels.get("reason") or "unknown"
        entry.reasons[reason] = entry.reasons.get(reason, 0.0) + value
    elif family == "requests":
        # one series per version: the model's rate is their sum
        entry.values["requests"] = entry.values.get("requests", 0.0) + value
        version = labels.get("version")
        if version:
            entry.versions[version] = entry.versions.get(version, 0.0) + value
    elif family in ("latency_summary", "latency_histogram"):
        fld = QUANTILE_FIELDS.get(labels.get("quantile", ""))
        if fld is not None:
            entry.values[f"{family}:{fld}"] = value / 1000.0
    elif family in ("latency_average", "queue_time", "compute_time"):
        entry.values[family] = value / 1000.0
    else:
        entry.values[family] = value


def _latency(key: LatencyKey, e: _Latency, rate_window_s: float | None) -> LatencyStats:
    v = e.values
    ok = v.get("requests")
    # no successful request in the window: whatever quantile a summary still holds is stale
    idle = ok is not None and ok <= 0.0

    def quantile(fld: str) -> float | None:
        if idle:
            return None
        summary = v.get(f"latency_summary:{fld}")
        return summary if summary is not None else v.get(f"latency_histogram:{fld}")

    failed = sum(e.reasons.values()) if e.reasons else None
    total = (ok or 0.0) + (failed or 0.0)
    error_rate = (failed or 0.0) / total if total > 0 and (ok is not None or failed) else None
    name, model = key
    return LatencyStats(
        key=name,
        address=e.address,
        model=model,
        versions=tuple(sorted(e.versions)),
        rate_window_s=rate_window_s,
        req_per_s=ok,
        p50_ms=quantile("p50_ms"),
        p95_ms=quantile("p95_ms"),
        p99_ms=quantile("p99_ms"),
        error_rate=error_rate,
        errors_by_reason=tuple(sorted(e.reasons.items())),
        queue_ms=None if idle else v.get("queue_time"),
        compute_ms=None if idle else v.get("compute_time"),
        pending=v.get("pending"),
        avg_ms=None if idle else v.get("latency_average"),
    )
