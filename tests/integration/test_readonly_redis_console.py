"""A read-only console on real Redis, driven through every key and palette command, writes nothing.

The proof is Redis's own: ``MONITOR`` records every command the server executes with the
connection's address; ``CLIENT LIST`` maps addresses to client names, and the console's Redis
source names its connection. Every command that connection sent is then looked up in
``COMMAND INFO``: none may carry the ``write`` or ``may_replicate`` flag (the latter catches a
writing ``EVAL``). The registry and the stream are also compared before and after.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gpucon.app import GpuconApp
from gpucon.config import GpuconConfig
from gpucon.hub import Hub
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.model.reading import Reading
from gpucon.registry import keys
from gpucon.session import demo_controls
from gpucon.sim.fleet import build_sim_fleet
from gpucon.sources.redisq import RedisQueueSource
from tests.helpers.redis_monitor import CommandRecorder, command_calls, dump, writing_commands

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CLIENT_NAME = "gpucon-ro-console-test"
SKIPPED_KEYS = {"q", "ctrl+q", "ctrl+c"}  # they quit the console
ACTION_KEYS = "dubpA"


class CountingSource(RedisQueueSource):
    """The console's Redis source, counting its reads (so the test waits on reads, not time)."""

    reads = 0

    def read(self) -> Reading:
        reading = super().read()
        self.reads += 1
        return reading


@pytest.fixture
def seeded(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        c,
        [
            BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=2.0),
            BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", weight=1.0),
        ],
    )
    c.xgroup_create("gen:queue", "g1", id="0", mkstream=True)
    for i in range(5):
        c.xadd("gen:queue", {"prompt": f"p{i}"})
    yield c
    c.close()


async def test_read_only_console_sends_no_write_to_redis(
    seeded: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    before = dump(seeded)
    calls_before = command_calls(seeded)
    source = CountingSource(url=redis_url, cadence_s=0.1, timeout_s=1.0, client_name=CLIENT_NAME)
    hub = Hub([source], refresh_s=0.1)
    # controls that could write (to the simulator): a read-only console drops them unused
    controls = demo_controls(GpuconConfig(audit_path=tmp_path / "audit.jsonl"), build_sim_fleet(7))
    app = GpuconApp(hub, mode="live", read_only=True, controls=controls)
    with CommandRecorder(redis_url) as recorder:
        async with app.run_test(size=(160, 45)) as pilot:
            deadline = time.monotonic() + 10
            while app.snapshot is None or not app.snapshot.backends:
                assert time.monotonic() < deadline, "the console never read the registry"
                await pilot.pause(0.05)
            assert app.controls is None
            base_depth = len(app.screen_stack)  # the fleet screen, wherever it sits
            recorder.note_clients()
            pressed = set(app.screen.active_bindings)  # every key bound where it starts
            pressed |= set(ACTION_KEYS)  # the action keys of a read-write console, too
            pressed |= {"enter", "escape", "tab", "slash", "question_mark", "ctrl+p", "r", "x"}
            for key in sorted(pressed - SKIPPED_KEYS):
                await pilot.press(key)
                await pilot.pause()
                recorder.note_clients()
                for _ in range(3):  # back to the fleet screen
                    if len(app.screen_stack) <= base_depth:
                        break
                    await pilot.press("escape")
                    await pilot.pause()
                assert len(app.screen_stack) == base_depth, f"{key} left {app.screen_stack}"
            commands = [c for c in app.get_system_commands(app.screen) if c.title not in ("Quit",)]
            assert any(c.title.startswith("Sort by") for c in commands)
            for command in commands:
                if "screenshot" in command.title.lower():
                    continue
                done = command.callback()
                if inspect.isawaitable(done):  # "Filter slots" and others are async
                    await done
                await pilot.pause()
                recorder.note_clients()
                for _ in range(3):
                    if len(app.screen_stack) <= base_depth:
                        break
                    await pilot.press("escape")
                    await pilot.pause()
                assert len(app.screen_stack) == base_depth, f"{command.title} left a screen"
            reads = source.reads
            deadline = time.monotonic() + 10
            while source.reads < reads + 3:  # a few more reads after all that
                assert time.monotonic() < deadline, "the console stopped reading"
                await pilot.pause(0.05)
            recorder.note_clients()
    # server-wide, including commands run inside scripts: no write was executed at all
    calls_after = command_calls(seeded)
    executed = {c for c, n in calls_after.items() if n > calls_before.get(c, 0)}
    executed -= {"info", "client|list", "monitor", "command|info"}  # this test's own
    assert "eval_ro" in executed or "xlen" in executed
    assert writing_commands(seeded, executed) == set(), sorted(executed)
    sent = recorder.commands_of(CLIENT_NAME)
    assert len(sent) > 10, f"the console's reads were not seen: {sent}"
    assert "evalsha" in sent or "eval_ro" in sent or "evalsha_ro" in sent or "xlen" in sent
    assert writing_commands(seeded, set(sent)) == set(), sorted(set(sent))
    assert dump(seeded) == before

    # the detector itself: a write sent under the console's name is seen and flagged
    with CommandRecorder(redis_url) as recorder:
        writer = redis.Redis.from_url(redis_url, client_name=CLIENT_NAME)
        writer.hset(keys.backend_key("b1"), "weight", "0")
        recorder.note_clients()
        time.sleep(0.2)
    assert writing_commands(seeded, set(recorder.commands_of(CLIENT_NAME))) == {"hset"}
    writer.close()
