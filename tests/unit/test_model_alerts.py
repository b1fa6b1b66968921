"""Alert rules and history windows."""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpucon.model.alerts import AlertInputs, AlertThresholds, Severity, derive_alerts
from gpucon.model.fleet import (
    Backend,
    BackendState,
    Health,
    LatencyStats,
    QueueStats,
    Slot,
    SlotKind,
    SourceStatus,
)
from gpucon.model.history import History, sustained

T = AlertThresholds()


def history_of(key: str, values: Sequence[float | None], start: float = 0.0) -> History:
    h = History(capacity=200)
    for i, v in enumerate(values):
        h = h.append(start + i, {key: v})
    return h


def inputs(now: float, history: History | None = None, **parts: object) -> AlertInputs:
    base: dict[str, object] = dict(
        now=now,
        slots={},
        backends={},
        latency={},
        queues={},
        sources={"sim": SourceStatus("sim", Health.OK, None, now, 0.01)},
        history=history or History(),
    )
    base.update(parts)
    return AlertInputs(**base)  # type: ignore[arg-type]


def rules(alerts: tuple[object, ...]) -> set[str]:
    return {a.rule for a in alerts}  # type: ignore[attr-defined]


def test_history_ring_is_bounded_and_immutable() -> None:
    h1 = History(capacity=3)
    h2 = h1.append(1.0, {"k": 1.0})
    h3 = h2.append(2.0, {"k": 2.0}).append(3.0, {"k": 3.0}).append(4.0, {"k": 4.0})
    assert h1.get("k") == () and h2.get("k") == (1.0,)
    assert h3.get("k") == (2.0, 3.0, 4.0) and h3.times == (2.0, 3.0, 4.0)


def test_new_series_is_aligned_with_times() -> None:
    h = History(capacity=5).append(1.0, {"a": 1.0}).append(2.0, {"a": 2.0, "b": 9.0})
    assert h.get("b") == (None, 9.0)


def test_sustained_needs_a_full_window_above() -> None:
    h = history_of("k", [99.0] * 61)
    assert sustained(h, "k", 60.0, 60.0, 98.0)
    assert not sustained(history_of("k", [99.0] * 30), "k", 29.0, 60.0, 98.0)  # too short
    dip = [99.0] * 61
    dip[30] = 50.0
    assert not sustained(history_of("k", dip), "k", 60.0, 60.0, 98.0)
    gap: list[float | None] = [99.0] * 61
    gap[10] = None
    assert not sustained(history_of("k", gap), "k", 60.0, 60.0, 98.0)


def test_hot_slot_after_a_minute_at_98_percent() -> None:
    slot = Slot(id="h/gpu0/gi1", kind=SlotKind.MIG, activity_pct=99.0)
    hot = history_of("slot:h/gpu0/gi1:activity", [99.0] * 61)
    assert "hot_slot" in rules(derive_alerts(inputs(60.0, hot, slots={slot.id: slot}), T))
    brief = history_of("slot:h/gpu0/gi1:activity", [10.0] * 40 + [99.0] * 21)
    assert "hot_slot" not in rules(derive_alerts(inputs(60.0, brief, slots={slot.id: slot}), T))


def test_low_free_memory_on_a_slot() -> None:
    tight = Slot(id="s1", kind=SlotKind.MIG, mem_used_mib=9000.0, mem_total_mib=10000.0)
    roomy = Slot(id="s2", kind=SlotKind.MIG, mem_used_mib=1000.0, mem_total_mib=10000.0)
    unknown = Slot(id="s3", kind=SlotKind.MIG, mem_used_mib=None, mem_total_mib=10000.0)
    alerts = derive_alerts(inputs(0.0, slots={s.id: s for s in (tight, roomy, unknown)}), T)
    assert [a.target for a in alerts if a.rule == "low_memory"] == ["s1"]


def test_p95_over_backend_slo_uses_per_backend_slo() -> None:
    lat = {"a": LatencyStats("a", p95_ms=900.0), "b": LatencyStats("b", p95_ms=3000.0)}
    alerts = derive_alerts(inputs(0.0, latency=lat, slo_p95_ms={"a": 800.0}), T)
    assert sorted(a.target for a in alerts if a.rule == "p95_slo") == ["a", "b"]
    nan = derive_alerts(inputs(0.0, latency={"c": LatencyStats("c", p95_ms=math.nan)}), T)
    assert "p95_slo" not in rules(nan)


