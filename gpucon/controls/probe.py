"""The load probe's engine: send a bounded number of requests and measure what came back.

Any ``Sender`` drives it: direct (KServe v2 infer to one backend) or through the queue (the
live senders and ``LiveProber`` are in ``gpucon.controls.probe_live``), or the demo's
simulated one. Every probe is bounded by count, rate, concurrency and duration, checked
against the target's configured caps before anything is sent (BadParams naming the field).
The result holds offered and achieved rate, p50/p90/p95/p99, errors by reason and stability
by perf_analyzer's rule (the last three windows' throughput within 10 %). Progress is
reported from the first send on (and every ``TICK_S`` while nothing else happens), with the
p50 of what has completed so far: a slow backend's first answer may be many seconds away.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from gpucon.config import ProbeTarget
from gpucon.errors import (
    MAX_ACTION_TIMEOUT_S,
    MIN_ACTION_TIMEOUT_S,
    BadParams,
    finite_number,
    shown,
)

STABILITY_PCT = 10.0
STABILITY_WINDOWS = 3
QUANTILES = (0.5, 0.9, 0.95, 0.99)
TICK_S = 0.5  # progress at least this often while a probe waits on slow answers
# this many connection failures before any answer: the backend is not there, so the probe
# stops sending rather than spend its whole count on refused connections
STOP_AFTER_CONNECT_ERRORS = 5
CONNECT_ERROR_PREFIX = "connect:"


@dataclass(frozen=True, slots=True)
class ProbeBounds:
    count: int
    rate_per_s: float
    concurrency: int
    duration_s: float
    timeout_s: float = 10.0


def _positive_int(field_name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise BadParams(field_name, f"expected a whole number, got {shown(value)}")
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise BadParams(field_name, f"expected a whole number, got {shown(value)}") from None
    if not math.isfinite(number) or number != int(number):
        raise BadParams(field_name, f"expected a whole number, got {shown(value)}")
    if number < 1:
        raise BadParams(field_name, f"must be ≥ 1, got {int(number)}")
    return int(number)


def check_bounds(target: ProbeTarget, params: Mapping[str, object]) -> ProbeBounds:
    """The probe's bounds from raw params, within the target's caps; BadParams names the field."""
    count = _positive_int("count", params.get("count", target.max_requests))
    concurrency = _positive_int("concurrency", params.get("concurrency", 1))

    def positive(name: str, default: float, maximum: float | None = None) -> float:
        # at least a clock's step: a rate of 1e-31/s would wait 1e31 s between requests
        value = params.get(name, default)
        return finite_number(name, value, minimum=MIN_ACTION_TIMEOUT_S, maximum=maximum)

    rate = positive("rate", target.max_rate_per_s)
    duration = positive("duration", target.max_duration_s)
    timeout = positive("timeout", 10.0, MAX_ACTION_TIMEOUT_S)
    caps = (
        ("count", count, target.max_requests, "max_requests"),
        ("rate", rate, target.max_rate_per_s, "max_rate_per_s"),
        ("concurrency", concurrency, target.max_concurrency, "max_concurrency"),
        ("duration", duration, target.max_duration_s, "max_duration_s"),
    )
    for name, value, cap, cap_name in caps:
        if value > cap:
            raise BadParams(
                name, f"{value:g} exceeds the cap {cap:g} ({cap_name} of target {target.name!r})"
            )
    return ProbeBounds(count, rate, concurrency, duration, timeout)


@dataclass(frozen=True, slots=True)
class ProbeProgress:
    sent: int
    completed: int
    errors: int
    total: int
    elapsed_s: float
    p50_ms: float | None = None  # of the requests completed so far
    duration_s: float | None = None  # the sending window planned


@dataclass(frozen=True, slots=True)
class ProbeResult:
    target: str
    mode: str  # "direct" or "queue"
    bounds: ProbeBounds
    sent: int
    succeeded: int
    errors: dict[str, int]
    # requests sent per second between the first and the last send; None under two sends
    offered_rate: float | None
    achieved_rate: float  # successful answers per second, first send to last answer
    duration_s: float
    latency_ms: dict[str, float | None]  # "p50".."p99"; None without a success
    window_s: float
    window_rates: tuple[float, ...]
    stable: bool | None  # None: fewer than three full windows
    send_span_s: float = 0.0  # from the first send to the last
    # why the probe stopped sending before its count or duration ran out, None when it did not
    stopped_early: str | None = None

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    def to_dict(self) -> dict[str, object]:
        return {
            "target": self.target,
            "mode": self.mode,
            "bounds": {
                "count": self.bounds.count,
                "rate": self.bounds.rate_per_s,
                "concurrency": self.bounds.concurrency,
                "duration": self.bounds.duration_s,
                "timeout": self.bounds.timeout_s,
            },
            "sent": self.sent,
            "succeeded": self.succeeded,
            "errors": dict(self.errors),
            "offered_rate": None if self.offered_rate is None else round(self.offered_rate, 3),
            "achieved_rate": round(self.achieved_rate, 3),
            "duration_s": round(self.duration_s, 3),
            "latency_ms": {
                k: None if v is None else round(v, 3) for k, v in self.latency_ms.items()
            },
            "window_s": round(self.window_s, 3),
            "window_rates": [round(r, 3) for r in self.window_rates],
            "stable": self.stable,
            "send_span_s": round(self.send_span_s, 3),
            "stopped_early": self.stopped_early,
        }


class Sender(Protocol):
    """Sends one request; returns None on success or a short error reason."""

    async def send(self, seq: int) -> str | None: ...

    async def aclose(self) -> None: ...


def quantile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank quantile (the value at rank ceil(q·n))."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


def window_rates(
    completions: list[float], start: float, end: float, window_s: float
) -> tuple[float, ...]:
    """Throughput of each full window between ``start`` and ``end`` (completion times)."""
    n = int((end - start) // window_s) if window_s > 0 else 0
    counts = [0] * n
    for t in completions:
        i = int((t - start) // window_s)
        if 0 <= i < n:
            counts[i] += 1
    return tuple(c / window_s for c in counts)


def is_stable(rates: tuple[float, ...]) -> bool | None:
    """perf_analyzer's rule: the last three windows each within 10 % of their mean."""
    if len(rates) < STABILITY_WINDOWS:
        return None
    last = rates[-STABILITY_WINDOWS:]
    mean = sum(last) / len(last)
    if mean == 0:
        return False
    return all(abs(r - mean) <= mean * STABILITY_PCT / 100.0 for r in last)


