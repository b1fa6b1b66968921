"""A probe's defaults from the backend's observed service time (pure).

A fixed probe reads wrong on half a fleet: 20/s for 10 s with a 10 s timeout is a fine look
at an 18 ms text model and a false alarm on a 14 s SDXL backend (every request times out, or
one is sent). So the defaults follow what the backend is seen to do:

- **concurrency**: half of what it sustains in flight within its SLO (``actions.capacity``),
  at least 1; one at a time when that is not known. A probe adds to live traffic: it must
  not be the reason the backend looks slow.
- **rate**: what that concurrency sustains at the observed service time (``UTILISATION`` of
  concurrency / service time), within the target's cap; more would only queue the probe's own
  requests behind each other and measure that. Where the backend's live work is known (its
  req/s × service time, Little's law) beside what it sustains, only the spare part is used (at
  least ``SPARE_FLOOR`` of it): a probe that overloads a busy backend measures its own queue.
- **count**: enough completed requests to judge a p95 (``MIN_SAMPLES``), and for a fast
  backend as many as ``FAST_WINDOW_S`` seconds at that rate give (more samples, same wait).
- **duration**: long enough to send them all, with ``DURATION_SLACK`` for sends held back
  while slow answers fill the concurrency (a probe that has sent its count ends there), at most
  ``MAX_DEFAULT_DURATION_S`` and within the target's cap; where the caps cannot give
  ``MIN_SAMPLES``, ``short_of`` says so and the plan warns before anything is sent.
- **timeout**: ``TIMEOUT_FACTOR`` times the observed p95, at least ``DEFAULT_TIMEOUT_S``.

Without a latency source the service time is unknown: a cautious probe (one at a time, a few
per second, a long timeout), and the verdict says when that was too short to judge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from gpucon.actions.capacity import sustained
from gpucon.errors import MAX_ACTION_TIMEOUT_S
from gpucon.model.history import last_known
from gpucon.model.snapshot import Snapshot

MIN_SAMPLES = 20  # fewer completed requests cannot put a p95 apart from the slowest one
FAST_WINDOW_S = 10.0  # a fast backend is probed this long: more samples for the same wait
MAX_DEFAULT_DURATION_S = 600.0  # a default probe never runs longer than this
# answers slower than the interval hold sends back (the demo's 7 s SDXL at 9 s under load sent
# 15 of 20 in the time 20 needed); the count ends a probe that keeps up, so slack costs nothing
DURATION_SLACK = 1.5
PROBE_SHARE = 0.5  # of what the backend sustains in flight
UTILISATION = 0.8  # of the probe's concurrency kept busy: its requests must not queue
SPARE_FLOOR = 0.25  # of what it sustains: a saturated backend is still probed, slowly
TIMEOUT_FACTOR = 3.0  # a request gets this many times the observed p95 before it is a timeout
DEFAULT_TIMEOUT_S = 10.0
UNKNOWN_RATE_PER_S = 2.0  # no service time known: a few requests per second
UNKNOWN_TIMEOUT_S = 60.0  # ... each given a minute (a diffusion model may take many seconds)


@dataclass(frozen=True, slots=True)
class ServiceEstimate:
    """What the backend is observed to do, as far as the sources say (None: unknown)."""

    service_s: float | None  # one request's typical time: its p50, else its mean compute time
    p95_s: float | None = None
    in_flight: float | None = None  # what it sustains in flight within its SLO
    source: str = "no latency source"  # where service_s came from, in words
    busy: float | None = None  # what its live traffic keeps in flight now (req/s × service)

    def describe(self) -> str:
        if self.service_s is None:
            return f"service time n/a ({self.source})"
        p95 = "" if self.p95_s is None else f", p95 {fmt_s(self.p95_s)}"
        held = "" if self.in_flight is None else f", sustains {self.in_flight:.3g} in flight"
        if self.busy is not None:
            held += f", {self.busy:.2g} busy"
        return f"service time {fmt_s(self.service_s)} ({self.source}{p95}{held})"


@dataclass(frozen=True, slots=True)
class ProbeCaps:
    """A probe target's caps (``ProbeTarget``'s ``max_*``)."""

    max_requests: int
    max_rate_per_s: float
    max_concurrency: int
    max_duration_s: float


@dataclass(frozen=True, slots=True)
class ProbeDefaults:
    count: int
    rate_per_s: float
    concurrency: int
    duration_s: float
    timeout_s: float
    # the requests the caps let this probe complete when fewer than MIN_SAMPLES; else None
    short_of: int | None
    why: str  # how they were chosen, one line for the plan


def fmt_s(seconds: float) -> str:
    """``18.2 ms`` or ``14.0 s``."""
    return f"{seconds * 1000:.1f} ms" if seconds < 1.0 else f"{seconds:.1f} s"


def sendable(rate_per_s: float, duration_s: float) -> int:
    """How many requests a probe sends at ``rate_per_s`` before ``duration_s`` ends: one at
    0, 1/rate, 2/rate ... while the send time is before the end."""
    return max(1, math.ceil(rate_per_s * duration_s - 1e-9))


def _clamp_int(value: float, low: int, high: int) -> int:
    return max(low, min(high, int(value)))


def _duration_for(count: int, rate: float, caps: ProbeCaps) -> float:
    """Long enough to send ``count`` at ``rate`` (the last one goes at (count - 1)/rate: half
    an interval more lets it go) with slack, a tenth of a second up, within the caps."""
    wanted = min(MAX_DEFAULT_DURATION_S, DURATION_SLACK * (count - 0.5) / rate)
    return min(caps.max_duration_s, math.ceil(wanted * 10.0) / 10.0)


def probe_defaults(
    service: ServiceEstimate, caps: ProbeCaps, given: Mapping[str, float] | None = None
) -> ProbeDefaults:
    """The probe's count, rate, concurrency, duration and timeout for this backend.

    ``given``: the params the operator set (checked numbers, by name: count, rate,
    concurrency, duration, timeout); they are kept, and the others are chosen to fit them
    (a given count and rate get a duration long enough to send them all).
    """
    g = dict(given or {})
    unknown = service.service_s is None or service.service_s <= 0
    s = service.service_s if service.service_s is not None and not unknown else 1.0
    p95 = max(service.p95_s or s, s)
    if "concurrency" in g:
        base = int(g["concurrency"])
    elif unknown or service.in_flight is None:
        base = 1
    else:
        base = _clamp_int(math.floor(service.in_flight * PROBE_SHARE), 1, caps.max_concurrency)
    spare: float | None = None
    if not unknown and "concurrency" not in g and service.in_flight and service.busy is not None:
        floor = SPARE_FLOOR * service.in_flight
        spare = max(service.in_flight - service.busy, floor)
    load = base if spare is None else min(float(base), spare)  # the probe's work in flight
    sustains = round_rate(UTILISATION * load / s)
    default_rate = min(caps.max_rate_per_s, UNKNOWN_RATE_PER_S if unknown else sustains)
    rate = g.get("rate", default_rate)
    count = int(
        g.get("count", min(caps.max_requests, max(MIN_SAMPLES, math.ceil(rate * FAST_WINDOW_S))))
    )
    duration = g.get("duration", _duration_for(count, rate, caps))
    if "count" not in g:
        count = min(count, sendable(rate, duration))
    # the probe's own requests in flight at its rate (Little's law at their p95) fit in it
    own = 1 if unknown else math.ceil(rate * p95 - 1e-9)
    concurrency = int(g.get("concurrency", _clamp_int(max(base, own), 1, caps.max_concurrency)))
    timeout = UNKNOWN_TIMEOUT_S if unknown else max(DEFAULT_TIMEOUT_S, TIMEOUT_FACTOR * p95)
    timeout = g.get("timeout", float(math.ceil(min(MAX_ACTION_TIMEOUT_S, timeout))))
    if "rate" in g:
        how = "the rate as given"
    elif unknown:
        how = "a cautious probe, one at a time"
    elif rate < sustains:
        verb = "sustains" if base == 1 else "sustain"
        how = f"the target's cap; {base} in flight {verb} {sustains:g}/s"
    elif spare is not None and spare < base:
        how = f"{UTILISATION:.0%} of the {spare:.2g} in flight it has spare"
    else:
        how = f"what {base} in flight sustain{'s' if base == 1 else ''} at {UTILISATION:.0%}"
    return ProbeDefaults(
        count=count,
        rate_per_s=rate,
        concurrency=concurrency,
        duration_s=duration,
        timeout_s=timeout,
        short_of=count if count < MIN_SAMPLES else None,
        why=f"{service.describe()}: {concurrency} at once at {rate:g}/s ({how}), {count} requests",
    )


def round_rate(rate: float) -> float:
    """Three significant digits: a rate the operator can read and type back."""
    return float(f"{rate:.3g}")


def observed_service(snapshot: Snapshot, name: str) -> ServiceEstimate:
    """What the snapshot says of backend ``name``'s service time: its p50 now (else its mean
    compute time), else the last one its history kept; its p95 likewise; its in-flight
    capacity from the history (``actions.capacity``)."""
    lat = snapshot.latency.get(name)
    service_ms: float | None = None
    source = "no latency source"
    if lat is not None and lat.p50_ms is not None:
        service_ms, source = lat.p50_ms, "its p50"
    elif lat is not None and (lat.compute_ms or lat.avg_ms) is not None:
        service_ms, source = lat.compute_ms or lat.avg_ms, "its mean request time"
    else:
        last = last_known(snapshot.history.get(f"backend:{name}:service_ms"))
        if last is not None:
            service_ms, source = last, "its last known request time"
    p95_ms = lat.p95_ms if lat is not None else None
    if p95_ms is None:
        p95_ms = last_known(snapshot.history.get(f"backend:{name}:p95"))
    backend = snapshot.backends.get(name)
    held = sustained(snapshot, backend).in_flight if backend is not None else None
    if service_ms is not None and service_ms <= 0:
        service_ms = None
    rps = lat.req_per_s if lat is not None else None
    busy = None if rps is None or service_ms is None else rps * service_ms / 1000.0
    return ServiceEstimate(
        service_s=None if service_ms is None else service_ms / 1000.0,
        busy=busy,
        p95_s=None if p95_ms is None or p95_ms <= 0 else p95_ms / 1000.0,
        in_flight=held,
        source=source,
    )
