"""The lab's backends come back after Redis restarts empty, as real backends' registration
agents bring them back: the lab stack (real ``gpucon backend`` processes, the reference
scheduler) runs on a real redis-server that the test kills and starts again, unpersisted, on
the same port. Each backend's agent writes its entry again within a heartbeat or two; one
whose process is gone stays gone (its agent died with it); an entry an operator changed is
never overwritten (the script writes only what is missing)."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from gpucon.lab.agent import register_if_absent
from gpucon.lab.registration import BackendRecord
from gpucon.model.fleet import Health
from gpucon.registry import keys
from gpucon.sources.redisq import RedisQueueSource
from tests.helpers.lab_stack import start_lab
from tests.helpers.servers import RedisProcess

pytestmark = pytest.mark.integration

HEARTBEAT_S = 1.0
# heartbeat, reconnect and a loaded 2-core box: the fleet is back well within this
BOUND_S = 10.0


def _until(check: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Seconds until ``check`` held (polled); fails after ``timeout_s``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        try:
            if check():
                return time.monotonic() - started
        except redis.RedisError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")


def _restart_empty(server: RedisProcess) -> None:
    """Kill the server, drop its data (the lab's Redis persists nothing), start it again."""
    server.kill()
    shutil.rmtree(server.dir)
    server.dir.mkdir()
    server.start()


def _registered(client: redis.Redis) -> set[str]:
    return {m.decode() for m in client.smembers(keys.BACKENDS)}  # type: ignore[union-attr]


def test_backends_register_again_after_redis_restarts_empty(tmp_path: Path) -> None:
    (tmp_path / "redis").mkdir()
    with (
        RedisProcess(tmp_path / "redis") as server,
        start_lab(server.url, tmp_path / "lab", backends=3, heartbeat_s=HEARTBEAT_S) as lab,
    ):
        client = redis.Redis.from_url(server.url, socket_timeout=1.0)
        try:
            names = {b.name for b in lab.backends}
            assert _registered(client) == names == {"lab-b0", "lab-b1", "lab-b2"}
            before = {n: client.hgetall(keys.backend_key(n)) for n in names}
            # an operator drained lab-b1 at a lower weight: heartbeats leave that alone
            client.hset(keys.backend_key("lab-b1"), mapping={"state": "drained", "weight": "0.5"})
            time.sleep(2.5 * HEARTBEAT_S)
            assert client.hget(keys.backend_key("lab-b1"), "state") == b"drained"
            assert client.hget(keys.backend_key("lab-b1"), "weight") == b"0.5"

            b0_log = tmp_path / "lab" / "lab-b0.log"
            assert "again" not in b0_log.read_text()  # registered at start: not "again"
            server.kill()
            time.sleep(2 * HEARTBEAT_S)  # an outage of a couple of heartbeats
            _restart_empty(server)
            assert _registered(client) != names  # empty: the agents have not been by yet
            took = _until(lambda: _registered(client) == names, BOUND_S, "the fleet back")
            print(f"lab: every backend registered again {took:.2f}s after the restart")
            for n in names:  # as the agent knows it: the operator's drain went with Redis
                assert client.hgetall(keys.backend_key(n)) == before[n], n
                assert client.hget(keys.INFLIGHT, n) is not None
            assert int(client.get(keys.VERSION) or 0) >= 1  # consoles re-read the registry
            # the server's log says the outage and the return, once each
            _until(lambda: "lab-b0 again" in b0_log.read_text(), 5.0, "the log to say so")
            said = b0_log.read_text()
            assert said.count("registry unreachable") == 1, said
            assert said.count("registered lab-b0 again: its registry entry was gone") == 1, said

            # the console's own source sees the fleet again
            source = RedisQueueSource(server.url, streams=("gen:queue",), group="g1")
            reading = source.read()
            assert reading.health is not Health.DOWN, reading.error  # (the group may lag)
            assert {b.name for b in reading.backends} == names

            # a backend whose process is gone has no agent: it is not registered again
            [b2] = [p for p in lab.processes if p.name == "lab-b2"]
            b2.stop()
            _restart_empty(server)
            _until(
                lambda: _registered(client) == {"lab-b0", "lab-b1"}, BOUND_S, "the live two back"
            )
            time.sleep(2 * HEARTBEAT_S)
            assert _registered(client) == {"lab-b0", "lab-b1"}
        finally:
            client.close()


def test_the_agent_writes_only_what_is_missing(redis_url: str) -> None:
    record = BackendRecord("b0", "http://127.0.0.1:9", "llm", "h/gpu0", 2.0)

    async def write() -> bool:
        client = aioredis.Redis.from_url(redis_url)
        try:
            return await register_if_absent(client, record)
        finally:
            await client.aclose()

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        assert asyncio.run(write()) is True  # nothing there: written whole
        assert client.hgetall(keys.backend_key("b0"))["weight"] == "2.0"
        assert client.sismember(keys.BACKENDS, "b0")
        assert client.hget(keys.INFLIGHT, "b0") == "0"
        version = client.get(keys.VERSION)
        assert asyncio.run(write()) is False  # whole: nothing written, no version bump
        assert client.get(keys.VERSION) == version
        # the set lost the name but the hash (an operator's drain) is there: listed again only
        client.hset(keys.backend_key("b0"), "state", "draining")
        client.hset(keys.INFLIGHT, "b0", "3")
        client.srem(keys.BACKENDS, "b0")
        assert asyncio.run(write()) is True
        assert client.sismember(keys.BACKENDS, "b0")
        assert client.hget(keys.backend_key("b0"), "state") == "draining"
        assert client.hget(keys.INFLIGHT, "b0") == "3"
        assert int(client.get(keys.VERSION) or 0) == int(version or 0) + 1
    finally:
        client.close()
