"""Since when each liveness signal has said what it says, and the not-ready alert's age.

A console that watched a backend go from ready to refused says "for 15s"; one started in the
middle of the fault knows only a lower bound ("for ≥15s") unless a source dates the change
(Prometheus's last ``up`` = 1); the not-ready alert is as old as the first signal that
objected, as dated, not as old as this console's first sight of it.
"""

from __future__ import annotations

import msgspec
import pytest

from gpucon.model.alerts import Alert, AlertInputs, AlertThresholds, Severity, derive_alerts
from gpucon.model.fleet import Backend
from gpucon.model.history import History
from gpucon.model.liveness import (
    BackendLiveness,
    ReadyCheck,
    SignalSince,
    TargetUp,
    aged_because,
)
from gpucon.model.liveness_book import LivenessBook, Signals
from gpucon.model.snapshot import Snapshot
from gpucon.sources.problems import Problems
from gpucon.sources.prom_up import DownDates, down_since_query, parse_down_since
from gpucon.widgets.liveness_text import signal_words
from tests.helpers.liveness_policy import POLICY as P

T0 = 1000.0
URL = "http://10.0.0.1:8000"


def checks(ready: bool, at: float, error: str | None = None) -> Signals:
    return Signals(checks=(("readiness", at, {"b1": ReadyCheck("b1", ready, error)}),))


def with_up(signals: Signals, up: TargetUp, at: float) -> Signals:
    return Signals(signals.checks, (("prometheus", at, {up.instance: up}),))


def not_ready_alert(
    liveness: dict[str, BackendLiveness], now: float, previous: tuple[Alert, ...] = ()
) -> tuple[str, float]:
    inputs = AlertInputs(
        now=now,
        slots={},
        backends={"b1": Backend("b1", url=URL)},
        latency={},
        queues={},
        sources={},
        history=History(),
        liveness=liveness,
    )
    alerts = derive_alerts(inputs, AlertThresholds(), previous)
    alert = next(a for a in alerts if a.rule == "not_ready")
    return alert.message, alert.since


def test_a_change_the_console_saw_is_dated_and_carried_while_the_signal_says_the_same() -> None:
    book = LivenessBook(P)
    backends = {"b1": Backend("b1", url=URL)}
    assert book.judge_all(backends, checks(True, T0), T0)["b1"].serving is True
    down = book.judge_all(backends, checks(False, T0 + 2, "refused"), T0 + 2)["b1"]
    assert down.http_since == SignalSince(T0 + 2, seen=True)
    # checked again and again, still refused: the start stays the first refusal
    later = book.judge_all(backends, checks(False, T0 + 17, "refused"), T0 + 17)["b1"]
    assert later.http_since == SignalSince(T0 + 2, seen=True)
    message, since = not_ready_alert({"b1": later}, T0 + 17)
    assert message == "not ready: http refused for 15s"
    assert since == T0 + 2
    # ready again, then refused again: a new start
    book.judge_all(backends, checks(True, T0 + 18), T0 + 18)
    again = book.judge_all(backends, checks(False, T0 + 19, "refused"), T0 + 19)["b1"]
    assert again.http_since == SignalSince(T0 + 19, seen=True)


def test_a_console_started_mid_fault_says_at_least_and_nothing_for_its_first_look() -> None:
    book = LivenessBook(P)
    backends = {"b1": Backend("b1", url=URL, ready=False, ready_at=T0)}
    first = book.judge_all(backends, checks(False, T0, "refused"), T0)["b1"]
    assert first.http_since == SignalSince(T0, seen=False)
    assert first.registry_since == SignalSince(T0, seen=False)
    # just looked: no age is better than "for ≥<2s"
    assert aged_because(first, T0 + 0.5) == "http refused, registry ready=0"
    backends = {"b1": Backend("b1", url=URL, ready=False, ready_at=T0 + 20)}
    later = book.judge_all(backends, checks(False, T0 + 20, "refused"), T0 + 20)["b1"]
    message, since = not_ready_alert({"b1": later}, T0 + 20)
    assert message == "not ready: http refused for ≥20s, registry ready=0 for ≥20s"
    assert since == T0


