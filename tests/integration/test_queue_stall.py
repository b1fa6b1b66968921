"""A stream nobody reads any more is named as such: the lab's scheduler killed, the requests
waiting, the redis source's ``consumer_idle_s`` growing and ``queue_stalled`` asking whether the
scheduler runs; a live scheduler and an empty queue raise nothing.

Real components: the lab stack (redis-server fixture, a backend server and the reference
scheduler as child processes) and ``RedisQueueSource`` reading them.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from gpucon.commands.cli import main
from gpucon.model.alert_base import Severity
from gpucon.model.fleet import QueueStats
from gpucon.model.queue_stall import stalled
from gpucon.sources.redisq import RedisQueueSource
from tests.helpers.lab_stack import start_lab
from tests.helpers.servers import poll_until

pytestmark = pytest.mark.integration

STREAM = "gen:queue"


def read_queue(src: RedisQueueSource) -> QueueStats:
    reading = src.read()
    assert reading.error is None, reading.error
    (queue,) = reading.queues
    return queue


def poll(
    src: RedisQueueSource, check: Callable[[QueueStats], bool], timeout_s: float
) -> QueueStats:
    return poll_until(lambda: read_queue(src), check, timeout_s)


def add(client: redis.Redis, count: int) -> None:
    for n in range(count):
        client.xadd(STREAM, {"model": "llm", "prompt": f"stall test {n}"})


def test_a_killed_scheduler_leaves_the_queue_stalled_and_says_so(
    redis_url: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    src = RedisQueueSource(redis_url, streams=(STREAM,), group="g1", client_name="gpucon-test")
    try:
        with start_lab(redis_url, tmp_path, backends=1, service_ms=5.0) as lab:
            add(client, 5)
            live = poll(src, lambda q: q.lag == 0 and q.pending == 0, 20.0)
            # the scheduler blocks on XREADGROUP and reads again and again: never idle long
            assert live.consumers == 1
            assert live.consumer_idle_s is not None and live.consumer_idle_s < 10.0
            assert stalled(live, warn_s=2.0) is None

            scheduler = next(p for p in lab.processes if p.name == "scheduler")
            scheduler.signal_group(signal.SIGKILL)
            assert scheduler.proc is not None
            scheduler.proc.wait(timeout=10)
            add(client, 7)
            first = poll(src, lambda q: (q.consumer_idle_s or 0.0) >= 2.0, 20.0)
            later = poll(
                src, lambda q: (q.consumer_idle_s or 0.0) > (first.consumer_idle_s or 0.0), 5.0
            )
            assert later.lag == 7  # nothing delivered them
            assert later.consumers == 1  # Redis still lists the dead consumer

            found = stalled(later, warn_s=2.0, crit_s=600.0)
            assert found is not None
            severity, message = found
            assert severity is Severity.WARNING
            assert "no consumer of group g1 has read for" in message
            assert "7 never delivered" in message
            # the dead scheduler held what it had read: nothing acknowledges those either
            if later.pending:
                assert f"it holds {later.pending} unacknowledged" in message
            else:
                assert message.endswith("is the scheduler running?")
            worse = stalled(later, warn_s=1.0, crit_s=2.0)
            assert worse is not None and worse[0] is Severity.CRITICAL
    finally:
        src.close()
        client.close()


def test_a_group_without_consumers_is_critical_and_an_empty_queue_is_not(
    redis_url: str,
) -> None:
    client = redis.Redis.from_url(redis_url)
    src = RedisQueueSource(redis_url, streams=(STREAM,), group="g1", client_name="gpucon-test")
    try:
        client.xgroup_create(STREAM, "g1", id="$", mkstream=True)
        empty = read_queue(src)
        assert empty.consumers == 0 and empty.lag == 0
        assert stalled(empty) is None  # nothing waits: nothing to say

        add(client, 3)
        waiting = read_queue(src)
        assert waiting.consumer_idle_s is None  # no consumer: no idle time to report
        found = stalled(waiting)
        assert found is not None
        severity, message = found
        assert severity is Severity.CRITICAL
        assert message.startswith("group g1 has no consumer: 3 never delivered")
    finally:
        src.close()
        client.close()


def test_snapshot_names_an_empty_registry_and_an_unread_stream(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unpersisted Redis restarted under a running fleet: the group is back (the scheduler
    made it), requests wait, and the registry lists nothing."""
    client = redis.Redis.from_url(redis_url)
    client.xgroup_create(STREAM, "g1", id="$", mkstream=True)
    add(client, 4)
    client.close()
    config = tmp_path / "config.toml"
    config.write_text(f'[fleets.lab.redis]\nurl = "{redis_url}"\nstreams = ["{STREAM}"]\n')
    assert main(["snapshot", "--json", "--config", str(config)]) == 0
    alerts = {a["rule"]: a for a in json.loads(capsys.readouterr().out)["alerts"]}
    registry = alerts["no_backends"]
    assert (registry["target"], registry["severity"]) == ("registry", "critical")
    assert registry["message"] == (
        "the scheduler registry lists no backend: nothing serves gen:queue (4 waiting)"
    )
    stall = alerts["queue_stalled"]
    assert (stall["target"], stall["severity"]) == (STREAM, "critical")
    assert stall["message"].startswith("group g1 has no consumer: 4 never delivered")
