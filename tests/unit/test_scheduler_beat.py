"""The schedulers' heartbeat contract and the stale in-flight counts of a silent scheduler."""

from __future__ import annotations

import pytest

from gpucon.model.alert_base import Severity
from gpucon.model.fleet import Backend, BackendState
from gpucon.model.reading import SchedulerBeat
from gpucon.model.scheduler_beat import SCHEDULER, BeatClock, SchedulerStaleness, silent_age
from gpucon.model.staleness import FRESH, Staleness
from gpucon.registry.heartbeat import Heartbeat, heartbeat_text, parse_heartbeats


def test_the_newest_heartbeat_wins_and_garbage_is_named() -> None:
    newest, problems = parse_heartbeats(
        {
            "a": heartbeat_text(100.0),
            "b": heartbeat_text(105.5, 2.0),
            "c": "not json",
            "d": '{"at": -1, "every_s": 1}',
            "e": '{"at": 200, "every_s": 0}',
        }
    )
    assert newest == Heartbeat("b", 105.5, 2.0)
    assert [p.split(":")[1].split()[1] for p in problems] == ["'c'", "'d'", "'e'"]
    assert parse_heartbeats({}) == (None, ())


def test_silent_after_two_periods_and_a_read() -> None:
    beat = SchedulerBeat("s", age_s=0.5, every_s=1.0)
    # read at t=10 with a 1 s cadence: silent once older than 2 * 1 + 1 = 3 s
    assert silent_age([(beat, 10.0, 1.0)], 12.4) is None
    assert silent_age([(beat, 10.0, 1.0)], 12.6) == pytest.approx(3.1)
    assert silent_age([], 100.0) is None


def backends(**inflight: int | None) -> dict[str, Backend]:
    return {n: Backend(name=n, state=BackendState.ACTIVE, inflight=v) for n, v in inflight.items()}


def test_only_counted_inflight_goes_stale_and_other_stale_values_keep_their_source() -> None:
    mark = SchedulerStaleness()
    fleet = backends(a=3, b=None)
    assert mark(FRESH, fleet, None) is FRESH
    stale = mark(FRESH, fleet, 7.0)
    assert stale.age("backend:a", "inflight") == 7.0
    assert stale.fields == {"backend:a": {"inflight": SCHEDULER}}  # b counts nothing
    # the same inputs: the same fields object (the hub's history gaps are not worked again)
    assert mark(FRESH, fleet, 8.0).fields is stale.fields
    redis_down = Staleness({"redis": 30.0}, {"backend:a": {"inflight": "redis"}})
    both = mark(redis_down, fleet, 9.0)
    assert both.age("backend:a", "inflight") == 30.0  # Redis's own age where it is stale


def test_req_per_s_is_not_current_while_the_silence_is_within_its_window() -> None:
    from gpucon.model.fleet import LatencyStats

    mark = SchedulerStaleness()
    fleet = backends(a=3, b=1, c=None)
    latency = {
        "a": LatencyStats("a", req_per_s=4.6, rate_window_s=60.0),
        "b": LatencyStats("b", req_per_s=None, rate_window_s=60.0),  # no rate shown
        "c": LatencyStats("c", req_per_s=2.0, rate_window_s=60.0),  # not the scheduler's
    }
    stale = mark(FRESH, fleet, 35.0, latency)
    assert stale.age("latency:a", "req_per_s") == 35.0  # still averages the minute before
    assert stale.age("latency:a", "p95_ms") is None
    assert stale.age("latency:b", "req_per_s") is None
    assert stale.age("latency:c", "req_per_s") is None
    # past the window the rate covers only the silence: current again, in-flight still stale
    later = mark(FRESH, fleet, 61.0, latency)
    assert later.age("latency:a", "req_per_s") is None
    assert later.age("backend:a", "inflight") == 61.0


def test_a_plan_made_while_the_scheduler_is_silent_says_so() -> None:
    from gpucon.actions.freshness import stale_inputs
    from gpucon.model.fleet import Health, SourceStatus
    from gpucon.model.snapshot import Snapshot

    fleet = backends(a=3)
    snapshot = Snapshot(
        taken_at=100.0,
        backends=fleet,
        sources={"redis": SourceStatus("redis", Health.OK, None, 99.5)},
        staleness=SchedulerStaleness()(FRESH, fleet, 12.0),
    )
    [line] = stale_inputs(snapshot, rechecked=True)
    assert line.warning and line.name == "stale:scheduler"
    assert line.text.startswith(
        "scheduler not current (its heartbeat is 10s old: in-flight counts are not kept)"
    )


def test_a_silent_scheduler_is_an_alert_crit_while_requests_wait() -> None:
    from gpucon.model.alerts import AlertInputs, AlertThresholds, derive_alerts
    from gpucon.model.fleet import QueueStats
    from gpucon.model.history import History

    def inputs(silent: float | None, lag: int) -> AlertInputs:
        queues = {"q": QueueStats("q", lag=lag, pending=0, group="g1")}
        return AlertInputs(100.0, {}, {}, {}, queues, {}, History(), scheduler_silent_s=silent)

    assert not [a for a in derive_alerts(inputs(None, 5), AlertThresholds())]
    [quiet] = derive_alerts(inputs(4.0, 0), AlertThresholds())
    assert (quiet.rule, quiet.severity, quiet.since) == ("scheduler_silent", Severity.WARNING, 96.0)
    alerts = derive_alerts(inputs(12.0, 7), AlertThresholds())
    silent = next(a for a in alerts if a.rule == "scheduler_silent")
    assert silent.severity is Severity.CRITICAL and "(7 waiting)" in silent.message
    assert silent.message.startswith("the scheduler's heartbeat stopped 10s ago")


