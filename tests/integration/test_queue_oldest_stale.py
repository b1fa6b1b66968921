"""A stale queue's oldest wait is a lower bound that grows, against a real redis-server.

Two requests wait in a real stream (one never delivered, one delivered and not acked); the
server is then stopped (SIGSTOP), so nothing can answer them. The console's last read said
they had waited about 0 s; while the read is stale the OLDEST it shows is that plus the read's
age (``≥5 s``), never more than they really waited, in the queue panel's words, ``gpucon
snapshot``'s text and its JSON (``oldest_wait_at_least``). A stream with nothing waiting at
the last read bounds nothing and keeps its read value.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import redis

from gpucon.commands.snapshot_render import snapshot_document, snapshot_text
from gpucon.hub import Hub
from gpucon.model.queue_wait import oldest_wait
from gpucon.model.snapshot import Snapshot
from gpucon.sources.redisq import RedisQueueSource
from gpucon.widgets import fmt
from tests.helpers.latest_snapshot import Latest
from tests.helpers.servers import RedisProcess

pytestmark = pytest.mark.integration

CADENCE_S = 0.5


def stale_5s(snap: Snapshot) -> bool:
    return (snap.value_age("queue:gen:queue", "oldest_age_s") or 0.0) >= 5.0


def test_stale_oldest_wait_is_a_growing_lower_bound(tmp_path: Path) -> None:
    with RedisProcess(tmp_path) as server:
        r = redis.Redis.from_url(server.url, decode_responses=True)
        for stream in ("gen:queue", "gen:idle"):
            r.xgroup_create(stream, "g1", id="$", mkstream=True)
        added_at = time.time()
        r.xadd("gen:queue", {"model": "m"})
        r.xreadgroup("g1", "c1", {"gen:queue": ">"}, count=1)  # delivered, never acked
        r.xadd("gen:queue", {"model": "m"})  # never delivered
        r.close()
        source = RedisQueueSource(
            server.url,
            streams=("gen:queue", "gen:idle"),
            group="g1",
            cadence_s=CADENCE_S,
            timeout_s=0.3,
        )
        hub = Hub([source], refresh_s=0.1)
        latest = Latest()
        hub.start(latest)
        assert server.proc is not None
        pid = server.proc.pid
        try:
            latest.wait(lambda s: "gen:queue" in s.queues, 15.0, "with the queue read")
            os.kill(pid, signal.SIGSTOP)

            snap = latest.wait(stale_5s, 20.0, "with the queue stale 5 s")
            really_waited = time.time() - added_at
        finally:
            os.kill(pid, signal.SIGCONT)
            hub.stop()
    q = snap.queues["gen:queue"]
    assert q.waiting == 2 and q.oldest_age_s is not None
    assert q.oldest_age_s < 5.0  # as read: well before the stop
    read_age = snap.value_age("queue:gen:queue", "oldest_age_s")
    assert read_age is not None
    wait = oldest_wait(q, snap.staleness)
    assert wait is not None and wait.at_least
    assert wait.seconds == pytest.approx(q.oldest_age_s + read_age)
    assert 5.0 <= wait.seconds <= really_waited + 0.5  # a true lower bound, and it grew
    shown = fmt.oldest_wait(wait)
    assert shown.startswith("≥") and len(shown) <= 7  # the queue panel's OLDEST column
    idle = oldest_wait(snap.queues["gen:idle"], snap.staleness)
    assert idle is not None and not idle.at_least  # nothing waited: no bound
    row = next(line for line in snapshot_text(snap, "lab") if line.startswith("gen:queue"))
    assert shown in row
    doc = {d["stream"]: d for d in snapshot_document(snap, "lab")["queues"]}
    assert doc["gen:queue"]["oldest_wait_at_least"] is True
    assert doc["gen:queue"]["oldest_wait_s"] == pytest.approx(wait.seconds, abs=1e-3)
    assert doc["gen:queue"]["oldest_age_s"] == q.oldest_age_s  # the read value, kept
    assert doc["gen:idle"]["oldest_wait_at_least"] is False
