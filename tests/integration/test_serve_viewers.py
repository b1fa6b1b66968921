"""``gpucon serve`` without a browser: viewers are bounded, each is a console process of its
own, and none outlives the server (WebSocket clients speaking textual-serve's protocol)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
import httpx
import pytest

from gpucon.commands.serve_web import ENDED_CLOSE, FULL_CLOSE
from tests.helpers.browser import ServedWall, served_wall

pytestmark = [pytest.mark.integration]


async def until_drawn(ws: aiohttp.ClientWebSocketResponse, needle: bytes) -> None:
    """Read the console's output until ``needle`` went by (10 s at most)."""
    seen = b""
    deadline = time.monotonic() + 15
    while needle not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"{needle!r} never drawn; got {len(seen)} bytes"
        message = await ws.receive(timeout=left)
        assert message.type is aiohttp.WSMsgType.BINARY, message
        seen = seen[-4096:] + message.data


def health(wall: ServedWall) -> dict[str, object]:
    answer: dict[str, object] = httpx.get(f"{wall.url}healthz", timeout=5.0).json()
    return answer


def wait(check: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone too
        return stat.read().split(") ", 1)[1][0] != "Z"


async def viewers_bounded(wall: ServedWall) -> list[int]:
    url = f"{wall.url}ws?width=120&height=40"
    async with aiohttp.ClientSession() as session:
        # another web page may not watch; nor may a request for a rebound hostile name
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(url, origin="http://evil.example")
        assert refused.value.status == 403
        rebound = await session.get(wall.url, headers={"Host": f"evil.example:{wall.port}"})
        assert rebound.status == 421
        assert health(wall)["viewers"] == 0
        own = await session.ws_connect(url, origin=wall.url.rstrip("/"))
        await until_drawn(own, b"READ-ONLY")
        await own.close()
        wait(lambda: health(wall)["viewers"] == 0, "the page's own viewer kept its place")
        first = await session.ws_connect(url)
        second = await session.ws_connect(url)
        for ws in (first, second):
            await until_drawn(ws, b"READ-ONLY")
        assert health(wall) == {"viewers": 2, "max_viewers": 2, "full": True}
        consoles = wall.consoles()
        assert len(consoles) == 2, consoles
        async with session.ws_connect(url) as third:
            message = await third.receive(timeout=10)
            assert message.type is aiohttp.WSMsgType.CLOSE
            assert third.close_code == FULL_CLOSE and "full" in str(message.extra)
        await first.close()
        wait(lambda: health(wall)["viewers"] == 1, "the closed viewer kept its place")
        wait(lambda: len(wall.consoles()) == 1, "the closed viewer's console did not exit")
        # its place is free: a new viewer is drawn; when its console dies, it is told so
        async with session.ws_connect(url) as fourth:
            await until_drawn(fourth, b"READ-ONLY")
            (mine,) = set(wall.consoles()) - set(consoles)
            os.kill(mine, signal.SIGKILL)
            while (message := await fourth.receive(timeout=10)).type is aiohttp.WSMsgType.BINARY:
                pass
            assert fourth.close_code == ENDED_CLOSE, (message, fourth.close_code)
        # a hung console (it cannot answer "quit") is killed once its viewer goes
        (hung,) = wall.consoles()
        os.kill(hung, signal.SIGSTOP)
        try:
            await second.close()
            wait(lambda: wall.consoles() == [], "consoles left after every viewer went")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(hung, signal.SIGKILL)
        # one more, then the server is killed under it
        last = await session.ws_connect(url)
        await until_drawn(last, b"READ-ONLY")
        orphans = wall.consoles()
        assert len(orphans) == 1
        assert wall.proc is not None
        wall.proc.send_signal(signal.SIGKILL)
        wall.proc.wait(timeout=5)
        wall.proc = None
        await last.close()
        return orphans


def test_viewers_are_bounded_and_no_console_outlives_the_server(tmp_path: Path) -> None:
    with served_wall(["--demo", "--max-viewers", "2"], tmp_path / "serve.log") as wall:
        orphans = asyncio.run(viewers_bounded(wall))
    # killed with SIGKILL, the server could stop nothing: each console sees its parent gone
    wait(lambda: not any(alive(pid) for pid in orphans), "a console outlived its server", 8)
