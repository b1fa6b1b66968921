"""``queue_stalled`` through ``derive_alerts``: WARN then CRIT as the consumers stay idle, a
cause that leads the queue's symptoms, and silence while the queue's source is stale (its idle
time is that of its last read). The readings themselves: tests/integration/test_queue_stall.py.
"""

from __future__ import annotations

from msgspec.structs import replace

from gpucon.model.alerts import Alert, AlertThresholds, Cause, Severity, derive_alerts
from gpucon.model.fleet import (
    Backend,
    BackendState,
    Health,
    LatencyStats,
    QueueStats,
    SourceStatus,
)
from gpucon.model.history import History
from gpucon.model.queue_stall import STALL_CRIT_S, STALL_WARN_S
from gpucon.model.registry_memory import RegistryListed, track_registry_listed
from tests.unit.test_model_early_warning import inputs

NOW = 1000.0


def stall_alerts(q: QueueStats, redis_ok_at: float = NOW) -> list[Alert]:
    sources = {"redis": SourceStatus("redis", Health.OK, None, redis_ok_at, 0.01)}
    found = derive_alerts(
        inputs(NOW, History(capacity=8), queues={q.stream: q}, sources=sources), AlertThresholds()
    )
    return [a for a in found if a.rule == "queue_stalled"]


def queue(idle_s: float | None, lag: int = 40, consumers: int | None = 1) -> QueueStats:
    return QueueStats(
        "gen:queue",
        group="g1",
        lag=lag,
        pending=2,
        oldest_age_s=idle_s,
        consumers=consumers,
        consumer_idle_s=idle_s,
    )


def test_idle_consumers_warn_then_crit_and_the_alert_is_a_cause() -> None:
    assert stall_alerts(queue(STALL_WARN_S - 1)) == []  # a long request, still read
    (warn,) = stall_alerts(queue(STALL_WARN_S + 5))
    assert warn.severity is Severity.WARNING and warn.target == "gen:queue"
    assert warn.cause is Cause.FAULT
    assert warn.message == (
        "no consumer of group g1 has read for 25 s (1 consumer(s)): 40 never delivered, "
        "oldest 25 s; it holds 2 unacknowledged: the scheduler died, or is stuck on them"
    )
    idle = replace(queue(STALL_WARN_S + 5), pending=0)  # nothing held: it is not stuck
    (alert,) = stall_alerts(idle)
    assert alert.message.endswith("oldest 25 s; is the scheduler running?")
    (crit,) = stall_alerts(queue(STALL_CRIT_S + 30))
    assert crit.severity is Severity.CRITICAL
    assert "has read for 1.5 min" in crit.message


def test_nothing_undelivered_or_unknown_idle_raises_nothing() -> None:
    assert stall_alerts(queue(STALL_CRIT_S * 2, lag=0)) == []  # consumers idle, queue empty
    assert stall_alerts(queue(None)) == []  # idle not read (a simulated queue)
    assert stall_alerts(QueueStats("gen:queue", length=0)) == []  # no group, nothing in it


def test_entries_in_a_stream_whose_group_is_gone_are_read_by_nobody() -> None:
    """A Redis restarted empty: the producers made the stream again, nobody made the group."""
    (alert,) = stall_alerts(QueueStats("gen:queue", length=50))
    assert (alert.severity, alert.cause) == (Severity.CRITICAL, Cause.FAULT)
    assert alert.message.startswith("stream gen:queue has no consumer group: nobody reads its 50")


def test_a_group_without_consumer_is_critical() -> None:
    (alert,) = stall_alerts(queue(None, lag=12, consumers=0))
    assert alert.severity is Severity.CRITICAL
    assert alert.message.startswith("group g1 has no consumer: 12 never delivered")


def test_a_stale_queue_source_says_nothing_about_the_stall() -> None:
    stale_at = NOW - AlertThresholds().stale_after_s - 5
    assert stall_alerts(queue(STALL_CRIT_S + 30), redis_ok_at=stale_at) == []


