"""The audit screen with Redis configured: this console's file and the fleet's ``gpucon:audit``
stream (other operators' actions) merged by time, each entry marked with its origin, read off
the UI thread; a stream that cannot be read is named while the file's records still show."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import redis
from textual.widgets import Static

from gpucon.actions.audit import ORIGIN_BOTH, ORIGIN_FILE, ORIGIN_STREAM, AuditStreamReader
from gpucon.app import GpuconApp
from gpucon.config import FleetConfig, GpuconConfig, RedisConfig
from gpucon.controls.audit_log import AuditLog, AuditRecord
from gpucon.controls.base import Controls
from gpucon.controls.registry import RedisRegistry
from gpucon.registry import keys
from gpucon.screens.actions_flow import audit_stream
from gpucon.screens.audit import AuditScreen
from tests.ui.rig import StaticFeed, wait_until

pytestmark = pytest.mark.integration
SIZE = (180, 40)


def console(
    config: GpuconConfig | None, controls: Controls | None = None, mode: str = "live"
) -> GpuconApp:
    """A live console (read-only unless it has controls) with no fleet data yet."""
    return GpuconApp(
        StaticFeed(None),
        mode=mode,
        read_only=controls is None,
        controls=controls,
        config=config,
        autostart=False,
    )


def config_for(audit_path: Path, redis_url: str | None) -> GpuconConfig:
    fleet = FleetConfig(
        name="lab", redis=None if redis_url is None else RedisConfig(url=redis_url, timeout_s=0.5)
    )
    return GpuconConfig(fleets={"lab": fleet}, default_fleet="lab", audit_path=audit_path)


def write_history(redis_url: str, audit_path: Path) -> None:
    """ann acts from this console (file and stream), bob from another (stream only), and an
    older demo action of ann's is in the file only."""
    registry = RedisRegistry.from_url(redis_url)
    mine = AuditLog(
        audit_path, stream=registry.append_audit, clock=iter([100.0, 102.0]).__next__, fleet="lab"
    )
    theirs = AuditLog(
        audit_path.parent / "bob.jsonl", stream=registry.append_audit, clock=lambda: 101.0
    )
    local_only = AuditLog(audit_path, clock=lambda: 50.0)
    mine.record(operator="ann@h1", event="intent", action="drain", target="b1", digest="d1")
    theirs.record(operator="bob@h2", event="intent", action="probe", target="b2", digest="d2")
    mine.record(
        operator="ann@h1", event="outcome", action="drain", target="b1", digest="d1", status="ok"
    )
    local_only.record(operator="ann@h1", event="intent", action="drain", target="x", digest="d0")
    registry.close()


async def test_file_and_stream_merged_by_time_with_their_origin(
    redis_url: str, tmp_path: Path
) -> None:
    audit_path = tmp_path / "audit.jsonl"
    write_history(redis_url, audit_path)
    app = console(config_for(audit_path, redis_url))
    async with app.run_test(size=SIZE) as pilot:
        app.open_audit()
        await wait_until(pilot, lambda: isinstance(app.screen, AuditScreen) and app.screen.loaded)
        screen = app.screen
        assert isinstance(screen, AuditScreen)
        got = [(e.record.ts, e.record.operator, e.origin) for e in screen.entries]
        assert got == [
            (50.0, "ann@h1", ORIGIN_FILE),  # the file only (a demo action)
            (100.0, "ann@h1", ORIGIN_BOTH),  # this console's: in both, shown once
            (101.0, "bob@h2", ORIGIN_STREAM),  # another operator's, from the stream
            (102.0, "ann@h1", ORIGIN_BOTH),
        ]
        lines = str(screen.query_one("#audit-body", Static).render()).splitlines()
        assert "redis gpucon:audit" in lines[0]
        bob = next(line for line in lines if "bob@h2" in line)
        assert f" {ORIGIN_STREAM} " in bob and "probe b2" in bob
        # intents without an outcome read interrupted; a finished run's intent does not
        assert screen.statuses == ["interrupted", "", "interrupted", "ok"]
        # (time, origin,) fleet (bob's record names none), operator, event, action, status
        assert bob.split()[4:] == ["?", "bob@h2", "intent", "probe", "b2", "interrupted", "[d2]"]
        ann = next(line for line in lines if "ann@h1" in line and "drain b1" in line)
        assert ann.split()[4:6] == ["lab", "ann@h1"]
        # while bob still holds b2's lock, his probe is running, not interrupted
        lock = '{"holder": "bob@h2", "since": 101.0, "action": "probe", "token": "t"}'
        locker = redis.Redis.from_url(redis_url)
        locker.set("gpucon:lock:b2", lock, px=10_000)
        locker.close()
        await pilot.press("r")
        await wait_until(pilot, lambda: screen.statuses[2] == "running")
        # another operator acts while the screen is open: r reads both again
        registry = RedisRegistry.from_url(redis_url)
        AuditLog(
            tmp_path / "carol.jsonl", stream=registry.append_audit, clock=lambda: 103.0
        ).record(operator="carol@h3", event="refused", action="drain", target="b1", digest="d3")
        registry.close()
        await pilot.press("r")
        await wait_until(pilot, lambda: len(screen.entries) == 5)
        assert screen.entries[-1].record.operator == "carol@h3"