def test_a_beating_scheduler_behind_redis_is_aged_on_the_consoles_clock() -> None:
    """Its clock 30 s behind: each beat reads 30 s old as written. Once a change is seen the
    beat is aged from the read that first saw it (not silent), and the skew is named."""
    clock = BeatClock()
    first = clock(SchedulerBeat("s", age_s=30.2, every_s=1.0, at=100.0), 1000.0, 1.0)
    assert first.age_s == 30.2  # one look: nothing to tell skew from silence yet
    assert clock.behind_s is None
    beat = clock(SchedulerBeat("s", age_s=30.4, every_s=1.0, at=101.0), 1001.0, 1.0)
    assert beat.age_s == 0.0 and clock.behind_s == pytest.approx(29.4)
    assert silent_age([(beat, 1001.0, 1.0)], 1001.5) is None
    # the same beat read again a tick later: aged from its first read
    again = clock(SchedulerBeat("s", age_s=31.4, every_s=1.0, at=101.0), 1002.0, 1.0)
    assert again.age_s == 1.0
    # it dies: its last beat ages on this console's clock and goes silent after 2 periods
    # and a read, whatever its own clock said
    dead = clock(SchedulerBeat("s", age_s=34.4, every_s=1.0, at=101.0), 1005.0, 1.0)
    assert silent_age([(dead, 1005.0, 1.0)], 1005.0) == pytest.approx(4.0)


def test_a_scheduler_ahead_of_redis_that_dies_goes_silent_on_time() -> None:
    """Ahead by 30 s its beats read 0 s old (Redis's clock is behind them) for 30 s after it
    died; aged on this console's clock, it is silent after two periods and a read."""
    clock = BeatClock()
    clock(SchedulerBeat("s", age_s=0.0, every_s=1.0, at=1030.0, ahead_s=30.0), 1000.0, 1.0)
    last = clock(SchedulerBeat("s", age_s=0.0, every_s=1.0, at=1031.0, ahead_s=30.0), 1001.0, 1.0)
    assert clock.behind_s == pytest.approx(-30.0)  # ahead: named as such
    later = clock(SchedulerBeat("s", age_s=0.0, every_s=1.0, at=1031.0, ahead_s=26.0), 1005.0, 1.0)
    assert last.age_s == 0.0 and later.age_s == 4.0
    assert silent_age([(later, 1005.0, 1.0)], 1005.0) == pytest.approx(4.0)


def test_a_scheduler_ahead_of_redis_is_named_from_one_look() -> None:
    """Its beats dated 30 s after Redis's time: one read proves the clock ahead by at least
    that (a beat is never younger than 0 s), so ``scheduler_clock`` names it; 2 s ahead is
    not named."""
    from gpucon.model.alerts import AlertThresholds, derive_alerts
    from gpucon.model.fleet import Health, SourceStatus
    from gpucon.model.history import History
    from tests.unit.test_model_early_warning import inputs

    clock = BeatClock()
    clock(SchedulerBeat("s", age_s=0.0, every_s=1.0, at=1030.0, ahead_s=29.8), 1000.0, 1.0)
    assert clock.behind_s == pytest.approx(-29.8)
    clock(SchedulerBeat("s", age_s=0.0, every_s=1.0, at=1031.0, ahead_s=29.9), 1001.0, 1.0)
    assert clock.behind_s == pytest.approx(-29.9)
    near = BeatClock()
    near(SchedulerBeat("s", age_s=0.0, every_s=1.0, at=1002.0, ahead_s=2.0), 1000.0, 1.0)
    assert near.behind_s is None

    now = 1000.0
    sources = {"redis": SourceStatus("redis", Health.OK, None, now, 0.01)}
    ahead = inputs(now, History(capacity=8), sources=sources, scheduler_behind_s=-29.9)
    (alert,) = [a for a in derive_alerts(ahead, AlertThresholds()) if a.rule == "scheduler_clock"]
    assert (alert.severity, alert.target) == (Severity.WARNING, SCHEDULER)
    assert alert.message == (
        "the scheduler's clock is at least 25s ahead of Redis's: it beats, but each heartbeat "
        "is dated that far after Redis's time as it is written; the registry dates it writes "
        "(ready_at, changed_at) are off as much: check NTP on its host"
    )


def test_the_skew_alert_names_the_clock_and_not_while_silent() -> None:
    from gpucon.model.alerts import AlertThresholds, derive_alerts
    from gpucon.model.fleet import Health, SourceStatus
    from gpucon.model.history import History
    from tests.unit.test_model_early_warning import inputs

    now = 1000.0
    sources = {"redis": SourceStatus("redis", Health.OK, None, now, 0.01)}
    skewed = inputs(now, History(capacity=8), sources=sources, scheduler_behind_s=29.4)
    (alert,) = [a for a in derive_alerts(skewed, AlertThresholds()) if a.rule == "scheduler_clock"]
    assert (alert.severity, alert.target) == (Severity.WARNING, SCHEDULER)
    assert alert.message.startswith(
        "the scheduler's clock is at least 25s behind Redis's: it beats, but each heartbeat "
        "reads that old as it is written"
    )
    silent = inputs(
        now,
        History(capacity=8),
        sources=sources,
        scheduler_behind_s=29.4,
        scheduler_silent_s=12.0,
    )
    rules = {a.rule for a in derive_alerts(silent, AlertThresholds())}
    assert "scheduler_clock" not in rules and "scheduler_silent" in rules
