"""The load probe on a live fleet: the two senders and ``LiveProber`` (``Controls.prober``).

``DirectSender`` posts KServe v2 ``/v2/models/{model}/infer`` to one backend (httpx);
``QueueSender`` puts the request on the queue (``XADD``) and waits for the scheduler's reply
on ``gen:reply:{entry_id}``. Either is driven by the engine in ``gpucon.controls.probe``
(bounds, rates, quantiles, stability), which is where a probe's limits are checked.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from gpucon.config import ProbeTarget
from gpucon.controls.probe import ProbeBounds, ProbeProgress, ProbeResult, Sender, run_probe
from gpucon.errors import BadParams
from gpucon.registry import keys
from gpucon.sources.connect import RedisAuth


class DirectSender:
    """KServe v2 infer straight to one backend."""

    def __init__(self, url: str, model: str, timeout_s: float, concurrency: int) -> None:
        self.endpoint = f"{url.rstrip('/')}/v2/models/{model}/infer"
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self.client = httpx.AsyncClient(timeout=timeout_s, limits=limits)

    async def send(self, seq: int) -> str | None:
        body = {
            "id": f"probe-{seq}",
            "inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [1], "data": ["probe"]}],
        }
        try:
            r = await self.client.post(self.endpoint, json=body)
        except httpx.TimeoutException:
            return "timeout"
        except (httpx.HTTPError, OSError) as exc:
            return f"connect: {type(exc).__name__}"
        return None if r.status_code == 200 else f"http {r.status_code}"

    async def aclose(self) -> None:
        await self.client.aclose()


class QueueSender:
    """Through the queue: XADD to the stream, wait for the scheduler's reply list."""

    def __init__(
        self,
        redis_url: str,
        stream: str,
        model: str,
        timeout_s: float,
        auth: RedisAuth | None = None,
    ) -> None:
        import redis.asyncio as aioredis

        from gpucon.sources.connect import redis_kwargs

        self.client: Any = aioredis.Redis.from_url(
            redis_url,
            decode_responses=True,
            socket_timeout=timeout_s + 5.0,
            client_name="gpucon-probe",
            **redis_kwargs(redis_url, auth),  # the fleet's user, password and TLS
        )
        self.stream = stream
        self.model = model
        self.timeout_s = timeout_s
        self.run_id = uuid.uuid4().hex[:8]

    async def send(self, seq: int) -> str | None:
        try:
            entry_id = await self.client.xadd(
                self.stream,
                {"model": self.model, "prompt": "probe", "id": f"probe-{self.run_id}-{seq}"},
            )
            got = await self.client.blpop([keys.reply_key(entry_id)], timeout=self.timeout_s)
        except (OSError, TimeoutError) as exc:
            return f"redis: {type(exc).__name__}"
        except Exception as exc:  # redis-py's errors: ConnectionError, ResponseError ...
            return f"redis: {type(exc).__name__}"
        if got is None:
            return "timeout"
        try:
            reply = json.loads(got[1])
        except (ValueError, TypeError):
            return "bad reply"
        status = reply.get("status") if isinstance(reply, dict) else None
        if status == "ok":
            return None
        detail = str(reply.get("detail", "")) if isinstance(reply, dict) else ""
        return f"scheduler: {detail[:60] or status}"

    async def aclose(self) -> None:
        await self.client.aclose()


def probe_target(
    target: ProbeTarget,
    bounds: ProbeBounds,
    *,
    via_queue: bool = False,
    redis_url: str | None = None,
    stream: str = "gen:queue",
    on_progress: Callable[[ProbeProgress], None] | None = None,
    redis_auth: RedisAuth | None = None,
) -> ProbeResult:
    """Run one probe to completion (blocking; call it from a worker thread, not the UI)."""
    sender: Sender
    if via_queue:
        if not redis_url:
            raise BadParams("via_queue", "the fleet has no [redis] section: no queue to probe")
        sender = QueueSender(redis_url, stream, target.model, bounds.timeout_s, redis_auth)
    else:
        sender = DirectSender(target.url, target.model, bounds.timeout_s, bounds.concurrency)
    return asyncio.run(
        run_probe(
            sender,
            bounds,
            target=target.name,
            mode="queue" if via_queue else "direct",
            on_progress=on_progress,
        )
    )


class LiveProber:
    """The live fleet's probe control (``Controls.prober``): real requests, bounded."""

    simulated = False

    def __init__(self, redis_auth: RedisAuth | None = None) -> None:
        self.redis_auth = redis_auth  # the fleet's Redis credentials, for probes via the queue

    def probe(
        self,
        target: ProbeTarget,
        bounds: ProbeBounds,
        on_progress: Callable[[ProbeProgress], None] | None = None,
        *,
        via_queue: bool = False,
        redis_url: str | None = None,
        stream: str = "gen:queue",
    ) -> ProbeResult:
        return probe_target(
            target, bounds, via_queue=via_queue, redis_url=redis_url, stream=stream,
            on_progress=on_progress, redis_auth=self.redis_auth,
        )  # fmt: skip
