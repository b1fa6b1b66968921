"""What a console started in the middle of an incident says: an alert is as old as what a
source dates, not as this console's first sight of it (the queue-past-SLO alert by the oldest
entry's id, Redis's clock); ``gpucon snapshot``'s text says each alert's age as the console's
panel does (a one-shot snapshot said nothing of it, and the JSON's ``since`` for a request
waiting 4 minutes was the snapshot's own time); the queue panel tells queues unknown from
none."""

from __future__ import annotations

from gpucon.commands.snapshot_render import snapshot_text
from gpucon.model.alerts import AlertThresholds, derive_alerts
from gpucon.model.fleet import Backend, BackendState, Health, SourceStatus
from gpucon.model.history import History
from gpucon.model.snapshot import Snapshot
from tests.unit.test_model_early_warning import inputs
from tests.unit.test_wait_words import NOW, WAITED_S, stuck_queue


def test_the_queue_past_slo_alert_is_dated_by_its_oldest_entry() -> None:
    q = stuck_queue()
    sources = {"redis": SourceStatus("redis", Health.OK, None, NOW, 0.01)}
    serving = {"b0": Backend("b0", state=BackendState.ACTIVE, model="sdxl")}
    t = AlertThresholds()
    found = derive_alerts(
        inputs(NOW, History(capacity=8), queues={q.stream: q}, sources=sources, backends=serving),
        t,
    )
    (alert,) = [a for a in found if a.rule == "queue_slo"]
    # waited 252 s, over an SLO of 2.5 s: past it since 249.5 s ago, on this console's first look
    assert alert.since == NOW - (WAITED_S - t.default_slo_p95_ms / 1000.0)
    text = "\n".join(snapshot_text(Snapshot(taken_at=NOW, alerts=found), "lab"))
    assert f"! critical   4m {q.stream}: oldest request waited 4.2 min" in text
    # the queue table writes the wait as the alerts do
    table = snapshot_text(Snapshot(taken_at=NOW, queues={q.stream: q}), "lab")
    assert any(line.startswith(q.stream) and " 4.2 min " in line for line in table), table


def test_the_queue_panel_says_queues_are_unknown_while_redis_was_never_read() -> None:
    """A console started while Redis was down said "no queues reported", as of a fleet with
    no queue; it is one whose queues nobody has read yet."""
    from gpucon.widgets.panels import compact_queues

    never = {"redis": SourceStatus("redis", Health.DOWN, "refused", None, 0.01, NOW - 20)}
    assert compact_queues(Snapshot(taken_at=NOW, sources=never)).plain == (
        "QUEUE queues unknown: redis never read (down)"
    )
    read = {"redis": SourceStatus("redis", Health.OK, None, NOW, 0.01)}
    assert compact_queues(Snapshot(taken_at=NOW, sources=read)).plain == "QUEUE none reported"


def test_an_alert_there_when_the_console_first_looked_is_at_least_its_age() -> None:
    """Undated, raised on the console's first look: ``≥20s`` (``n/a`` before 2 s); dated
    before the console looked, or raised later while it watched: its age as it is."""
    from gpucon.model.alerts import Alert, Severity
    from gpucon.widgets.alert_lines import age_text, alert_line, watched_from

    began = NOW - 20.0
    sources = {
        "redis": SourceStatus("redis", Health.OK, None, NOW, 0.01, began),
        "readiness": SourceStatus("readiness", Health.OK, None, NOW, 0.01, began + 0.3),
    }
    watched = watched_from(Snapshot(taken_at=NOW, sources=sources))
    assert watched == began

    def alert(since: float) -> Alert:
        return Alert("not_ready:b1", "not_ready", "b1", Severity.CRITICAL, "not ready", since)

    assert age_text(alert(began + 1.0), NOW, watched) == "≥15s"
    assert age_text(alert(began + 1.0), began + 2.5, watched) == "n/a"
    assert age_text(alert(began - 300.0), NOW, watched) == "5m"  # dated by a source
    assert age_text(alert(began + 12.0), NOW, watched) == "8s"  # seen to begin
    assert age_text(alert(began + 1.0), NOW) == "15s"  # nothing known of the watch
    assert alert_line(alert(began + 1.0), NOW, "", watched).plain.startswith("CRIT ≥15s b1  ")
    # a one-shot snapshot: only its one look, so an undated alert's age is n/a
    once = {"redis": SourceStatus("redis", Health.OK, None, NOW, 0.01, NOW - 0.2)}
    text = snapshot_text(Snapshot(taken_at=NOW, sources=once, alerts=(alert(NOW - 0.1),)), "lab")
    assert "! critical  n/a b1: not ready" in text
