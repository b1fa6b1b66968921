"""Whether a probe can judge the backend (pure): before it runs (``plan_checks``: enough
requests can complete, a timeout longer than the service time) and after (``verdict``: slow or
failing, fine, or nothing yet).

A probe that was too short must not read as a broken backend. The verdict is one of:

- ``failing``: not one request was answered (a dead or hung backend: one timed-out request
  is enough to say so, unless the timeout was shorter than its service time), most requests
  failed (at least ``FAILING_MIN`` of them), or more than ``ERROR_PCT`` % failed over at
  least ``MIN_SAMPLES`` answers;
- ``too short``: fewer than ``MIN_SAMPLES`` requests completed, or the probe sent for less than
  ``MIN_SERVICE_TIMES`` service times, or every failure was a timeout shorter than the
  backend's service time (the probe's setting, not the backend's fault) — it names what to
  change;
- ``slow``: p95 over the backend's SLO with enough samples (when its p50 under the probe was
  well above its p50 before, the probe's own load is named as part of it);
- ``ok``: p95 within it.

The rates are said so that they mean something: the offered rate is measured only over two
sends or more (one send has no rate), next to the rate that was planned; when the probe's
concurrency held sends back, that is said instead of a rate nobody asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpucon.actions.plan import Precondition
from gpucon.actions.probe_defaults import (
    MIN_SAMPLES,
    ProbeDefaults,
    ServiceEstimate,
    fmt_s,
    sendable,
)

if TYPE_CHECKING:  # the engine's module loads its HTTP client: not needed to judge a report
    from gpucon.controls.probe import ProbeBounds

ERROR_PCT = 5.0
FAILING_MIN = 3
MIN_SERVICE_TIMES = 3.0
HELD_BACK = 0.9  # offered below this share of the planned rate: the concurrency held it back
SLOWED = 1.3  # a probe's p50 this many times the backend's p50 before it: its own load counts


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: str  # "ok", "slow", "failing", "too short"
    text: str

    @property
    def backend_failing(self) -> bool:
        return self.kind == "failing"

    def line(self) -> str:
        return f"{self.kind.upper()}: {self.text}"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else fmt_s(value / 1000.0)


def verdict(
    report: Mapping[str, Any],
    *,
    slo_p95_ms: float | None,
    service_s: float | None = None,
    timeout_s: float | None = None,
) -> Verdict:
    """The verdict on one probe's ``report`` (``ProbeResult.to_dict``)."""
    ok = int(report.get("succeeded") or 0)
    errors: Mapping[str, int] = report.get("errors") or {}
    failed = sum(errors.values())
    answered = ok + failed
    lat = report.get("latency_ms") or {}
    p50, p95 = lat.get("p50"), lat.get("p95")
    if int(report.get("sent") or 0) == 0:
        return Verdict("too short", "nothing was sent: raise the duration or the rate")
    timeouts_only = failed > 0 and set(errors) == {"timeout"}
    if timeouts_only and timeout_s is not None and service_s is not None and timeout_s < service_s:
        return Verdict(
            "too short",
            f"{failed} request(s) timed out after {fmt_s(timeout_s)}, less than the backend's "
            f"service time {fmt_s(service_s)}: raise the timeout",
        )
    stopped = report.get("stopped_early")
    if stopped:
        planned = int((report.get("bounds") or {}).get("count") or 0)
        sent = int(report.get("sent") or 0)
        return Verdict("failing", f"{stopped} ({sent} of {planned} requests sent)")
    if ok == 0 and failed > 0:  # not one answer: too few to judge speed, enough to judge this
        return Verdict("failing", _none_answered(errors, failed, timeout_s, service_s))
    error_pct = 100.0 * failed / answered if answered else 0.0
    many = failed >= FAILING_MIN and error_pct >= 50.0
    if many or (answered >= MIN_SAMPLES and error_pct > ERROR_PCT):
        worst = max(errors.items(), key=lambda kv: kv[1])[0]
        return Verdict(
            "failing",
            f"{failed} of {answered} requests failed ({error_pct:.0f}%, mostly {worst})",
        )
    sent_for = report.get("send_span_s")
    if (
        service_s is not None
        and sent_for is not None
        and ok < MIN_SAMPLES
        and sent_for < MIN_SERVICE_TIMES * service_s
    ):
        return Verdict(
            "too short",
            f"it sent for {fmt_s(sent_for)}, under {MIN_SERVICE_TIMES:g} service times "
            f"({fmt_s(service_s)} each); p50 {_ms(p50)} from {ok} sample(s)",
        )
    if ok < MIN_SAMPLES:
        more = f", {failed} failed" if failed else ""
        planned = int((report.get("bounds") or {}).get("count") or 0)
        sent = int(report.get("sent") or 0)
        advice = (
            f"only {sent} of {planned} were sent in the duration: raise duration or concurrency"
            if sent < planned
            else "raise count and duration to judge"
        )
        return Verdict(
            "too short",
            f"{ok} of the {MIN_SAMPLES} samples a p95 needs{more}; p50 {_ms(p50)} ({advice})",
        )
    if slo_p95_ms is None:
        return Verdict("ok", f"p95 {_ms(p95)} over {ok} samples (no SLO known)")
    if p95 is not None and p95 > slo_p95_ms:
        text = f"p95 {_ms(p95)} over its SLO {_ms(slo_p95_ms)} ({ok} samples)"
        return Verdict("slow", text + _own_load(report, p50, service_s))
    return Verdict("ok", f"p95 {_ms(p95)} within its SLO {_ms(slo_p95_ms)} ({ok} samples)")


