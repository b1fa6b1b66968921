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
(host:port), Triton's ``model`` label and a ``backend`` label if present: one server often
serves several models, each registered as its own backend, and the merge joins them on
(host:port of the backend's url, model). ``version`` is kept on the request rate only (the
versions a model serves); the other families add versions up in PromQL, where histograms and
per-request means stay exact (summary quantiles of two live versions take the larger).

GPU health (``gpu_health``): temperature, power and its limit, GPU utilisation (percent) and
the last XID error, one query matching each field by exact name, one series per GPU.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# family -> what it reads; the parser in gpucon.sources.prometheus knows each family's shape
DCGM_FAMILIES = ("gr_engine_active", "sm_active", "dram_active", "fb_memory", "gpu_health")
# dcgm-exporter field -> Gpu field; the power limit under either name DCGM has used
GPU_HEALTH_FIELDS = {
    "DCGM_FI_DEV_GPU_TEMP": "temperature_c",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": "power_limit_w",
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": "power_limit_w",
    "DCGM_FI_DEV_GPU_UTIL": "util_pct",
    "DCGM_FI_DEV_XID_ERRORS": "xid_last",
}
# labels a MIG GPU instance's copy of a device field carries, and the card's own does not
PER_INSTANCE_LABELS = ("GPU_I_ID", "GPU_I_PROFILE", "pod", "namespace", "container")
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

BY = "instance, backend, model"
_PER_REQUEST = "sum by ({by}) (rate({metric}[{{window}}])) / sum by ({by}) (rate(nv_inference_request_success[{{window}}]))"  # noqa: E501


def _histogram_quantiles() -> str:
    parts = [
        f"label_replace(histogram_quantile({q}, sum by ({BY}, le) "
        f'(rate(nv_inference_request_duration_us_bucket[{{window}}]))), "quantile", "{q}", "", "")'
        for q in ("0.5", "0.95", "0.99")
    ]
    return " or ".join(parts)


def _gpu_health() -> str:
    """The whole-GPU fields, one series per GPU and field.

    The exporter repeats a MIG GPU's device fields on each of its GPU instances (with their
    pods): PromQL folds those copies into one, the field's name kept in ``dcgm_field`` since
    aggregation drops ``__name__``.
    """
    names = "|".join(GPU_HEALTH_FIELDS)
    return (
        f"max without ({', '.join(PER_INSTANCE_LABELS)}) "
        f'(label_replace({{__name__=~"{names}"}}, "dcgm_field", "$1", "__name__", "(.+)"))'
    )


DEFAULT_QUERIES: Mapping[str, str] = {
    "gr_engine_active": '{__name__=~"DCGM_FI_PROF_GR_ENGINE_ACTIVE.*"}',
    "sm_active": '{__name__=~"DCGM_FI_PROF_SM_ACTIVE.*"}',
    "dram_active": '{__name__=~"DCGM_FI_PROF_DRAM_ACTIVE.*"}',
    "fb_memory": '{__name__=~"DCGM_FI_DEV_FB_(USED|FREE|TOTAL|CAPACITY).*"}',
    "gpu_health": _gpu_health(),
    "requests": f"sum by ({BY}, version) (rate(nv_inference_request_success[{{window}}]))",
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


_DURATION_UNITS_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w)")


def window_seconds(window: str) -> float | None:
    """A PromQL duration ("1m", "30s", "1m30s") in seconds; None if it is not one."""
    text = window.strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(int(n) * _DURATION_UNITS_S[u] for n, u in parts)
