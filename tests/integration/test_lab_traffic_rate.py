"""The lab's traffic follows the rate typed while it runs: a real redis-server counts what the
generator sent, paused, at a low rate and at a high one; ``gpucon lab`` takes it from stdin."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from gpucon.lab.traffic import TrafficSpec, generate
from gpucon.lab.traffic_control import RateControl
from tests.helpers.lab_cli import read_until
from tests.helpers.servers import RedisProcess

pytestmark = pytest.mark.integration


async def sent_within(client: aioredis.Redis, stream: str, seconds: float) -> int:
    count, _ = await sent_and_elapsed(client, stream, seconds)
    return count


async def sent_and_elapsed(
    client: aioredis.Redis, stream: str, seconds: float
) -> tuple[int, float]:
    """What the generator sent in about ``seconds``, and how long the window really was (on a
    loaded machine the sleep overruns, and the generator sends what its schedule owes)."""
    start = time.monotonic()
    before = await client.xlen(stream)
    await asyncio.sleep(seconds)
    after = await client.xlen(stream)
    return int(after) - int(before), time.monotonic() - start


async def test_generator_follows_the_rate_as_it_changes(tmp_path: Path) -> None:
    server = RedisProcess(tmp_path)
    server.start()
    client = aioredis.Redis.from_url(server.url)
    control = RateControl(0.0)  # paused from the start
    spec = TrafficSpec(rate_per_s=0.0, max_count=100_000, max_duration_s=60.0)
    stop = asyncio.Event()
    try:
        sending = asyncio.create_task(generate(client, spec, stop, control=control))
        assert await sent_within(client, spec.stream, 0.5) == 0
        control.set(10.0)
        await asyncio.sleep(0.2)
        slow, slow_window = await sent_and_elapsed(client, spec.stream, 1.0)
        control.set(200.0)
        await asyncio.sleep(0.2)
        fast, fast_window = await sent_and_elapsed(client, spec.stream, 1.0)
        control.set(0.0)
        await asyncio.sleep(0.2)
        paused = await sent_within(client, spec.stream, 0.5)
        stop.set()
        ids = await asyncio.wait_for(sending, 5)  # a paused generator still stops at once
    finally:
        await client.aclose()
        server.kill()
    figures = f"slow {slow} in {slow_window:.2f} s, fast {fast} in {fast_window:.2f} s"
    # at most the rate over the window as it really was, and one batch of catching up
    assert 5 <= slow <= 10 * slow_window + 6, figures
    assert fast <= 200 * fast_window + 30, figures
    # the rate went up twentyfold; a loaded machine's generator still sends five times as much
    assert fast / fast_window >= 5 * slow / slow_window, figures
    assert paused == 0
    assert len(ids) >= slow + fast


def test_gpucon_lab_takes_the_rate_from_what_is_typed(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "gpucon.commands.cli", "lab", "--backends", "1", "--rate", "0",
            "--duration", "60", "--dir", str(tmp_path / "lab"), "--no-prometheus"]  # fmt: skip
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines: list[str] = []

    def wait_for(text: str) -> str:
        line = read_until(proc, lines, text)
        if line is None:
            raise AssertionError(f"no {text!r} from gpucon lab:\n" + "".join(lines))
        return line

    try:
        wait_for("traffic: paused (--rate 0)")
        url = re.search(r"redis\s+(redis://\S+)", "".join(lines))
        assert url is not None
        client = redis.Redis.from_url(url.group(1))
        assert client.xlen("gen:queue") == 0
        proc.stdin.write("rate fast\n")
        proc.stdin.flush()
        assert "rate: expected a number >= 0, got 'fast'" in wait_for("traffic: rate")
        proc.stdin.write("rate 40\n")
        proc.stdin.flush()
        wait_for("traffic: 40 req/s")
        deadline = time.monotonic() + 15
        while client.xlen("gen:queue") < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.xlen("gen:queue") >= 10
        client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert "stopped everything it started" in out
