"""In-flight counts are only as current as the scheduler that keeps them.

Real components: the lab stack (redis-server fixture, a backend server, the reference
scheduler as child processes), ``RedisQueueSource`` and the hub. The scheduler writes its
heartbeat to ``gpucon:schedulers``; killed with requests in flight, Redis still answers (its
source stays fresh) but the counts it left stop moving: INFL is drawn stale with the
heartbeat's age. A registry whose scheduler writes no heartbeat is unknown, not dead.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import redis

from gpucon.hub import Hub
from gpucon.model.alert_base import Severity
from gpucon.model.scheduler_beat import SCHEDULER
from gpucon.model.snapshot import Snapshot
from gpucon.registry import keys
from gpucon.screens.detail import backend_lines
from gpucon.sources.redisq import RedisQueueSource
from gpucon.widgets.row_builder import build_rows
from gpucon.widgets.slot_cells import cell
from tests.helpers.lab_stack import start_lab
from tests.helpers.latest_snapshot import Latest

pytestmark = pytest.mark.integration

STREAM = "gen:queue"


def inflight_age(snap: Snapshot, name: str) -> float | None:
    return snap.value_age(f"backend:{name}", "inflight")


def test_a_killed_scheduler_leaves_inflight_stale_with_its_heartbeats_age(
    redis_url: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    source = RedisQueueSource(redis_url, streams=(STREAM,), cadence_s=0.5, timeout_s=1.0)
    hub = Hub([source], refresh_s=0.2)
    latest = Latest()
    try:
        # slow requests: the counts the killed scheduler leaves are not 0
        with start_lab(redis_url, tmp_path, backends=1, service_ms=8000.0) as lab:
            (backend,) = lab.backends
            for n in range(3):
                client.xadd(STREAM, {"model": "llm", "prompt": f"heartbeat {n}"})
            hub.start(latest)
            live = latest.wait(
                lambda s: (
                    (s.backends[backend.name].inflight or 0) > 0
                    if backend.name in s.backends
                    else False
                ),
                20.0,
                "with requests in flight",
            )
            assert inflight_age(live, backend.name) is None  # the scheduler beats: current
            assert client.hexists(keys.SCHEDULERS, "lab-scheduler")

            scheduler = next(p for p in lab.processes if p.name == "scheduler")
            assert scheduler.proc is not None
            os.kill(scheduler.proc.pid, signal.SIGKILL)
            scheduler.proc.wait(timeout=10)
            killed_at = time.monotonic()
            stale = latest.wait(
                lambda s: inflight_age(s, backend.name) is not None, 15.0, "with INFL stale"
            )
            # silent after two of its 1 s periods and one 0.5 s read, not before
            assert time.monotonic() - killed_at > 1.5
            assert stale.staleness.fields[f"backend:{backend.name}"]["inflight"] == SCHEDULER
            # and an alert says so at once (queue_stalled waits 20 s): its requests wait
            [silent] = [a for a in stale.alerts if a.rule == "scheduler_silent"]
            assert silent.severity is Severity.CRITICAL and silent.target == SCHEDULER
            assert "the scheduler's heartbeat stopped" in silent.message
            assert stale.taken_at - silent.since == pytest.approx(
                inflight_age(stale, backend.name) or 0.0, abs=0.01
            )  # as old as its last beat: INFL's age
            assert "redis" not in stale.staleness.sources  # Redis itself answers: fresh
            assert stale.sources["redis"].health.value == "ok"
            later = latest.wait(
                lambda s: (
                    (inflight_age(s, backend.name) or 0.0)
                    > (inflight_age(stale, backend.name) or 0.0) + 1.0
                ),
                10.0,
                "with the age growing",
            )
        row = next(r for r in build_rows(later, 2500.0).values() if r.backend == backend.name)
        text, style = cell("inflight", row, 8, "")
        count, _, age = text.strip().partition("·")
        assert style == "stale"
        assert int(count) == later.backends[backend.name].inflight and int(count) > 0
        assert age.endswith("s") and float(age[:-1]) >= 3.0  # the heartbeat's age, as `0·6s`
        # the detail says why, and does not call the (fresh) registry stale
        detail = backend_lines((later.backends[backend.name],), later, 2500.0).plain
        assert f"in flight stale {age}: the scheduler's heartbeat stopped" in detail
        assert "registry stale" not in detail
    finally:
        hub.stop()
        source.close()
        client.close()


def test_no_heartbeat_is_unknown_not_dead_and_a_bad_one_is_named(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    client.sadd(keys.BACKENDS, "b0")
    client.hset(keys.backend_key("b0"), mapping={"state": "active", "weight": "1"})
    client.hset(keys.INFLIGHT, "b0", "4")
    source = RedisQueueSource(redis_url, streams=(STREAM,), cadence_s=0.2, timeout_s=1.0)
    hub = Hub([source], refresh_s=0.1)
    try:
        for _ in range(3):
            hub.poll_once()
            time.sleep(0.5)  # past any heartbeat window: a scheduler without one stays unknown
        hub.poll_once()
        snap = hub.tick()
        assert snap.backends["b0"].inflight == 4
        assert inflight_age(snap, "b0") is None and SCHEDULER not in snap.staleness.sources

        client.hset(keys.SCHEDULERS, "old-sched", "yesterday")
        reading = source.read()
        assert reading.scheduler_beat is None
        assert reading.error is not None and "gpucon:schedulers 'old-sched'" in reading.error
    finally:
        hub.stop()
        source.close()
        client.close()