def test_queue_wait_for_a_minute() -> None:
    lat = {"a": LatencyStats("a", queue_ms=35.0)}
    h = history_of("backend:a:queue_ms", [35.0] * 61)
    assert "queue_wait" in rules(derive_alerts(inputs(60.0, h, latency=lat), T))
    q = {"gen:queue": QueueStats("gen:queue", oldest_age_s=45.754)}
    hq = history_of("queue:gen:queue:oldest", [45.754] * 61)
    assert "queue_wait" in rules(derive_alerts(inputs(60.0, hq, queues=q), T))
    # a shared queue's oldest entry is seconds old, not the backend's queue time in ms: half a
    # second waiting (a busy but healthy queue) is under the 5 s it takes to alert
    hq_low = history_of("queue:gen:queue:oldest", [0.5] * 61)
    assert "queue_wait" not in rules(derive_alerts(inputs(60.0, hq_low, queues=q), T))


def test_queue_wait_on_the_oldest_entry_says_seconds() -> None:
    q = {"gen:queue": QueueStats("gen:queue", oldest_age_s=45.754)}
    hq = history_of("queue:gen:queue:oldest", [45.754] * 61)
    (alert,) = [a for a in derive_alerts(inputs(60.0, hq, queues=q), T) if a.rule == "queue_wait"]
    assert alert.message == "oldest entry 46 s old > 5.0 s for 60s"
    lat = {"a": LatencyStats("a", queue_ms=35.0)}
    h = history_of("backend:a:queue_ms", [35.0] * 61)
    (alert,) = [a for a in derive_alerts(inputs(60.0, h, latency=lat), T) if a.rule == "queue_wait"]
    assert alert.message == "queue wait 35 ms > 20 ms for 60s"


def test_backend_not_ready_and_down() -> None:
    b = {
        "x": Backend("x", ready=False),
        "y": Backend("y", state=BackendState.DOWN),
        "z": Backend("z", ready=False, state=BackendState.DRAINED),  # drained on purpose
        "w": Backend("w", ready=True),
    }
    alerts = derive_alerts(inputs(0.0, backends=b), T)
    assert sorted(a.target for a in alerts if a.rule == "not_ready") == ["x", "y"]


def test_stale_source() -> None:
    sources = {
        "redis": SourceStatus("redis", Health.OK, None, last_ok_at=0.0),
        "prom": SourceStatus("prom", Health.DOWN, "ConnectionError: refused", last_ok_at=None),
        "nvml": SourceStatus("nvml", Health.OK, None, last_ok_at=99.0),
    }
    queues = {"gen:queue": QueueStats("gen:queue", length=3, group="g1", lag=1, pending=2)}
    alerts = derive_alerts(inputs(100.0, sources=sources, queues=queues), T)
    stale = {a.target: a for a in alerts if a.rule == "stale_source"}
    assert set(stale) == {"redis", "prom"}
    # Redis holds the request queue: without it nobody can tell whether requests are served
    assert stale["redis"].severity is Severity.CRITICAL
    assert stale["redis"].message == (
        "queue depth and wait unknown (gen:queue); registry not current: "
        "source stale, last good read 1m ago"
    )
    # Prometheus (latency, rates) and the others: their values are dimmed, WARN as before
    assert stale["prom"].severity is Severity.WARNING
    assert stale["prom"].message == "source stale, never read: ConnectionError: refused"
    # the critical source down comes first among the faults
    faults = [a.target for a in alerts if a.rule == "stale_source"]
    assert faults == ["redis", "prom"]


def test_a_first_read_that_failed_alerts_at_once_one_not_back_yet_waits() -> None:
    """A console whose only source answered "library not found" must not say "all clear"
    for its first 15 s; a source whose first read has not come back yet is given that time."""
    failed = SourceStatus(
        "nvml", Health.DOWN, "NVML not available", None, last_read_s=0.001, started_at=99.0
    )
    pending = SourceStatus("prom", Health.DOWN, "not read yet", None, None, started_at=99.0)
    alerts = derive_alerts(inputs(100.0, sources={"nvml": failed, "prom": pending}), T)
    [stale] = [a for a in alerts if a.rule == "stale_source"]
    assert stale.target == "nvml"
    assert stale.message == "source stale, never read: NVML not available"
    later = derive_alerts(inputs(99.0 + T.stale_after_s, sources={"prom": pending}), T)
    assert [a.target for a in later if a.rule == "stale_source"] == ["prom"]


