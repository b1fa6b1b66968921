"""The reference scheduler against a real redis-server and real KServe v2 backends on loopback.

It must honour the registry (state, weight, health), answer every entry exactly once, claim
entries a crashed consumer left pending, and finish what it has in flight on shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from gpucon.lab.backend_server import BackendServer
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.lab.scheduler import BackendView, Scheduler, SchedulerConfig, choose_backend
from gpucon.lab.service_time import ServiceTimeModel
from gpucon.lab.traffic import TrafficSpec, generate
from gpucon.registry import keys
from gpucon.registry.parse import parse_ready

pytestmark = pytest.mark.integration


@contextlib.asynccontextmanager
async def backends(
    n: int, service_ms: float = 10.0, slots: int = 8, slowdown: float = 0.15
) -> AsyncIterator[list[BackendServer]]:
    model = ServiceTimeModel(base_ms=service_ms, slots=slots, slowdown=slowdown)
    servers = [BackendServer(f"b{i}", "llm", model, seed=i) for i in range(n)]
    for s in servers:
        await s.start()
    try:
        yield servers
    finally:
        for s in servers:
            await s.close()


def register(url: str, servers: Sequence[BackendServer], weights: Sequence[float] = (),
             states: Sequence[str] = ()) -> None:  # fmt: skip
    client = redis.Redis.from_url(url)
    records = [
        BackendRecord(
            s.name,
            s.url,
            "llm",
            f"h/gpu{i}",
            weights[i] if weights else 1.0,
            states[i] if states else "active",
        )
        for i, s in enumerate(servers)
    ]
    register_backends(client, records)
    client.close()


@contextlib.asynccontextmanager
async def running(config: SchedulerConfig) -> AsyncIterator[Scheduler]:
    scheduler = Scheduler(config, seed=7)
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    try:
        yield scheduler
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)


async def wait_answered(r: Any, ids: list[str], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await r.xlen(keys.RESULTS_STREAM) >= len(ids):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"only {await r.xlen(keys.RESULTS_STREAM)} of {len(ids)} answered")


async def answers(r: Any) -> dict[str, list[str]]:
    """entry id -> backends that answered it, from the results stream."""
    out: dict[str, list[str]] = {}
    for _id, fields in await r.xrange(keys.RESULTS_STREAM):
        out.setdefault(fields["entry_id"], []).append(fields["backend"])
    return out


@pytest.fixture
async def r(redis_url: str) -> AsyncIterator[Any]:
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


def test_choose_backend_prefers_lower_inflight_per_weight() -> None:
    rng = random.Random(1)
    light = BackendView("light", "u", "m", weight=1.0, state="active", inflight=0)
    heavy = BackendView("heavy", "u", "m", weight=4.0, state="active", inflight=2)
    # (0+1)/1 = 1.0 vs (2+1)/4 = 0.75: the heavy one wins every time with two candidates
    assert {choose_backend([light, heavy], rng).name for _ in range(50)} == {"heavy"}  # type: ignore[union-attr]
    assert choose_backend([], rng) is None
    views = [BackendView(f"b{i}", "u", "m", 1.0, "active", 0) for i in range(5)]
    picked = {choose_backend(views, rng).name for _ in range(200)}  # type: ignore[union-attr]
    assert picked == {v.name for v in views}  # ties are broken at random


def test_config_refuses_claim_idle_shorter_than_request_timeout() -> None:
    with pytest.raises(ValueError, match="claim_min_idle_ms"):
        SchedulerConfig("redis://x", request_timeout_s=10, claim_min_idle_ms=5_000)
    with pytest.raises(ValueError, match="concurrency"):
        SchedulerConfig("redis://x", concurrency=0)


async def test_every_entry_answered_once_and_registry_counters_return_to_zero(
    redis_url: str, r: Any
) -> None:
    async with backends(3) as servers:
        register(redis_url, servers)
        async with running(SchedulerConfig(redis_url)):
            ids = await generate(r, TrafficSpec(rate_per_s=300, max_count=300))
            await wait_answered(r, ids)
        got = await answers(r)
        assert sorted(got) == sorted(ids)
        assert all(len(b) == 1 for b in got.values())
        served = [str(e["entry_id"]) for s in servers for e in s.served_log()]
        assert sorted(served) == sorted(ids)
        for s in servers:
            assert s.served, f"{s.name} got no work"
            assert await r.hget(keys.INFLIGHT, s.name) == "0"
            assert await r.hlen(keys.assigned_key(s.name)) == 0
        reply = json.loads((await r.lrange(keys.reply_key(ids[0]), 0, -1))[0])
        assert reply["status"] == "ok" and reply["entry_id"] == ids[0]
        pending = await r.xpending(TrafficSpec().stream, "g1")
        assert pending["pending"] == 0
        # its health rounds' verdicts, for consoles, read as every reader reads them
        verdicts, problems = parse_ready(await r.get(keys.READY))
        assert problems == () and set(verdicts) == {s.name for s in servers}
        assert all(flag == "1" and float(at) > 1.7e9 for flag, at in verdicts.values())


async def test_only_active_backends_with_weight_get_work(redis_url: str, r: Any) -> None:
    async with backends(4) as servers:
        register(redis_url, servers, weights=[1, 1, 0, 1],
                 states=["active", "draining", "active", "drained"])  # fmt: skip
        async with running(SchedulerConfig(redis_url)):
            ids = await generate(r, TrafficSpec(rate_per_s=200, max_count=100))
            await wait_answered(r, ids)
        assert len(servers[0].served) == 100
        assert [len(s.served) for s in servers[1:]] == [0, 0, 0]


async def test_weights_shift_the_share_under_load(redis_url: str, r: Any) -> None:
    # no slowdown with concurrency, so inflight share = throughput share (4:1)
    async with backends(2, service_ms=40, slots=16, slowdown=0) as servers:
        register(redis_url, servers, weights=[4, 1])
        async with running(SchedulerConfig(redis_url)):
            ids = await generate(r, TrafficSpec(rate_per_s=250, max_count=400))
            await wait_answered(r, ids)
        heavy, light = len(servers[0].served), len(servers[1].served)
        assert heavy + light == 400
        assert heavy > 2.5 * light, (heavy, light)


async def test_unhealthy_backend_is_skipped(redis_url: str, r: Any) -> None:
    async with backends(2) as servers:
        register(redis_url, servers)
        servers[1].ready = False
        async with running(SchedulerConfig(redis_url, health_interval_s=0.1)):
            ids = await generate(r, TrafficSpec(rate_per_s=200, max_count=60))
            await wait_answered(r, ids)
            servers[1].ready = True
            await asyncio.sleep(0.4)  # the next health check brings it back
            more = await generate(r, TrafficSpec(rate_per_s=200, max_count=60))
            await wait_answered(r, ids + more)
        assert not [e for e in servers[1].served_log() if e["entry_id"] in ids]
        assert [e for e in servers[1].served_log() if e["entry_id"] in more]


async def test_state_is_checked_atomically_even_when_the_cache_is_stale(
    redis_url: str, r: Any
) -> None:
    async with backends(2) as servers:
        register(redis_url, servers)
        # a cache that is never refreshed: only the atomic check at assignment protects b1
        config = SchedulerConfig(redis_url, registry_poll_s=60, registry_refresh_s=60)
        async with running(config) as scheduler:
            await asyncio.sleep(0.2)
            await r.hset(keys.backend_key("b1"), "state", "drained")  # no version bump
            assert scheduler.backends["b1"].state == "active"
            ids = await generate(r, TrafficSpec(rate_per_s=200, max_count=80))
            await wait_answered(r, ids)
        assert len(servers[0].served) == 80 and not servers[1].served


async def test_claims_entries_a_crashed_consumer_left_pending(redis_url: str, r: Any) -> None:
    stream, group = "gen:queue", "g1"
    async with backends(2) as servers:
        register(redis_url, servers)
        await r.xgroup_create(stream, group, "0", mkstream=True)
        ids = await generate(r, TrafficSpec(rate_per_s=1000, max_count=20))
        # a consumer reads them, assigns one to b0 (inflight counted), then dies
        await r.xreadgroup(group, "crashed", {stream: ">"}, count=20)
        await r.hset(keys.assigned_key("b0"), ids[0], "1")
        await r.hincrby(keys.INFLIGHT, "b0", 1)
        await asyncio.sleep(0.6)
        config = SchedulerConfig(
            redis_url, request_timeout_s=0.4, claim_min_idle_ms=500, claim_interval_s=0.2
        )
        async with running(config):
            await wait_answered(r, ids)
        got = await answers(r)
        assert sorted(got) == sorted(ids) and all(len(b) == 1 for b in got.values())
        assert await r.hget(keys.INFLIGHT, "b0") == "0"
        assert await r.hlen(keys.assigned_key("b0")) == 0
        assert (await r.xpending(stream, group))["pending"] == 0


async def test_shutdown_finishes_in_flight_requests(redis_url: str, r: Any) -> None:
    async with backends(1, service_ms=400) as servers:
        register(redis_url, servers)
        scheduler = Scheduler(SchedulerConfig(redis_url), seed=1)
        stop = asyncio.Event()
        task = asyncio.create_task(scheduler.run(stop))
        ids = await generate(r, TrafficSpec(rate_per_s=1000, max_count=4))
        deadline = time.monotonic() + 5
        while sum(scheduler.dispatched.values()) < 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert await r.xlen(keys.RESULTS_STREAM) == 0  # still being served
        stop.set()
        await asyncio.wait_for(task, 10)
        got = await answers(r)
        assert sorted(got) == sorted(ids)
        # after the stop nothing more is read
        late = await generate(r, TrafficSpec(rate_per_s=1000, max_count=2))
        await asyncio.sleep(0.3)
        assert not set(late) & set(await answers(r))


async def test_two_schedulers_share_the_group_and_answer_each_entry_once(
    redis_url: str, r: Any
) -> None:
    async with backends(2) as servers:
        register(redis_url, servers)
        one = SchedulerConfig(redis_url, consumer="s1")
        two = SchedulerConfig(redis_url, consumer="s2")
        async with running(one) as s1, running(two) as s2:
            ids = await generate(r, TrafficSpec(rate_per_s=300, max_count=200))
            await wait_answered(r, ids)
        got = await answers(r)
        assert sorted(got) == sorted(ids) and all(len(b) == 1 for b in got.values())
        assert s1.answered > 0 and s2.answered > 0
        assert s1.answered + s2.answered == 200


async def test_a_claim_racing_a_slow_consumer_still_answers_once(redis_url: str, r: Any) -> None:
    # the backend takes 0.8 s; "eager" claims entries idle 0.3 s, so it sends entries "slow"
    # is still waiting on: the backend serves some twice, but only the first XACK answers
    async with backends(1, service_ms=800, slots=64, slowdown=0) as servers:
        register(redis_url, servers)
        slow = SchedulerConfig(redis_url, consumer="slow", claim_interval_s=60)
        eager = SchedulerConfig(
            redis_url, consumer="eager", request_timeout_s=0.25, claim_min_idle_ms=300,
            claim_interval_s=0.05,
        )  # fmt: skip
        async with running(slow):
            ids = await generate(r, TrafficSpec(rate_per_s=1000, max_count=5))
            await asyncio.sleep(0.05)
            async with running(eager):
                await wait_answered(r, ids)
                await asyncio.sleep(1.0)  # the other copies finish and try to answer too
        served_ids = [str(e["entry_id"]) for e in servers[0].served_log()]
        assert len(served_ids) > len(set(served_ids)) == 5  # some were served twice
        got = await answers(r)
        assert sorted(got) == sorted(ids) and all(len(b) == 1 for b in got.values())
        async with r.pipeline(transaction=False) as pipe:
            for entry_id in ids:
                pipe.llen(keys.reply_key(entry_id))
            assert set(await pipe.execute()) == {1}
        assert await r.hget(keys.INFLIGHT, "b0") == "0"
        assert await r.hlen(keys.assigned_key("b0")) == 0
