"""One age format on one screen: the status bar says a broken source's age as the stale cells
and the alerts it explains do (``DOWN 5s`` beside ``1840/2500·5s`` and ``CRIT 5s redis``), a
healthy one coarsely (``<2s``)."""

from __future__ import annotations

import msgspec
import pytest

from gpucon.model.ages import fmt_elapsed
from gpucon.model.alerts import AlertInputs, AlertThresholds, derive_alerts
from gpucon.model.fleet import Health, SourceStatus
from gpucon.model.history import History
from gpucon.model.snapshot import Snapshot
from gpucon.widgets import fmt
from gpucon.widgets.alert_lines import alert_head
from gpucon.widgets.status_bar import source_badges

STYLES = {Health.OK: "green", Health.DEGRADED: "yellow", Health.DOWN: "red"}


@pytest.mark.parametrize("age_s", [3.2, 5.0, 12.0, 17.9, 44.0, 130.0])
def test_a_down_source_ages_in_the_cells_steps(age_s: float) -> None:
    now = 1000.0
    snapshot = Snapshot(
        taken_at=now,
        sources={
            "prometheus": SourceStatus("prometheus", Health.DOWN, "timed out", now - age_s, 5.0),
            "redis": SourceStatus("redis", Health.OK, None, now - 1.0, 0.01),
            "nvml": SourceStatus("nvml", Health.DEGRADED, "slow", now - age_s, 0.5),
        },
    )
    text = source_badges(snapshot, STYLES).plain
    assert f"prometheus  DOWN  {fmt.age(age_s)} │" in text
    assert f"nvml  STALE  {fmt.age(age_s)} │" in text
    assert "redis ok <2s │" in text


def test_the_steps_are_the_cells_ones_everywhere() -> None:
    # 17 s: a stale cell says 15s, and so do an alert's age and an XID's (they said 10s)
    assert fmt.age(17.0) == "15s" and fmt.since(17.0) == "15s"
    # below 10 s too: the alert said <10s where the bar said DOWN 7s
    assert fmt.since(7.0) == "7s" and fmt.age(7.0) == "7s" and fmt_elapsed(7.0) == "7s"


@pytest.mark.parametrize("age_s", [0.4, 5.0, 8.9, 27.0])
def test_one_outage_reads_the_same_in_the_bar_the_alert_and_its_message(age_s: float) -> None:
    """Redis down for ``age_s``: the bar's DOWN age, the alert's age and the alert's text."""
    now = 1000.0
    status = SourceStatus("redis", Health.DOWN, "refused", now - age_s, 0.01)
    inputs = AlertInputs(now, {}, {}, {}, {}, {"redis": status}, History(), {})
    # first seen now (a console started mid-outage): its age is still the outage's, from the
    # source's last good read, as the bar's; and it stays so on the next tick
    [first] = [a for a in derive_alerts(inputs, AlertThresholds()) if a.target == "redis"]
    later = msgspec.structs.replace(inputs, now=now + 1.0)
    [alert] = [a for a in derive_alerts(later, AlertThresholds(), (first,)) if a.target == "redis"]
    assert alert.since == first.since == now - age_s
    now += 1.0  # the next tick: the bar, the alert's age and its text say the same
    shown = fmt.since(age_s + 1.0)
    bar = source_badges(Snapshot(taken_at=now, sources={"redis": status}), STYLES).plain
    assert f"redis  DOWN  {shown} │" in bar
    assert alert_head(alert, now, "").plain.split() == ["CRIT", shown, "redis"]
    assert f"last good read {shown} ago" in alert.message


def test_a_source_read_with_errors_and_fresh_values_says_err_and_its_error() -> None:
    """``redis STALE <2s`` contradicted itself (fresh values, a partial error nowhere on
    screen): a degraded source within its staleness limit is ERR, and ``source_errors`` gives
    the error; once its values are older than the limit it is STALE as before."""
    now = 1000.0
    error = "stream gen:queue: no consumer group 'g1'"
    fresh = SourceStatus("redis", Health.DEGRADED, error, now - 0.4, 0.01, now - 60, 2.0)
    old = SourceStatus("redis", Health.DEGRADED, error, now - 47.0, 0.01, now - 60, 2.0)
    assert (
        "redis  ERR  <2s │" in source_badges(Snapshot(now, sources={"redis": fresh}), STYLES).plain
    )
    assert (
        "redis  STALE  45s │" in source_badges(Snapshot(now, sources={"redis": old}), STYLES).plain
    )
    inputs = AlertInputs(now, {}, {}, {}, {}, {"redis": fresh}, History(capacity=4))
    (alert,) = [a for a in derive_alerts(inputs, AlertThresholds()) if a.rule == "source_errors"]
    assert (alert.target, alert.message) == ("redis", f"read with errors: {error}")
    stale = AlertInputs(now, {}, {}, {}, {}, {"redis": old}, History(capacity=4))
    assert {a.rule for a in derive_alerts(stale, AlertThresholds())} == {"stale_source"}
