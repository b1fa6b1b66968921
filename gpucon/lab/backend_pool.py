"""The scheduler's view of the registry: cached backends, their health, and who is eligible.

The registry is re-read whenever ``gpucon:registry:version`` changes (and every
``refresh_s`` anyway, in one pipeline); readiness comes from ``/v2/health/ready`` with a
timeout. The cache only narrows the choice: the assignment script re-checks the state
atomically, so a stale cache can never send work to a backend that is no longer active.

Each health check's outcome is published in the backend's hash (``ready`` 1/0 and
``ready_at``, epoch seconds), so consoles see what the scheduler sees. It is not a registry
change (the version is not bumped: plans that check it stay valid), and a backend removed
meanwhile is not written back into existence.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from gpucon.lab import registry_scripts as rs

# KEYS[1] the backend's hash; ARGV ready (1/0), ready_at. Only an existing hash is written.
PUBLISH_READY_LUA = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'ready', ARGV[1], 'ready_at', ARGV[2])
end
return 0
"""


@dataclass(slots=True)
class BackendView:
    """The scheduler's cached copy of one registry entry."""

    name: str
    url: str
    model: str
    weight: float
    state: str
    inflight: int

    @classmethod
    def from_hash(cls, name: str, h: dict[str, str]) -> BackendView:
        try:
            weight = float(h.get("weight", "0"))
        except ValueError:
            weight = 0.0
        try:
            inflight = int(h.get("inflight", "0"))
        except ValueError:
            inflight = 0
        if weight != weight or weight < 0:  # NaN or negative: never eligible
            weight = 0.0
        return cls(
            name=name,
            url=h.get("url", "").rstrip("/"),
            model=h.get("model", ""),
            weight=weight,
            state=h.get("state", ""),
            inflight=inflight,
        )


def choose_backend(candidates: Sequence[BackendView], rng: random.Random) -> BackendView | None:
    """Power of two choices on ``(inflight + 1) / weight`` among eligible candidates."""
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0]
    a, b = rng.sample(list(candidates), 2)
    score_a = (max(a.inflight, 0) + 1) / a.weight
    score_b = (max(b.inflight, 0) + 1) / b.weight
    if score_a == score_b:
        return a if rng.random() < 0.5 else b
    return a if score_a < score_b else b


class BackendPool:
    """Backends as the registry and their health checks say they are now."""

    def __init__(
        self, redis: Any, http: httpx.AsyncClient, *, refresh_s: float, health_timeout_s: float
    ) -> None:
        self.redis = redis
        self.http = http
        self.refresh_s = refresh_s
        self.health_timeout_s = health_timeout_s
        self.backends: dict[str, BackendView] = {}
        self.healthy: dict[str, bool] = {}
        # set when backends appear: the health loop checks them at once
        self.changed = asyncio.Event()
        self._version: str | None = None
        self._last_full_read = 0.0
        self._publish = redis.register_script(PUBLISH_READY_LUA)

    async def refresh(self, force: bool = False) -> None:
        version = await self.redis.get(rs.REGISTRY_VERSION)
        now = time.monotonic()
        fresh_enough = now - self._last_full_read < self.refresh_s
        if not force and version == self._version and fresh_enough:
            return
        names = sorted(str(n) for n in await self.redis.smembers(rs.BACKENDS_SET))
        async with self.redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hgetall(rs.backend_key(name))
            hashes = await pipe.execute()
        fresh = {n: BackendView.from_hash(n, h) for n, h in zip(names, hashes, strict=True) if h}
        new_names = set(fresh) - set(self.backends)
        self.backends = fresh
        self._version = None if version is None else str(version)
        self._last_full_read = now
        if new_names:
            self.changed.set()

    async def _ready(self, b: BackendView) -> bool:
        try:
            r = await self.http.get(f"{b.url}/v2/health/ready", timeout=self.health_timeout_s)
            return r.status_code == 200
        except (httpx.HTTPError, OSError):
            return False

    async def check_health(self) -> None:
        views = list(self.backends.values())
        results = await asyncio.gather(*(self._ready(b) for b in views))
        self.healthy = {b.name: ok for b, ok in zip(views, results, strict=True)}
        await self.publish(dict(self.healthy))

    async def publish(self, healthy: dict[str, bool]) -> None:
        """Write each check's outcome into the registry (one pipeline)."""
        if not healthy:
            return
        checked_at = f"{time.time():.3f}"
        async with self.redis.pipeline(transaction=False) as pipe:
            for name, ok in healthy.items():
                await self._publish(
                    keys=[rs.backend_key(name)], args=["1" if ok else "0", checked_at], client=pipe
                )
            await pipe.execute()

    def eligible(self, model: str | None, excluded: set[str]) -> list[BackendView]:
        return [
            b
            for b in self.backends.values()
            if b.state == "active"
            and b.weight > 0
            and self.healthy.get(b.name, False)
            and b.name not in excluded
            and (not model or b.model == model)
        ]
