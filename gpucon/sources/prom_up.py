"""Prometheus's ``up`` per scrape target: did the last scrape of each backend succeed.

One more instant query per read (family ``up``; a config may narrow it, e.g.
``up{job="triton"}``). Each series becomes a ``TargetUp`` keyed by its ``instance`` label
(host:port); the hub matches it to backends by their url. Pure; garbage is noted, never raised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpucon.model.liveness import TargetUp
from gpucon.sources.problems import Problems
from gpucon.sources.prom_parse import labels_of, sample_value

UP_FAMILY = "up"
UP_QUERY = "up"


def parse_up(series_list: Sequence[Mapping[str, Any]], problems: Problems) -> list[TargetUp]:
    """One TargetUp per ``instance``; a target scraped by several jobs is up if any job is."""
    by_instance: dict[str, TargetUp] = {}
    for series in series_list:
        labels = labels_of(series)
        instance = labels.get("instance")
        if not isinstance(instance, str) or not instance:
            problems.add("up: a series has no instance label")
            continue
        value = sample_value(series, UP_FAMILY, problems)
        if value is None:
            continue
        job = labels.get("job")
        target = TargetUp(instance, value >= 1.0, job if isinstance(job, str) else None)
        known = by_instance.get(instance)
        if known is None or (target.up and not known.up):
            by_instance[instance] = target
    return [by_instance[k] for k in sorted(by_instance)]
