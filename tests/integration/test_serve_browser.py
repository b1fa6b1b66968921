"""``gpucon serve`` in a real headless Chromium: the wall draws, stays read-only, survives a
reload and a server restart, and says when what it shows is stale.

The served page is read from xterm.js's own buffer (``tests/helpers/browser.py`` says how); a
screenshot of each wall is kept (``$GPUCON_TEST_ARTIFACTS``, else the test's tmp directory).
On a live fleet the proof that nothing writes is Redis's own, as in
``test_readonly_redis_console.py``: MONITOR and INFO commandstats see no write command.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import httpx
import pytest
import redis

from gpucon.commands.serve_web import FULL_CLOSE
from gpucon.config.keys import DEFAULT_KEYS
from gpucon.lab.registration import BackendRecord, register_backends
from tests.helpers.browser import MISSING, artifact_dir, browser, served_wall
from tests.helpers.redis_monitor import CommandRecorder, command_calls, dump, writing_commands
from tests.helpers.servers import RedisProcess

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(MISSING is not None, reason=MISSING or ""),
]

# the verbs' keys as the console binds them when it may write: here they must do nothing
ACTION_KEYS = [DEFAULT_KEYS[verb][1] for verb in ("drain", "undrain", "rebalance", "probe")]
CLIENT_NAME = "gpucon-wall-test"
STALL_S = 5  # the page's "no update for N s" (15 by default; the clock redraws every second)


def badges(text: str) -> str:
    return text.splitlines()[0] if text else ""


def shows_wall(text: str) -> bool:
    """The header's badges and the fleet table's column heads are drawn."""
    return "NOC" in badges(text) and "READ-ONLY" in badges(text) and "BACKEND" in text


async def second_viewer(url: str) -> tuple[int | None, str]:
    """What a viewer past the limit gets: its WebSocket's close code and reason."""
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(
            f"{url}ws?width=80&height=24", timeout=aiohttp.ClientWSTimeout(10)
        ) as ws,
    ):
        message = await ws.receive(timeout=10)
        assert message.type is aiohttp.WSMsgType.CLOSE, message
        return ws.close_code, str(message.extra or "")


