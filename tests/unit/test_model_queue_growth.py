"""The queue early warning: a stream's waiting count rising sharply or steadily, and noise not."""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

import pytest

from gpucon.model.alerts import Alert, AlertThresholds, Cause, Severity, derive_alerts
from gpucon.model.fleet import Backend, LatencyStats, QueueStats
from gpucon.model.history import History
from tests.unit.test_model_early_warning import history, inputs

T = AlertThresholds()
KEY = "queue:gen:queue:waiting"
OLDEST = "queue:gen:queue:oldest"


def growth(
    waiting: Sequence[float | None],
    oldest: Sequence[float | None] = (),
    previous: Sequence[Alert] = (),
    **parts: object,
) -> list[Alert]:
    series: dict[str, Sequence[float | None]] = {KEY: waiting}
    if oldest:
        series[OLDEST] = oldest
    series.update(parts.pop("series", {}))  # type: ignore[call-overload]
    h = history(series)
    last = waiting[-1]
    q = QueueStats(
        "gen:queue",
        lag=None if last is None else int(last),
        pending=0,
        oldest_age_s=oldest[-1] if oldest else None,
    )
    now = len(waiting) - 1.0
    found = derive_alerts(inputs(now, h, queues={q.stream: q}, **parts), T, previous)
    return [a for a in found if a.rule == "queue_growth"]


CALM = [5.0, 7.0, 4.0, 6.0, 5.0, 8.0, 6.0, 4.0, 6.0, 5.0]


def test_a_spike_is_named_within_three_ticks_with_its_rate_wait_and_models() -> None:
    waiting = [*CALM, 9.0, 14.0, 19.0]  # +4.7/s for 3 ticks
    oldest = [0.0] * len(CALM) + [0.9, 2.1, 3.3]
    queue_ms = {
        "backend:sdxl-a:queue_ms": [1.0] * len(CALM) + [900.0, 2100.0, 3300.0],
        "backend:sd15-a:queue_ms": [1.0] * len(CALM) + [700.0, 1500.0, 2600.0],
        "backend:bert-a:queue_ms": [1.0] * (len(CALM) + 3),  # not waiting longer: not named
    }
    lat = {name: LatencyStats(name, queue_ms=1.0) for name in ("sdxl-a", "sd15-a", "bert-a")}
    backends = {
        "sdxl-a": Backend("sdxl-a", model="sdxl"),
        "sd15-a": Backend("sd15-a", model="sd15"),
        "bert-a": Backend("bert-a", model="bert-base"),
    }
    (alert,) = growth(waiting, oldest, series=queue_ms, latency=lat, backends=backends)
    assert alert.target == "gen:queue" and alert.severity is Severity.WARNING
    assert alert.cause is Cause.RESOURCE  # it leads the p95 alerts of the backends behind it
    assert alert.message == (
        "queue growing +4.7/s for 3 ticks (3 s), 19 waiting, oldest 3.3 s (was 0.0 s); "
        "queue time up: sdxl 3.3 s, sd15 2.6 s"
    )


