"""The reference scheduler: reads a Redis Stream with a consumer group and sends each entry to
the backend the registry says should get it.

Common practice, as DESIGN.md's registry contract asks: ``XREADGROUP`` (bounded by free
concurrency), dispatch to the ``active`` backend with the lowest ``(inflight+1)/weight`` among
two random healthy candidates, ``XACK`` only after the backend answered (with the answer
written in the same atomic step), and ``XAUTOCLAIM`` of entries a crashed consumer left pending.
Assignment is atomic against the registry (a Lua script checks ``state`` and bumps the
backend's count in ``gpucon:inflight``), so once a drain has written ``draining`` no new entry
goes to that backend. Each health check's verdict goes to ``gpucon:ready`` (``1``/``0`` and
when), where consoles read it, and every ``heartbeat_s`` its heartbeat to
``gpucon:schedulers`` (``registry/heartbeat.py``), so that a console can tell in-flight counts
it keeps from counts a dead scheduler left behind.
SIGTERM (``stop`` event): stop reading, finish what is in flight, exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import socket
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
import redis.asyncio as aioredis

from gpucon.lab import registry_scripts as rs
from gpucon.lab.backend_pool import BackendPool, BackendView, choose_backend
from gpucon.registry import keys
from gpucon.registry.heartbeat import DEFAULT_EVERY_S, heartbeat_text

__all__ = ["BackendView", "Scheduler", "SchedulerConfig", "choose_backend"]

log = logging.getLogger("gpucon.scheduler")
# a blocked group read that Redis ends because the group or its stream went away (a restart
# without data answers NOGROUP; a FLUSHALL or DEL under the read, "UNBLOCKED the stream key no
# longer exists", which killed the scheduler)
GROUP_GONE = ("NOGROUP", "UNBLOCKED")


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    redis_url: str
    stream: str = "gen:queue"
    group: str = "g1"
    consumer: str = field(default_factory=lambda: f"sched-{socket.gethostname()}-{os.getpid()}")
    concurrency: int = 32
    request_timeout_s: float = 10.0
    health_interval_s: float = 0.5
    health_timeout_s: float = 1.0
    registry_poll_s: float = 0.05
    registry_refresh_s: float = 1.0
    claim_interval_s: float = 1.0
    # must exceed request_timeout_s: a live consumer's entry is never claimed from under it
    claim_min_idle_ms: int = 30_000
    block_ms: int = 200
    dispatch_attempts: int = 3
    shutdown_grace_s: float = 15.0
    heartbeat_s: float = DEFAULT_EVERY_S

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"scheduler: concurrency must be >= 1, got {self.concurrency}")
        if self.claim_min_idle_ms <= self.request_timeout_s * 1000:
            raise ValueError(
                "scheduler: claim_min_idle_ms must exceed request_timeout_s "
                f"({self.claim_min_idle_ms} ms <= {self.request_timeout_s} s)"
            )


class Scheduler:
    """One scheduler process (one consumer in the group)."""

    def __init__(self, config: SchedulerConfig, *, seed: int | None = None) -> None:
        self.config = config
        self.pool: BackendPool | None = None
        self.dispatched: Counter[str] = Counter()
        self.answered = 0
        self.failed = 0
        self._rng = random.Random(seed)
        self._local: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._redis: aioredis.Redis | None = None
        self._reader: aioredis.Redis | None = None
        self._http: httpx.AsyncClient | None = None
        self._stopping = asyncio.Event()

    @property
    def backends(self) -> dict[str, BackendView]:
        return {} if self.pool is None else self.pool.backends

    # --- lifecycle -------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        cfg = self.config
        self._stopping = stop
        self._redis = aioredis.Redis.from_url(
            cfg.redis_url,
            decode_responses=True,
            socket_timeout=5.0,
            client_name="gpucon-scheduler",
        )
        self._reader = aioredis.Redis.from_url(
            cfg.redis_url,
            decode_responses=True,
            socket_timeout=5.0 + cfg.block_ms / 1000,
            client_name="gpucon-scheduler-reader",
        )
        limits = httpx.Limits(max_connections=cfg.concurrency * 2, max_keepalive_connections=64)
        self._http = httpx.AsyncClient(timeout=cfg.request_timeout_s, limits=limits)
        self._assign = self._redis.register_script(rs.ASSIGN_LUA)
        self._release = self._redis.register_script(rs.RELEASE_LUA)
        self._ack_reply = self._redis.register_script(rs.ACK_AND_REPLY_LUA)
        self.pool = BackendPool(
            self._redis, self._http, refresh_s=cfg.registry_refresh_s,
            health_timeout_s=cfg.health_timeout_s,
        )  # fmt: skip
        try:
            await self._ensure_group()
            await self.pool.refresh(force=True)
            await self.pool.check_health()
            background = [
                asyncio.create_task(self._registry_loop(stop)),
                asyncio.create_task(self._health_loop(stop)),
                asyncio.create_task(self._claim_loop(stop)),
                asyncio.create_task(self._heartbeat_loop(stop)),
            ]
            try:
                await self._read_loop(stop)
            finally:
                await self._finish_in_flight()
                for t in background:
                    t.cancel()
                await asyncio.gather(*background, return_exceptions=True)
        finally:
            await self._http.aclose()
            await self._redis.aclose()
            await self._reader.aclose()

    async def _ensure_group(self) -> None:
        assert self._redis is not None
        try:
            await self._redis.xgroup_create(
                self.config.stream, self.config.group, "0", mkstream=True
            )
        except aioredis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def _finish_in_flight(self) -> None:
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=self.config.shutdown_grace_s)
        for t in pending:  # their entries stay pending in the group; another consumer claims them
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    # --- registry and health ---------------------------------------------------------------

    async def _registry_loop(self, stop: asyncio.Event) -> None:
        assert self.pool is not None
        while not stop.is_set():
            with contextlib.suppress(Exception):
                await self.pool.refresh()
            await asyncio.sleep(self.config.registry_poll_s)

    async def _health_loop(self, stop: asyncio.Event) -> None:
        assert self.pool is not None
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.pool.changed.wait(), self.config.health_interval_s)
            self.pool.changed.clear()
            with contextlib.suppress(Exception):
                await self.pool.check_health()

    async def _heartbeat_loop(self, stop: asyncio.Event) -> None:
        """Say this scheduler is alive (and so keeps ``gpucon:inflight``) every heartbeat_s;
        the field stays when it stops, so that consoles see its counts go stale."""
        assert self._redis is not None
        cfg = self.config
        while not stop.is_set():
            with contextlib.suppress(Exception):  # Redis away: the next beat tries again
                beat = heartbeat_text(time.time(), cfg.heartbeat_s)
                await self._redis.hset(keys.SCHEDULERS, cfg.consumer, beat)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), cfg.heartbeat_s)

    # --- reading and claiming --------------------------------------------------------------

    async def _read_loop(self, stop: asyncio.Event) -> None:
        assert self._reader is not None
        cfg = self.config
        while not stop.is_set():
            free = cfg.concurrency - len(self._tasks)
            if free <= 0:
                await asyncio.wait(set(self._tasks), timeout=0.2, return_when="FIRST_COMPLETED")
                continue
            try:
                resp: Any = await self._reader.xreadgroup(
                    cfg.group, cfg.consumer, {cfg.stream: ">"}, count=free, block=cfg.block_ms
                )
            except aioredis.ResponseError as exc:
                if not any(word in str(exc) for word in GROUP_GONE):
                    raise
                # a Redis that restarted without its data, or was flushed (or the stream
                # deleted) under this blocked read: make the group again, unless it went down
                # again meanwhile (then the next read says so)
                with contextlib.suppress(aioredis.ConnectionError, aioredis.TimeoutError):
                    await self._ensure_group()
                continue
            except (aioredis.ConnectionError, aioredis.TimeoutError) as exc:
                log.warning("redis read failed: %s", exc)
                await asyncio.sleep(0.5)
                continue
            for _stream, entries in resp or []:
                for entry_id, fields in entries:
                    self._spawn(entry_id, fields, claimed=False)

    async def _claim_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.sleep(self.config.claim_interval_s)
            if stop.is_set():
                return
            try:
                await self.claim_stale()
            except Exception as exc:
                log.warning("claim failed: %s", exc)

    async def claim_stale(self) -> int:
        """Claim entries idle longer than ``claim_min_idle_ms`` and dispatch them; returns how
        many were claimed."""
        assert self._redis is not None
        cfg = self.config
        start, claimed = "0-0", 0
        while True:
            free = cfg.concurrency - len(self._tasks)
            if free <= 0:
                return claimed
            nxt, entries, deleted = await self._redis.xautoclaim(
                cfg.stream, cfg.group, cfg.consumer, cfg.claim_min_idle_ms, start, count=free
            )
            for entry_id in deleted or []:  # trimmed from the stream: nothing left to answer
                await self._redis.xack(cfg.stream, cfg.group, entry_id)
            for entry_id, fields in entries:
                if entry_id in self._local or fields is None:
                    continue
                claimed += 1
                self._spawn(entry_id, fields, claimed=True)
            if nxt in ("0-0", b"0-0") or not entries:
                return claimed
            start = nxt

    def _spawn(self, entry_id: str, fields: dict[str, str], *, claimed: bool) -> None:
        self._local.add(entry_id)
        task = asyncio.create_task(self._handle(entry_id, fields, claimed))
        self._tasks.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self._tasks.discard(t)
            self._local.discard(entry_id)

        task.add_done_callback(done)

    # --- dispatching one entry -------------------------------------------------------------

    async def _release_everywhere(self, entry_id: str) -> None:
        """A claimed entry may hold a crashed consumer's assignment: release it wherever."""
        for name in list(self.backends):
            await self._release(keys=rs.script_keys(name), args=[entry_id, name])

    async def _handle(self, entry_id: str, fields: dict[str, str], claimed: bool) -> None:
        try:
            if claimed:
                await self._release_everywhere(entry_id)
            await self._dispatch(entry_id, fields)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one entry's trouble never stops the scheduler
            log.warning("entry %s: %s", entry_id, exc)

    async def _dispatch(self, entry_id: str, fields: dict[str, str]) -> None:
        assert self.pool is not None
        pool = self.pool
        model = fields.get("model") or None
        excluded: set[str] = set()
        attempts = 0
        last_error = "no attempt"
        while True:
            candidates = pool.eligible(model, excluded)
            backend = choose_backend(candidates, self._rng)
            if backend is None:
                if self._stopping.is_set():
                    return  # left pending in the group: another consumer claims it
                if excluded and not pool.eligible(model, set()):
                    excluded.clear()
                await asyncio.sleep(0.05)  # wait for a backend to become eligible
                continue
            res = await self._assign(
                keys=rs.script_keys(backend.name), args=[entry_id, backend.name]
            )
            if int(res[0]) != 1:  # the registry changed under our cache: re-read, pick again
                backend.state = str(res[1])
                continue
            backend.inflight = int(res[1])
            self.dispatched[backend.name] += 1
            try:
                status, reason = await self._send(backend, entry_id, fields, str(res[2]))
            finally:
                left = await self._release(
                    keys=rs.script_keys(backend.name), args=[entry_id, backend.name]
                )
                if int(left) >= 0:
                    backend.inflight = int(left)
            if status == 200:
                await self._answer(entry_id, backend.name, "ok", reason)
                return
            attempts += 1
            last_error = reason
            if status in (0, 503):  # unreachable or not ready: skip it until the next check
                pool.healthy[backend.name] = False
            excluded.add(backend.name)
            if attempts >= self.config.dispatch_attempts or 400 <= status < 500:
                await self._answer(entry_id, backend.name, "error", last_error)
                return

    async def _send(
        self, backend: BackendView, entry_id: str, fields: dict[str, str], assigned_at: str
    ) -> tuple[int, str]:
        """POST a KServe v2 infer request; returns (HTTP status or 0, reason/body text)."""
        assert self._http is not None
        body: dict[str, Any] = {
            "id": fields.get("id", entry_id),
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "BYTES",
                    "shape": [1],
                    "data": [fields.get("prompt", "")],
                }
            ],
            "parameters": {"entry_id": entry_id, "assigned_at": assigned_at},
        }
        model = fields.get("model") or backend.model
        try:
            r = await self._http.post(f"{backend.url}/v2/models/{model}/infer", json=body)
        except httpx.TimeoutException:
            return 0, "timeout"
        except (httpx.HTTPError, OSError) as exc:
            return 0, f"connect: {type(exc).__name__}"
        if r.status_code == 200:
            return 200, r.text
        return r.status_code, f"http {r.status_code}"

    async def _answer(self, entry_id: str, backend: str, status: str, detail: str) -> None:
        cfg = self.config
        reply = json.dumps(
            {"entry_id": entry_id, "backend": backend, "status": status, "detail": detail[:2000]}
        )
        done = await self._ack_reply(
            keys=[cfg.stream, keys.reply_key(entry_id), keys.RESULTS_STREAM],
            args=[cfg.group, entry_id, reply, backend, status, rs.REPLY_TTL_S, rs.RESULTS_MAXLEN],
        )
        if int(done) == 1:
            if status == "ok":
                self.answered += 1
            else:
                self.failed += 1
