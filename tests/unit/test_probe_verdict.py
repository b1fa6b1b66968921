"""The probe's verdict: a slow or failing backend apart from a probe too short to judge."""

from __future__ import annotations

from typing import Any

from gpucon.actions.probe_verdict import rates_text, verdict


def report(
    ok: int,
    errors: dict[str, int] | None = None,
    *,
    p50: float | None = 20.0,
    p95: float | None = 30.0,
    sent: int | None = None,
    send_span_s: float = 10.0,
    offered: float | None = 20.0,
    rate: float = 20.0,
) -> dict[str, Any]:
    errs = errors or {}
    return {
        "sent": ok + sum(errs.values()) if sent is None else sent,
        "succeeded": ok,
        "errors": errs,
        "latency_ms": {"p50": p50, "p90": p95, "p95": p95, "p99": p95},
        "send_span_s": send_span_s,
        "offered_rate": offered,
        "achieved_rate": 19.5,
        "bounds": {"count": 200, "rate": rate, "concurrency": 2, "duration": 10.0},
    }


def test_enough_samples_within_the_slo_is_ok_and_over_it_is_slow() -> None:
    assert verdict(report(200), slo_p95_ms=100.0, service_s=0.02).kind == "ok"
    slow = verdict(report(200, p95=180.0), slo_p95_ms=100.0, service_s=0.02)
    assert slow.kind == "slow" and "over its SLO" in slow.text and not slow.backend_failing
    assert "probe's own" not in slow.text  # p50 20 ms, as before the probe
    # the demo's SDXL at 7 s, probed one at a time on top of its traffic: 11 s under the probe
    loaded = report(20, p50=11_173.0, p95=17_838.0)
    v = verdict(loaded, slo_p95_ms=14_000.0, service_s=6.9, timeout_s=23.0)
    assert v.kind == "slow" and "p50 11.2 s under the probe against 6.9 s before it" in v.text


def test_failing_requests_are_the_backends_fault() -> None:
    v = verdict(report(0, {"connect: refused": 5}), slo_p95_ms=100.0, service_s=0.02)
    assert v.kind == "failing" and v.backend_failing and "connect: refused" in v.text
    v = verdict(report(180, {"http 500": 20}), slo_p95_ms=100.0, service_s=0.02)
    assert v.kind == "failing" and "10%" in v.text
    # one error among many is no verdict of failure
    assert verdict(report(199, {"http 500": 1}), slo_p95_ms=100.0).kind == "ok"


def test_a_short_probe_of_a_slow_backend_is_too_short_not_failing() -> None:
    # the old demo probe: 10 s at 20/s, one at a time, against a 14 s backend
    one = report(0, {"timeout": 1}, p50=None, p95=None, send_span_s=0.0, offered=None)
    v = verdict(one, slo_p95_ms=14_000.0, service_s=14.0, timeout_s=10.0)
    assert v.kind == "too short" and "raise the timeout" in v.text and not v.backend_failing
    few = report(4, p50=14_100.0, p95=15_000.0, send_span_s=52.0)
    few["bounds"]["count"] = 4
    v = verdict(few, slo_p95_ms=14_000.0, service_s=14.0, timeout_s=45.0)
    assert v.kind == "too short" and "4 of the 20 samples" in v.text and "14.1 s" in v.text
    assert "raise count and duration" in v.text  # all 4 planned were sent
    held = report(16, p50=10_100.0, send_span_s=170.0)
    held["bounds"]["count"] = 20  # answers slower than planned held sends back
    v = verdict(held, slo_p95_ms=14_000.0, service_s=7.0, timeout_s=24.0)
    assert v.kind == "too short" and "only 16 of 20 were sent" in v.text
    brief = report(2, p50=14_100.0, send_span_s=20.0)
    v = verdict(brief, slo_p95_ms=14_000.0, service_s=14.0, timeout_s=45.0)
    assert v.kind == "too short" and "under 3 service times" in v.text
    v = verdict(report(0, sent=0), slo_p95_ms=100.0)
    assert v.kind == "too short" and "nothing was sent" in v.text


def test_rates_are_said_sensibly() -> None:
    # one send has no rate: never 1/(a few microseconds)
    one = report(1, sent=1, send_span_s=0.0, offered=None)
    text = rates_text(one)
    assert "offered n/a (1 sent)" in text and "of 20/s planned" in text
    assert "offered 19.9/s of 20/s planned" in rates_text(report(200, offered=19.9))
    held = rates_text(report(40, offered=4.0))
    assert "held back by concurrency 2" in held


def test_the_plan_warns_when_the_probe_cannot_judge_or_the_backend_is_down() -> None:
    from gpucon.actions import probe
    from gpucon.config import ProbeTarget
    from gpucon.model.fleet import Backend, LatencyStats
    from gpucon.model.liveness import BackendLiveness
    from gpucon.model.snapshot import Snapshot

    target = ProbeTarget("b", "http://127.0.0.1:1", "sdxl")  # caps: 60 s at most
    snap = Snapshot(
        taken_at=1.0,
        backends={"b": Backend("b", model="sdxl")},
        latency={"b": LatencyStats("b", p50_ms=14000.0, p95_ms=15500.0)},
        liveness={"b": BackendLiveness("b", serving=False, because="http refused")},
    )
    plan = probe.plan(snap, {"target": "b", "probe_targets": (target,), "timeout": 5})
    warned = {p.name: p.text for p in plan.warnings}
    assert "fewer than the 20 a p95 needs" in warned["samples"]
    assert "timeout 5.0 s is under the backend's observed 15.5 s" in warned["timeout"]
    assert "NOT READY (http refused): expect failures" in warned["backend"]
    assert plan.ok and plan.params["service_s"] == 14.0


def test_a_probe_nothing_answered_is_failing_not_too_short() -> None:
    # gpucon lab, lab-b1 stopped (SIGSTOP): 2 of 20 sent in 3 s, each timed out after 2 s
    hung = report(0, {"timeout": 2}, p50=None, p95=None, send_span_s=2.0, offered=0.5, rate=10)
    hung["bounds"]["count"] = 20
    v = verdict(hung, slo_p95_ms=2500.0, service_s=None, timeout_s=2.0)
    assert v.kind == "failing" and v.backend_failing
    assert v.text == (
        "none of the 2 request(s) that ended was answered (timeout: 2); they timed out after "
        "2.0 s and the backend's service time is unknown: if it is slower than that, raise the "
        "timeout"
    )
    # with its service time known and under the timeout, no such doubt is written
    v = verdict(hung, slo_p95_ms=2500.0, service_s=0.05, timeout_s=2.0)
    assert v.kind == "failing" and v.text.endswith("(timeout: 2)")
    refused = report(0, {"connect: refused": 2}, p50=None, p95=None)
    v = verdict(refused, slo_p95_ms=2500.0, service_s=None, timeout_s=2.0)
    assert v.text == "none of the 2 request(s) that ended was answered (connect: refused: 2)"
