"""A marker secret given in URL userinfo (the config file's Redis and Prometheus URLs, and
GPUCON_REDIS_URL) reaches none of the output channels: ``config check``, ``snapshot`` text and
JSON with the sources failing (errors quote the URL) and with a real password-protected Redis
answering, the console's status bar, alerts and notifications, and an action's audit file and
stream."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from gpucon.app import GpuconApp
from gpucon.commands.cli import main
from gpucon.config import load_config
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.registry import RedisRegistry
from gpucon.errors import StepFailed
from gpucon.registry import keys
from gpucon.session import open_session
from tests.helpers.secured import secured_redis
from tests.helpers.servers import free_port

pytestmark = pytest.mark.integration
MARKER = "Mk7zSecretQ9"


def write_config(tmp_path: Path, redis_url: str, prom_url: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[fleets.x.redis]\nurl = "{redis_url}"\ntimeout_s = 0.5\n'
        f'[fleets.x.prometheus]\nurl = "{prom_url}"\ntimeout_s = 0.5\n'
    )
    path.chmod(0o600)
    return path


@pytest.fixture
def closed_ports() -> tuple[int, int]:
    return free_port(), free_port()  # nothing listens there: every read is refused


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GPUCON_CONFIG", "GPUCON_REDIS_URL", "GPUCON_PROMETHEUS_URL", "GPUCON_FLEET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def failing_config(tmp_path: Path, ports: tuple[int, int]) -> Path:
    return write_config(
        tmp_path,
        f"redis://ops:{MARKER}@127.0.0.1:{ports[0]}/0",
        f"http://admin:{MARKER}@127.0.0.1:{ports[1]}/",
    )


def test_config_check_shows_the_user_never_the_password(
    tmp_path: Path,
    closed_ports: tuple[int, int],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = failing_config(tmp_path, closed_ports)
    assert main(["--config", str(path), "config", "check"]) == 0
    out = capsys.readouterr()
    assert MARKER not in out.out + out.err
    assert f"redis://ops:***@127.0.0.1:{closed_ports[0]}/0" in out.out
    assert f"http://admin:***@127.0.0.1:{closed_ports[1]}/" in out.out

    # the environment's URL, named as where the value came from
    monkeypatch.setenv("GPUCON_REDIS_URL", f"redis://envuser:{MARKER}@127.0.0.1:1/0")
    assert main(["--config", str(path), "config", "check"]) == 0
    out = capsys.readouterr()
    assert MARKER not in out.out + out.err
    assert "redis://envuser:***@127.0.0.1:1/0" in out.out and "# env GPUCON_REDIS_URL" in out.out

    # a URL the config refuses is quoted in the error without its password
    monkeypatch.setenv("GPUCON_REDIS_URL", f"http://envuser:{MARKER}@127.0.0.1:1/0")
    assert main(["--config", str(path), "config", "check"]) == 2
    out = capsys.readouterr()
    assert MARKER not in out.out + out.err and "envuser:***@" in out.err


def test_snapshot_of_failing_sources_quotes_no_password(
    tmp_path: Path, closed_ports: tuple[int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path = failing_config(tmp_path, closed_ports)
    assert main(["--config", str(path), "snapshot", "--json"]) == 1  # every source down
    out = capsys.readouterr()
    assert MARKER not in out.out + out.err
    doc = json.loads(out.out)
    errors = {s["name"]: s["error"] for s in doc["sources"]}
    # the errors are still there, and still say where: the user and host, not the password
    assert "ConnectionError" in errors["redis"]
    assert f"admin:***@127.0.0.1:{closed_ports[1]}" in errors["prometheus"]

    assert main(["--config", str(path), "snapshot"]) == 1
    out = capsys.readouterr()
    assert MARKER not in out.out + out.err
    assert "ConnectionError" in out.out


def test_snapshot_through_a_password_protected_redis(
    tmp_path: Path, closed_ports: tuple[int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    with secured_redis(tmp_path, password=f"{MARKER}-default", user_password=MARKER) as server:
        path = write_config(
            tmp_path,
            server.url(user=server.user, password=MARKER),
            f"http://admin:{MARKER}@127.0.0.1:{closed_ports[1]}/",
        )
        assert main(["--config", str(path), "snapshot", "--json"]) == 0
        out = capsys.readouterr()
    assert MARKER not in out.out + out.err
    doc = json.loads(out.out)
    health = {s["name"]: s["health"] for s in doc["sources"]}
    assert health["redis"] != "down"  # read through the ACL user's password
    assert health["prometheus"] == "down"


async def test_console_status_alerts_and_notifications_hold_no_password(
    tmp_path: Path, closed_ports: tuple[int, int]
) -> None:
    config = load_config(failing_config(tmp_path, closed_ports), env={})
    session = open_session(config, read_only=True)
    app = GpuconApp(
        session.hub, mode="live", read_only=True, config=config, fleet_name=session.fleet_name
    )
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            for _ in range(100):  # until both sources have failed at least once
                await pilot.pause(0.1)
                latest = session.hub.latest
                statuses = latest.sources if latest is not None else {}
                if all(statuses.get(n) and statuses[n].error for n in ("redis", "prometheus")):
                    break
            else:
                raise AssertionError("the sources never reported their errors")
            await pilot.pause(0.3)
            # an error that quotes the URL, notified as a screen would
            app.screen.notify(f"cannot reach {config.fleet.redis.url}", markup=False)  # type: ignore[union-attr]
            await pilot.pause(0.1)
            shown = app.export_screenshot()
            notes = [f"{n.title} {n.message}" for n in app._notifications]
            kept = [s.error or "" for s in session.hub.latest.sources.values()]  # type: ignore[union-attr]
    finally:
        session.close()
    assert any("ConnectionError" in k for k in kept)
    assert any("ops:***@" in n for n in notes)
    for text in (shown, *notes, *kept):
        assert MARKER not in text
    await asyncio.sleep(0)


def test_audit_file_and_stream_after_a_failed_step(tmp_path: Path) -> None:
    with secured_redis(tmp_path, password=MARKER) as server:
        url = server.url(password=MARKER)
        registry = RedisRegistry.from_url(url)
        audit = AuditLog(tmp_path / "audit.jsonl", stream=registry.append_audit, fleet="x")
        failure = StepFailed("set_state", f"ConnectionError: lost {url} mid-step")
        audit.record(
            operator="ann@h",
            event="outcome",
            action="drain",
            target="b1",
            digest="d",
            status="failed",
            text=str(failure),
        )
        client = redis.Redis.from_url(url)
        stream = repr(client.xrange(keys.AUDIT))
        client.close()
        registry.close()
    written = (tmp_path / "audit.jsonl").read_text()
    assert MARKER not in str(failure) and MARKER not in written and MARKER not in stream
    assert "lost redis://:***@" in written
    assert "lost redis://:***@" in stream


async def test_console_while_redis_fails_then_recovers_and_in_help(tmp_path: Path) -> None:
    ports = (free_port(), free_port())
    config = load_config(failing_config(tmp_path, ports), env={})
    session = open_session(config, read_only=True)
    app = GpuconApp(
        session.hub, mode="live", read_only=True, config=config, fleet_name=session.fleet_name
    )
    shown: list[str] = []

    async def until(pilot: Any, ok: Callable[[Any], bool], what: str) -> None:
        for _ in range(150):
            await pilot.pause(0.1)
            latest = session.hub.latest
            if latest is not None and "redis" in latest.sources and ok(latest.sources["redis"]):
                return
        raise AssertionError(what)

    try:
        async with app.run_test(size=(200, 50)) as pilot:
            await until(pilot, lambda s: bool(s.error), "redis never failed")
            shown.append(app.export_screenshot())
            # the same password the URL holds; Redis now answers on that port
            with secured_redis(tmp_path, password=f"{MARKER}-d", user_password=MARKER,
                               port=ports[0]):  # fmt: skip
                await until(pilot, lambda s: s.health.value != "down", "redis never recovered")
                await pilot.pause(0.3)
                shown.append(app.export_screenshot())
                await pilot.press("question_mark")
                await pilot.pause(0.3)
                assert type(app.screen).__name__ == "HelpScreen"
                shown.append(app.export_screenshot())
            kept = [s.error or "" for s in session.hub.latest.sources.values()]  # type: ignore[union-attr]
    finally:
        session.close()
    assert len(shown) == 3 and all("gpucon" in svg for svg in shown)
    for text in (*shown, *kept):
        assert MARKER not in text


def test_drain_and_undrain_through_a_password_in_the_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpucon.lab.registration import BackendRecord, register_backends

    audit_path = tmp_path / "audit.jsonl"
    with secured_redis(tmp_path, password=f"{MARKER}-d", user_password=MARKER) as server:
        url = server.url(user=server.user, password=MARKER)
        client = redis.Redis.from_url(url, decode_responses=True)
        register_backends(
            client,
            [
                BackendRecord("b1", "http://127.0.0.1:1", "m", "h/gpu0/gi1", weight=2.0),
                BackendRecord("b2", "http://127.0.0.1:2", "m", "h/gpu0/gi2", weight=1.0),
            ],
        )
        monkeypatch.setenv("GPUCON_CONFIG", str(tmp_path / "none.toml"))
        monkeypatch.setenv("GPUCON_REDIS_URL", url)
        monkeypatch.setenv("GPUCON_AUDIT_PATH", str(audit_path))
        monkeypatch.setenv("GPUCON_OPERATOR", "cli@test")
        assert main(["drain", "b1", "--yes", "--json", "--reason", "maintenance"]) == 0
        assert main(["undrain", "b1", "--yes"]) == 0
        assert main(["audit", "--all", "--json", "--limit", "100"]) == 0
        out = capsys.readouterr()
        stream = repr(client.xrange(keys.AUDIT))
        client.close()
    assert '"status": "ok"' in out.out and "cli@test" in stream
    for text in (out.out, out.err, stream, audit_path.read_text()):
        assert MARKER not in text


def test_console_in_a_pty_shows_no_password(tmp_path: Path) -> None:
    """The real console in a pseudo-terminal, its sources refused (errors quoting the URL),
    its config readable by others (a start-up warning): every byte it writes is read."""
    import os
    import re
    import sys

    from benchmarks.pty_run import ANSI, run_in_pty

    path = failing_config(tmp_path, (free_port(), free_port()))
    # the alerts panel names a source down for a second, with its error (which quotes the URL)
    path.write_text(path.read_text() + "[alerts]\nstale_after_s = 1.0\n")
    path.chmod(0o644)
    env = {
        **os.environ,
        "GPUCON_CONFIG": str(path),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "GPUCON_REDIS_URL": f"redis://envuser:{MARKER}@127.0.0.1:{free_port()}/0",
    }
    seen: list[bytes] = []
    run_in_pty(
        [sys.executable, "-m", "gpucon.commands.cli", "--read-only"],
        marker=None,
        duration_s=10.0,
        env=env,
        capture=seen,
    )
    screen = ANSI.sub(b"", b"".join(seen)).decode("utf-8", errors="replace")
    flat = re.sub(r"\s+", " ", screen)
    assert "DOWN" in screen and "holds a password inline" in flat
    assert "source stale" in flat and "admin:***@" in flat
    assert MARKER not in screen and MARKER.encode() not in b"".join(seen)


async def test_a_crash_report_masks_the_passwords_in_its_locals(tmp_path: Path) -> None:
    """Textual prints each frame's local variables when the console crashes."""
    from rich.console import Console

    from tests.ui.rig import StaticFeed

    app = GpuconApp(StaticFeed(None), mode="live", read_only=True, autostart=False)
    async with app.run_test(size=(120, 30)):
        url = f"redis://ops:{MARKER}@127.0.0.1:1/0"
        try:
            raise ConnectionError(f"lost {url}")
        except ConnectionError:
            app._fatal_error()
        report = list(app._exit_renderables)
        app._exit_renderables.clear()
        app._exception = None  # the report was the point: the test itself did not crash
    console = Console(width=200, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    for renderable in report:
        console.print(renderable)
    text = console.export_text()
    assert "url" in text and "ConnectionError" in text  # the locals are still shown
    assert MARKER not in text and "ops:***@" in text
