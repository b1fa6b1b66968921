"""``queue_stalled`` through ``derive_alerts``: WARN then CRIT as the consumers stay idle, a
cause that leads the queue's symptoms, and silence while the queue's source is stale (its idle
time is that of its last read). The readings themselves: tests/integration/test_queue_stall.py.
"""

from __future__ import annotations

from msgspec.structs import replace

from gpucon.model.alerts import Alert, AlertThresholds, Cause, Severity, derive_alerts
from gpucon.model.fleet import Backend, Health, LatencyStats, QueueStats, SourceStatus
from gpucon.model.history import History
from gpucon.model.queue_stall import STALL_CRIT_S, STALL_WARN_S
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
    assert stall_alerts(QueueStats("gen:queue", length=50)) == []  # no group: nothing to say


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