def default_window_s(bounds: ProbeBounds) -> float:
    planned = min(bounds.duration_s, bounds.count / bounds.rate_per_s)
    return max(0.2, planned / 6.0)


@dataclass
class _Tally:
    sent: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    completions: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    connect_streak: int = 0  # connection failures in a row, before any answer
    stopped_early: str | None = None

    def record(self, error: str | None) -> None:
        """Count one request's outcome; stop the probe at the first run of connection
        failures with nothing answered (a later failure after an answer is measured)."""
        if error is None:
            self.connect_streak = 0
            return
        self.errors[error] += 1
        if not error.startswith(CONNECT_ERROR_PREFIX):
            self.connect_streak = 0
            return
        self.connect_streak += 1
        if (
            self.stopped_early is None
            and not self.latencies_ms
            and self.connect_streak >= STOP_AFTER_CONNECT_ERRORS
        ):
            self.stopped_early = (
                f"connection failed ×{self.connect_streak} ({error}) with no answer, stopped early"
            )


async def run_probe(
    sender: Sender,
    bounds: ProbeBounds,
    *,
    target: str,
    mode: str,
    on_progress: Callable[[ProbeProgress], None] | None = None,
    window_s: float | None = None,
) -> ProbeResult:
    """Send up to ``bounds.count`` requests at ``bounds.rate_per_s`` (open loop, at most
    ``bounds.concurrency`` outstanding) for at most ``bounds.duration_s``; measure."""
    window = window_s or default_window_s(bounds)
    tally = _Tally()
    slots = asyncio.Semaphore(bounds.concurrency)
    tasks: set[asyncio.Task[None]] = set()
    start = time.perf_counter()
    deadline = start + bounds.duration_s

    def report() -> None:
        if on_progress is not None:
            done = tally.latencies_ms
            on_progress(
                ProbeProgress(
                    tally.sent,
                    len(done),
                    sum(tally.errors.values()),
                    bounds.count,
                    time.perf_counter() - start,
                    quantile(sorted(done), 0.5),
                    bounds.duration_s,
                )
            )

    async def tick() -> None:
        while True:
            await asyncio.sleep(TICK_S)
            report()

    async def one(seq: int) -> None:
        t0 = time.perf_counter()
        try:
            remaining = max(0.001, deadline + bounds.timeout_s - t0)
            error = await asyncio.wait_for(sender.send(seq), min(bounds.timeout_s, remaining))
        except TimeoutError:
            error = "timeout"
        finally:
            slots.release()
        t1 = time.perf_counter()
        if error is None:
            tally.latencies_ms.append((t1 - t0) * 1000.0)
            tally.completions.append(t1)
        tally.record(error)
        report()

    last_send = start
    ticker = asyncio.create_task(tick()) if on_progress is not None else None
    try:
        for seq in range(bounds.count):
            due = start + seq / bounds.rate_per_s
            if due >= deadline or tally.stopped_early is not None:
                break
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            await slots.acquire()
            if time.perf_counter() >= deadline or tally.stopped_early is not None:
                slots.release()
                break
            last_send = time.perf_counter()
            tally.sent += 1
            task = asyncio.create_task(one(seq))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            report()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        if ticker is not None:
            ticker.cancel()
        for task in tasks:
            task.cancel()
        await sender.aclose()
    end = time.perf_counter()
    report()
    send_span = last_send - start
    # n sends at rate r span (n-1)/r seconds; one send has no rate (1/span would be huge)
    offered = (tally.sent - 1) / send_span if tally.sent > 1 and send_span > 0 else None
    ok = len(tally.latencies_ms)
    achieved = ok / (end - start) if end > start else 0.0
    ordered = sorted(tally.latencies_ms)
    rates = window_rates(tally.completions, start, max(last_send, start), window)
    return ProbeResult(
        target=target,
        mode=mode,
        bounds=bounds,
        sent=tally.sent,
        succeeded=ok,
        errors=dict(tally.errors),
        offered_rate=offered,
        achieved_rate=achieved,
        duration_s=end - start,
        latency_ms={f"p{round(q * 100)}": quantile(ordered, q) for q in QUANTILES},
        window_s=window,
        window_rates=rates,
        stable=is_stable(rates),
        send_span_s=send_span,
        stopped_early=tally.stopped_early,
    )
