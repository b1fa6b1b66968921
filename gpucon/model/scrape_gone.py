"""A backend whose scrape target Prometheus dropped: ``not_scraped``.

Prometheus answers, other targets report ``up``, but a backend this console saw scraped has
no ``up`` series any more (its target was removed from Prometheus's config, or its service
discovery lost it). Its P95 and REQ/S go ``n/a`` (after a minute of a rate that averages the
samples before), and nothing said why: the server may be serving fine, or not at all, and
Prometheus is no longer a witness either way. The hub keeps the backends it has seen scraped
(``track_scraped``); the rule names each one that is no longer, WARN, while Prometheus reads
fresh and still scrapes some target (a Prometheus that lost every target, or is down, is its
source's alert).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpucon.model.alert_base import AlertInputs, AlertThresholds, Found, Severity
from gpucon.model.fleet import Health
from gpucon.model.liveness import BackendLiveness

PROMETHEUS = "prometheus"  # the source that reads ``up`` (sources.prometheus)


def track_scraped(
    previous: frozenset[str], liveness: Mapping[str, BackendLiveness]
) -> frozenset[str]:
    """The backends this console has seen with an ``up`` series of their own (``previous``
    itself while none is new: the same object, tick after tick)."""
    new = [n for n, lv in liveness.items() if lv.prom_up is not None and n not in previous]
    return previous | frozenset(new) if new else previous


def _prometheus_fresh(i: AlertInputs, t: AlertThresholds) -> bool:
    status = i.sources.get(PROMETHEUS)
    if status is None or status.health is Health.DOWN:
        return False
    age = status.age_s(i.now)
    limit = status.stale_after_s if status.stale_after_s is not None else t.stale_after_s
    return age is not None and age <= limit


def not_scraped(i: AlertInputs, t: AlertThresholds) -> Iterable[Found]:
    if not i.scraped or not _prometheus_fresh(i, t):
        return
    liveness = i.liveness
    if not any(lv.prom_up is not None for lv in liveness.values()):
        return  # no target reports at all: not one backend's trouble
    for name in sorted(i.scraped):
        lv = liveness.get(name)
        backend = i.backends.get(name)
        if lv is None or backend is None or lv.prom_up is not None:
            continue
        target = f" ({backend.url})" if backend.url else ""
        yield (
            "not_scraped",
            name,
            Severity.WARNING,
            f"Prometheus no longer scrapes it{target}: no up series, so its p95 and req/s are "
            "no longer measured (a rate fades over its window); target removed from "
            "Prometheus's config, or lost by its discovery?",
        )


RULES = (not_scraped,)