def test_a_down_queue_source_names_the_streams_it_no_longer_reads() -> None:
    sources = {"redis": SourceStatus("redis", Health.DOWN, "TimeoutError", last_ok_at=99.5)}
    queues = {f"q{n}": QueueStats(f"q{n}", length=0) for n in range(4)}
    [alert] = [
        a
        for a in derive_alerts(inputs(100.0, sources=sources, queues=queues), T)
        if a.rule == "stale_source"
    ]
    assert alert.severity is Severity.CRITICAL
    assert alert.message.startswith("queue depth and wait unknown (q0, q1, +2); ")
    assert alert.message.endswith("last good read <2s ago: TimeoutError")
    # no stream read yet (Redis down from the start): the queue is unknown all the same
    [never] = [
        a
        for a in derive_alerts(
            inputs(100.0, sources={"redis": SourceStatus("redis", Health.DOWN, "refused")}), T
        )
        if a.rule == "stale_source"
    ]
    assert never.severity is Severity.CRITICAL
    assert never.message.startswith("queue depth and wait unknown; registry not current: ")


def test_order_is_cause_then_worst_then_newest_and_since_carries_over() -> None:
    slots = {"s1": Slot(id="s1", kind=SlotKind.MIG, mem_used_mib=9900.0, mem_total_mib=10000.0)}
    first = derive_alerts(inputs(10.0, slots=slots, backends={"x": Backend("x", ready=False)}), T)
    later = derive_alerts(
        inputs(
            20.0,
            slots=slots,
            backends={"x": Backend("x", ready=False)},
            latency={"a": LatencyStats("a", p95_ms=9e9)},
        ),
        T,
        first,
    )
    assert all(a.severity is Severity.CRITICAL for a in later)
    # the backend not ready, then the slot's memory, then the p95 they may cause (the newest)
    assert [a.target for a in later] == ["x", "s1", "a"]
    assert {a.target: a.since for a in later}["s1"] == 10.0


def test_history_views_do_not_change_after_later_appends() -> None:
    h = History(capacity=4)
    views = []
    for i in range(50):  # far past the trimming point (3 x capacity)
        h = h.append(float(i), {"k": float(i)} if i % 7 else {})
        views.append(h)
    assert views[-1].get("k") == (46.0, 47.0, 48.0, None)  # tick 49 had no sample
    assert views[-1].times == (46.0, 47.0, 48.0, 49.0)
    # a view taken earlier still shows what it showed then
    assert views[-3].get("k") == (44.0, 45.0, 46.0, 47.0)
    assert views[-3].last("k") == 47.0
    assert views[-1].last("k") is None


def test_history_branching_from_an_older_view_copies() -> None:
    h1 = History(capacity=3).append(1.0, {"k": 1.0})
    h2 = h1.append(2.0, {"k": 2.0})
    branch = h1.append(3.0, {"k": 30.0})
    assert h2.get("k") == (1.0, 2.0)
    assert branch.get("k") == (1.0, 30.0)
    assert branch.times == (1.0, 3.0)


def test_series_gone_for_two_windows_is_forgotten() -> None:
    h = History(capacity=2).append(0.0, {"gone": 1.0})
    for i in range(1, 10):
        h = h.append(float(i), {"kept": 1.0})
    assert h.get("gone") == ()
    assert h.get("kept") == (1.0, 1.0)


def test_queue_waiting_is_lag_plus_pending_not_the_stream_length() -> None:
    capped = QueueStats("gen:queue", length=10_000, lag=3, pending=4)
    assert capped.waiting == 7  # a capped stream sits at its MAXLEN; the work waiting is 7
    assert QueueStats("s", length=12, lag=None, pending=2).waiting == 2
    assert QueueStats("s", length=12).waiting == 12  # no consumer group: XLEN is all there is
    assert QueueStats("s").waiting is None


def test_not_ready_follows_each_ticks_backends_while_the_verdicts_stand() -> None:
    """The same verdicts (the liveness book hands the same mapping on) over new backend
    records: the rule reads this tick's states and records, not last tick's."""
    from gpucon.model.liveness import BackendLiveness

    live = {
        n: BackendLiveness(n, http_ready=True, http_fresh=True, serving=True)
        for n in ("a", "b", "c")
    }
    assert all(lv.serving is True for lv in live.values())

    def tick(states: dict[str, BackendState], owner: str) -> list[str]:
        b = {n: Backend(n, state=s, owner=owner) for n, s in states.items()}
        alerts = derive_alerts(inputs(0.0, backends=b, liveness=live), T)
        return sorted(a.message for a in alerts if a.rule == "not_ready")

    active = BackendState.ACTIVE
    assert tick({"a": active, "b": active, "c": active}, "ops") == []
    down = {"a": active, "b": BackendState.DOWN, "c": active}
    assert tick(down, "ops") == ["backend down: ops marked it down"]
    # the same states again: the message is this tick's record's (its owner)
    assert tick(down, "sched") == ["backend down: sched marked it down"]
    assert tick({"a": active, "b": active, "c": active}, "ops") == []
