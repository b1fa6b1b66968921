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
from gpucon.widgets.panels import AlertsPanel
from gpucon.widgets.status_bar import StatusBar
from tests.helpers.servers import RedisProcess
from tests.ui.rig import table_lines


def _console(url: str) -> tuple[GpuconApp, Hub, RedisQueueSource]:
    source = RedisQueueSource(url, streams=("gen:queue",), group="g1", timeout_s=0.5)
    hub = Hub([source], refresh_s=1.0)
    hub.poll_once()
    hub.tick()
    return GpuconApp(hub, autostart=False, mode="live", read_only=True), hub, source


async def _first_lines(url: str) -> tuple[str, str]:
    """The status bar's line and the table's first line under its header, in a console on
    ``url``."""
    app, _hub, source = _console(url)
    try:
        async with app.run_test(size=(150, 30)) as pilot:
            await pilot.pause()
            bar = app.screen.query_one(StatusBar).render_line(0).text
            return bar, table_lines(app)[1]
    finally:
        source.close()


async def _first_table_line(url: str) -> str:
    """The table's first line under its header, in a console on ``url``."""
    return (await _first_lines(url))[1]


async def test_table_of_a_console_started_with_redis_down_says_the_registry_was_never_read(
    tmp_path: Path,
) -> None:
    server = RedisProcess(tmp_path)
    server.start()
    server.kill()  # down before the console's first read
    bar, first = await _first_lines(server.url)
    assert "fleet unknown, not empty: redis (the registry) never read (down)" in first, first
    # the status bar does not contradict it with "0 slots 0 backends"
    assert bar.rstrip().endswith("0 GPUs slots unknown backends unknown"), bar


async def test_table_of_an_empty_registry_says_none_was_reported(tmp_path: Path) -> None:
    with RedisProcess(tmp_path) as server:
        seed = redis.Redis.from_url(server.url)
        seed.xgroup_create("gen:queue", "g1", id="$", mkstream=True)
        seed.close()
        bar, empty = await _first_lines(server.url)
    assert "no slot or backend reported: every source read" in empty, empty
    assert bar.rstrip().endswith("0 GPUs 0 slots 0 backends"), bar  # read, and none


async def test_a_registry_flushed_under_the_console_says_it_lost_its_backends(
    tmp_path: Path,
) -> None:
    """An unpersisted Redis restarted empty (here FLUSHALL): the table and the alerts say the
    registry lost the backend it listed, not an empty fleet."""
    with RedisProcess(tmp_path) as server:
        seed = redis.Redis.from_url(server.url)
        seed.xgroup_create("gen:queue", "g1", id="$", mkstream=True)
        seed.sadd("gpucon:backends", "lab-b0")
        seed.hset("gpucon:backend:lab-b0", mapping={"slot": "lab/gpu0/gi1", "state": "active"})
        seed.incr("gpucon:registry:version")  # as every registry writer does
        app, hub, source = _console(server.url)
        try:
            async with app.run_test(size=(150, 30)) as pilot:
                await pilot.pause()
                assert "lab-b0" in table_lines(app)[1]
                seed.flushall()
                seed.xadd("gen:queue", {"prompt": "after the flush"})
                hub.poll_once()
                app.screen.show_snapshot(hub.tick())  # type: ignore[attr-defined]
                await pilot.pause()
                lost = table_lines(app)[1]
                panel = app.screen.query_one(AlertsPanel)
                alerts = [panel.render_line(y).text for y in range(1, 6)]
        finally:
            source.close()
            seed.close()
    assert "the registry lost every backend: it listed 1, now none" in lost, lost
    # both causes, CRIT: the queue nobody reads and the registry that lost its backend
    assert any(a.startswith("CRIT") and "has no consumer group" in a for a in alerts), alerts
    lines = " ".join(alerts)
    assert "registry  the scheduler registry lost every backend: it listed 1" in lines, alerts


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
