"""A CRIT is never listed below a WARN, and a symptom names the cause that fires with it."""

from __future__ import annotations

from gpucon.model.alert_base import Alert, Severity
from gpucon.model.alert_causes import with_likely_causes
from gpucon.model.alert_order import group_alerts, ordered
from gpucon.model.fleet import Backend, BackendState


def alert(rule: str, target: str, severity: Severity, message: str = "") -> Alert:
    return Alert(f"{rule}:{target}", rule, target, severity, message or rule, 100.0)


BACKENDS = {
    "sdxl-a": Backend("sdxl-a", slot_id="h/gpu0/gi1", model="sdxl", state=BackendState.ACTIVE),
    "sdxl-b": Backend("sdxl-b", slot_id="h/gpu0/gi2", model="sdxl", state=BackendState.ACTIVE),
    "llm-a": Backend("llm-a", slot_id="h/gpu1", model="llm", state=BackendState.ACTIVE),
}


def test_the_crit_queue_slo_comes_first_and_names_the_growing_queue() -> None:
    growing = alert("queue_growth", "gen:queue", Severity.WARNING, "queue growing +6.5/s")
    slo = alert("queue_slo", "gen:queue", Severity.CRITICAL, "oldest request waited 9.6 s")
    shown = ordered(with_likely_causes([growing, slo], BACKENDS))
    assert [a.rule for a in shown] == ["queue_slo", "queue_growth"]
    assert shown[0].message == (
        "oldest request waited 9.6 s (likely cause: queue growing on gen:queue)"
    )
    assert shown[1].message == "queue growing +6.5/s"  # a cause names nothing
    # grouped per target, the stream's line is led by the CRIT
    [group] = group_alerts(shown)
    assert group.lead.rule == "queue_slo" and group.severity is Severity.CRITICAL
    # a stalled stream is named before a growing one: nobody reads it
    stalled = alert("queue_stalled", "gen:queue", Severity.WARNING)
    [first, *_] = ordered(with_likely_causes([growing, stalled, slo], BACKENDS))
    assert first.message.endswith("(likely cause: nobody reads gen:queue)")


def test_the_queue_past_its_slo_leads_the_newer_p95s_it_pushes_up() -> None:
    """Dated by its oldest entry, the queue's alert is older than the backends' p95 alerts it
    brings; newest-first alone put it below all of them, off an 80x24 panel."""
    slo = Alert("queue_slo:q", "queue_slo", "q", Severity.CRITICAL, "oldest waited 2.8 min", 10.0)
    p95s = [
        Alert(f"p95_slo:{n}", "p95_slo", n, Severity.CRITICAL, "p95 high", 90.0 + i)
        for i, n in enumerate(("sdxl-a", "sdxl-b", "llm-a"))
    ]
    shown = ordered([*p95s, slo])
    assert [a.target for a in shown] == ["q", "llm-a", "sdxl-b", "sdxl-a"]
    # a fault still leads it, and a WARN queue alert does not jump a CRIT p95
    down = alert("not_ready", "sdxl-b", Severity.CRITICAL)
    warn = Alert("queue_slo:q", "queue_slo", "q", Severity.WARNING, "oldest waited 9 s", 10.0)
    assert [a.rule for a in ordered([warn, p95s[0], down])] == ["not_ready", "p95_slo", "queue_slo"]


def test_a_backends_p95_names_its_models_backend_that_went_down_first() -> None:
    down = alert("not_ready", "sdxl-a", Severity.CRITICAL, "backend down")
    p95 = alert("p95_slo", "sdxl-b", Severity.CRITICAL, "p95 2710 ms > SLO 2500 ms")
    other = alert("p95_trend", "llm-a", Severity.WARNING, "p95 rising")
    hot = alert("thermal", "h/gpu1", Severity.WARNING, "thermal slowdown at 88 C")
    shown = {a.key: a.message for a in with_likely_causes([down, p95, other, hot], BACKENDS)}
    assert shown["p95_slo:sdxl-b"].endswith("(likely cause: sdxl-a not serving sdxl)")
    assert shown["p95_trend:llm-a"].endswith("(likely cause: heat on h/gpu1)")
    assert shown["not_ready:sdxl-a"] == "backend down"


def test_no_cause_firing_leaves_the_text_alone() -> None:
    alerts = [alert("p95_slo", "sdxl-b", Severity.CRITICAL, "p95 over")]
    assert with_likely_causes(alerts, BACKENDS) == alerts


def test_a_stall_and_an_outage_are_as_old_as_what_redis_remembers() -> None:
    """A console started mid-stall: ``queue_stalled`` is as old as the consumer's last read
    (Redis's idle time), not as this console's first look."""
    from gpucon.model.alerts import AlertInputs, AlertThresholds, derive_alerts
    from gpucon.model.fleet import Health, QueueStats, SourceStatus
    from gpucon.model.history import History

    queue = QueueStats(
        "gen:queue", lag=30, pending=2, group="g1", consumers=1, consumer_idle_s=68.0
    )
    redis_ok = {"redis": SourceStatus("redis", Health.OK, None, 999.5, 0.01)}
    inputs = AlertInputs(1000.0, {}, {}, {}, {"gen:queue": queue}, redis_ok, History())
    [stall] = [a for a in derive_alerts(inputs, AlertThresholds()) if a.rule == "queue_stalled"]
    assert stall.since == 1000.0 - 68.0
