"""A bounded traffic generator: XADD requests into the queue stream at a steady rate.

The rate may change while it runs (``RateControl``: the lab's ``rate``/``spike`` commands); it
stays on a fixed grid between changes, so a slow ``XADD`` does not lower the rate.

Bounded by count and duration (both required); returns the entry ids it added so tests can
check that each one is answered exactly once. Redis going away (stopped, killed, timing out)
does not stop it: like a real client, a request that cannot be queued is dropped and counted
(``on_drop``), and the next one is tried on time, so the lab's queue fills again as soon as
Redis is back.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from gpucon.lab.traffic_control import RateControl

STREAM_MAXLEN = 100_000


@dataclass(frozen=True, slots=True)
class TrafficSpec:
    stream: str = "gen:queue"
    model: str = "llm"
    rate_per_s: float = 20.0
    max_count: int = 1000
    max_duration_s: float = 60.0

    def __post_init__(self) -> None:
        if not self.rate_per_s >= 0:  # 0: paused until a RateControl gives a rate
            raise ValueError(f"traffic: rate_per_s must be >= 0, got {self.rate_per_s!r}")
        if self.max_count < 1:
            raise ValueError(f"traffic: max_count must be >= 1, got {self.max_count!r}")
        if not self.max_duration_s > 0:
            raise ValueError(f"traffic: max_duration_s must be > 0, got {self.max_duration_s!r}")


def say_dropped(count: int, error: BaseException) -> None:
    """The lab's report of requests Redis did not take: the first, then every 100th."""
    if count == 1 or count % 100 == 0:
        print(f"traffic: {count} request(s) dropped, Redis: {error}", file=sys.stderr, flush=True)


async def _wait(delay: float, stop: asyncio.Event | None, control: RateControl) -> None:
    """Sleep ``delay`` seconds, or less when ``stop`` is set or the rate changes."""
    events = [e for e in (stop, control.changed) if e is not None]
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


async def generate(
    client: aioredis.Redis,
    spec: TrafficSpec,
    stop: asyncio.Event | None = None,
    on_drop: Callable[[int, BaseException], None] = say_dropped,
    control: RateControl | None = None,
) -> list[str]:
    """Add entries at ``spec.rate_per_s`` (or ``control``'s rate as it changes: 0 pauses)
    until count, duration or ``stop``; returns their ids (a request Redis does not take is
    dropped: ``on_drop(dropped so far, error)``)."""
    ids: list[str] = []
    dropped = 0
    rate = control if control is not None else RateControl(spec.rate_per_s)
    start = time.monotonic()
    end = start + spec.max_duration_s
    due = start  # when the next request is sent: on a fixed grid, so no drift
    sent_due: float | None = None  # when the last one was due
    for n in range(spec.max_count):
        while True:
            if stop is not None and stop.is_set():
                return ids
            if rate.changed.is_set():
                # a new rate: the next request one new interval after the last one due
                rate.changed.clear()
                now = time.monotonic()
                if sent_due is None or rate.rate_per_s <= 0:
                    due = now
                else:
                    due = max(now, sent_due + 1.0 / rate.rate_per_s)
            if due > end:
                return ids
            if rate.rate_per_s <= 0:  # paused: wait for a rate (or the end)
                await _wait(end - time.monotonic(), stop, rate)
                if not rate.changed.is_set():
                    due = time.monotonic()
                continue
            delay = due - time.monotonic()
            if delay <= 0:
                break
            if stop is None and control is None:
                await asyncio.sleep(delay)
            else:
                await _wait(delay, stop, rate)
        sent_due, due = due, due + 1.0 / rate.rate_per_s
        try:
            entry_id = await client.xadd(
                spec.stream,
                {
                    "model": spec.model,
                    "prompt": f"lab request {n}",
                    "sent_at": f"{time.time():.6f}",
                },
                maxlen=STREAM_MAXLEN,
                approximate=True,
            )
        except (RedisError, OSError) as error:  # Redis stopped or gone: drop it, go on
            dropped += 1
            on_drop(dropped, error)
            continue
        ids.append(entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id))
    return ids
