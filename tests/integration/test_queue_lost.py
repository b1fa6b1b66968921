"""A stream made anew under a running console (``FLUSHALL``, as an unpersisted Redis restarted
empty, then the scheduler's group made again): the console names it, with the requests that
were waiting before, where the queue had read short and healthy with nothing said.

Real components: the redis-server fixture, ``RedisQueueSource`` read by a ``Hub``."""

from __future__ import annotations

import pytest
import redis

from gpucon.hub import Hub
from gpucon.model.alert_base import Severity
from gpucon.model.snapshot import Snapshot
from gpucon.sources.redisq import RedisQueueSource

pytestmark = pytest.mark.integration

STREAM = "gen:queue"


def tick(hub: Hub) -> Snapshot:
    hub.poll_once()
    return hub.tick()


def test_a_stream_made_anew_is_named_with_the_requests_waiting_before(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    client.xgroup_create(STREAM, "g1", id="$", mkstream=True)
    for n in range(8):
        client.xadd(STREAM, {"prompt": f"p{n}"})
    client.xreadgroup("g1", "worker", {STREAM: ">"}, count=5)  # 5 read, 3 waiting
    src = RedisQueueSource(redis_url, streams=(STREAM,), group="g1", client_name="gpucon-test")
    hub = Hub([src], refresh_s=1.0)
    try:
        before = tick(hub)
        assert before.queues[STREAM].entries_read == 5
        assert not [a for a in before.alerts if a.rule == "queue_lost"]
        client.flushall()
        # no group for a tick: nothing said yet, the count before stands
        assert not [a for a in tick(hub).alerts if a.rule == "queue_lost"]
        # the scheduler makes its group again; one new request comes
        client.xgroup_create(STREAM, "g1", id="$", mkstream=True)
        client.xadd(STREAM, {"prompt": "after"})
        after = tick(hub)
        (alert,) = [a for a in after.alerts if a.rule == "queue_lost"]
        assert alert.target == STREAM and alert.severity is Severity.WARNING
        assert "read count went back from 5 to 0" in alert.message
        assert "8 requests were waiting then" in alert.message
        assert after.queues[STREAM].waiting == 1  # the queue itself reads short and healthy
        # still named on the next tick, dated from the read that saw it
        again = tick(hub)
        (held,) = [a for a in again.alerts if a.rule == "queue_lost"]
        assert held.since == alert.since
    finally:
        src.close()
