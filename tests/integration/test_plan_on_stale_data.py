"""A plan made while a source is stale says so before its checks: a drain planned 15 s after
the registry's Redis stopped answering showed ``PASS state: b1 is active`` from Redis's last
word and nothing else. A real redis-server registry, killed under the hub."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from gpucon.actions.catalog import get_action
from gpucon.hub import Hub
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.model.fleet import Health
from gpucon.sources.redisq import RedisQueueSource
from tests.helpers.servers import RedisProcess

pytestmark = pytest.mark.integration


def test_a_drain_planned_on_a_stale_registry_warns_first(tmp_path: Path) -> None:
    server = RedisProcess(tmp_path)
    server.start()
    client = redis.Redis.from_url(server.url, decode_responses=True)
    client.xgroup_create("gen:queue", "g1", id="$", mkstream=True)
    register_backends(
        client,
        [
            BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=1.0),
            BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", weight=1.0),
        ],
    )
    client.close()
    now = [time.time()]  # the sources stamp their readings with the real clock
    source = RedisQueueSource(server.url, streams=("gen:queue",), timeout_s=1.0)
    hub = Hub([source], refresh_s=1.0, clock=lambda: now[0])
    drain = get_action("drain")
    try:
        hub.poll_once()
        fresh = hub.tick()
        plan = drain.plan(fresh, {"backend": "b1"})
        # every source current: nothing to say
        assert not [p for p in plan.preconditions if p.name.startswith("stale:")]

        server.kill()
        now[0] += 17.0
        hub.poll_once()
        stale = hub.tick()
        assert stale.sources["redis"].health is Health.DOWN
        plan = drain.plan(stale, {"backend": "b1"})
        first = plan.preconditions[0]
        assert first.name == "stale:redis" and first.verdict == "WARN"
        assert first.text.startswith("redis not current (last good read 15s ago: ")
        assert "Connection refused" in first.text
        assert "applying reads the state again first" in first.text
        # the registry's last word still passes its own check, below the warning
        state = next(p for p in plan.preconditions if p.name == "state:b1")
        assert state.verdict == "PASS"
        assert plan.ok  # a warning, not a refusal: the guard re-reads before any write
    finally:
        source.close()
        server.kill()
