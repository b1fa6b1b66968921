"""The scheduler's view of the registry: cached backends, their health, and who is eligible.

The registry is re-read whenever ``gpucon:registry:version`` changes (and every
``refresh_s`` anyway, in one pipeline) and parsed by ``gpucon.registry.parse``, as every
reader does; readiness comes from ``/v2/health/ready`` with a timeout, and each verdict is
written to ``gpucon:ready`` for consoles, with when it last changed where known. The cache
only narrows the choice: the assignment script re-checks the state atomically, so a stale
cache can never send work to a backend that is no longer active.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from gpucon.model.fleet import Backend, BackendState
from gpucon.registry import keys
from gpucon.registry.parse import parse_backend, ready_text
from gpucon.registry.read import decode_hash, live_fields
from gpucon.registry.ready_dates import ReadyDates


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
    def from_backend(cls, b: Backend) -> BackendView:
        """A cached view of a parsed backend; what the parser refused is never eligible."""
        return cls(
            name=b.name,
            url=(b.url or "").rstrip("/"),
            model=b.model or "",
            weight=b.weight or 0.0,
            state=b.state.value,
            inflight=b.inflight or 0,
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
        # when each verdict last changed, written beside it (``gpucon.registry.ready_dates``)
        self.ready_dates = ReadyDates()
        # set when backends appear: the health loop checks them at once
        self.changed = asyncio.Event()
        self._version: str | None = None
        self._last_full_read = 0.0

    async def refresh(self, force: bool = False) -> None:
        version = await self.redis.get(keys.VERSION)
        now = time.monotonic()
        fresh_enough = now - self._last_full_read < self.refresh_s
        if not force and version == self._version and fresh_enough:
            return
        names = sorted(str(n) for n in await self.redis.smembers(keys.BACKENDS))
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(keys.INFLIGHT)
            for name in names:
                pipe.hgetall(keys.backend_key(name))
            inflight, *hashes = await pipe.execute()
        counts = decode_hash(inflight)
        fresh = {}
        for name, raw in zip(names, hashes, strict=True):
            if raw:
                fields = {**decode_hash(raw), **live_fields(counts.get(name), None)}
                fresh[name] = BackendView.from_backend(parse_backend(name, fields)[0])
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
        if views:  # the verdicts, for consoles: no version bump (it is not a registry change)
            now = time.time()
            verdicts = {b.name: (ok, now) for b, ok in zip(views, results, strict=True)}
            if not self.ready_dates.seeded:  # a restarted scheduler keeps the dates
                before = await self.redis.get(keys.READY)
                self.ready_dates.seed(None if before is None else str(before))
            since = self.ready_dates.update(verdicts)
            await self.redis.set(keys.READY, ready_text(verdicts, since))

    def eligible(self, model: str | None, excluded: set[str]) -> list[BackendView]:
        return [
            b
            for b in self.backends.values()
            if b.state == BackendState.ACTIVE
            and b.weight > 0
            and self.healthy.get(b.name, False)
            and b.name not in excluded
            and (not model or b.model == model)
        ]
