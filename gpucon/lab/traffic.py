"""A bounded traffic generator: XADD requests into the queue stream at a steady rate.

Bounded by count and duration (both required); returns the entry ids it added so tests can
check that each one is answered exactly once.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import redis.asyncio as aioredis

STREAM_MAXLEN = 100_000


@dataclass(frozen=True, slots=True)
class TrafficSpec:
    stream: str = "gen:queue"
    model: str = "llm"
    rate_per_s: float = 20.0
    max_count: int = 1000
    max_duration_s: float = 60.0

    def __post_init__(self) -> None:
        if not self.rate_per_s > 0:
            raise ValueError(f"traffic: rate_per_s must be > 0, got {self.rate_per_s!r}")
        if self.max_count < 1:
            raise ValueError(f"traffic: max_count must be >= 1, got {self.max_count!r}")
        if not self.max_duration_s > 0:
            raise ValueError(f"traffic: max_duration_s must be > 0, got {self.max_duration_s!r}")


async def generate(
    client: aioredis.Redis, spec: TrafficSpec, stop: asyncio.Event | None = None
) -> list[str]:
    """Add entries at ``spec.rate_per_s`` until count, duration or ``stop``; returns their ids."""
    ids: list[str] = []
    interval = 1.0 / spec.rate_per_s
    start = time.monotonic()
    for n in range(spec.max_count):
        due = start + n * interval
        if due - start > spec.max_duration_s or (stop is not None and stop.is_set()):
            break
        delay = due - time.monotonic()
        if delay > 0:
            if stop is None:
                await asyncio.sleep(delay)
            else:
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                    break
                except TimeoutError:
                    pass
        entry_id = await client.xadd(
            spec.stream,
            {"model": spec.model, "prompt": f"lab request {n}", "sent_at": f"{time.time():.6f}"},
            maxlen=STREAM_MAXLEN,
            approximate=True,
        )
        ids.append(entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id))
    return ids
