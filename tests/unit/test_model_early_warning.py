"""Early warning from trends, the trend arithmetic, and the order and grouping of alerts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from gpucon.model.alert_order import group_alerts, ordered
from gpucon.model.alerts import (
    Alert,
    AlertInputs,
    AlertThresholds,
    Cause,
    Severity,
    derive_alerts,
)
from gpucon.model.fleet import (
    Backend,
    BackendState,
    Health,
    LatencyStats,
    Slot,
    SlotKind,
    SourceStatus,
)
from gpucon.model.history import History
from gpucon.model.trends import known_points, pearson, slope, ticks_within

T = AlertThresholds()
GIB = 1024.0


def history(series: Mapping[str, Sequence[float | None]], start: float = 0.0) -> History:
    h = History(capacity=120)
    n = max(len(v) for v in series.values())
    for i in range(n):
        h = h.append(start + i, {k: v[i] for k, v in series.items() if i < len(v)})
    return h


def inputs(now: float, h: History, **parts: object) -> AlertInputs:
    base: dict[str, object] = dict(
        now=now,
        slots={},
        backends={},
        latency={},
        queues={},
        sources={"sim": SourceStatus("sim", Health.OK, None, now, 0.01)},
        history=h,
    )
    base.update(parts)
    return AlertInputs(**base)  # type: ignore[arg-type]


# -- trend arithmetic ---------------------------------------------------------------------


def test_slope_and_pearson_on_known_lines() -> None:
    xs = [0.0, 1.0, 2.0, 3.0, 4.0]
    assert slope(xs, [3.0 + 2.5 * x for x in xs]) == pytest.approx(2.5)
    assert slope([1.0, 1.0], [0.0, 5.0]) is None  # no spread in x
    assert pearson(xs, [10 - x for x in xs]) == pytest.approx(-1.0)
    assert pearson(xs, [1.0, 3.0, 2.0, 5.0, 4.0]) == pytest.approx(0.8)
    assert pearson(xs, [7.0] * 5) is None  # a flat series says nothing
    assert known_points([0.0, 1.0, 2.0], [None, 4.0, 5.0]) == ([1.0, 2.0], [4.0, 5.0])
    assert ticks_within([1.0, 2.0, 3.0, 4.0], now=4.0, seconds=2.0) == 3


def test_history_back_tail_and_rose() -> None:
    h = history({"a": [1.0, 2.0, None, 4.0], "b": [5.0, 5.0, 5.0, 5.0]})
    assert h.back("a", 0) == 4.0 and h.back("a", 2) == 2.0 and h.back("a", 1) is None
    assert h.back("a", 9) is None and h.back("zz", 0) is None
    assert h.tail("a", 2) == (None, 4.0) and h.tail("a", 99) == (1.0, 2.0, None, 4.0)
    assert h.rose(["a", "b", "zz"], 3) == ["a"]
    assert h.rose(["a"], 1) == []  # the sample one tick back is a gap


# -- memory: full in N min ----------------------------------------------------------------


def slot(total_mib: float = 10 * GIB, used: float = 4 * GIB) -> Slot:
    return Slot("h/gpu0/gi3", SlotKind.MIG, mem_used_mib=used, mem_total_mib=total_mib)


def test_a_growing_slot_is_full_in_minutes_and_the_alert_says_the_trend() -> None:
    flat = [4 * GIB] * 20
    leak = [4 * GIB + 20.0 * k for k in range(1, 6)]  # 20 MiB/s for 5 s
    h = history({"slot:h/gpu0/gi3:mem_used": flat + leak})
    now = len(flat + leak) - 1.0
    s = slot(used=leak[-1])
    alerts = derive_alerts(inputs(now, h, slots={s.id: s}), T)
    (alert,) = [a for a in alerts if a.rule == "memory_trend"]
    # (10 GiB - 4 GiB - 100 MiB) / 20 MiB/s = 302 s: above the 5 min CRIT horizon, WARN
    assert alert.severity is Severity.WARNING and alert.target == s.id
    assert "full in 5.0 min" in alert.message and "+20 MiB/s" in alert.message
    assert "co-tenant" not in alert.message
    faster = AlertThresholds(mem_full_crit_s=400.0)
    alerts = derive_alerts(inputs(now, h, slots={s.id: s}), faster)
    assert [a.severity for a in alerts if a.rule == "memory_trend"] == [Severity.CRITICAL]


@pytest.mark.parametrize(
    "tail",
    [
        [4 * GIB + 512.0] * 5,  # one step (a caching allocator's new peak): not a trend
        [4 * GIB + 20.0, 4 * GIB + 40.0],  # two rises: too few yet
        [4 * GIB + 20.0 * k for k in range(1, 6)] + [4 * GIB + 100.0] * 20,  # it stopped
        [4 * GIB + 1.0 * k for k in range(1, 6)],  # 1 MiB/s: full in ~1.7 h, beyond 30 min
        [9 * GIB + 20.0 * k for k in range(1, 6)],  # under 1.5 GiB free: low_memory says it
    ],
)
def test_memory_that_is_not_running_out_raises_nothing(tail: list[float]) -> None:
    values = [4 * GIB] * 20 + tail
    h = history({"slot:h/gpu0/gi3:mem_used": values})
    s = slot(used=values[-1])
    alerts = derive_alerts(inputs(len(values) - 1.0, h, slots={s.id: s}), T)
    assert [a for a in alerts if a.rule == "memory_trend"] == []


def test_memory_freed_restarts_the_trend() -> None:
    values = [4 * GIB + 20.0 * k for k in range(10)] + [3 * GIB, 3 * GIB + 20.0]
    h = history({"slot:h/gpu0/gi3:mem_used": values})
    s = slot(used=values[-1])
    alerts = derive_alerts(inputs(len(values) - 1.0, h, slots={s.id: s}), T)
    assert [a for a in alerts if a.rule == "memory_trend"] == []  # one rise since the drop


# -- p95 approaching its SLO --------------------------------------------------------------


def test_p95_near_its_slo_and_rising_warns_with_the_time_to_slo() -> None:
    p95 = [700.0 + 20.0 * k for k in range(11)]  # 700 → 900 ms in 10 s, SLO 1000
    h = history({"backend:b:p95": p95})
    lat = {"b": LatencyStats("b", p95_ms=900.0, req_per_s=5.0)}
    slo = {"b": 1000.0}
    alerts = derive_alerts(inputs(10.0, h, latency=lat, slo_p95_ms=slo), T)
    (alert,) = [a for a in alerts if a.rule == "p95_trend"]
    assert "90% of SLO" in alert.message and "rising 20 ms/s" in alert.message
    # in ms, as the table's P95/SLO and the p95_slo alert (a 14 s SLO read "SLO 14.0 s")
    assert alert.message.startswith("p95 900 ms is 90% of SLO 1000 ms, ")
    assert "at SLO in ~5 s" in alert.message
    # flat at 90 %: not rising; drained: not judged; over the SLO: p95_slo says it
    flat = history({"backend:b:p95": [900.0] * 11})
    assert not [
        a
        for a in derive_alerts(inputs(10.0, flat, latency=lat, slo_p95_ms=slo), T)
        if a.rule == "p95_trend"
    ]
    drained = {"b": Backend("b", state=BackendState.DRAINED)}
    assert not [
        a
        for a in derive_alerts(inputs(10.0, h, latency=lat, backends=drained, slo_p95_ms=slo), T)
        if a.rule == "p95_trend"
    ]


# -- order and groups ---------------------------------------------------------------------


def alert(rule: str, target: str, severity: Severity, since: float) -> Alert:
    return Alert(f"{rule}:{target}", rule, target, severity, f"{rule} on {target}", since)


def test_worse_first_then_causes_before_symptoms_then_newest() -> None:
    """Every CRIT above every WARN (an on-call eye looks for CRIT first), causes before their
    symptoms among equals, INFO last."""
    down = alert("not_ready", "sdxl-c0", Severity.CRITICAL, 10.0)
    p95_new = alert("p95_slo", "sdxl-a0", Severity.CRITICAL, 50.0)
    p95_old = alert("p95_slo", "sdxl-a1", Severity.CRITICAL, 40.0)
    leak = alert("memory_trend", "h/gpu0/gi3", Severity.WARNING, 30.0)
    hot = alert("hot_slot", "h/gpu0/gi3", Severity.WARNING, 60.0)
    quiet = alert("no_traffic", "x", Severity.INFO, 70.0)
    nobody = alert("not_ready", "y", Severity.INFO, 70.0)
    shown = ordered([quiet, hot, p95_old, nobody, leak, p95_new, down])
    assert shown == (down, p95_new, p95_old, leak, hot, nobody, quiet)
    assert down.cause is Cause.FAULT and leak.cause is Cause.RESOURCE
    assert hot.cause is Cause.SYMPTOM and alert("new_rule", "z", Severity.INFO, 0).cause


def test_groups_one_per_target_led_by_the_cause_with_a_count() -> None:
    leak = alert("memory_trend", "s", Severity.WARNING, 30.0)
    low = alert("low_memory", "s", Severity.CRITICAL, 35.0)
    hot = alert("hot_slot", "s", Severity.WARNING, 60.0)
    down = alert("not_ready", "b", Severity.CRITICAL, 10.0)
    groups = group_alerts([hot, leak, down, low])
    assert [g.target for g in groups] == ["b", "s"]
    s = groups[1]
    assert s.lead is low and s.count == 3 and s.others == (leak, hot)
    assert s.severity is Severity.CRITICAL
    assert s.summary() == "low_memory on s (+2: memory_trend, hot_slot)"
    assert groups[0].summary() == "not_ready on b"


def _run_from_window(
    times: Sequence[float], values: Sequence[float | None]
) -> tuple[list[float], list[float]]:
    """The newest growth run as found in the whole window (known pairs, then back from the
    newest sample while nothing drops, then forward over equal samples)."""
    ts, vs = known_points(times, values)
    start = len(vs) - 1
    while start > 0 and vs[start - 1] <= vs[start]:
        start -= 1
    while start < len(vs) - 1 and vs[start + 1] == vs[start]:
        start += 1
    return ts[start:], vs[start:]


def test_the_newest_growth_run_read_newest_first_is_the_windows() -> None:
    """memory_trend reads only the newest run (stopped at the first drop): on series with
    gaps, flat stretches, drops and saw-teeth, the same times and values as the window."""
    import random

    from gpucon.model.early_warning import _newest_run

    rng = random.Random(3)
    for case in range(300):
        length = rng.randint(1, 40 if case % 3 else 160)  # and past the rings' capacity
        values: list[float | None] = []
        v = 100.0
        for _ in range(length):
            roll = rng.random()
            if roll < 0.15:
                values.append(None)
                continue
            v += 0.0 if roll < 0.35 else rng.choice([-2.0, 1.0, 1.5, 3.0])
            values.append(v)
        h = history({"slot:s:mem_used": values})
        ticks = rng.randint(1, length)
        window = h.times[len(h.times) - ticks :]
        expected = _run_from_window(window, h.tail("slot:s:mem_used", ticks))
        assert _newest_run(h, "slot:s:mem_used", window, ticks) == expected, case
        back = [h.back("slot:s:mem_used", j) for j in range(min(ticks, len(h.times)))]
        assert list(h.newest_first("slot:s:mem_used", ticks)) == back, case
