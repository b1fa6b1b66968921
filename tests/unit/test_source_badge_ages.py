"""The status bar says a broken source's age in the same steps as the stale cells it explains
(``DOWN 15s`` beside ``1840/2500·15s``), a healthy one coarsely (``<2s``)."""

from __future__ import annotations

import pytest

from gpucon.model.fleet import Health, SourceStatus
from gpucon.model.snapshot import Snapshot
from gpucon.widgets import fmt
from gpucon.widgets.panels import source_badges

STYLES = {Health.OK: "green", Health.DEGRADED: "yellow", Health.DOWN: "red"}


@pytest.mark.parametrize("age_s", [3.2, 12.0, 17.9, 44.0, 130.0])
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


def test_the_steps_are_the_cells_ones_everywhere_from_10_s() -> None:
    # 17 s: a stale cell says 15s, and so do an alert's age and an XID's (they said 10s)
    assert fmt.age(17.0) == "15s" and fmt.since(17.0) == "15s"
    assert fmt.since(7.0) == "<10s" and fmt.age(7.0) == "7s"  # below 10 s: coarse on purpose