def test_prometheus_dates_the_outage_a_console_started_in_the_middle_of() -> None:
    """up=0 with Prometheus's last up=1 three minutes ago: the alert is three minutes old on
    this console's first tick, and says so without a lower bound."""
    book = LivenessBook(P)
    backends = {"b1": Backend("b1", url=URL)}
    dated = TargetUp("10.0.0.1:8000", False, "triton", since=T0 - 180)
    signals = with_up(checks(False, T0, "refused"), dated, T0)
    lv = book.judge_all(backends, signals, T0)["b1"]
    assert lv.prom_since == SignalSince(T0 - 180, seen=True)
    assert lv.fault_began() == SignalSince(T0 - 180, seen=True)
    message, since = not_ready_alert({"b1": lv}, T0 + 5)
    assert message == "not ready: http refused for ≥5s, prometheus up=0 for 3m"
    assert since == T0 - 180
    # an alert this console already held (from its first tick, before Prometheus dated the
    # outage) is as old as the older of the two starts
    held = Alert("not_ready:b1", "not_ready", "b1", Severity.CRITICAL, "not ready", T0)
    assert not_ready_alert({"b1": lv}, T0 + 5, (held,))[1] == T0 - 180
    older = msgspec.structs.replace(held, since=T0 - 600)
    assert not_ready_alert({"b1": lv}, T0 + 5, (older,))[1] == T0 - 600


def test_the_age_goes_beside_the_value_not_after_a_note() -> None:
    lv = BackendLiveness(
        "b1",
        prom_up=False,
        prom_fresh=True,
        serving=False,
        because="prometheus up=0 (no readiness signal)",
        prom_since=SignalSince(T0, seen=True),
    )
    assert aged_because(lv, T0 + 65) == "prometheus up=0 for 1m (no readiness signal)"


@pytest.mark.parametrize(
    ("found", "expected"),
    [({"10.0.0.1:8000": T0 - 60.0}, T0 - 60.0), ({}, None)],
)
def test_down_dates_are_asked_once_per_outage(found: dict[str, float], expected: float) -> None:
    dates = DownDates()
    down = TargetUp("10.0.0.1:8000", False)
    alive = TargetUp("10.0.0.2:8000", True)
    assert dates.undated([down, alive]) == ["10.0.0.1:8000"]
    dates.learn(["10.0.0.1:8000"], found)
    assert dates.undated([down, alive]) == []  # dated or not, not asked again
    assert [t.since for t in dates.dated([down, alive])] == [expected, None]
    # back up: forgotten, so its next outage is asked about again
    assert dates.undated([TargetUp("10.0.0.1:8000", True)]) == []
    assert dates.undated([down]) == ["10.0.0.1:8000"]


def test_the_down_query_matches_the_exact_instances() -> None:
    query = down_since_query(["10.0.0.1:8000", 'odd"name'])
    assert 'instance=~"10\\\\.0\\\\.0\\\\.1:8000|odd\\"name"' in query
    assert query.endswith("== 1)[30m:1s]))")
    problems = Problems()
    series = [
        {"metric": {"instance": "10.0.0.1:8000"}, "value": [T0, str(T0 - 42)]},
        {"metric": {"instance": "x"}, "value": [T0, "garbage"]},
    ]
    assert parse_down_since(series, problems) == {"10.0.0.1:8000": T0 - 42}
    assert problems.summary()


def test_the_detail_line_says_for_how_long_and_how_long_ago_it_was_asked() -> None:
    lv = BackendLiveness(
        "b1",
        http_ready=False,
        http_error="refused",
        http_fresh=True,
        prom_up=False,
        prom_fresh=True,
        registry_ready=False,
        registry_ready_at=T0 + 59.5,
        registry_fresh=True,
        serving=False,
        http_since=SignalSince(T0 + 15, seen=False),
        prom_since=SignalSince(T0, seen=True),
        registry_since=SignalSince(T0 + 15, seen=False),
    )
    words = [w for w, _ in signal_words(lv, Snapshot(taken_at=T0 + 60))]
    assert words == [
        "http: refused for ≥45s",
        "prometheus up=0 for 1m",
        "registry ready=0 for ≥45s, 0.5s ago",
    ]


def test_a_backend_marked_down_is_as_old_as_its_registry_change() -> None:
    """The scheduler marked it down 10 minutes ago (the hash's ``changed_at``): the alert of
    a console started now says 10m; a drained one's reminder is not dated by its drain."""
    from gpucon.model.fleet import BackendState
    from gpucon.registry.parse import parse_backend

    fields = {"url": URL, "state": "down", "owner": "scheduler", "changed_at": str(T0 - 600)}
    down, problems = parse_backend("b1", fields)
    assert problems == () and down.changed_at == T0 - 600
    refused = LivenessBook(P).judge_all({"b1": down}, checks(False, T0, "refused"), T0)

    def since_of(b: Backend) -> float:
        inputs = AlertInputs(
            now=T0,
            slots={},
            backends={"b1": b},
            latency={},
            queues={},
            sources={},
            history=History(),
            liveness=refused,
        )
        return next(a.since for a in derive_alerts(inputs, AlertThresholds()))

    assert since_of(down) == T0 - 600
    drained = msgspec.structs.replace(down, state=BackendState.DRAINED)
    assert since_of(drained) == T0  # not ready since this look, whenever it was drained
    _, bad = parse_backend("b1", {**fields, "changed_at": "yesterday"})
    assert any("changed_at" in p for p in bad)