def test_the_models_are_named_the_same_when_the_backends_history_is_one_block_a_tick() -> None:
    """The hub appends each backend's queue time as one block a tick: the models waiting
    longer are read off two blocks, and named as from one series per backend."""
    waiting = [*CALM, 9.0, 14.0, 19.0]
    names = ("sdxl-a", "sd15-a", "bert-a", "gone-a")
    ms = {
        "sdxl-a": [1.0] * len(CALM) + [900.0, 2100.0, 3300.0],
        "sd15-a": [1.0] * len(CALM) + [700.0, 1500.0, 2600.0],
        "bert-a": [1.0] * (len(CALM) + 3),
        # no sample 3 ticks back (where the growth began): not named, as from its own series
        "gone-a": [1.0] * (len(CALM) - 1) + [math.nan, 1.0, 1.0, 9000.0],
    }
    h = History(capacity=120)
    for k in range(len(waiting)):
        block = array("f", [ms[n][k] for n in names])
        h = h.append_blocks(float(k), [("backend", "queue_ms", names, block)], {KEY: waiting[k]})
    lat = {name: LatencyStats(name, queue_ms=1.0) for name in names}
    backends = {n: Backend(n, model=n.split("-")[0]) for n in names}
    q = QueueStats("gen:queue", lag=19, pending=0)
    now = len(waiting) - 1.0
    found = derive_alerts(inputs(now, h, queues={q.stream: q}, latency=lat, backends=backends), T)
    (alert,) = [a for a in found if a.rule == "queue_growth"]
    assert alert.message.endswith("; queue time up: sdxl 3.3 s, sd15 2.6 s")
    series = {f"backend:{n}:queue_ms": [None if v != v else v for v in ms[n]] for n in names}
    assert growth(waiting, series=series, latency=lat, backends=backends) == [alert]


def test_two_ticks_are_enough_when_they_rise_by_the_minimum() -> None:
    (alert,) = growth([*CALM, 5.0, 11.0, 16.0])  # a flat tick, then +11 in two
    assert alert.message.startswith("queue growing +5.5/s for 2 ticks (2 s), 16 waiting")
    assert growth([*CALM, 5.0, 9.0, 14.0]) == []  # +9 in two: not yet


@pytest.mark.parametrize(
    "tail",
    [
        [8.0, 10.0, 12.0],  # rising each tick, but by 7: what noise does
        [9.0, 16.0, 15.0, 22.0],  # +13 in 3 ticks, but not tick after tick
        [2.0, 3.0, 4.0, 9.0],  # +7, under the floor of 10 waiting
    ],
)
def test_noise_and_small_rises_raise_nothing(tail: list[float]) -> None:
    assert growth([*CALM, *tail]) == []


def test_once_raised_it_holds_through_a_dip_and_counts_from_where_it_began() -> None:
    waiting = [*CALM, 9.0, 14.0, 19.0]
    (first,) = growth(waiting)
    waiting += [24.0, 23.0, 30.0]  # one tick of noise inside a growing queue
    (held,) = growth(waiting, previous=[first])
    assert held.since == first.since
    assert "+4.2/s for 6 ticks (6 s), 30 waiting" in held.message  # 5 → 30 over 6 s
    # drained back to where it stood: it ends
    assert growth([*waiting, 20.0, 12.0, 5.0], previous=[held]) == []


def test_a_steady_climb_is_a_trend_over_the_window() -> None:
    waiting = [4.0 + 0.5 * k + (k % 2) for k in range(31)]  # 0.5/s, never 10 in 3 ticks
    (alert,) = growth(waiting, [0.0] * 30 + [2.5])
    assert alert.message == "queue growing +0.5/s over 30 s, 19 waiting, oldest 2.5 s (was 0.0 s)"


def test_a_steady_trend_needs_half_a_window_of_history() -> None:
    # 13 samples (after a start): the fit over them is not a trend of 30 s
    assert growth([4.0, 4.0, 5.0, 3.0, 4.0, 4.0, 6.0, 3.0, 5.0, 6.0, 5.0, 8.0, 12.0]) == []


@pytest.mark.parametrize(
    "waiting",
    [
        [4.0, 5.0, 6.0, 7.0, 8.0, 9.0] * 5,  # growing, but fewer waiting than the floor
        [30.0, 20.0, 25.0, 18.0, 22.0, 21.0],  # many, not growing
        [12.0] * 29 + [13.0],  # 0.03/s
        [1800.0 + 5.0 * k for k in range(30)],  # 5/s, but 8 % on a deep queue: a drift
        [None, None, 5.0, None, 30.0],  # gaps: no rise measured across them
    ],
)
def test_a_queue_that_is_not_growing_raises_nothing(waiting: list[float | None]) -> None:
    assert growth(waiting) == []
