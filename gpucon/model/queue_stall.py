"""What stops a stream from being served at all: nobody reads it, nothing is registered, or
nothing registered is active.

``queue_stalled``: requests wait in a stream that no consumer of its group reads any more, or
whose consumer group is gone (``_no_group``).

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

``left_registry``: a backend that left the registry while not serving (``registry_memory``).

``no_backends``: the redis source reads the scheduler registry and it lists no backend while a
consumer group serves a stream: nothing can take its requests. When this console saw the
registry list backends before (``registry_listed``), it says the registry lost them all and
how many it had, dated from the last read that listed them (CRIT whatever waits, with or
without a consumer group: a Redis restarted empty has lost the group too). An unpersisted
Redis that was restarted comes back empty (the lab's does), and the backends are still
running: the message counts the inference servers Prometheus still reports, which tells that
case apart from a fleet that was never registered. It also says when the registry lists
backends and none is active (all drained, draining or down): nothing is sent on, CRIT while
requests wait, dated by the backends' last state move (``changed_at``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from gpucon.model.alert_base import (
    AlertInputs,
    AlertThresholds,
    Found,
    Severity,
    fmt_duration,
    fmt_wait,
)
from gpucon.model.fleet import BackendState, Health, QueueStats

RULE = "queue_stalled"
STALL_WARN_S = 20.0
STALL_CRIT_S = 60.0
NAMES_SHOWN = 4  # backends named in an alert before "…"
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
    q: QueueStats,
    warn_s: float = STALL_WARN_S,
    crit_s: float = STALL_CRIT_S,
    *,
    none_active: bool = False,
) -> tuple[Severity, str] | None:
    """The stream's stall (severity, message), or None while a consumer reads it;
    ``none_active``: no backend is active, so a live scheduler has nowhere to send."""
    if q.group is None:
        return _no_group(q)
    if not q.lag:  # nothing waits to be delivered
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
        f"{waiting}; {_why(q, none_active)}",
    )


def _no_group(q: QueueStats) -> tuple[Severity, str] | None:
    """A stream that holds entries while its consumer group is gone: nobody reads it at all.
    The redis source reads the configured group; a stream without it (a Redis restarted
    empty, whose stream the producers made again with their next XADD) is never delivered
    from, however long it grows: CRIT, not the slow backends ``queue_growth`` would suggest."""
    if not q.length:
        return None
    return (
        Severity.CRITICAL,
        f"stream {q.stream} has no consumer group: nobody reads its {q.length} entries "
        "(Redis restarted without its data, or the group was deleted?); the scheduler must "
        "create it again: is it running?",
    )


def _why(q: QueueStats, none_active: bool = False) -> str:
    """A consumer that holds requests may be stuck on them (a scheduler reads no more while
    its concurrency is used up): say so rather than only asking whether it runs. With no
    backend active, a live scheduler holds them for want of one: that is said first."""
    if none_active:
        held = f"it holds {q.pending} unacknowledged" if q.pending else "it reads nothing"
        return f"{held}: no backend is active to send to (see registry), or it died"
    if q.pending:
        return f"it holds {q.pending} unacknowledged: the scheduler died, or is stuck on them"
    return "is the scheduler running?"


def queue_stalled(i: AlertInputs, t: AlertThresholds) -> Iterable[Found]:
    if not i.queues or not fresh_queue(i, t):
        return
    # registered backends, none active (or the registry lost them all): a live scheduler
    # holds what it read with nowhere to send it
    backends = i.backends.values()
    none_active = (
        not any(b.state is BackendState.ACTIVE for b in backends)
        if backends
        else i.registry_listed is not None
    )
    for stream, q in i.queues.items():
        found = stalled(q, none_active=none_active)
        if found is not None:
            yield (RULE, stream, *found)


def no_backends(i: AlertInputs, t: AlertThresholds) -> Iterable[Found]:
    if QUEUE_SOURCE not in i.sources or not fresh_queue(i, t):
        return
    if i.backends:
        yield from _none_active(i)
        return
    servers = len(i.latency)
    lost = i.registry_listed
    if lost is not None:  # it listed backends before: lost, not a fleet never registered
        waiting = sum(q.waiting or 0 for q in i.queues.values())
        streams = ", ".join(i.queues) or "the queue"
        still = f"; Prometheus still reports {servers} inference server(s)" if servers else ""
        yield (
            "no_backends",
            "registry",
            Severity.CRITICAL,
            f"the scheduler registry lost every backend: it listed {lost.count}, now none "
            f"(Redis restarted without its data, or its keys were deleted?); nothing is "
            f"scheduled from {streams} ({waiting} waiting){still}",
        )
        return
    served = [q for q in i.queues.values() if q.group is not None]
    if not served:
        return
    waiting = sum(q.waiting or 0 for q in served)
    streams = ", ".join(q.stream for q in served)
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


def _none_active(i: AlertInputs) -> Iterable[Found]:
    """Backends registered, none of them active (all drained, draining or down) while a stream
    is read: no new request is sent anywhere, however the queue grows. CRIT while requests
    wait (``queue_growth`` alone said WARN and ``queue_slo`` falls silent with no backend
    taking work), WARN while nothing waits yet."""
    if not i.queues or any(b.state is BackendState.ACTIVE for b in i.backends.values()):
        return
    states = Counter(b.state.value for b in i.backends.values())
    counted = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
    names = sorted(i.backends)
    shown = ", ".join(names[:NAMES_SHOWN]) + (", …" if len(names) > NAMES_SHOWN else "")
    waiting = sum(q.waiting or 0 for q in i.queues.values())
    yield (
        "no_backends",
        "registry",
        Severity.CRITICAL if waiting else Severity.WARNING,
        f"no backend is active: {counted} ({shown}); nothing is sent on from "
        f"{', '.join(i.queues)} ({waiting} waiting)",
    )


def no_backends_since(i: AlertInputs) -> float | None:
    """When the registry stopped offering a backend, where it says: the last state move of
    its backends (``changed_at``, the writer's clock) when none is active, or the last read
    that listed backends when it lists none."""
    if not i.backends:
        return None if i.registry_listed is None else i.registry_listed.at
    moves = [b.changed_at for b in i.backends.values()]
    if any(at is None for at in moves):
        return None
    return max(at for at in moves if at is not None)


def left_registry(i: AlertInputs, t: AlertThresholds) -> Iterable[Found]:
    """``left_registry`` (WARN, on the backend): it left the registry while not serving, so its
    ``not_ready`` ended with it, not because it recovered (a Redis restarted empty forgets a
    backend whose server is gone: nothing registers it again)."""
    for d in i.registry_departed:
        yield (
            "left_registry",
            d.name,
            Severity.WARNING,
            f"left the registry while not ready ({d.because}): its not-ready alert ended with "
            "it, not because it recovered; Redis restarted without its data, or it was removed?",
        )


def departed_at(i: AlertInputs, name: str) -> float | None:
    """When a backend that ``left_registry`` names left it."""
    return next((d.at for d in i.registry_departed if d.name == name), None)


RULES = (queue_stalled, no_backends, left_registry)