async def test_a_stream_that_cannot_be_read_is_named_and_the_file_still_shows(
    tmp_path: Path,
) -> None:
    audit_path = tmp_path / "audit.jsonl"
    AuditLog(audit_path, clock=lambda: 10.0).record(
        operator="ann@h1", event="intent", action="drain", target="b1", digest="d1"
    )
    app = console(config_for(audit_path, "redis://127.0.0.1:1/0"))  # nothing listens there
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("A")
        await wait_until(pilot, lambda: isinstance(app.screen, AuditScreen) and app.screen.loaded)
        screen = app.screen
        assert isinstance(screen, AuditScreen)
        assert [e.origin for e in screen.entries] == [ORIGIN_FILE]
        text = str(screen.query_one("#audit-body", Static).render())
        assert "cannot read gpucon:audit: ConnectionError" in text and "ann@h1" in text


class SlowStream(AuditStreamReader):
    """Answers after a delay and notes the thread it was read in."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__("redis://127.0.0.1:1/0", 1.0)
        self.release = release
        self.threads: list[threading.Thread] = []

    def read(self, limit: int) -> list[AuditRecord]:
        self.threads.append(threading.current_thread())
        self.release.wait(5.0)
        return [AuditRecord(5.0, "bob@h2", "intent", "drain", "b9", "d9")]


async def test_the_stream_is_read_off_the_ui_thread(tmp_path: Path) -> None:
    release = threading.Event()
    stream = SlowStream(release)
    app = console(config_for(tmp_path / "audit.jsonl", None))
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(AuditScreen(tmp_path / "audit.jsonl", stream=stream))
        await pilot.pause(0.2)
        screen = app.screen
        assert isinstance(screen, AuditScreen) and not screen.loaded  # still reading
        await pilot.press("r")  # the UI answers while the stream is slow
        await pilot.pause(0.05)
        release.set()
        await wait_until(pilot, lambda: screen.loaded)
        assert [e.origin for e in screen.entries] == [ORIGIN_STREAM]
        assert stream.threads and threading.main_thread() not in stream.threads


async def test_no_stream_without_redis_or_in_the_demo(redis_url: str, tmp_path: Path) -> None:
    assert audit_stream("live", None, config_for(tmp_path / "a", None)) is None
    assert audit_stream("demo", None, config_for(tmp_path / "a", redis_url)) is None
    live = audit_stream("live", None, config_for(tmp_path / "a", redis_url))
    assert isinstance(live, AuditStreamReader) and live.url == redis_url
    client = redis.Redis.from_url(redis_url)
    try:
        assert live.read(10) == []  # nothing recorded yet; a read, nothing written
        assert client.exists(keys.AUDIT) == 0
    finally:
        live.close()
        client.close()


async def test_without_its_config_a_live_console_reads_the_stream_through_its_registry(
    redis_url: str, tmp_path: Path
) -> None:
    audit_path = tmp_path / "audit.jsonl"
    write_history(redis_url, audit_path)
    registry = RedisRegistry.from_url(redis_url)
    controls = Controls(registry, AuditLog(audit_path, stream=registry.append_audit), "ann@h1")
    app = console(None, controls=controls)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("A")
            await wait_until(
                pilot, lambda: isinstance(app.screen, AuditScreen) and app.screen.loaded
            )
            screen = app.screen
            assert isinstance(screen, AuditScreen)
            origins = [(e.record.operator, e.origin) for e in screen.entries]
            assert ("bob@h2", ORIGIN_STREAM) in origins and ("ann@h1", ORIGIN_BOTH) in origins
    finally:
        controls.close()


async def test_an_unreadable_file_is_named_not_left_reading(tmp_path: Path) -> None:
    audit_path = tmp_path / "audit.jsonl"
    audit_path.mkdir()  # a directory where the file should be
    app = console(config_for(audit_path, None))
    async with app.run_test(size=SIZE) as pilot:
        app.open_audit()
        await wait_until(pilot, lambda: isinstance(app.screen, AuditScreen) and app.screen.loaded)
        text = str(app.screen.query_one("#audit-body", Static).render())
        assert "cannot read" in text and "IsADirectoryError" in text
