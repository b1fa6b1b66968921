"""One wait, one way of writing it: the oldest request's wait reads the same in the queue
panel and in every alert that names it (it read ``252 s`` in one alert, ``4.2 min`` in
another and ``4m`` in the panel for the same request)."""

from __future__ import annotations

from gpucon.model.alerts import AlertThresholds, derive_alerts
from gpucon.model.fleet import Backend, BackendState, Health, QueueStats, SourceStatus
from gpucon.model.history import History
from gpucon.model.snapshot import Snapshot
from gpucon.widgets.panels import compact_queues
from tests.unit.test_model_early_warning import inputs

NOW = 1000.0
WAITED_S = 252.0


def stuck_queue() -> QueueStats:
    return QueueStats(
        "gen:queue",
        group="g1",
        lag=40,
        pending=2,
        oldest_age_s=WAITED_S,
        consumers=1,
        consumer_idle_s=WAITED_S,
    )


def test_the_alerts_and_the_panel_write_the_oldest_wait_alike() -> None:
    q = stuck_queue()
    sources = {"redis": SourceStatus("redis", Health.OK, None, NOW, 0.01)}
    serving = {"b0": Backend("b0", state=BackendState.ACTIVE, model="sdxl")}  # default SLO
    found = derive_alerts(
        inputs(NOW, History(capacity=8), queues={q.stream: q}, sources=sources, backends=serving),
        AlertThresholds(),
    )
    naming_it = {a.rule: a.message for a in found if "oldest" in a.message}
    assert {"queue_slo", "queue_stalled"} <= naming_it.keys(), naming_it
    for rule, message in naming_it.items():
        assert "4.2 min" in message and "252" not in message, (rule, message)
    panel = compact_queues(Snapshot(taken_at=NOW, queues={q.stream: q}, sources=sources)).plain
    assert "oldest 4.2 min" in panel, panel
