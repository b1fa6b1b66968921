"""A console started while Redis is down says why its table is empty (the registry was never
read), not a bare table under ``0 backends``; once Redis has answered with no backend at all,
the table says the fleet reported none; a filter that hides every row says so.

The Redis is a real redis-server, killed before the console reads it (its port refuses).
"""

from __future__ import annotations

from pathlib import Path

import redis

from gpucon.app import GpuconApp
from gpucon.hub import Hub
from gpucon.sources.redisq import RedisQueueSource
from tests.helpers.servers import RedisProcess
from tests.ui.rig import table_lines


def _console(url: str) -> tuple[GpuconApp, Hub, RedisQueueSource]:
    source = RedisQueueSource(url, streams=("gen:queue",), group="g1", timeout_s=0.5)
    hub = Hub([source], refresh_s=1.0)
    hub.poll_once()
    hub.tick()
    return GpuconApp(hub, autostart=False, mode="live", read_only=True), hub, source


async def _first_table_line(url: str) -> str:
    """The table's first line under its header, in a console on ``url``."""
    app, _hub, source = _console(url)
    try:
        async with app.run_test(size=(150, 30)) as pilot:
            await pilot.pause()
            return table_lines(app)[1]
    finally:
        source.close()


async def test_table_of_a_console_started_with_redis_down_says_the_registry_was_never_read(
    tmp_path: Path,
) -> None:
    server = RedisProcess(tmp_path)
    server.start()
    server.kill()  # down before the console's first read
    first = await _first_table_line(server.url)
    assert "fleet unknown, not empty: redis (the registry) never read (down)" in first, first


async def test_table_of_an_empty_registry_says_none_was_reported(tmp_path: Path) -> None:
    with RedisProcess(tmp_path) as server:
        seed = redis.Redis.from_url(server.url)
        seed.xgroup_create("gen:queue", "g1", id="$", mkstream=True)
        seed.close()
        empty = await _first_table_line(server.url)
    assert "no slot or backend reported: every source read" in empty, empty


async def test_a_filter_that_hides_every_row_says_so(tmp_path: Path) -> None:
    with RedisProcess(tmp_path) as server:
        seed = redis.Redis.from_url(server.url)
        seed.xgroup_create("gen:queue", "g1", id="$", mkstream=True)
        seed.sadd("gpucon:backends", "lab-b0")
        seed.hset("gpucon:backend:lab-b0", mapping={"slot": "lab/gpu0/gi1", "state": "active"})
        seed.close()
        app, hub, source = _console(server.url)
        try:
            async with app.run_test(size=(150, 30)) as pilot:
                await pilot.pause()
                assert "lab-b0" in table_lines(app)[1]
                await pilot.press("slash", *"nomatch", "enter")
                hub.poll_once()
                app.screen.show_snapshot(hub.tick())  # type: ignore[attr-defined]
                await pilot.pause()
                hidden = table_lines(app)[1]
        finally:
            source.close()
    assert "no row matches the filter" in hidden, hidden