def registry_alerts(**parts: object) -> list[Alert]:
    base: dict[str, object] = dict(
        queues={"gen:queue": queue(1.0, lag=6)},
        sources={"redis": SourceStatus("redis", Health.OK, None, NOW, 0.01)},
    )
    base.update(parts)
    found = derive_alerts(inputs(NOW, History(capacity=8), **base), AlertThresholds())
    return [a for a in found if a.rule == "no_backends"]


def test_an_empty_registry_under_a_served_stream_is_named() -> None:
    (alert,) = registry_alerts()
    assert (alert.target, alert.severity, alert.cause) == (
        "registry",
        Severity.CRITICAL,
        Cause.FAULT,
    )
    assert alert.message == (
        "the scheduler registry lists no backend: nothing serves gen:queue (8 waiting)"
    )
    # the servers still run and report: say so (a Redis restarted empty, not a new fleet)
    lat = {"127.0.0.1:52199": LatencyStats("127.0.0.1:52199", req_per_s=0.0)}
    (alert,) = registry_alerts(latency=lat)
    assert alert.message.endswith(
        "; Prometheus still reports 1 inference server(s): unregistered, or Redis restarted "
        "without its data?"
    )
    empty = QueueStats("gen:queue", group="g1", lag=0, pending=0)
    (calm,) = registry_alerts(queues={"gen:queue": empty})
    assert calm.severity is Severity.WARNING  # nothing waits yet


def test_no_registry_alert_with_backends_without_redis_or_while_redis_is_stale() -> None:
    assert registry_alerts(backends={"b0": Backend("b0")}) == []
    assert registry_alerts(sources={"sim": SourceStatus("sim", Health.OK, None, NOW, 0.01)}) == []
    stale = SourceStatus("redis", Health.DOWN, "refused", NOW - 60, 0.01)
    assert registry_alerts(sources={"redis": stale}) == []
    assert registry_alerts(queues={"gen:queue": QueueStats("gen:queue", length=3)}) == []


def test_a_registry_that_listed_backends_and_lists_none_lost_them() -> None:
    """It listed 3 until the last good read: lost, CRIT, dated from that read, served stream
    or not (a Redis restarted empty lost the group too)."""
    listed = RegistryListed(3, NOW - 14)
    (alert,) = registry_alerts(registry_listed=listed)
    assert alert.severity is Severity.CRITICAL and alert.since == NOW - 14
    assert alert.message == (
        "the scheduler registry lost every backend: it listed 3, now none (Redis restarted "
        "without its data, or its keys were deleted?); nothing is scheduled from gen:queue "
        "(8 waiting)"
    )
    no_group = {"gen:queue": QueueStats("gen:queue", length=5)}
    (alert,) = registry_alerts(registry_listed=listed, queues=no_group)
    assert alert.message.endswith("nothing is scheduled from gen:queue (5 waiting)")
    # with backends, or while Redis is out (its last word stands), nothing
    assert registry_alerts(registry_listed=listed, backends={"b0": Backend("b0")}) == []
    stale = SourceStatus("redis", Health.DOWN, "refused", NOW - 60, 0.01)
    assert registry_alerts(registry_listed=listed, sources={"redis": stale}) == []


def test_the_registry_listing_is_kept_from_fresh_non_empty_reads_only() -> None:
    two = {"b0": Backend("b0"), "b1": Backend("b1")}
    first = track_registry_listed(None, two, True, 10.0)
    assert first == RegistryListed(2, 10.0)
    assert track_registry_listed(first, {}, True, 11.0) is first  # emptied: remembered
    assert track_registry_listed(first, {"b0": Backend("b0")}, False, 12.0) is first  # stale
    assert track_registry_listed(first, {"b0": Backend("b0")}, True, 13.0) == RegistryListed(
        1, 13.0
    )
    assert track_registry_listed(None, {}, True, 10.0) is None


