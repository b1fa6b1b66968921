"""``queue_slo``: requests have waited in a stream longer than any model's p95 SLO.

A backend's p95 is what its server measures, from when it takes a request: the wait in the
stream before it is not in it. Under a burst the table can read ``23/2500`` on every row while
the oldest request has waited 9.6 s, past the SLO before any server saw it. When the oldest
waiting entry of a stream is older than the largest p95 SLO of the backends taking work, some
users get more than any SLO allows whatever the servers say: CRIT, on the stream, saying how
long it waited, how many wait, and that a server's p95 starts when it takes the request. A
symptom (the cause is the backends that do not keep up, or none taking work). Silent while
the queue's source is stale (``stale_source`` speaks then) and while no backend takes work
(``no_backends`` and ``not_ready`` do).
"""

from __future__ import annotations

from collections.abc import Iterable

from gpucon.model.alert_base import AlertInputs, AlertThresholds, Severity, fmt_wait
from gpucon.model.fleet import BackendState
from gpucon.model.queue_stall import fresh_queue

_TAKES_WORK = (BackendState.ACTIVE, BackendState.DRAINING)


def queue_slo(i: AlertInputs, t: AlertThresholds) -> Iterable[tuple[str, str, Severity, str]]:
    if not i.queues or not fresh_queue(i, t):
        return
    ages = [q.oldest_age_s for q in i.queues.values() if q.oldest_age_s is not None]
    if not ages:
        return
    oldest_ms = max(ages) * 1000.0
    slo_of = i.slo_p95_ms.get
    default = t.default_slo_p95_ms
    backends = i.backends.values()
    # most ticks: a backend taking work has an SLO that allows the oldest wait, found at the
    # first such backend (not a maximum over thousands of them every tick)
    if any(b.state in _TAKES_WORK and slo_of(b.name, default) >= oldest_ms for b in backends):
        return
    slo_ms = _largest_slo_ms(i, t)
    if slo_ms is None:
        return  # no backend takes work: no_backends and not_ready speak
    for stream, q in i.queues.items():
        age_s = q.oldest_age_s
        if age_s is None or age_s * 1000.0 <= slo_ms:
            continue
        waiting = (q.lag or 0) + (q.pending or 0)
        yield (
            "queue_slo",
            stream,
            Severity.CRITICAL,
            f"oldest request waited {fmt_wait(age_s)}, past every p95 SLO "
            f"(largest {slo_ms:.0f} ms), {waiting} waiting; a server's p95 starts when it "
            "takes the request",
        )


def _largest_slo_ms(i: AlertInputs, t: AlertThresholds) -> float | None:
    """The largest p95 SLO of the backends taking work (None: none takes work)."""
    slo_of = i.slo_p95_ms.get
    slos = [
        slo_of(b.name, t.default_slo_p95_ms) for b in i.backends.values() if b.state in _TAKES_WORK
    ]
    return max(slos) if slos else None


def past_slo_since(i: AlertInputs, t: AlertThresholds, stream: str) -> float | None:
    """When the stream's oldest waiting request passed the largest SLO: its age is its entry
    id's (Redis's clock), so a console started long after knows the breach's start."""
    q = i.queues.get(stream)
    slo_ms = _largest_slo_ms(i, t)
    if q is None or q.oldest_age_s is None or slo_ms is None:
        return None
    return i.now - (q.oldest_age_s - slo_ms / 1000.0)


RULES = (queue_slo,)
