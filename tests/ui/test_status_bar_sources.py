"""The status bar at 80 columns names the source that broke: a real redis-server killed under
the console is listed DOWN before the healthy sources, which the narrow bar counts instead."""

from __future__ import annotations

import time
from pathlib import Path

import redis

from gpucon.app import GpuconApp
from gpucon.hub import Hub
from gpucon.model.fleet import Health
from gpucon.sources.redisq import RedisQueueSource
from gpucon.widgets.status_bar import StatusBar
from tests.helpers.servers import RedisProcess
from tests.ui.fleet_fixture import HandSource


async def test_a_killed_redis_is_shown_down_first_at_80_columns(tmp_path: Path) -> None:
    server = RedisProcess(tmp_path)
    server.start()
    seed = redis.Redis.from_url(server.url)
    seed.xgroup_create("gen:queue", "g1", id="$", mkstream=True)
    seed.close()
    # redis sorts after "hand", "prometheus" and "readiness": by name alone it would be cut
    redis_source = RedisQueueSource(
        server.url, streams=("gen:queue",), timeout_s=1.0, client_name="gpucon-test"
    )
    hub = Hub(
        [HandSource(), HandSource(name="prometheus"), HandSource(name="readiness"), redis_source],
        refresh_s=1.0,
    )
    try:
        for _ in range(2):
            hub.poll_once()
            hub.tick()
        assert hub.latest is not None and hub.latest.sources["redis"].health is Health.OK
        server.kill()
        hub.poll_once()
        down = hub.tick()
        assert down.sources["redis"].health is Health.DOWN

        app = GpuconApp(hub, autostart=False, mode="live", read_only=True)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            bar = app.screen.query_one(StatusBar)
            line = bar.render_line(0).text.rstrip()
            assert len(line) <= 80 and not line.endswith("…")
            assert "redis  DOWN " in line  # on screen, with the age of its last good read
            # the healthy ones come after, counted where there is no room to name them
            assert line.index("redis") < line.index("+3 ok")
            await pilot.resize_terminal(160, 24)
            await pilot.pause()
            wide = bar.render_line(0).text
            assert wide.index("redis  DOWN") < wide.index("hand ok")
    finally:
        redis_source.close()
        server.kill()


async def test_the_outage_has_one_age_in_the_status_bar_the_cells_and_the_alert(
    tmp_path: Path,
) -> None:
    """A stopped redis-server 17 s after its last good read: the status bar, the queue panel
    and the stale-source alert all say 15s (the alert said 10s: its own steps)."""
    server = RedisProcess(tmp_path)
    server.start()
    seed = redis.Redis.from_url(server.url)
    seed.xgroup_create("gen:queue", "g1", id="$", mkstream=True)
    seed.close()
    now = [time.time()]  # the sources stamp their readings with the real clock
    redis_source = RedisQueueSource(
        server.url, streams=("gen:queue",), timeout_s=1.0, client_name="gpucon-test"
    )
    hub = Hub([redis_source], refresh_s=1.0, clock=lambda: now[0])
    try:
        hub.poll_once()
        hub.tick()
        server.kill()
        now[0] += 17.0
        hub.poll_once()
        down = hub.tick()
        assert down.sources["redis"].health is Health.DOWN
        alert = next(a for a in down.alerts if a.target == "redis")
        assert "last good read 15s ago" in alert.message, alert.message

        app = GpuconApp(hub, autostart=False, mode="live", read_only=True)
        async with app.run_test(size=(150, 40)) as pilot:
            await pilot.pause()
            bar = app.screen.query_one(StatusBar).render_line(0).text
            assert "redis  DOWN  15s" in bar, bar
    finally:
        redis_source.close()
        server.kill()
