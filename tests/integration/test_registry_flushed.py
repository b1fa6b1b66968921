"""A Redis that loses its data under a running fleet (``FLUSHALL``, as an unpersisted Redis
restarted empty): the console says the registry lost every backend it listed (it was 2, now
none) rather than showing an empty fleet as if all were well; a stream whose consumer group is
gone is named as read by nobody, not left to a WARN ``queue_growth``; and the lab's reference
scheduler survives the flush (its blocked read was ended with ``UNBLOCKED``, which killed it)
and serves the stream again.

Real components: the redis-server fixture, the lab's backend servers and scheduler as child
processes (no registration agent: nothing writes the registry again), ``RedisQueueSource``
read by a ``Hub``.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from gpucon.hub import Hub
from gpucon.model.alert_base import Severity
from gpucon.model.snapshot import Snapshot
from gpucon.sources.redisq import RedisQueueSource
from gpucon.widgets.empty_table import empty_table_note
from tests.helpers.lab_stack import start_lab
from tests.helpers.servers import poll_until

pytestmark = pytest.mark.integration

STREAM = "gen:queue"


def tick(hub: Hub) -> Snapshot:
    hub.poll_once()
    return hub.tick()


def tick_until(hub: Hub, check: Callable[[Snapshot], bool], timeout_s: float) -> Snapshot:
    return poll_until(lambda: tick(hub), check, timeout_s)


def test_a_flushed_registry_is_lost_not_empty_and_the_scheduler_serves_again(
    redis_url: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    src = RedisQueueSource(redis_url, streams=(STREAM,), group="g1", client_name="gpucon-test")
    hub = Hub([src], refresh_s=1.0)
    try:
        with start_lab(redis_url, tmp_path, backends=2, service_ms=5.0, heartbeat_s=None) as lab:
            listed = tick_until(hub, lambda s: len(s.backends) == 2, 20.0)
            assert not [a for a in listed.alerts if a.rule == "no_backends"]
            before = listed.taken_at

            # the scheduler blocks in XREADGROUP 0.2 s at a time: flushed a few times, one
            # flush surely lands under a blocked read
            for _ in range(3):
                client.flushall()
                time.sleep(0.25)
            for n in range(3):
                client.xadd(STREAM, {"model": "bert-base", "prompt": f"after flush {n}"})
            lost = tick(hub)
            assert lost.backends == {}
            (alert,) = [a for a in lost.alerts if a.rule == "no_backends"]
            assert alert.severity is Severity.CRITICAL
            assert alert.message.startswith(
                "the scheduler registry lost every backend: it listed 2, now none (Redis "
                "restarted without its data, or its keys were deleted?); nothing is scheduled "
                f"from {STREAM} ("
            )
            assert alert.since == before  # dated from the last read that listed them
            assert empty_table_note(lost, filtered=False).startswith(
                "the registry lost every backend: it listed 2, now none"
            )

            # the scheduler's blocked read was ended by the flush: it makes its group again
            # and reads what waits (it used to die of "UNBLOCKED the stream key no longer
            # exists", leaving a stream nobody reads)
            scheduler = next(p for p in lab.processes if p.name == "scheduler")
            served = tick_until(
                hub, lambda s: (q := s.queues[STREAM]).group == "g1" and q.lag == 0, 20.0
            )
            assert scheduler.proc is not None and scheduler.proc.poll() is None
            assert not [a for a in served.alerts if a.rule == "queue_stalled"]
            # still no backend registered (no agent here): the alert stays, as old as before
            (still,) = [a for a in served.alerts if a.rule == "no_backends"]
            assert still.since == before
    finally:
        src.close()
        client.close()


def test_a_stream_whose_group_is_gone_is_read_by_nobody(redis_url: str) -> None:
    """No scheduler makes the group again: the entries are never delivered, CRIT."""
    client = redis.Redis.from_url(redis_url)
    src = RedisQueueSource(redis_url, streams=(STREAM,), group="g1", client_name="gpucon-test")
    hub = Hub([src], refresh_s=1.0)
    try:
        client.xgroup_create(STREAM, "g1", id="$", mkstream=True)
        assert not [a for a in tick(hub).alerts if a.rule == "queue_stalled"]
        client.flushall()
        for n in range(4):
            client.xadd(STREAM, {"model": "bert-base", "prompt": f"no group {n}"})
        snap = tick(hub)
        assert snap.queues[STREAM].group is None
        (alert,) = [a for a in snap.alerts if a.rule == "queue_stalled"]
        assert (alert.target, alert.severity) == (STREAM, Severity.CRITICAL)
        assert alert.message == (
            f"stream {STREAM} has no consumer group: nobody reads its 4 entries (Redis "
            "restarted without its data, or the group was deleted?); the scheduler must "
            "create it again: is it running?"
        )
        assert snap.alerts[0] == alert  # the cause leads: it is no slow backend
    finally:
        src.close()
        client.close()


def test_a_dead_backend_forgotten_by_a_flushed_registry_is_named_not_recovered(
    redis_url: str, tmp_path: Path
) -> None:
    """Two servers with registration agents; one killed: the scheduler says it is not ready.
    A flush forgets it (nothing registers it again): its not-ready alert ends, and
    ``left_registry`` says why, while the living one registers again and is not named."""
    client = redis.Redis.from_url(redis_url)
    src = RedisQueueSource(redis_url, streams=(STREAM,), group="g1", client_name="gpucon-test")
    hub = Hub([src], refresh_s=1.0)
    try:
        with start_lab(redis_url, tmp_path, backends=2, service_ms=5.0, heartbeat_s=0.5) as lab:
            tick_until(hub, lambda s: len(s.backends) == 2, 20.0)
            dead, alive = lab.backends
            server = next(p for p in lab.processes if p.name == dead.name)
            server.signal_group(signal.SIGKILL)
            down = tick_until(
                hub,
                lambda s: (lv := s.liveness.get(dead.name)) is not None and lv.serving is False,
                30.0,
            )
            assert f"not_ready:{dead.name}" in {a.key for a in down.alerts}
            client.flushall()
            back = tick_until(
                hub, lambda s: set(s.backends) == {alive.name} and s.backends != {}, 20.0
            )
            assert f"not_ready:{dead.name}" not in {a.key for a in back.alerts}
            (left,) = [a for a in back.alerts if a.rule == "left_registry"]
            assert (left.target, left.severity) == (dead.name, Severity.WARNING)
            assert left.message.startswith("left the registry while not ready (")
            assert "not because it recovered" in left.message
    finally:
        src.close()
        client.close()
