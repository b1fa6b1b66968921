"""What stops a stream from being served at all: nobody reads it, or nothing is registered.

``queue_stalled``: requests wait in a stream that no consumer of its group reads any more.

A queue that grows can mean the backends are too slow (``queue_growth`` says how fast) or that
nothing takes the requests at all: the scheduler died, or lost its connection. Only the second
is fixed by restarting the scheduler, so it has its own alert that names it. Redis keeps, per
consumer of a group, how long since it last read (``XINFO CONSUMERS`` ``idle``); the source
reports the smallest (``QueueStats.consumer_idle_s``). Entries that were never delivered
(``lag`` > 0) while every consumer has been idle that long mean nobody is reading: WARN after
``STALL_WARN_S``, CRIT after ``STALL_CRIT_S``; a group with no consumer at all is CRIT.

A live consumer that takes one long request at a time reads again when it is done, so the
thresholds sit above a long request's service time (a 14 s SDXL image) and do not fire on it;
one whose requests hang holds them unacknowledged, and the message then says it may be stuck.
The rule says nothing while the queue's source is stale: its numbers are those of its last
read (``stale_source`` speaks then).

``no_backends``: the redis source reads the scheduler registry and it lists no backend while a
consumer group serves a stream: nothing can take its requests. An unpersisted Redis that was
restarted comes back empty (the lab's does), and the backends are still running: the message
counts the inference servers Prometheus still reports, which tells that case apart from a
fleet that was never registered.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpucon.model.alert_base import (
    AlertInputs,
    AlertThresholds,
    Found,
    Severity,
    fmt_duration,
    fmt_wait,
)
from gpucon.model.fleet import Health, QueueStats

RULE = "queue_stalled"
STALL_WARN_S = 20.0
STALL_CRIT_S = 60.0
# the source that reads streams (sources.redisq): a stale reading freezes the idle time
QUEUE_SOURCE = "redis"


def fresh_queue(i: AlertInputs, t: AlertThresholds) -> bool:
    """Whether the queue's source read well within its staleness limit (no such source: yes)."""
    status = i.sources.get(QUEUE_SOURCE)
    if status is None:
        return True
    age = status.age_s(i.now)
    limit = status.stale_after_s if status.stale_after_s is not None else t.stale_after_s
    return status.health is not Health.DOWN and age is not None and age <= limit


def stalled(
    q: QueueStats, warn_s: float = STALL_WARN_S, crit_s: float = STALL_CRIT_S
) -> tuple[Severity, str] | None:
    """The stream's stall (severity, message), or None while a consumer reads it."""
    if q.group is None or not q.lag:  # nothing waits to be delivered
        return None
    oldest = "" if q.oldest_age_s is None else f", oldest {fmt_wait(q.oldest_age_s)}"
    waiting = f"{q.lag} never delivered{oldest}"
    if q.consumers == 0:
        return (
            Severity.CRITICAL,
            f"group {q.group} has no consumer: {waiting}; is the scheduler running?",
        )
    idle = q.consumer_idle_s
    if idle is None or idle < warn_s:
        return None
    count = "" if q.consumers is None else f" ({q.consumers} consumer(s))"
    return (
        Severity.CRITICAL if idle >= crit_s else Severity.WARNING,
        f"no consumer of group {q.group} has read for {fmt_duration(idle)}{count}: "
        f"{waiting}; {_why(q)}",
    )


def _why(q: QueueStats) -> str:
    """A consumer that holds requests may be stuck on them (a scheduler reads no more while
    its concurrency is used up): say so rather than only asking whether it runs."""
    if q.pending:
        return f"it holds {q.pending} unacknowledged: the scheduler died, or is stuck on them"
    return "is the scheduler running?"


def queue_stalled(i: AlertInputs, t: AlertThresholds) -> Iterable[Found]:
    if not i.queues or not fresh_queue(i, t):
        return
    for stream, q in i.queues.items():
        found = stalled(q)
        if found is not None:
            yield (RULE, stream, *found)


def no_backends(i: AlertInputs, t: AlertThresholds) -> Iterable[Found]:
    if i.backends or QUEUE_SOURCE not in i.sources or not fresh_queue(i, t):
        return
    served = [q for q in i.queues.values() if q.group is not None]
    if not served:
        return
    waiting = sum(q.waiting or 0 for q in served)
    streams = ", ".join(q.stream for q in served)
    servers = len(i.latency)
    hint = (
        f"; Prometheus still reports {servers} inference server(s): unregistered, or Redis "
        "restarted without its data?"
        if servers
        else ""
    )
    yield (
        "no_backends",
        "registry",
        Severity.CRITICAL if waiting else Severity.WARNING,
        f"the scheduler registry lists no backend: nothing serves {streams} "
        f"({waiting} waiting){hint}",
    )


RULES = (queue_stalled, no_backends)