def test_demo_wall_in_chromium_reloads_and_survives_a_restart(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with (
        served_wall(["--demo", "--max-viewers", "1", "--refresh", "0.5"], log) as wall,
        browser() as page,
    ):
        started = time.monotonic()
        page.open(f"{wall.url}?stall_s={STALL_S}")
        text = page.wait_for(lambda t: shows_wall(t) and "sdxl-a0-gi1" in t, what="the wall")
        load_s = time.monotonic() - started
        assert load_s < 20
        table = text.splitlines()[1]
        for column in ("HOST", "GPU", "SLOT", "BACKEND", "STATE"):
            assert column in table, table
        shot = page.screenshot(artifact_dir(tmp_path) / "serve-demo.png")
        assert shot.stat().st_size > 20_000  # a drawn wall, not an empty page

        # the action keys of a console that may write: no plan, no state moves
        page.press(*ACTION_KEYS)
        time.sleep(1.0)  # two refreshes: a drain would show "draining" by now
        text = page.wait_for(shows_wall, what="the wall after the action keys")
        assert "drain" not in text.lower() and "plan" not in text.lower(), text
        assert "active" in text

        # one viewer allowed: a second one is told the wall is full
        assert httpx.get(f"{wall.url}healthz", timeout=5.0).json()["full"] is True
        code, reason = asyncio.run(second_viewer(wall.url))
        assert code == FULL_CLOSE and "full" in reason, (code, reason)

        # the browser reloads: the wall is drawn again (the old console's place is freed)
        page.driver.refresh()
        page.wait_for(shows_wall, what="the wall after a reload")
        assert page.banner() == ""

        # the server restarts: the last frame stays, dimmed under a STALE banner, then the
        # page reconnects by itself
        wall.stop()
        deadline = time.monotonic() + 10
        while "STALE" not in page.banner():
            assert time.monotonic() < deadline, "no STALE banner after the server stopped"
            time.sleep(0.1)
        assert "restarting" in page.banner() or "lost" in page.banner(), page.banner()
        assert shows_wall(page.screen_text()), "the last frame was not kept"
        page.screenshot(artifact_dir(tmp_path) / "serve-demo-stale.png")
        wall.start()
        page.wait_for(lambda t: shows_wall(t) and page.banner() == "", what="the reconnect")

        # the connection stays open but nothing comes (a hung console, a cut nobody closed):
        # after stall_s the page says so and reconnects to a new console
        (hung,) = wall.consoles()
        os.kill(hung, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + STALL_S + 10
            while "no update" not in page.banner():
                assert time.monotonic() < deadline, f"no stall noticed: {page.banner()!r}"
                time.sleep(0.1)
            page.wait_for(lambda t: shows_wall(t) and page.banner() == "", what="a new console")
            # (the hung console itself is killed: test_serve_viewers.py)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(hung, signal.SIGKILL)
    assert "Traceback" not in log.read_text()
    print(f"wall drawn {load_s:.2f} s after the page was asked for; screenshots in {shot.parent}")


@pytest.fixture
def live_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    (tmp_path / "redis").mkdir()
    with RedisProcess(tmp_path / "redis") as server:
        yield server


def write_live_config(path: Path, redis_url: str) -> Path:
    # read_only = false on purpose: the served console is read-only whatever the config says
    path.write_text(
        "read_only = false\n"
        'fleet = "wall"\n'
        "[fleets.wall.redis]\n"
        f'url = "{redis_url}"\n'
        f'client_name = "{CLIENT_NAME}"\n'
        "cadence_s = 0.25\n"
        "timeout_s = 0.5\n"
    )
    return path


def test_live_wall_writes_nothing_and_marks_an_outage(
    tmp_path: Path, live_redis: RedisProcess
) -> None:
    client = redis.Redis.from_url(live_redis.url, decode_responses=True)
    register_backends(
        client,
        [
            BackendRecord("wall-b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=2.0),
            BackendRecord("wall-b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", weight=1.0),
        ],
    )
    client.xgroup_create("gen:queue", "g1", id="0", mkstream=True)
    client.xadd("gen:queue", {"prompt": "p"})
    config = write_live_config(tmp_path / "config.toml", live_redis.url)
    before, calls_before = dump(client), command_calls(client)
    log = tmp_path / "serve.log"
    env = {"GPUCON_READ_ONLY": "0"}  # neither can the environment turn read-only off
    with (
        served_wall(["--config", str(config), "--refresh", "0.5"], log, env) as wall,
        browser() as page,
    ):
        with CommandRecorder(live_redis.url) as recorder:
            page.open(wall.url)
            text = page.wait_for(lambda t: shows_wall(t) and "wall-b2" in t, what="the fleet")
            recorder.note_clients()
            # (every other key and palette command: test_readonly_redis_console.py; a lone
            # Escape reaches a served console only with the next key, as an Alt prefix)
            page.press(*ACTION_KEYS, *(key.upper() for key in ACTION_KEYS))
            time.sleep(1.5)  # several reads after the keys
            recorder.note_clients()
            text = page.wait_for(shows_wall, what="the wall after the action keys")
            assert "drain" not in text.lower() and "plan" not in text.lower(), text
        page.screenshot(artifact_dir(tmp_path) / "serve-live.png")
        calls_after = command_calls(client)
        executed = {c for c, n in calls_after.items() if n > calls_before.get(c, 0)}
        executed -= {"info", "client|list", "monitor", "command|info"}  # this test's own
        assert writing_commands(client, executed) == set(), sorted(executed)
        sent = recorder.commands_of(CLIENT_NAME)
        assert len(sent) > 5, f"the served console's reads were not seen: {sent}"
        assert writing_commands(client, set(sent)) == set(), sorted(set(sent))
        assert dump(client) == before
        client.close()

        # the source goes away behind the live wall: it keeps drawing and says so
        live_redis.kill()
        text = page.wait_for(
            lambda t: re.search(r"redis\s+DOWN", badges(t)) is not None and "wall-b1" in t,
            what="the outage marked",
        )
        assert "stale" in text  # the queue's last values, with their age
        page.screenshot(artifact_dir(tmp_path) / "serve-live-outage.png")
        assert page.banner() == ""  # the page itself is fine: only the source is down
    assert "Traceback" not in log.read_text()
