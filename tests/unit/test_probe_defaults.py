"""A probe's defaults follow the backend's observed service time (synthetic service times)."""

from __future__ import annotations

import pytest

from gpucon.actions.probe_defaults import (
    MIN_SAMPLES,
    ProbeCaps,
    ProbeDefaults,
    ServiceEstimate,
    probe_defaults,
    sendable,
)

LIVE_CAPS = ProbeCaps(max_requests=200, max_rate_per_s=20.0, max_concurrency=8, max_duration_s=60)
DEMO_CAPS = ProbeCaps(
    max_requests=500, max_rate_per_s=100.0, max_concurrency=16, max_duration_s=600
)
FAST = ServiceEstimate(0.0182, 0.0273, None, "its p50")  # the lab's text backend
SDXL_S, SDXL_P95_S = 14.0, 15.5
SDXL = ServiceEstimate(SDXL_S, SDXL_P95_S, None, "its p50")  # SDXL on a small slice


def completes(d: ProbeDefaults, service_s: float) -> int:
    """What the defaults let complete: sends within the duration, `concurrency` at a time."""
    sent = min(d.count, sendable(d.rate_per_s, d.duration_s))
    return min(sent, d.concurrency * (int(d.duration_s / service_s) + 1))


def test_a_fast_backend_gets_many_requests_at_the_targets_cap() -> None:
    d = probe_defaults(FAST, LIVE_CAPS)
    assert (d.count, d.rate_per_s, d.concurrency) == (200, 20.0, 1)
    # 10 s of sends at 20/s, with slack for sends held back by slow answers (the count ends it)
    assert 10.0 <= d.duration_s <= 15.0 and d.timeout_s == 10.0
    assert sendable(d.rate_per_s, d.duration_s) >= d.count  # every one of them is sent
    assert d.short_of is None and "the target's cap" in d.why and "18.2 ms" in d.why


def test_a_14_s_sdxl_backend_gets_a_rate_it_sustains_and_time_for_enough_samples() -> None:
    d = probe_defaults(SDXL, DEMO_CAPS)
    assert d.concurrency >= 1
    # at most what its one request in flight sustains: the probe does not queue on itself
    assert d.rate_per_s * SDXL_S <= d.concurrency
    assert d.count == MIN_SAMPLES and completes(d, SDXL_S) >= MIN_SAMPLES
    assert d.duration_s >= MIN_SAMPLES * SDXL_S / d.concurrency * 0.8
    # answers a little slower than planned still leave time for all 20 to be sent
    assert d.duration_s >= MIN_SAMPLES * SDXL_P95_S * 1.1 / d.concurrency
    assert d.timeout_s >= 3 * SDXL_P95_S
    assert d.short_of is None


def test_what_it_sustains_in_flight_raises_concurrency_and_shortens_the_probe() -> None:
    alone = probe_defaults(SDXL, DEMO_CAPS)
    held = probe_defaults(ServiceEstimate(14.0, 15.5, 4.0, "its p50"), DEMO_CAPS)
    assert held.concurrency == 2  # half of the 4 it sustains
    assert held.rate_per_s == pytest.approx(2 * alone.rate_per_s, rel=0.01)
    assert held.duration_s < alone.duration_s / 1.9


def test_caps_that_cannot_give_enough_samples_are_said() -> None:
    d = probe_defaults(SDXL, LIVE_CAPS)  # 60 s at most: four 14 s requests
    assert d.duration_s == 60 and d.short_of == d.count and d.count < MIN_SAMPLES


def test_no_service_time_known_gives_a_cautious_probe() -> None:
    d = probe_defaults(ServiceEstimate(None), LIVE_CAPS)
    assert d.concurrency == 1 and d.rate_per_s <= 2.0 and d.timeout_s >= 60.0
    assert "n/a" in d.why


def test_given_params_are_kept_and_the_others_fit_them() -> None:
    # a slower rate than the default: the duration grows so that every request is sent
    d = probe_defaults(FAST, LIVE_CAPS, {"count": 20, "rate": 0.5})
    assert (d.count, d.rate_per_s) == (20, 0.5) and sendable(0.5, d.duration_s) >= 20
    assert "as given" in d.why
    # a given duration that is too short keeps the count asked for (the plan warns)
    d = probe_defaults(FAST, LIVE_CAPS, {"count": 100, "duration": 1.0})
    assert d.count == 100 and d.duration_s == 1.0
    d = probe_defaults(SDXL, DEMO_CAPS, {"concurrency": 4})
    assert d.concurrency == 4 and d.rate_per_s == pytest.approx(4 * 0.8 / 14.0, rel=0.01)


@pytest.mark.parametrize("service_s", [0.001, 0.02, 0.3, 2.0, 14.0, 90.0])
def test_defaults_stay_within_the_caps(service_s: float) -> None:
    for caps in (LIVE_CAPS, DEMO_CAPS):
        d = probe_defaults(ServiceEstimate(service_s, service_s * 1.3, 6.0, "p50"), caps)
        assert 1 <= d.count <= caps.max_requests
        assert 0 < d.rate_per_s <= caps.max_rate_per_s
        assert 1 <= d.concurrency <= caps.max_concurrency
        assert 0 < d.duration_s <= caps.max_duration_s


def test_a_busy_backend_is_probed_only_with_its_spare_capacity() -> None:
    # the demo's SDXL on a 3g slice: 6.9 s a request, sustains 1.04 in flight, 0.69 busy
    idle = probe_defaults(ServiceEstimate(6.9, 7.6, 1.04, "its p50", busy=0.0), DEMO_CAPS)
    busy = probe_defaults(ServiceEstimate(6.9, 7.6, 1.04, "its p50", busy=0.69), DEMO_CAPS)
    assert busy.concurrency == 1 and "spare" in busy.why
    # its traffic plus the probe's work stay within what it sustains
    assert 0.69 + busy.rate_per_s * 6.9 <= 1.04
    assert busy.rate_per_s < idle.rate_per_s / 2 and busy.count == MIN_SAMPLES
    # a saturated backend is still probed, slowly (a quarter of what it sustains)
    full = probe_defaults(ServiceEstimate(6.9, 7.6, 1.04, "its p50", busy=2.0), DEMO_CAPS)
    assert full.rate_per_s == pytest.approx(0.8 * 0.25 * 1.04 / 6.9, rel=0.01)


def test_the_service_time_is_read_from_the_snapshot_and_its_history() -> None:
    from gpucon.actions.probe_defaults import observed_service
    from gpucon.model.fleet import Backend, LatencyStats
    from gpucon.model.history import History
    from gpucon.model.snapshot import Snapshot

    b = Backend("b", model="sdxl")
    now = Snapshot(
        taken_at=1.0,
        backends={"b": b},
        latency={"b": LatencyStats("b", req_per_s=0.1, p50_ms=14000.0, p95_ms=15500.0)},
    )
    est = observed_service(now, "b")
    assert (est.service_s, est.p95_s, est.source) == (14.0, 15.5, "its p50")
    assert est.busy == pytest.approx(1.4)
    # no latency now (a stale scrape): the last values its history kept
    history = History().append(0.5, {"backend:b:service_ms": 13000.0, "backend:b:p95": 16000.0})
    gone = Snapshot(taken_at=1.0, backends={"b": b}, history=history)
    est = observed_service(gone, "b")
    assert (est.service_s, est.p95_s) == (13.0, 16.0) and "last known" in est.source
    assert observed_service(Snapshot(taken_at=1.0, backends={"b": b}), "b").service_s is None