def test_registered_backends_none_active_send_nothing_on() -> None:
    """Every backend drained (or down) while requests wait: CRIT, dated by the last drain;
    WARN while nothing waits; one active backend, or no stream, says nothing."""
    drained = {
        f"lab-b{n}": Backend(f"lab-b{n}", state=BackendState.DRAINED, changed_at=NOW - 30 + n)
        for n in range(3)
    }
    drained["lab-b2"] = replace(drained["lab-b2"], state=BackendState.DOWN)
    (alert,) = registry_alerts(backends=drained)
    assert (alert.severity, alert.since) == (Severity.CRITICAL, NOW - 28)
    assert alert.message == (
        "no backend is active: 1 down, 2 drained (lab-b0, lab-b1, lab-b2); nothing is sent on "
        "from gen:queue (8 waiting)"
    )
    empty = QueueStats("gen:queue", group="g1", lag=0, pending=0)
    (calm,) = registry_alerts(backends=drained, queues={"gen:queue": empty})
    assert calm.severity is Severity.WARNING
    one_active = dict(drained, a=Backend("a"))
    assert registry_alerts(backends=one_active) == []
    assert registry_alerts(backends=drained, queues={}) == []
    undated = dict(drained, x=Backend("x", state=BackendState.DRAINED))
    (alert,) = registry_alerts(backends=undated)
    assert alert.since == NOW  # a backend without changed_at: first seen now


def test_a_stall_with_no_active_backend_says_the_scheduler_has_nowhere_to_send() -> None:
    """The scheduler alive but every backend drained: it holds what it read and reads no more;
    the stall names the drained registry before a dead scheduler."""
    sources = {"redis": SourceStatus("redis", Health.OK, None, NOW, 0.01)}
    drained = {"b0": Backend("b0", state=BackendState.DRAINED)}
    parts = dict(queues={"gen:queue": queue(STALL_WARN_S + 5)}, sources=sources)
    found = derive_alerts(
        inputs(NOW, History(capacity=8), backends=drained, **parts), AlertThresholds()
    )
    (stall,) = [a for a in found if a.rule == "queue_stalled"]
    assert stall.message.endswith(
        "it holds 2 unacknowledged: no backend is active to send to (see registry), or it died"
    )
    active = {"b0": Backend("b0")}
    found = derive_alerts(
        inputs(NOW, History(capacity=8), backends=active, **parts), AlertThresholds()
    )
    (stall,) = [a for a in found if a.rule == "queue_stalled"]
    assert stall.message.endswith("the scheduler died, or is stuck on them")


def test_a_backend_that_left_the_registry_while_not_serving_is_kept_a_while() -> None:
    from gpucon.model.liveness import BackendLiveness
    from gpucon.model.registry_memory import (
        DEPARTED_KEEP_S,
        Departed,
        departures,
        track_departed,
    )

    before = {
        "b0": Backend("b0"),
        "b1": Backend("b1"),
        "b2": Backend("b2", state=BackendState.DOWN),
    }
    liveness = {
        "b0": BackendLiveness("b0", serving=True),
        "b1": BackendLiveness("b1", serving=False, because="http refused"),
    }
    now_listed = {"b0": Backend("b0")}
    left = departures(before, liveness, now_listed)
    assert left == {"b1": "http refused", "b2": "registry state down"}  # b0 stays: not news
    assert departures(before, liveness, before) == {}
    gone = track_departed((), left, now_listed, True, NOW)
    assert gone == (Departed("b1", NOW, "http refused"), Departed("b2", NOW, "registry state down"))
    assert track_departed(gone, {}, now_listed, True, NOW + 5) is gone  # unchanged: same
    assert track_departed((), left, now_listed, False, NOW) == ()  # a stale read: no news
    relisted = dict(now_listed, b1=Backend("b1"))
    assert [d.name for d in track_departed(gone, {}, relisted, True, NOW + 5)] == ["b2"]
    assert track_departed(gone, {}, now_listed, True, NOW + DEPARTED_KEEP_S + 1) == ()

    found = derive_alerts(
        inputs(
            NOW,
            History(capacity=8),
            backends=now_listed,
            sources={"redis": SourceStatus("redis", Health.OK, None, NOW, 0.01)},
            registry_departed=gone,
        ),
        AlertThresholds(),
    )
    (b1,) = [a for a in found if a.key == "left_registry:b1"]
    assert (b1.severity, b1.since) == (Severity.WARNING, NOW)
    assert b1.message == (
        "left the registry while not ready (http refused): its not-ready alert ended with it, "
        "not because it recovered; Redis restarted without its data, or it was removed?"
    )
