"""The reference scheduler outlives a Redis outage: it says so, keeps trying, and serves the
queue again once Redis is back (even a restarted one that lost the consumer group)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gpucon.lab.backend_server import BackendServer
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.lab.scheduler import Scheduler, SchedulerConfig
from gpucon.lab.service_time import ServiceTimeModel
from gpucon.lab.traffic import TrafficSpec, generate
from gpucon.registry import keys
from tests.helpers.servers import RedisProcess

pytestmark = pytest.mark.integration


async def register(url: str, server: BackendServer) -> None:
    import redis

    client = redis.Redis.from_url(url)
    register_backends(client, [BackendRecord(server.name, server.url, "llm", "h/gpu0")])
    client.close()


async def test_the_scheduler_reports_a_redis_outage_and_serves_again_after(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisProcess(tmp_path)
    server.start()
    backend = BackendServer("b0", "llm", ServiceTimeModel(base_ms=5.0, slots=4), seed=1)
    await backend.start()
    client = aioredis.Redis.from_url(
        server.url, decode_responses=True, socket_timeout=0.5, socket_connect_timeout=0.5
    )
    scheduler = Scheduler(SchedulerConfig(server.url, block_ms=100), seed=3)
    stop = asyncio.Event()
    caplog.set_level(logging.WARNING, logger="gpucon.scheduler")
    try:
        await register(server.url, backend)
        task = asyncio.create_task(scheduler.run(stop))
        before = await generate(client, TrafficSpec(rate_per_s=100, max_count=5))
        await wait_for(lambda: results(client), len(before))
        server.kill()  # the lab's redis dies, unpersisted: the group and registry go with it
        await asyncio.sleep(1.5)
        assert not task.done(), task.exception() if task.done() else None
        assert any("redis" in r.getMessage().lower() for r in caplog.records)  # it said so
        await asyncio.to_thread(server.start)
        await register(server.url, backend)
        after = await generate(client, TrafficSpec(rate_per_s=100, max_count=5))
        await wait_for(lambda: results(client), len(after), timeout_s=15)
        assert not task.done()
    finally:
        stop.set()
        if "task" in locals():
            await asyncio.wait_for(task, 20)
        await client.aclose()
        await backend.close()
        server.kill()


async def results(client: aioredis.Redis) -> int:
    try:
        return int(await client.xlen(keys.RESULTS_STREAM))
    except (aioredis.ConnectionError, aioredis.TimeoutError):
        return 0


async def wait_for(count: object, want: int, timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    got = 0
    while loop.time() < deadline:
        got = await count()  # type: ignore[operator]
        if got >= want:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{got} of {want} answered")