def _none_answered(
    errors: Mapping[str, int], failed: int, timeout_s: float | None, service_s: float | None
) -> str:
    """Every request that ended failed: the backend answered none of them. When they all timed
    out and its service time is unknown, a timeout shorter than it is named as the other cause."""
    kinds = ", ".join(f"{kind}: {n}" for kind, n in sorted(errors.items(), key=lambda kv: -kv[1]))
    text = f"none of the {failed} request(s) that ended was answered ({kinds})"
    if set(errors) == {"timeout"} and service_s is None:
        after = "" if timeout_s is None else f" after {fmt_s(timeout_s)}"
        text += (
            f"; they timed out{after} and the backend's service time is unknown: if it is "
            "slower than that, raise the timeout"
        )
    return text


def _own_load(report: Mapping[str, Any], p50: float | None, service_s: float | None) -> str:
    """When requests took much longer under the probe than the backend's p50 before it, the
    probe's own requests are part of the load it measured: said, so that "slow" is read as
    "slow with this much more work", not as a backend that was slow already."""
    if p50 is None or service_s is None or p50 < SLOWED * service_s * 1000.0:
        return ""
    rate = report.get("achieved_rate")
    added = "" if rate is None else f" ({rate:.3g}/s)"
    return (
        f"; p50 {_ms(p50)} under the probe against {fmt_s(service_s)} before it: "
        f"the probe's own requests{added} added to the backend's load"
    )


def rates_text(report: Mapping[str, Any]) -> str:
    """``offered 19.9/s of 20/s planned, achieved 19.7/s``; "n/a" where there is no rate."""
    bounds = report.get("bounds") or {}
    planned = bounds.get("rate")
    offered = report.get("offered_rate")
    achieved = report.get("achieved_rate")
    sent = int(report.get("sent") or 0)
    offer = f"offered n/a ({sent} sent)" if offered is None else f"offered {offered:.3g}/s"
    if planned is not None:
        offer += f" of {planned:g}/s planned"
        if offered is not None and offered < HELD_BACK * planned:
            offer += f" (held back by concurrency {bounds.get('concurrency')})"
    got = "n/a" if achieved is None else f"{achieved:.3g}/s"
    return f"{offer}, achieved {got}"


def plan_checks(
    service: ServiceEstimate, chosen: ProbeDefaults, bounds: ProbeBounds, *, edited: list[str]
) -> list[Precondition]:
    """Whether the probe as planned can be judged: how its params were chosen, how many
    requests can complete, and whether the timeout leaves a request its service time."""
    how = f"defaults from {chosen.why}"
    if edited:
        how = f"{', '.join(edited)} as given; the rest {how}"
    lines = [Precondition("params", True, how, warning=service.service_s is None)]
    completes = min(bounds.count, sendable(bounds.rate_per_s, bounds.duration_s))
    if service.service_s is not None:  # at most `concurrency` at a time, each service_s long
        per_slot = int(bounds.duration_s / service.service_s) + 1
        completes = min(completes, bounds.concurrency * per_slot)
    if completes < MIN_SAMPLES:
        lines.append(
            Precondition(
                "samples",
                True,
                f"about {completes} request(s) can complete in {bounds.duration_s:g} s at "
                f"{bounds.rate_per_s:g}/s, {bounds.concurrency} at once: fewer than the "
                f"{MIN_SAMPLES} a p95 needs, so the verdict will be 'too short' (raise "
                "duration, count or concurrency, within the target's caps)",
                warning=True,
            )
        )
    else:
        lines.append(
            Precondition("samples", True, f"about {completes} requests can complete (a p95 "
                         f"needs {MIN_SAMPLES})")
        )  # fmt: skip
    slowest = service.p95_s or service.service_s
    if slowest is not None and bounds.timeout_s < slowest:
        lines.append(
            Precondition(
                "timeout",
                True,
                f"timeout {fmt_s(bounds.timeout_s)} is under the backend's observed "
                f"{fmt_s(slowest)}: requests will time out",
                warning=True,
            )
        )
    return lines
