"""Prometheus's ``up`` per scrape target: did the last scrape of each backend succeed.

One more instant query per read (family ``up``; a config may narrow it, e.g.
``up{job="triton"}``). Each series becomes a ``TargetUp`` keyed by its ``instance`` label
(host:port); the hub matches it to backends by their url. Pure; garbage is noted, never raised.

A target that is down is dated once per outage (``down_since_query``): the last time
Prometheus's own samples had it up, within ``DOWN_LOOKBACK``, so a console started in the
middle of an outage says how long it has lasted, not how long this console has watched it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from gpucon.model.liveness import TargetUp
from gpucon.sources.problems import Problems
from gpucon.sources.prom_parse import labels_of, sample_value

UP_FAMILY = "up"
UP_QUERY = "up"
# how far back a down target's last ``up`` = 1 is looked for, and at what step: no longer
# than a scrape interval, or a target up for one scrape between two steps is missed (the
# date is the step after its last ``up`` = 1 sample); targets dated per query at most
DOWN_LOOKBACK = "30m"
DOWN_STEP = "1s"
DOWN_DATED_PER_QUERY = 50


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


def down_since_query(instances: Iterable[str]) -> str:
    """PromQL for the last time each of ``instances`` had ``up`` = 1 (epoch seconds, at the
    step's resolution); a target not up within the look-back returns no series."""
    # a regex of the exact names, written as a PromQL string (its backslashes doubled)
    alternatives = "|".join(re.escape(i) for i in sorted(instances))
    literal = alternatives.replace("\\", "\\\\").replace('"', '\\"')
    return (
        f'max by (instance) (max_over_time(timestamp(up{{instance=~"{literal}"}} == 1)'
        f"[{DOWN_LOOKBACK}:{DOWN_STEP}]))"
    )


def parse_down_since(
    series_list: Sequence[Mapping[str, Any]], problems: Problems
) -> dict[str, float]:
    """instance -> the last time it was up, from ``down_since_query``'s answer."""
    found: dict[str, float] = {}
    for series in series_list:
        instance = labels_of(series).get("instance")
        value = sample_value(series, "up (down since)", problems)
        if isinstance(instance, str) and value is not None and value > 0:
            found[instance] = value
    return found


class DownDates:
    """The date of each down target's outage, asked of Prometheus once per outage (a target
    seen up again is forgotten; one the look-back does not date stays undated)."""

    def __init__(self) -> None:
        self._dated: dict[str, float | None] = {}

    def undated(self, targets: Sequence[TargetUp]) -> list[str]:
        """The down targets not asked about yet (at most ``DOWN_DATED_PER_QUERY``); forgets
        the targets that are up again."""
        down = {t.instance for t in targets if not t.up}
        for instance in [i for i in self._dated if i not in down]:
            del self._dated[instance]
        return sorted(i for i in down if i not in self._dated)[:DOWN_DATED_PER_QUERY]

    def learn(self, asked: Iterable[str], found: Mapping[str, float]) -> None:
        for instance in asked:
            self._dated[instance] = found.get(instance)

    def dated(self, targets: Sequence[TargetUp]) -> list[TargetUp]:
        """``targets`` with each down one's ``since`` where known."""
        dates = self._dated
        if not dates:
            return list(targets)
        return [
            msgspec.structs.replace(t, since=at)
            if not t.up and (at := dates.get(t.instance)) is not None
            else t
            for t in targets
        ]
