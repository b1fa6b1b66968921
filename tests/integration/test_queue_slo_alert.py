"""Requests that waited in the stream longer than any SLO raise a CRIT alert on the stream,
whatever the backends' own p95 says (it leaves the wait out): under the lab's `spike 400 25`
the table read `23/2500` on every row while the oldest request had waited 9.6 s, and the only
alert was a WARN that the queue grew. A real redis-server holds the stream and the registry."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import redis

from gpucon.hub import Hub
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.model.alerts import Severity
from gpucon.sources.redisq import RedisQueueSource
from tests.helpers.servers import RedisProcess

pytestmark = pytest.mark.integration


def test_the_oldest_request_past_every_slo_is_critical(tmp_path: Path) -> None:
    with RedisProcess(tmp_path) as server:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        client.xgroup_create("gen:queue", "g1", id="0", mkstream=True)
        register_backends(
            client,
            [
                BackendRecord("b1", "http://127.0.0.1:1", "fast", "h/gpu0/gi1", weight=1.0),
                BackendRecord("b2", "http://127.0.0.1:2", "slow", "h/gpu0/gi2", weight=1.0),
            ],
        )
        source = RedisQueueSource(server.url, streams=("gen:queue",), timeout_s=1.0)
        # the largest SLO is 4 s: a request that waited 3 s is within it
        hub = Hub([source], slo_p95_ms_by_model={"fast": 500.0, "slow": 4000.0})
        try:
            client.xadd("gen:queue", {"p": "1"}, id=f"{int((time.time() - 3) * 1000)}-0")
            hub.poll_once()
            calm = hub.tick()
            assert calm.queues["gen:queue"].oldest_age_s is not None
            assert not [a for a in calm.alerts if a.rule == "queue_slo"]

            # an entry that has waited 9 s, and 40 more behind it
            client.delete("gen:queue")
            client.xgroup_create("gen:queue", "g1", id="0", mkstream=True)
            start = int((time.time() - 9) * 1000)
            for k in range(41):
                client.xadd("gen:queue", {"p": str(k)}, id=f"{start + k}-0")
            hub.poll_once()
            late = hub.tick()
        finally:
            source.close()
            client.close()
    (alert,) = [a for a in late.alerts if a.rule == "queue_slo"]
    assert alert.target == "gen:queue" and alert.severity is Severity.CRITICAL
    assert re.match(r"oldest request waited 9\.\d s, past every p95 SLO ", alert.message)
    assert "(largest 4000 ms), 41 waiting" in alert.message
    assert alert.message.endswith("; a server's p95 starts when it takes the request")
