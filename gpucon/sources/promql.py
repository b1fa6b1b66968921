"""Default PromQL, one query per metric family, for dcgm-exporter and Triton.

Each query returns one series per GPU / MIG slice / backend, so the number of queries per tick
is fixed whatever the fleet size. Templates may use ``{window}`` (the rate window, "1m").

dcgm-exporter names: the classic fields (``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, ratios 0–1;
``DCGM_FI_DEV_FB_USED``/``FB_FREE``, MiB). DCGM 4.6's exporter (4.6.0-4.8.3) renamed the
``Hostname`` label to ``hostname``; DCGM 4.7's exporter (4.9) renames the 23 fields DCGM 4.7
deprecates and moves memory to bytes (``DCGM_FI_DEV_FB_CAPACITY_BYTES`` is new). The default
queries match every spelling by ``__name__`` prefix and the parser converts by the unit the
name carries (``*_BYTES`` → MiB), so both generations read the same.

Triton: ``nv_inference_request_success``/``_failure`` (by ``reason``), quantiles from the
``nv_inference_request_summary_us`` summary, else ``histogram_quantile`` over
``nv_inference_request_duration_us_bucket``, else the mean from the cumulative counter
``nv_inference_request_duration_us`` per successful request; queue and compute time per
request; ``nv_inference_pending_request_count``. Series are grouped by the scrape ``instance``
(host:port, which the hub maps to a backend by its url) and a ``backend`` label if present.
"""

from __future__ import annotations

from collections.abc import Mapping

# family -> what it reads; the parser in gpucon.sources.prometheus knows each family's shape
DCGM_FAMILIES = ("gr_engine_active", "sm_active", "dram_active", "fb_memory")
TRITON_FAMILIES = (
    "requests",
    "failures",
    "latency_summary",
    "latency_histogram",
    "latency_average",
    "queue_time",
    "compute_time",
    "pending",
)

BY = "instance, backend"
_PER_REQUEST = "sum by ({by}) (rate({metric}[{{window}}])) / sum by ({by}) (rate(nv_inference_request_success[{{window}}]))"  # noqa: E501


def _histogram_quantiles() -> str:
    parts = [
        f"label_replace(histogram_quantile({q}, sum by ({BY}, le) "
        f'(rate(nv_inference_request_duration_us_bucket[{{window}}]))), "quantile", "{q}", "", "")'
        for q in ("0.5", "0.95", "0.99")
    ]
    return " or ".join(parts)


DEFAULT_QUERIES: Mapping[str, str] = {
    "gr_engine_active": '{__name__=~"DCGM_FI_PROF_GR_ENGINE_ACTIVE.*"}',
    "sm_active": '{__name__=~"DCGM_FI_PROF_SM_ACTIVE.*"}',
    "dram_active": '{__name__=~"DCGM_FI_PROF_DRAM_ACTIVE.*"}',
    "fb_memory": '{__name__=~"DCGM_FI_DEV_FB_(USED|FREE|TOTAL|CAPACITY).*"}',
    "requests": f"sum by ({BY}) (rate(nv_inference_request_success[{{window}}]))",
    "failures": f"sum by ({BY}, reason) (rate(nv_inference_request_failure[{{window}}]))",
    "latency_summary": (
        f'max by ({BY}, quantile) (nv_inference_request_summary_us{{quantile=~"0.5|0.95|0.99"}})'
    ),
    "latency_histogram": _histogram_quantiles(),
    "latency_average": _PER_REQUEST.format(by=BY, metric="nv_inference_request_duration_us"),
    "queue_time": _PER_REQUEST.format(by=BY, metric="nv_inference_queue_duration_us"),
    "compute_time": _PER_REQUEST.format(by=BY, metric="nv_inference_compute_infer_duration_us"),
    "pending": f"sum by ({BY}) (nv_inference_pending_request_count)",
    # whether each scrape target answered its last scrape (gpucon.sources.prom_up)
    "up": "up",
}


def render_queries(overrides: Mapping[str, str], window: str) -> dict[str, str]:
    """The PromQL to send per family: defaults, overridden by the config, window filled in."""
    merged = {**DEFAULT_QUERIES, **overrides}
    return {family: text.replace("{window}", window) for family, text in merged.items()}
