"""``not_scraped``: a backend this console saw scraped that Prometheus no longer scrapes, while
Prometheus reads fresh and scrapes others; and ``up`` is matched to a backend by its own
target, never by a neighbour's on the same host."""

from __future__ import annotations

from gpucon.model.alerts import AlertThresholds, derive_alerts
from gpucon.model.fleet import Backend, Health, SourceStatus
from gpucon.model.history import History
from gpucon.model.liveness import BackendLiveness, TargetUp
from gpucon.model.liveness_book import match_targets
from gpucon.model.scrape_gone import track_scraped
from tests.unit.test_model_early_warning import inputs

NOW = 1000.0
BACKENDS = {
    "b0": Backend("b0", url="http://10.0.0.5:8000"),
    "b1": Backend("b1", url="http://10.0.0.5:8001"),
}


def up(instance: str) -> tuple[TargetUp, str, float]:
    return (TargetUp(instance, True), "prometheus", NOW)


def test_a_neighbours_target_is_not_a_backends_own() -> None:
    both = {"10.0.0.5:8000": up("10.0.0.5:8000"), "10.0.0.5:8001": up("10.0.0.5:8001")}
    assert set(match_targets(BACKENDS, both)) == {"b0", "b1"}
    # b1's target removed: the one left on the host is b0's own, not b1's
    left = {"10.0.0.5:8000": up("10.0.0.5:8000")}
    assert set(match_targets(BACKENDS, left)) == {"b0"}
    # Triton: inference on :8000, metrics on :8002, the only target on the host: still its
    triton = {"10.0.0.9:8002": up("10.0.0.9:8002")}
    assert set(match_targets({"t": Backend("t", url="http://10.0.0.9:8000")}, triton)) == {"t"}


def test_the_scraped_set_grows_and_is_the_same_object_while_nothing_is_new() -> None:
    seen = {"b0": BackendLiveness("b0", prom_up=True), "b1": BackendLiveness("b1")}
    first = track_scraped(frozenset(), seen)
    assert first == {"b0"}
    assert track_scraped(first, seen) is first
    assert track_scraped(first, {"b0": BackendLiveness("b0")}) is first  # gone: remembered


def alerts(scraped: frozenset[str], prom: SourceStatus, **lv: BackendLiveness) -> list[str]:
    parts = inputs(
        NOW,
        History(capacity=8),
        backends=BACKENDS,
        liveness=lv,
        sources={"prometheus": prom},
        scraped=scraped,
    )
    return [a.message for a in derive_alerts(parts, AlertThresholds()) if a.rule == "not_scraped"]


def test_a_backend_no_longer_scraped_is_named_while_prometheus_scrapes_others() -> None:
    fresh = SourceStatus("prometheus", Health.OK, None, NOW, 0.01)
    b0 = BackendLiveness("b0", prom_up=True, prom_fresh=True)
    gone = BackendLiveness("b1")
    (message,) = alerts(frozenset({"b0", "b1"}), fresh, b0=b0, b1=gone)
    assert message.startswith(
        "Prometheus no longer scrapes it (http://10.0.0.5:8001): no up series, so its p95 and "
        "req/s are no longer measured"
    )
    assert alerts(frozenset({"b0"}), fresh, b0=b0, b1=gone) == []  # never seen scraped
    # Prometheus down, or no target reporting at all: its source's alert, not each backend's
    down = SourceStatus("prometheus", Health.DOWN, "refused", NOW - 60, 0.01)
    assert alerts(frozenset({"b0", "b1"}), down, b0=b0, b1=gone) == []
    nothing = BackendLiveness("b0")
    assert alerts(frozenset({"b0", "b1"}), fresh, b0=nothing, b1=gone) == []
